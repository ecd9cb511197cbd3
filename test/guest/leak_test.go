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

	"github.com/gorping/gorping/test/guesttest"
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

// leakServer is a persistent gorping server and what it held right after
// rdma_listen, for tests that check it returns there after its clients.
type leakServer struct {
	t        *testing.T
	srv      *Proc
	base     procState
	addr, ps string
}

// startLeakServer starts a persistent gorping server on addr and records its
// post-listen baseline: one cm_id (the listener), no QP or MR.
func startLeakServer(t *testing.T, addr string) *leakServer {
	t.Helper()
	port := freshPort()
	ls := &leakServer{t: t, addr: addr, ps: strconv.Itoa(port)}
	ls.srv = Start(t, gorpingImpl(t).bin, "-s", "-P", "-a", addr, "-p", ls.ps)
	WaitListening(t, ls.srv, addr, port, 30*time.Second)
	ls.base = snapshot(t, ls.srv)
	t.Logf("post-listen baseline: %s", ls.base)
	if ls.base.rdma["cm_id"] != 1 || ls.base.rdma["qp"] != 0 || ls.base.rdma["mr"] != 0 {
		t.Errorf("post-listen server holds %v, want one cm_id (the listener) and no QP/MR", ls.base.rdma)
	}
	return ls
}

// client starts a 5-ping validating client of the server.
func (ls *leakServer) client(who impl, extra ...string) *Proc {
	return Start(ls.t, who.bin, append([]string{"-c", "-a", ls.addr, "-p", ls.ps, "-C", "5", "-V"}, extra...)...)
}

// finish waits for procs (a stock client exiting 0 may show v44's spurious
// exit) and for the server to hold no more than its baseline.
func (ls *leakServer) finish(what string, wantCode int, procs ...*Proc) {
	t := ls.t
	t.Helper()
	stock := stockImpl(t).bin
	for _, p := range procs {
		code := p.Wait(t, 120*time.Second)
		r := Result{Stdout: p.Stdout(), Stderr: p.Stderr(), Code: code}
		if wantCode == 0 && strings.HasPrefix(p.Name, stock) {
			CheckStockExit(t, what+": "+p.Name, r)
		} else if code != wantCode {
			t.Errorf("%s: %s exit status %d, want %d\nstderr:\n%s", what, p.Name, code, wantCode, r.Stderr)
		}
	}
	waitState(t, ls.srv, ls.base, "after "+what)
}

// killMidRun SIGKILLs an endless gorping client of the server once it pings,
// checks the server gives its connection back, and stops the server.
func (ls *leakServer) killMidRun() {
	t := ls.t
	t.Helper()
	killed := Start(t, gorpingImpl(t).bin, "-c", "-a", ls.addr, "-p", ls.ps, "-C", "0", "-v")
	waitFor(t, 60*time.Second, "the endless client's pings", func() bool {
		return strings.Count(killed.Stdout(), "\n") >= 20 || !killed.Running()
	})
	killed.Kill()
	waitState(t, ls.srv, ls.base, "after a client was killed mid-run")
	noCrash(t, "gorping server", ls.srv.Stderr())
	ls.srv.Kill()
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
		ls := startLeakServer(t, IPv4(t))
		for i := range 3 {
			ls.finish(fmt.Sprintf("sequential client %d", i+1), 0, ls.client(g))
		}

		var crowd []*Proc
		for range 4 {
			crowd = append(crowd, ls.client(g), ls.client(s))
		}
		ls.finish("8 concurrent clients", 0, crowd...)

		ls.finish("-q clients", 0, ls.client(g, "-q"), ls.client(s, "-q"))
		ls.finish("clients bigger than the server's -S", 0, ls.client(g, "-S", "65535"), ls.client(s, "-S", "4000"))
		ls.killMidRun()
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
		// The client is killed mid-ping: the server's ending is either order rping
		// has (PeerKilled's judge; what this test asserts is the steady state above).
		cli.Kill()
		killedClientEnding(t, g, srv.Wait(t, peerEndDeadline), srv.Stderr())
	})
}
