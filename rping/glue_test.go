//go:build !guest

// The connection glue (newVerbsConn, setupBuffers, converse, free, the CM waits) runs
// here on the host over in-process device models and the fake CM (fakecm_test.go); in
// the TCG guests it would only add minutes to the rxe tier, which runs the same glue on
// the real kernel.

package rping

import (
	"context"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/gorping/gorping/internal/hostenv/hostenvtest"
	"github.com/gorping/gorping/uverbs"
)

// glueRun shapes one runGlue run.
type glueRun struct {
	dev  uverbs.Device
	open func(uverbs.Device) (*uverbs.Context, error) // the device model
	// cm adjusts the fake CM (faults) before the client starts; nil: none.
	cm func(*fakeCM)
}

// runGlue runs rping's client (runClient) and server (serve) on their own fake CM IDs
// over a device model, each as Run runs it (reporting from the side's options), until
// both have ended, and returns their statuses. A server that never got a request
// reports -1. Host tests install a host without RDMA, so what the glue reads from sysfs
// (counters, MTUs, GIDs) is absent here, whatever the machine has.
func runGlue(t *testing.T, g glueRun, cl, sv *side) (clSt, svSt int) {
	t.Helper()
	hostenvtest.NoRDMA(t)
	cm := newFakeCM(g.dev)
	if g.cm != nil {
		g.cm(cm)
	}
	if cl.cfg.Addr.IsUnspecified() {
		cl.cfg.Addr = netip.MustParseAddr("192.0.2.1")
	}
	for _, s := range []*side{cl, sv} {
		s.cfg.verbs = g.open
		if s.cfg.Poll {
			// --poll never yields; here the "NIC" is a goroutine on the same CPUs, and on
			// a 2-CPU machine two loops that never yield would leave it only the
			// runtime's 10 ms preemptions.
			s.cfg.spin = runtime.Gosched
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	id := cm.newID(netip.MustParseAddrPort("192.0.2.2:40000"))
	go func() {
		cl.status <- reported(ctx, cl.cfg, func(ctx context.Context, cfg Config) int {
			return runClient(ctx, &cfg, newOut(&cfg), id)
		})
	}()
	svSt = -1
	served := make(chan int, 1)
	select {
	case child := <-cm.requests:
		go func() {
			served <- reported(ctx, sv.cfg, func(ctx context.Context, cfg Config) int {
				return serve(ctx, &cfg, newOut(&cfg), child)
			})
		}()
		select {
		case svSt = <-served:
		case <-ctx.Done():
			t.Fatalf("server did not finish: stderr %q", sv.stderr)
		}
	case clSt = <-cl.status:
		return clSt, svSt
	case <-ctx.Done():
		t.Fatalf("client did not connect: stderr %q", cl.stderr)
	}
	select {
	case clSt = <-cl.status:
	case <-ctx.Done():
		t.Fatalf("client did not finish: stderr %q", cl.stderr)
	}
	return clSt, svSt
}

// newOut is the run's printer, as runRDMA makes it.
func newOut(cfg *Config) *printer {
	return &printer{stdout: cfg.Stdout, stderr: cfg.Stderr, debug: cfg.Debug}
}

// normalEnd checks what a side prints to stderr at a normal end: nothing, or the
// DISCONNECT line of its CM goroutine (always on the server, which waits for it; on the
// client only if the line comes before its own teardown).
func normalEnd(t *testing.T, who string, s *side, always bool) {
	t.Helper()
	line := "client DISCONNECT EVENT...\n"
	if who == "server" {
		line = "server DISCONNECT EVENT...\n"
	}
	if got := s.stderr.String(); got != line && (always || got != "") {
		t.Errorf("%s stderr %q, want %q", who, got, line)
	}
}

// released fails t unless the model holds no QP, CQ or MR any more: free released
// everything the glue made.
func released(t *testing.T, live func() (int, int, int)) {
	t.Helper()
	if qps, cqs, mrs := live(); qps+cqs+mrs != 0 {
		t.Errorf("after the run the device still holds %d QPs, %d CQs, %d MRs", qps, cqs, mrs)
	}
}
