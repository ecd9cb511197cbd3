//go:build guest

package guest

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorping/gorping/internal/guesttest"
)

// procState is what a process holds: its RDMA objects by kind and its open
// file descriptors.
type procState struct {
	rdma map[string]int
	fds  []string
}

func snapshot(t testing.TB, p *Proc) procState {
	t.Helper()
	fds, err := fdTargets(pidOf(p))
	if err != nil {
		t.Fatalf("%v", err)
	}
	return procState{rdma: procResources(t, p), fds: fds}
}

func (s procState) equal(o procState) bool {
	return maps.Equal(s.rdma, o.rdma) && slices.Equal(s.fds, o.fds)
}

func (s procState) String() string {
	var b strings.Builder
	for _, k := range guesttest.Kinds {
		fmt.Fprintf(&b, "%s %d, ", k, s.rdma[k])
	}
	fmt.Fprintf(&b, "%d fds:\n", len(s.fds))
	for _, f := range s.fds {
		fmt.Fprintf(&b, "    %s\n", f)
	}
	return b.String()
}

// waitState waits until p holds exactly what base holds, failing the test
// with both states after timeout.
func waitState(t *testing.T, p *Proc, base procState, when string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if !p.Running() {
			t.Fatalf("%s exited %s\nstderr:\n%s", p.Name, when, p.Stderr())
		}
		cur := snapshot(t, p)
		if cur.equal(base) {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%s %s still holds more than its baseline (waited 30s)\nnow:      %s\nbaseline: %s", p.Name, when, cur, base)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestLeaks checks that gorping gives back every RDMA object and file
// descriptor it takes. (Every interop and error test also checks, through
// leakGuard, that no process holds RDMA objects once its processes are gone.)
func TestLeaks(t *testing.T) {
	// A persistent server returns to what it held right after rdma_listen
	// after every kind of client: sequential, concurrent, -q, bigger than its
	// -S, and killed mid-run.
	t.Run("PersistentServer", func(t *testing.T) {
		leakGuard(t)
		g, s := gorpingImpl(t), stockImpl(t)
		addr, port := IPv4(t), freshPort()
		ps := strconv.Itoa(port)
		srv := Start(t, g.bin, "-s", "-P", "-a", addr, "-p", ps)
		WaitListening(t, srv, addr, port, 30*time.Second)
		base := snapshot(t, srv)
		t.Logf("post-listen baseline: %s", base)
		if base.rdma["cm_id"] != 1 || base.rdma["qp"] != 0 || base.rdma["mr"] != 0 {
			t.Errorf("post-listen server holds %v, want one cm_id (the listener) and no QP/MR", base.rdma)
		}

		client := func(who impl, extra ...string) *Proc {
			return Start(t, who.bin, append([]string{"-c", "-a", addr, "-p", ps, "-C", "5", "-V"}, extra...)...)
		}
		finish := func(what string, procs ...*Proc) {
			t.Helper()
			for _, p := range procs {
				code := p.Wait(t, 120*time.Second)
				r := Result{Stdout: p.Stdout(), Stderr: p.Stderr(), Code: code}
				if strings.HasPrefix(p.Name, s.bin) {
					CheckStockExit(t, what+": "+p.Name, r)
				} else if code != 0 {
					t.Errorf("%s: %s exit status %d\nstderr:\n%s", what, p.Name, code, r.Stderr)
				}
			}
			waitState(t, srv, base, "after "+what)
		}

		for i := range 3 {
			finish(fmt.Sprintf("sequential client %d", i+1), client(g))
		}

		var crowd []*Proc
		for range 4 {
			crowd = append(crowd, client(g), client(s))
		}
		finish("8 concurrent clients", crowd...)

		finish("-q clients", client(g, "-q"), client(s, "-q"))
		finish("clients bigger than the server's -S", client(g, "-S", "65535"), client(s, "-S", "4000"))

		killed := Start(t, g.bin, "-c", "-a", addr, "-p", ps, "-C", "0", "-v")
		waitFor(t, 60*time.Second, "the endless client's pings", func() bool {
			return strings.Count(killed.Stdout(), "\n") >= 20 || !killed.Running()
		})
		killed.Kill()
		waitState(t, srv, base, "after a client was killed mid-run")

		noCrash(t, "gorping server", srv.Stderr())
		srv.Kill()
	})

	// A running connection does not grow: what each side holds after 100
	// pings is what it holds after many more.
	t.Run("SteadyDuringRun", func(t *testing.T) {
		leakGuard(t)
		g := gorpingImpl(t)
		addr, port := IPv6(t), freshPort()
		ps := strconv.Itoa(port)
		srv := Start(t, g.bin, "-s", "-a", addr, "-p", ps)
		WaitListening(t, srv, addr, port, 30*time.Second)
		cli := Start(t, g.bin, "-c", "-a", addr, "-p", ps, "-C", "0", "-v", "-V")
		pings := func(n int) {
			waitFor(t, 120*time.Second, fmt.Sprintf("%d pings", n), func() bool {
				return strings.Count(cli.Stdout(), "\n") >= n || !cli.Running()
			})
			if !cli.Running() {
				t.Fatalf("client ended\nstderr:\n%s", cli.Stderr())
			}
		}
		pings(100)
		s1, c1 := snapshot(t, srv), snapshot(t, cli)
		t.Logf("server: %sclient: %s", s1, c1)
		if c1.rdma["cm_id"] != 1 || c1.rdma["qp"] != 1 || c1.rdma["cq"] != 1 {
			t.Errorf("client holds %v, want exactly one cm_id, QP and CQ", c1.rdma)
		}
		pings(strings.Count(cli.Stdout(), "\n") + 1000)
		s2, c2 := snapshot(t, srv), snapshot(t, cli)
		if !s2.equal(s1) {
			t.Errorf("server grew during the run\nafter 100 pings: %s\nlater:           %s", s1, s2)
		}
		if !c2.equal(c1) {
			t.Errorf("client grew during the run\nafter 100 pings: %s\nlater:           %s", c1, c2)
		}
		cli.Kill()
		if code := srv.Wait(t, peerEndDeadline); code != 0 {
			t.Errorf("server exit status %d after its client ended, want 0\nstderr:\n%s", code, srv.Stderr())
		}
	})
}
