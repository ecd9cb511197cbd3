//go:build fabric

package fabric

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorping/gorping/rping"
	"github.com/gorping/gorping/test/guesttest"
	"github.com/gorping/gorping/test/vm"
	"github.com/gorping/gorping/test/vm/agent"
)

// Guest paths and tools (see test/vm's initramfs).
const (
	gorping = vm.GuestGorping
	stock   = "rping"
	ipTool  = vm.GuestIP
	rdma    = vm.GuestRDMA
	tc      = "/usr/sbin/tc"
)

// host returns cluster host n (1-based), failing the test if it is off.
func host(t testing.TB, n int) *vm.Host {
	t.Helper()
	h := cl.Hosts[n-1]
	if !h.Running() {
		t.Fatalf("%s is powered off (an earlier test did not bring it back)", h.Name)
	}
	return h
}

// call bounds one agent request: the agent answers at once unless told to wait.
func call(t testing.TB, timeout time.Duration, f func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := f(ctx); err != nil {
		t.Fatal(err)
	}
}

// rproc is a process a test started in a guest.
type rproc struct {
	h    *vm.Host
	boot int // the host's boot the process runs in
	id   int
	pid  int
	name string
	last agent.Status // once done
}

// start starts args in guest h; the test's cleanup kills it if it still runs
// (after a SIGQUIT for gorping, whose goroutine dump then shows where it hung).
func start(t testing.TB, h *vm.Host, args ...string) *rproc {
	t.Helper()
	return startOwned(t, t, h, args...)
}

// startOwned is start whose process belongs to owner: a subtest that restarts a
// process the rest of its parent test uses gives the parent, whose end (not the
// subtest's) then kills it.
func startOwned(t, owner testing.TB, h *vm.Host, args ...string) *rproc {
	t.Helper()
	p := &rproc{h: h, boot: h.Boots(), name: h.Name + ": " + strings.Join(args, " ")}
	call(t, 30*time.Second, func(ctx context.Context) error {
		r, err := h.Agent.Start(ctx, agent.StartRequest{Args: args})
		p.id, p.pid = r.ID, r.PID
		return err
	})
	owner.Cleanup(func() {
		t := owner
		if !h.Running() || h.Boots() != p.boot {
			return // the process went with its host
		}
		st := p.status(t)
		if st.Done {
			return
		}
		if t.Failed() && strings.Contains(args[0], "gorping") {
			// Where each thread is in the kernel (a system call that does not
			// return), then where each goroutine is.
			k := start(t, h, "sh", "-c", fmt.Sprintf(`for d in /proc/%d/task/*; do echo "$d $(cat $d/wchan) $(cut -d' ' -f3 $d/stat)"; cat $d/stack; done`, p.pid)).wait(t, 30*time.Second)
			t.Logf("%s still running at test end; its threads in the kernel:\n%s", p.name, k.Stdout)
			p.signal(t, syscall.SIGQUIT)
			st, _ = p.waitErr(5 * time.Second)
			t.Logf("%s still running at test end; after SIGQUIT its stderr:\n%s", p.name, st.Stderr)
		}
		p.signal(t, syscall.SIGKILL)
		p.waitErr(10 * time.Second)
	})
	return p
}

func (p *rproc) status(t testing.TB) agent.Status {
	t.Helper()
	var st agent.Status
	call(t, 30*time.Second, func(ctx context.Context) (err error) {
		st, err = p.h.Agent.Output(ctx, p.id, 0, 0)
		return err
	})
	return st
}

// running reports whether the process has not exited.
func (p *rproc) running(t testing.TB) bool { t.Helper(); return !p.status(t).Done }

func (p *rproc) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	call(t, 30*time.Second, func(ctx context.Context) error { return p.h.Agent.Signal(ctx, p.id, int(sig)) })
}

func (p *rproc) waitErr(timeout time.Duration) (agent.Status, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout+30*time.Second)
	defer cancel()
	return p.h.Agent.Wait(ctx, p.id, timeout)
}

