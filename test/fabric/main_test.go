//go:build fabric

package fabric

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorping/gorping/test/vm"
)

// cl is the cluster every test of the package shares: booted once by
// TestMain, and left as each test found it (faults are undone by cleanups).
var cl *vm.Cluster

// Environment: FABRIC_SUITE, FABRIC_ARCH (default bookworm/amd64), FABRIC_HOSTS
// (default 3), FABRIC_CONSOLE=1 (echo the guests' consoles), FABRIC_PCAP=file.
func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	target := vm.Target{Suite: envOr("FABRIC_SUITE", "bookworm"), Arch: envOr("FABRIC_ARCH", "amd64")}
	hosts, err := strconv.Atoi(envOr("FABRIC_HOSTS", "3"))
	if err != nil || hosts < 3 {
		fmt.Fprintf(os.Stderr, "fabric: FABRIC_HOSTS=%q: need a number >= 3\n", os.Getenv("FABRIC_HOSTS"))
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch action, err := vm.EnsurePrereqs(ctx, []string{target.Arch}, true, os.Stderr); action {
	case vm.PrereqOK:
	case vm.PrereqSkip:
		// Outside CI a host without qemu skips the tier loudly (EnsurePrereqs
		// never skips under CI=true).
		fmt.Printf("*** fabric tier SKIPPED: %v ***\n", err)
		return 0
	default:
		fmt.Printf("fabric: FAILED, %v\n", err)
		return 1
	}
	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintf(os.Stderr, "fabric: %v\n", err)
		return 1
	}
	cache, err := vm.CacheRoot()
	if err != nil {
		fmt.Fprintf(os.Stderr, "fabric: %v\n", err)
		return 1
	}
	var console *os.File
	if os.Getenv("FABRIC_CONSOLE") == "1" {
		console = os.Stdout
	}
	o := vm.ClusterOptions{
		Target: target, Hosts: hosts, ModuleRoot: root, CacheRoot: cache,
		Timeouts: vm.DefaultTimeouts(target.Arch), Pcap: os.Getenv("FABRIC_PCAP"),
		Forwards: []int{meshPort},
		// The shape of a GPU cluster (TestMeshRails): two RDMA rails per host,
		// each its own switch and subnet, and a node network without RDMA.
		Rails: 2, NodeNet: true,
	}
	o.Out = os.Stdout
	if console != nil {
		o.Console = console
	}
	start := time.Now()
	cl, err = vm.StartCluster(ctx, o)
	if err != nil {
		fmt.Printf("fabric: test bed failed: %v\n", err)
		return 1
	}
	fmt.Printf("fabric: %d hosts of %s (kernel %s) up in %.1fs\n", hosts, target, cl.Kernel, time.Since(start).Seconds())
	code := m.Run()
	if code != 0 {
		for _, h := range cl.Hosts {
			fmt.Printf("--- console of %s (last lines) ---\n", h.Name)
			c := h.Console()
			for _, l := range c[max(0, len(c)-40):] {
				fmt.Println("  " + l)
			}
		}
	}
	for _, h := range cl.Hosts {
		if p := h.Panics(); len(p) > 0 {
			fmt.Printf("fabric: %s's kernel panicked: %s\n", h.Name, strings.Join(p, "; "))
			code = 1
		}
	}
	cl.Close()
	return code
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("not inside the gorping module")
	}
	return filepath.Dir(mod), nil
}
