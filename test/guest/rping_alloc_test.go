//go:build guest

package guest

import (
	"context"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/gorping/gorping/rping"
)

// TestGuestPingLoopAllocatesNothing checks the real data path (rxe rings,
// doorbell, completion channel), not a fake: a client and a server in this
// process run 100 and then 100+n validated, printed (-v -V) pings (n = 2000,
// 500 with --poll), and the extra n pings must not add allocations. Both runs pay the same setup and teardown, so the
// difference is what the ping loops themselves allocate.
//
// It runs in every waiting mode (event, --poll) and with gorping's reporting
// (--stats per-ping lines, --json per-ping objects, -i's timer).
//
// The figures (time and CPU per ping) are logged, not asserted: speed depends
// on the machine and on TCG.
func TestGuestPingLoopAllocatesNothing(t *testing.T) {
	for _, mode := range []struct {
		name  string
		extra int // pings of the second run beyond the first's 100
		set   func(cfg *rping.Config)
	}{
		{"event", 2000, func(*rping.Config) {}},
		// The client busy-polls (both sides run the same cqWait code; two
		// spinning loops on the guest's two CPUs would starve rxe's kernel
		// work). Fewer pings: a spinning client is slow under TCG, and this
		// mode's setup varies by a few objects only (seen: ≤ 6).
		{"poll", 500, func(cfg *rping.Config) { cfg.Poll = !cfg.Server }},
		{"stats", 2000, func(cfg *rping.Config) { cfg.Stats = true; cfg.Interval = time.Microsecond }},
		// More pings: --json's per-run diagnostics (port, GID, counter
		// directory walks) vary by a few hundred objects from run to run
		// (seen: 473), close to 2000's tolerance of 500.
		{"json", 4000, func(cfg *rping.Config) { cfg.Stats, cfg.JSON = true, true }},
	} {
		t.Run(mode.name, func(t *testing.T) { testPingLoopAllocs(t, mode.extra, mode.set) })
	}
}

func testPingLoopAllocs(t *testing.T, n int, set func(cfg *rping.Config)) {
	addr := guestAddr(t, "GORPING_IPV4")
	measure := func(count int) (mallocs uint64, wall, cpu time.Duration) {
		p := port()
		sv := newRunner(true, addr, p, 64, 0)
		cl := newRunner(false, addr, p, 64, count)
		cl.cfg.Validate = true
		set(&sv.cfg)
		set(&cl.cfg)
		// -v on both sides: printing the ping lines must not allocate either.
		// (Counted, not kept: the test's own buffers would grow and allocate;
		// the counts are the waits' progress. --json moves the -v lines to stderr.)
		sv.cfg.Verbose, cl.cfg.Verbose = true, true
		var svOut, clOut lineCounter
		sv.cfg.Stdout, cl.cfg.Stdout = &svOut, &clOut
		if cl.cfg.JSON {
			sv.cfg.Stderr, cl.cfg.Stderr = &svOut, &clOut
		}
		sv.progress, cl.progress = svOut.n.Load, clOut.n.Load
		var before, after runtime.MemStats
		var ru0, ru1 syscall.Rusage
		// A failed wait leaves the runs behind: end them before the next test.
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(func() { cancel(); sv.reap(t); cl.reap(t) })
		sv.start(ctx)
		listening(t, p) // polls the rdma tool: allocates, so it stays outside the window
		runtime.GC()
		runtime.ReadMemStats(&before)
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
		start := time.Now()
		if st := cl.start(ctx).wait(t, "client"); st != 0 {
			t.Fatalf("client exit %d, stderr %q", st, cl.stderr)
		}
		if st := sv.wait(t, "server"); st != 0 {
			t.Fatalf("server exit %d, stderr %q", st, sv.stderr)
		}
		wall = time.Since(start)
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
		runtime.ReadMemStats(&after)
		cpu = time.Duration(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) * time.Nanosecond
		return after.Mallocs - before.Mallocs, wall, cpu
	}
	m1, w1, c1 := measure(100)
	m2, w2, c2 := measure(100 + n)
	extra := int64(m2) - int64(m1)
	perPing := float64(extra) / float64(n)
	t.Logf("allocations: %d for 100 pings, %d for %d pings: %.3f per extra ping", m1, m2, 100+n, perPing)
	// The difference of the two runs, so setup and teardown cancel out; on a
	// loaded host a stall in the short run can make it meaningless (even
	// negative), hence the raw figures too.
	t.Logf("per ping (client+server in one process): %.1f µs wall, %.1f µs CPU (runs: %d pings %v wall %v CPU, %d pings %v wall %v CPU)",
		float64((w2-w1).Microseconds())/float64(n), float64((c2-c1).Microseconds())/float64(n),
		100, w1.Round(time.Millisecond), c1.Round(time.Millisecond), 100+n, w2.Round(time.Millisecond), c2.Round(time.Millisecond))
	// One allocation anywhere in either loop would cost at least 1 per ping.
	// Setup and teardown vary a little from run to run (seen: up to ~130
	// objects; the first JSON run ~300 more, for encoding/json's type cache),
	// so the bound tolerates a constant of n/4, never a per-ping cost.
	if perPing > 0.25 {
		t.Errorf("the ping loop allocates: %.3f allocations per ping (%d extra for %d pings)", perPing, extra, n)
	}
}
