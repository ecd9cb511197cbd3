//go:build guest

package guest

import (
	"context"
	"errors"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/gorping/gorping/rping"
	"github.com/gorping/gorping/test/guesttest"
)

// startResponder runs Respond on :: port p until the test ends and waits for its listener.
func startResponder(t *testing.T, p uint16) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	up := make(chan struct{}, 4)
	done := make(chan error, 1)
	log := &lockedBuffer{}
	go func() {
		done <- rping.Respond(ctx, rping.ResponderConfig{Port: p, Log: log, Listening: func() { up <- struct{}{} }})
	}()
	select {
	case <-up:
	case err := <-done:
		t.Fatalf("Respond: %v\n%s", err, log)
	case <-time.After(60 * time.Second):
		t.Fatalf("the responder did not listen within 60s\n%s", log)
	}
	var stopped bool
	var err error
	stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			select {
			case err = <-done:
			case <-time.After(60 * time.Second):
				t.Fatalf("Respond did not return 60s after its context ended\n%s", log)
			}
		}
		return err
	}
	t.Cleanup(func() { stop() })
	return stop
}

func reason(err error) string {
	var pe *rping.ProbeError
	if errors.As(err, &pe) {
		return pe.Reason
	}
	return "(not a ProbeError: " + err.Error() + ")"
}

// TestGuestProbe: the responder (bound to ::) serves probers over IPv4 and IPv6; Ping
// allocates nothing in steady state; a responder that goes away fails the next ping
// with a reason, and everything is released.
func TestGuestProbe(t *testing.T) {
	p := port()
	stop := startResponder(t, p)
	// First, while the responder serves nobody else: a session that ends (a
	// prober closed) tears down in the responder's goroutines, which allocate,
	// and may overlap the next subtest's window.
	t.Run("allocs", func(t *testing.T) {
		pr, err := rping.DialProbe(context.Background(), rping.ProbeConfig{Target: netip.AddrPortFrom(guestAddr(t, "GORPING_IPV4"), p)})
		if err != nil {
			t.Fatalf("DialProbe: %v", err)
		}
		defer pr.Close()
		ping := func() {
			if _, err := pr.Ping(5 * time.Second); err != nil {
				t.Fatalf("ping: %v", err)
			}
		}
		// Warm up until the process is quiet: the responder's session finishes its
		// setup in its own goroutines while the first pings run. A window of 100
		// pings with at most one allocation (the runtime's odd one) is quiet.
		var ms runtime.MemStats
		quiet := false
		for w := 0; w < 30 && !quiet; w++ {
			runtime.ReadMemStats(&ms)
			m0 := ms.Mallocs
			for range 100 {
				ping()
			}
			runtime.ReadMemStats(&ms)
			quiet = ms.Mallocs-m0 <= 1
		}
		if !quiet {
			t.Logf("allocations did not stop within 3000 pings of warm-up; measuring anyway")
		}
		const n = 1000
		var before, after runtime.MemStats
		sites := guesttest.AllocSites()
		runtime.GC()
		runtime.ReadMemStats(&before)
		start := time.Now()
		for range n {
			ping()
		}
		wall := time.Since(start)
		runtime.ReadMemStats(&after)
		where := sites(6)
		per := float64(after.Mallocs-before.Mallocs) / n
		t.Logf("%d pings (prober and responder in this process): %.3f allocations per ping, %.1f µs per ping",
			n, per, float64(wall.Microseconds())/n)
		if where != "" {
			t.Logf("what allocated:\n%s", where)
		}
		// The responder's session loop shares the process; both allocate nothing per
		// ping. The runtime's own odd allocation is tolerated, a per-ping cost is not.
		if per > 0.05 {
			t.Errorf("Ping allocates: %.3f allocations per ping (sites above)", per)
		}
	})

	for _, fam := range []string{"GORPING_IPV4", "GORPING_IPV6"} {
		t.Run(fam, func(t *testing.T) {
			addr := guestAddr(t, fam)
			pr, err := rping.DialProbe(context.Background(), rping.ProbeConfig{Target: netip.AddrPortFrom(addr, p)})
			if err != nil {
				t.Fatalf("DialProbe %s: %v", addr, err)
			}
			defer pr.Close()
			if pr.Device() != "rxe0" || pr.Port() != 1 {
				t.Errorf("path %s/%d, want rxe0/1", pr.Device(), pr.Port())
			}
			var sum time.Duration
			for i := range 20 {
				rtt, err := pr.Ping(5 * time.Second)
				if err != nil || rtt <= 0 {
					t.Fatalf("ping %d: rtt %v err %v", i, rtt, err)
				}
				sum += rtt
			}
			t.Logf("%s: 20 pings, mean RTT %v", fam, sum/20)
		})
	}

	t.Run("responder-leaves", func(t *testing.T) {
		pr, err := rping.DialProbe(context.Background(), rping.ProbeConfig{Target: netip.AddrPortFrom(guestAddr(t, "GORPING_IPV4"), p)})
		if err != nil {
			t.Fatalf("DialProbe: %v", err)
		}
		defer pr.Close()
		if _, err := pr.Ping(5 * time.Second); err != nil {
			t.Fatalf("first ping: %v", err)
		}
		if err := stop(); err != nil {
			t.Fatalf("Respond after its context ended: %v, want nil", err)
		}
		_, err = pr.Ping(5 * time.Second)
		if err == nil {
			t.Fatal("ping after the responder stopped succeeded")
		}
		switch r := reason(err); r {
		case rping.ReasonDisconnected, "wr_flush_err", "retry_exc_err", rping.ReasonTimeout:
			t.Logf("ping after the responder stopped: %v", err)
		default:
			t.Errorf("ping after the responder stopped: reason %q (%v)", r, err)
		}
		if _, err2 := pr.Ping(time.Second); err2 != err {
			t.Errorf("a spent prober answered %v, then %v; want the same error", err, err2)
		}
	})
}

// TestGuestProbeRefused: nothing listens on the port: connect_refused, promptly.
func TestGuestProbeRefused(t *testing.T) {
	start := time.Now()
	_, err := rping.DialProbe(context.Background(), rping.ProbeConfig{Target: netip.AddrPortFrom(guestAddr(t, "GORPING_IPV4"), port()),
		ConnectTimeout: 20 * time.Second})
	if reason(err) != rping.ReasonConnectRefused {
		t.Fatalf("dial to a port nobody listens on: %v, want reason %s", err, rping.ReasonConnectRefused)
	}
	t.Logf("%v after %v", err, time.Since(start).Round(time.Millisecond))
	// An address with no RDMA device on its route.
	_, err = rping.DialProbe(context.Background(), rping.ProbeConfig{Target: netip.MustParseAddrPort("127.0.0.1:7174")})
	if r := reason(err); r != rping.ReasonAddrError && r != rping.ReasonRouteError {
		t.Errorf("dial to 127.0.0.1 (no RDMA device): %v, want addr_error or route_error", err)
	}
}
