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

// TestModelErrorCQEWithTimestamps: on a CQ with completion timestamps an error CQE keeps
// its syndrome (it shares the timestamp's bytes): a WRITE with a wrong rkey completes
// with REM_ACCESS_ERR, not with whatever the clock's low bytes decode to.
func TestModelErrorCQEWithTimestamps(t *testing.T) {
	n := NewForTest(t, Config{BfRegSize: 512})
	a, b := newEndFlags(t, n, uverbs.CQTimestamps), newEnd(t, n)
	connectEnds(t, a, b)
	for i := range uint64(20) { // the clock's low byte differs from round to round
		a.write(t, b, i, 8, 0)
		a.pollTS(t)
	}
	wr := uverbs.SendWR{ID: 99, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
		SGE:        []uverbs.SGE{{Addr: a.buf.Addr(), Length: 8, LKey: a.mr.LKey}},
		RemoteAddr: b.buf.Addr(), RKey: b.mr.RKey ^ 0x100}
	if err := a.qp.PostSend(&wr); err != nil {
		t.Fatal(err)
	}
	wc := make([]uverbs.WC, 1)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Microsecond) {
		if got, err := a.cq.Poll(wc); err != nil {
			t.Fatal(err)
		} else if got == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no completion for the bad WRITE within 10s; model violations %q", n.Errors())
		}
	}
	if wc[0].WRID != 99 || wc[0].Status != uverbs.WCRemAccessErr || wc[0].Timestamp != 0 {
		t.Errorf("bad WRITE completed %+v; want wr 99, REM_ACCESS_ERR, no timestamp", wc[0])
	}
}
