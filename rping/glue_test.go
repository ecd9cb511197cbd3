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
	_ "github.com/gorping/gorping/uverbs/providers" // the models open their devices through the shipped providers
)

// glueRun shapes one runGlue run.
type glueRun struct {
	dev  uverbs.Device
	open func(uverbs.Device) (*uverbs.Context, error) // the device model
	// cm adjusts the fake CM (faults) before the client starts; nil: none.
	cm func(*fakeCM)
	// host is where both sides look; zero: glueHost.
	host uverbs.Host
}

// runGlue runs rping's client as Run runs it (reporting from the side's options, the
// device count, the event channel and its removal watch, runClient) on the fake CM, and
// its server (serve) on the child ID the fake CM hands out, over a device model, until
// both have ended, and returns their statuses. A server that never got a request
// reports -1. Both run on a host of the test's own (glueHost): what the glue reads from
// sysfs (counters, MTUs, GIDs) is what the test put there, whatever the machine has.
func runGlue(t testing.TB, g glueRun, cl, sv *side) (clSt, svSt int) {
	t.Helper()
	cm := newFakeCM(g.dev)
	if g.cm != nil {
		g.cm(cm)
	}
	if cl.cfg.Addr.IsUnspecified() {
		cl.cfg.Addr = netip.MustParseAddr("192.0.2.1")
	}
	host := g.host
	if host == (uverbs.Host{}) {
		host = glueHost(t)
	}
	for _, s := range []*side{cl, sv} {
		s.cfg.verbs, s.cfg.host = g.open, host
		if s.cfg.Poll {
			// --poll never yields; here the "NIC" is a goroutine on the same CPUs, and on
			// a 2-CPU machine two loops that never yield would leave it only the
			// runtime's 10 ms preemptions.
			s.cfg.spin = runtime.Gosched
		}
	}
	cl.cfg.cm = cm.channel
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	go func() { cl.status <- Run(ctx, cl.cfg) }()
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

// glueHost is a host without RDMA but one device in its sysfs: rping's first step
// counts the devices (what the glue uses is the model's, through the fake CM).
func glueHost(t testing.TB) uverbs.Host {
	env := hostenvtest.NoRDMA(t)
	hostenvtest.AddRxe(t, env, "rxe0", "uverbs0")
	return uverbs.NewHost(env)
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

// deviceModel is what the glue tests use of a device model (test/mlx5model,
// test/rxemodel).
type deviceModel interface {
	Device(name string) uverbs.Device
	Open(name string, opts ...uverbs.Option) (*uverbs.Context, error)
	Errors() []string          // what a device would have rejected
	Live() (qps, cqs, mrs int) // objects not destroyed yet
}

// modelGlue is a glueRun over device name of m.
func modelGlue(m deviceModel, name string) glueRun {
	return glueRun{dev: m.Device(name), open: func(d uverbs.Device) (*uverbs.Context, error) { return m.Open(d.Name) }}
}

// modelClean fails t if the model saw anything a device would reject, or still holds
// a QP, CQ or MR: free released everything the glue made.
func modelClean(t *testing.T, m deviceModel) {
	t.Helper()
	if errs := m.Errors(); len(errs) > 0 {
		t.Fatalf("the device model saw %d violations, first: %s", len(errs), errs[0])
	}
	if qps, cqs, mrs := m.Live(); qps+cqs+mrs != 0 {
		t.Errorf("after the run the device still holds %d QPs, %d CQs, %d MRs", qps, cqs, mrs)
	}
}

// shortPings is n, or with -short (make check) a tenth of it, at least 500: every ring
// still wraps dozens of times.
func shortPings(n int) int {
	if testing.Short() {
		return max(n/10, 500)
	}
	return n
}

// modelMode is one way of pinging over a device model.
type modelMode struct {
	name         string
	pings        int
	poll, selfQP bool // --poll on both sides; -q on both sides
	bf           int  // mlx5: BlueFlame register size (0: doorbells only)
}

// pingOverModel runs mode's pings with the client validating and both sides printing
// the ping data (-V -v, -v), and requires both to exit 0 with rping's lines: the ping
// data on stdout, at most the DISCONNECT lines on stderr.
func pingOverModel(t *testing.T, g glueRun, mode modelMode) {
	t.Helper()
	cl, sv := newSide(false, DefaultSize, mode.pings), newSide(true, DefaultSize, 0)
	cl.cfg.Verbose, cl.cfg.Validate, sv.cfg.Verbose = true, true, true
	cl.cfg.Poll, sv.cfg.Poll = mode.poll, mode.poll
	cl.cfg.SelfCreateQP, sv.cfg.SelfCreateQP = mode.selfQP, mode.selfQP
	clSt, svSt := runGlue(t, g, cl, sv)
	if clSt != 0 || svSt != 0 {
		t.Fatalf("exit client %d server %d; stderr client %q server %q", clSt, svSt, cl.stderr, sv.stderr)
	}
	if got, want := cl.stdout.String(), pingLines("ping data: ", mode.pings, DefaultSize); got != want {
		t.Errorf("client stdout differs: %d bytes, want %d", len(got), len(want))
	}
	if got, want := sv.stdout.String(), pingLines("server ping data: ", mode.pings, DefaultSize); got != want {
		t.Errorf("server stdout differs: %d bytes, want %d", len(got), len(want))
	}
	normalEnd(t, "client", cl, false)
	normalEnd(t, "server", sv, true)
}
