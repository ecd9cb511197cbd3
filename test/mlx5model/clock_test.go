package mlx5model

import (
	"testing"
	"time"

	"github.com/gorping/gorping/uverbs"
)

// pollTS polls a's CQ for one completion and returns its timestamp in nanoseconds.
func (a *end) pollTS(t *testing.T) uint64 {
	t.Helper()
	wc := make([]uverbs.WC, 1)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Microsecond) {
		n, err := a.cq.Poll(wc)
		if err != nil || n == 0 {
			continue
		}
		ns, ok := a.cq.TimestampNS(wc[0].Timestamp)
		if wc[0].Timestamp == 0 || !ok {
			t.Fatalf("completion %+v: no timestamp (converted: %v)", wc[0], ok)
		}
		return ns
	}
	t.Fatalf("no completion within 10s; model violations %q", a.nic.Errors())
	return 0
}

// TestModelTimestamps: a CQ created with completion timestamps gets the model's device
// clock in every CQE; converted with the clock_info page (which the model refreshes under
// its sequence count) two completions lie as far apart as the wall clock says, within
// the time between the first post and the second poll. A CQ without the flag has none.
func TestModelTimestamps(t *testing.T) {
	n := NewForTest(t, Config{BfRegSize: 512})
	a, b := newEndFlags(t, n, uverbs.CQTimestamps), newEnd(t, n)
	connectEnds(t, a, b)
	if !a.cq.Timestamps() || b.cq.Timestamps() {
		t.Fatalf("Timestamps(): %v with the flag, %v without", a.cq.Timestamps(), b.cq.Timestamps())
	}
	start := time.Now()
	a.write(t, b, 1, 8, 0)
	ns1 := a.pollTS(t)
	time.Sleep(25 * time.Millisecond) // across at least two refreshes of the clock page
	a.write(t, b, 2, 8, 0)
	ns2 := a.pollTS(t)
	wall := time.Since(start)
	if d := time.Duration(ns2 - ns1); ns2 <= ns1 || d < 25*time.Millisecond || d > wall {
		t.Errorf("completions %d ns apart; want between 25ms and the %v the test took", ns2-ns1, wall)
	}
	if _, ok := b.cq.TimestampNS(12345); ok {
		t.Error("a CQ without timestamps converts one")
	}
}