// wait waits up to timeout for the process to end and returns its status; on
// timeout the test fails with what it printed.
func (p *rproc) wait(t testing.TB, timeout time.Duration) agent.Status {
	t.Helper()
	st, err := p.waitErr(timeout)
	if err != nil {
		t.Fatalf("wait for %s: %v", p.name, err)
	}
	if !st.Done {
		t.Fatalf("%s did not exit within %s\nstdout:\n%s\nstderr:\n%s", p.name, timeout, st.Stdout, st.Stderr)
	}
	p.last = st
	return st
}

// run runs args in guest h to completion within timeout.
func run(t testing.TB, h *vm.Host, timeout time.Duration, args ...string) agent.Status {
	t.Helper()
	return start(t, h, args...).wait(t, timeout)
}

// must runs a setup command in guest h and fails the test unless it exits 0.
func must(t testing.TB, h *vm.Host, args ...string) string {
	t.Helper()
	st := run(t, h, time.Minute, args...)
	if st.Code != 0 {
		t.Fatalf("%s: %s: exit %d\n%s%s", h.Name, strings.Join(args, " "), st.Code, st.Stdout, st.Stderr)
	}
	return st.Stdout
}

// portSeq gives every server its own port, so no test talks to (or sees the
// listener of) an earlier test's server.
var portSeq atomic.Int32

func freshPort() int { return 7400 + int(portSeq.Add(1)) }

// waitListening waits until server (on its host) has an rdma_cm id in LISTEN
// on addrPort as rdma prints it ("10.0.3.2:7401", "2001:db8:3::2:7401").
func waitListening(t testing.TB, server *rproc, addrPort string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		st := run(t, server.h, time.Minute, rdma, "resource", "show", "cm_id")
		for _, r := range guesttest.ParseResources("cm_id", st.Stdout) {
			if r.Listening(addrPort) {
				return
			}
		}
		if s := server.status(t); s.Done {
			t.Fatalf("%s exited (status %d) before listening on %s\nstdout:\n%s\nstderr:\n%s", server.name, s.Code, addrPort, s.Stdout, s.Stderr)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no rdma_cm LISTEN on %s within %s; rdma resource show cm_id:\n%s", server.name, addrPort, timeout, st.Stdout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// addrPort formats an address and port as rdma resource show does.
func addrPort(addr string, port int) string { return fmt.Sprintf("%s:%d", addr, port) }

func netipMust(s string) netip.Addr { return netip.MustParseAddr(s) }

// impl is one rping implementation: gorping or rdma-core's rping.
type impl struct{ name, bin string }

var (
	gorpingImpl = impl{"gorping", gorping}
	stockImpl   = impl{"stock", stock}
)

func (i impl) stock() bool { return i.name == "stock" }

// checkExit fails the test unless a run exited well: gorping 0, stock rping 0
// or v44's known spurious 255 (guesttest.StockExitOK).
func checkExit(t testing.TB, who string, i impl, st agent.Status) {
	t.Helper()
	if i.stock() {
		if ok, bug := guesttest.StockExitOK(st.Code, st.Stderr); !ok {
			t.Errorf("%s (stock rping) exit %d, want 0\nstderr:\n%s", who, st.Code, st.Stderr)
		} else if bug {
			t.Logf("%s: exit 255 from rping v44's known spurious exit, accepted", who)
		}
		return
	}
	if st.Code != 0 {
		t.Errorf("%s (gorping) exit %d, want 0\nstderr:\n%s", who, st.Code, st.Stderr)
	}
}

// pingLines is what `rping -c -v -S size -C count` prints (prefix "ping data: "),
// or its server with -v ("server ping data: ").
func pingLines(prefix string, count, size int) string {
	var b strings.Builder
	for i := range count {
		fmt.Fprintf(&b, "%s%s\n", prefix, rping.PayloadString(i, size))
	}
	return b.String()
}

// sameText compares long outputs and reports the first differing line.
func sameText(t testing.TB, what, got, want string) {
	t.Helper()
	if got == want {
		return
	}
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			t.Errorf("%s differs (%d bytes, want %d) first at line %d:\n got %.200q\nwant %.200q", what, len(got), len(want), i+1, gl, wl)
			return
		}
	}
}
