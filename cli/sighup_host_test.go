//go:build !guest

package cli

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// An agent takes SIGHUP before anything that takes time (issue 44: a SIGHUP 1-5 ms
// after the start killed 5 agents of 5, as systemctl reload right after start would):
// in the binary's package inits, package sighup's comes before any init outside the
// standard library (the Prometheus client's, the providers', this command line's).
// Read from the runtime's own trace of the inits, in the order they ran.
func TestSIGHUPTakenFirst(t *testing.T) {
	bin := buildBinary(t)
	cmd := exec.Command(bin, "mesh", "--help")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	var errOut strings.Builder
	cmd.Stderr = &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("mesh --help: %v\n%s", err, errOut.String())
	}
	var before []string
	for _, l := range strings.Split(errOut.String(), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 || f[0] != "init" {
			continue
		}
		if f[1] == "github.com/gorping/gorping/cli/sighup" {
			for _, p := range before {
				if first, _, _ := strings.Cut(p, "/"); strings.Contains(first, ".") {
					t.Errorf("package %s's init runs before SIGHUP is taken", p)
				}
			}
			if len(before) < 5 {
				t.Errorf("only %d inits before package sighup's (%q): is this the runtime's trace?", len(before), before)
			}
			return
		}
		before = append(before, f[1])
	}
	t.Fatalf("no init of package sighup in the trace of %d inits:\n%s", len(before), errOut.String())
}
