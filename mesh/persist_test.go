//go:build !guest

package mesh

// A fault stays visible for as long as it lasts (docs/mesh.md, "Paths: a fault stays
// visible"): connections are replaced on a schedule, fast while their target has just
// failed, so a black-holed ECMP member keeps failing some path's slots instead of
// vanishing once every path has reconnected onto a member that works.

import (
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorping/gorping/mesh/probe"
	"github.com/gorping/gorping/rping"
)

// shortRotation makes the rotation's bounds fit a host test (milliseconds, not minutes):
// --path-lifetime's least, and the hot rotation it returns for the agent's deps.
func shortRotation(t *testing.T, hold, hot time.Duration) probe.Hot {
	t.Helper()
	oldMin := minPathLifetime
	minPathLifetime = 10 * time.Millisecond
	t.Cleanup(func() { minPathLifetime = oldMin })
	return probe.Hot{Hold: hold, MinLifetime: hot, SlotsPerConn: 1}
}

// deadMember is a fake ECMP group of 4 members hashed on the destination QP, member 1
// black-holing while dead is set.
func deadMember(fn *fakeNet, dead *atomic.Bool) {
	fn.mu.Lock()
	defer fn.mu.Unlock()
	fn.failFlow = func(f rping.Flow) string {
		if dead.Load() && (f.RemoteQPN/2)%4 == 1 {
			return rping.ReasonTimeout
		}
		return ""
	}
}

// failuresPerWindow samples sel (a counter) every window, n times, and returns its
// increase in each.
func failuresPerWindow(t *testing.T, ta *testAgent, sel string, window time.Duration, n int) []float64 {
	t.Helper()
	value := func() float64 {
		m, err := ta.Scrape()
		if err != nil {
			t.Fatal(err)
		}
		v, _ := m.Sum(sel)
		return v
	}
	last := value()
	var out []float64
	for range n {
		time.Sleep(window)
		v := value()
		out = append(out, v-last)
		last = v
	}
	return out
}

// TestDeadMemberStaysVisible: with --paths 4 and a member that black-holes a quarter
// of the flows, the paths' failures go on in every window while the member is dead
// (dead connections counted, the target up all along), and stop once it is repaired.
// Without rotation (--path-lifetime 0) the same fault vanishes once every path has
// reconnected onto a working member: the behaviour the rotation exists to undo.
func TestDeadMemberStaysVisible(t *testing.T) {
	hot := shortRotation(t, 2*time.Second, 50*time.Millisecond)
	const target = "192.0.2.1:7174"
	sel := `gorping_path_failures_total{target="` + target + `"}`
	run := func(t *testing.T, lifetime string) (during, after []float64, ta *testAgent) {
		fn := newFakeNet()
		fn.set(target, behavior{rtt: 3 * time.Microsecond})
		var dead atomic.Bool
		dead.Store(true)
		deadMember(fn, &dead)
		ta = startAgent(t, deps{dial: fn.dial, resolver: &fakeResolver{m: map[string][]netip.Addr{}}, hot: hot},
			"--interval", "10ms", "--timeout", "5ms", "--backoff-max", "20ms", "--paths", "4",
			"--path-lifetime", lifetime, "--peers", "192.0.2.1")
		ta.wait(t, `gorping_target_up{target="`+target+`"}`, eq(1))
		time.Sleep(time.Second) // past the start, when every first connection draws its flow
		during = failuresPerWindow(t, ta, sel, time.Second, 5)
		dead.Store(false)
		time.Sleep(time.Second) // the repair's bound: a slot and a redial
		after = failuresPerWindow(t, ta, sel, time.Second, 2)
		return during, after, ta
	}
	t.Run("rotating", func(t *testing.T) {
		during, after, ta := run(t, "1s")
		for i, n := range during {
			if n == 0 {
				t.Errorf("window %d of the fault: no path failed (failures per window %v): the dead member left the series", i, during)
			}
		}
		for i, n := range after {
			if n != 0 {
				t.Errorf("window %d after the repair: %g failures (%v)", i, n, after)
			}
		}
		m, err := ta.Scrape()
		if err != nil {
			t.Fatal(err)
		}
		dc, _ := m.Value(`gorping_dead_connections_total{target="` + target + `"}`)
		conns, _ := m.Value(`gorping_connections_total{target="` + target + `"}`)
		up, _ := m.Value(`gorping_target_up{target="` + target + `"}`)
		t.Logf("failures per second during the fault %v, after %v; %g connections, %g dead", during, after, conns, dc)
		if dc < 4 || up != 1 {
			t.Errorf("dead connections %g (want several), target_up %g (want 1)", dc, up)
		}
	})
	t.Run("without rotation", func(t *testing.T) {
		during, _, _ := run(t, "0")
		quiet := 0
		for _, n := range during {
			if n == 0 {
				quiet++
			}
		}
		t.Logf("failures per second during the fault without rotation: %v", during)
		if quiet < len(during)/2 {
			t.Errorf("without rotation the fault stayed in view in %d of %d windows: the test no longer shows what rotation fixes", len(during)-quiet, len(during))
		}
	})
}
