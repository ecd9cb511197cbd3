package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/gorping/gorping/test/vm"
)

type clusterFlags struct {
	hosts, cpus     int
	net, pcap       string
	hold, noInstall bool
	console         bool
	script          string // the script file; run on the host with bash
	target          vm.Target
	timeout         time.Duration
}

// runCluster boots a multi-host test bed, runs the script on the host with gx
// on its PATH and $GORPING_CLUSTER set (and $H1_IPV4 ... for each host), and
// returns the script's exit status (ExitInfra when the test bed failed).
func runCluster(f clusterFlags) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	switch action, err := vm.EnsurePrereqs(ctx, []string{f.target.Arch}, !f.noInstall, os.Stderr); action {
	case vm.PrereqOK:
	case vm.PrereqSkip:
		fmt.Printf("guestrun: SKIPPED, %v\n", err)
		return vm.ExitSkipped
	default:
		fmt.Printf("guestrun: FAILED, %v\n", err)
		return vm.ExitInfra
	}
	if f.script == "" && !f.hold {
		fmt.Fprintln(os.Stderr, "guestrun: -hosts needs -script (run on the host) or -hold")
		return 2
	}
	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintf(os.Stderr, "guestrun: %v\n", err)
		return vm.ExitInfra
	}
	cache, err := vm.CacheRoot()
	if err != nil {
		fmt.Fprintf(os.Stderr, "guestrun: %v\n", err)
		return vm.ExitInfra
	}
	start := time.Now()
	o := vm.ClusterOptions{Target: f.target, Hosts: f.hosts, CPUs: f.cpus, Net: f.net, Pcap: f.pcap,
		ModuleRoot: root, CacheRoot: cache, Timeouts: vm.DefaultTimeouts(f.target.Arch), Out: os.Stdout}
	if f.console {
		o.Console = os.Stdout
	}
	c, err := vm.StartCluster(ctx, o)
	if err != nil {
		fmt.Printf("guestrun: multi-host test bed failed: %v\n", err)
		return vm.ExitInfra
	}
	defer c.Close()
	fmt.Printf("guestrun: %d hosts of %s up in %.1fs\n", f.hosts, f.target, time.Since(start).Seconds())
	info := filepath.Join(c.Work(), "cluster.json")
	b, _ := json.MarshalIndent(c.Info(), "", "  ")
	gx := exec.Command("go", "build", "-o", filepath.Join(c.Work(), "gx"), "./test/vm/gx")
	gx.Dir, gx.Stderr = root, os.Stderr
	if err := os.WriteFile(info, b, 0o644); err != nil || gx.Run() != nil {
		fmt.Printf("guestrun: cannot prepare gx (%v)\n", err)
		return vm.ExitInfra
	}
	env := append(os.Environ(), "GORPING_CLUSTER="+info, "PATH="+c.Work()+":"+os.Getenv("PATH"))
	for _, h := range c.Hosts {
		up := strings.ToUpper(h.Name)
		env = append(env, up+"_IPV4="+h.IPv4, up+"_IPV6="+h.IPv6)
	}
	code := 0
	if f.script != "" {
		timeout := f.timeout
		if timeout == 0 {
			timeout = 10 * time.Minute
		}
		sctx, cancel := context.WithTimeout(ctx, timeout)
		cmd := exec.CommandContext(sctx, "bash", f.script)
		cmd.Env, cmd.Stdin, cmd.Stdout, cmd.Stderr = env, os.Stdin, os.Stdout, os.Stderr
		err := cmd.Run()
		timedOut := sctx.Err() == context.DeadlineExceeded
		cancel()
		code = cmd.ProcessState.ExitCode()
		if timedOut {
			fmt.Printf("guestrun: script %s did not finish within %s\n", f.script, timeout)
			code = vm.ExitInfra
		} else if err != nil && code < 0 {
			fmt.Printf("guestrun: script %s: %v\n", f.script, err)
			code = vm.ExitInfra
		}
	}
	if f.hold {
		fmt.Printf("guestrun: holding the cluster; in another shell:\n  export GORPING_CLUSTER=%s PATH=%s:$PATH\n  gx h1 ip -br addr\nCtrl-C ends it.\n", info, c.Work())
		<-ctx.Done()
	}
	if code != 0 && !f.console {
		for _, h := range c.Hosts {
			lines := h.Console()
			fmt.Printf("--- console of %s (last lines; -console shows it all) ---\n", h.Name)
			for _, l := range lines[max(0, len(lines)-30):] {
				fmt.Println("  " + l)
			}
		}
	}
	for _, h := range c.Hosts {
		if p := h.Panics(); len(p) > 0 {
			fmt.Printf("guestrun: %s's kernel panicked: %s\n", h.Name, strings.Join(p, "; "))
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}
