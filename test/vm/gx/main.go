// Command gx runs a command on a host of a running multi-host test bed
// (guestrun -hosts N), for the host-side scripts guestrun runs (-script) and
// for poking at a held cluster by hand (guestrun -hosts N -hold):
//
//	gx h2 gorping -s -a 10.0.3.2 -v          run in the foreground, output as it comes
//	gx -bg srv h2 gorping -s -a 10.0.3.2 -v  start in the background, named srv
//	gx -wait srv                             wait for srv, print its output, exit with its status
//	gx -wait cli -until 'seq=3'              wait until cli has printed seq=3
//	gx -listen 10.0.3.2:7174 h2              wait until an rdma_cm id listens there
//	gx -kill srv                             SIGINT to srv (then wait for it with -wait)
//	gx -poweroff h2                          pull h2's plug
//	gx -put bin/gorping:/usr/local/bin/gorping h1  copy a file into a guest
//
// The cluster is described by $GORPING_CLUSTER (a JSON file guestrun writes);
// background names are kept next to it. Every wait has a deadline (-timeout).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/gorping/gorping/test/guesttest"
	"github.com/gorping/gorping/test/vm"
	"github.com/gorping/gorping/test/vm/agent"
)

func main() { os.Exit(run()) }

func run() int {
	bg := flag.String("bg", "", "start the command in the background under this name")
	wait := flag.String("wait", "", "wait for the background command of this name")
	kill := flag.String("kill", "", "send SIGINT to the background command of this name")
	until := flag.String("until", "", "with -wait: return once the command has printed this text (exit 0), not when it ends")
	listen := flag.String("listen", "", "wait until an rdma_cm id on the host listens on ADDR:PORT")
	poweroff := flag.Bool("poweroff", false, "power the host off at once")
	put := flag.String("put", "", "copy a host file into the guest: HOSTFILE:GUESTPATH (mode 0755)")
	timeout := flag.Duration("timeout", 2*time.Minute, "deadline of the command or wait")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: gx [flags] hN command [args...]  |  gx -wait|-kill NAME  |  gx -listen ADDR:PORT hN\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	info, err := vm.ReadClusterInfo(os.Getenv("GORPING_CLUSTER"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "gx: %v\n", err)
		return 2
	}
	ctx, stop := context.WithTimeout(context.Background(), *timeout+30*time.Second)
	defer stop()
	switch {
	case *wait != "" || *kill != "":
		name := *wait + *kill
		j, err := loadJob(name)
		if err != nil {
			fmt.Fprintf(os.Stderr, "gx: %v\n", err)
			return 2
		}
		c := agent.NewClient(j.Agent)
		if *kill != "" {
			return report(c.Signal(ctx, j.ID, int(syscall.SIGINT)))
		}
		if *until != "" {
			return report(waitText(ctx, c, j.ID, *until, *timeout))
		}
		st, err := c.Wait(ctx, j.ID, *timeout)
		if err != nil {
			return report(err)
		}
		os.Stdout.WriteString(st.Stdout)
		os.Stderr.WriteString(st.Stderr)
		if !st.Done {
			fmt.Fprintf(os.Stderr, "gx: %s (%s) still running after %s\n", name, strings.Join(j.Args, " "), *timeout)
			return 124
		}
		return exitOf(st)
	}
	if flag.NArg() < 1 {
		flag.Usage()
		return 2
	}
	h, ok := info.Host(flag.Arg(0))
	if !ok {
		fmt.Fprintf(os.Stderr, "gx: no host %q in the cluster\n", flag.Arg(0))
		return 2
	}
	c := agent.NewClient(h.Agent)
	switch {
	case *poweroff:
		return report(c.PowerOff(ctx))
	case *put != "":
		src, dst, ok := strings.Cut(*put, ":")
		b, err := os.ReadFile(src)
		if !ok || err != nil {
			fmt.Fprintf(os.Stderr, "gx: -put %q: want HOSTFILE:GUESTPATH (%v)\n", *put, err)
			return 2
		}
		return report(c.WriteFile(ctx, dst, b, 0o755))
	case *listen != "":
		return report(waitListen(ctx, c, *listen, *timeout))
	}
	args := flag.Args()[1:]
	if len(args) == 0 {
		flag.Usage()
		return 2
	}
	r, err := c.Start(ctx, agent.StartRequest{Args: args})
	if err != nil {
		return report(err)
	}
	if *bg != "" {
		return report(saveJob(*bg, job{Agent: h.Agent, ID: r.ID, Args: args}))
	}
	return follow(ctx, c, r.ID, *timeout)
}

// follow prints the process's output as it comes and returns its exit status;
// Ctrl-C is passed on to it.
func follow(ctx context.Context, c *agent.Client, id int, timeout time.Duration) int {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	deadline := time.Now().Add(timeout)
	var off, eoff int
	for {
		st, err := c.Output(ctx, id, off, eoff)
		if err != nil {
			return report(err)
		}
		os.Stdout.WriteString(st.Stdout)
		os.Stderr.WriteString(st.Stderr)
		off, eoff = st.StdoutLen, st.StderrLen
		if st.Done {
			return exitOf(st)
		}
		if time.Now().After(deadline) {
			c.Signal(ctx, id, int(syscall.SIGKILL))
			fmt.Fprintf(os.Stderr, "gx: killed after %s\n", timeout)
			return 124
		}
		select {
		case s := <-sigs:
			c.Signal(ctx, id, int(s.(syscall.Signal)))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func exitOf(st agent.Status) int {
	if st.Signal != "" {
		fmt.Fprintf(os.Stderr, "gx: killed by %s\n", st.Signal)
		return 128 + 9
	}
	return st.Code
}

func report(err error) int {
	if err != nil {
		fmt.Fprintf(os.Stderr, "gx: %v\n", err)
		return 1
	}
	return 0
}

// waitText polls a background command's output until it contains text.
func waitText(ctx context.Context, c *agent.Client, id int, text string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		st, err := c.Output(ctx, id, 0, 0)
		if err != nil {
			return err
		}
		if strings.Contains(st.Stdout, text) || strings.Contains(st.Stderr, text) {
			return nil
		}
		if st.Done {
			return fmt.Errorf("it ended (status %d) without printing %q", st.Code, text)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no %q after %s", text, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitListen polls `rdma resource show cm_id` on the host for a LISTEN id.
func waitListen(ctx context.Context, c *agent.Client, addrPort string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		r, err := c.Start(ctx, agent.StartRequest{Args: []string{vm.GuestRDMA, "resource", "show", "cm_id"}})
		if err != nil {
			return err
		}
		st, err := c.Wait(ctx, r.ID, 30*time.Second)
		if err != nil {
			return err
		}
		for _, res := range guesttest.ParseResources("cm_id", st.Stdout) {
			if res.Listening(addrPort) {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nothing listens on %s after %s", addrPort, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type job struct {
	Agent string
	ID    int
	Args  []string
}

func jobFile(name string) string {
	return filepath.Join(filepath.Dir(os.Getenv("GORPING_CLUSTER")), "job-"+name+".json")
}

func saveJob(name string, j job) error {
	b, _ := json.Marshal(j)
	return os.WriteFile(jobFile(name), b, 0o644)
}

func loadJob(name string) (job, error) {
	var j job
	b, err := os.ReadFile(jobFile(name))
	if errors.Is(err, os.ErrNotExist) {
		return j, fmt.Errorf("no background command named %q", name)
	}
	if err == nil {
		err = json.Unmarshal(b, &j)
	}
	return j, err
}
