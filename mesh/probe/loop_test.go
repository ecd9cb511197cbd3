package probe

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/gorping/gorping/mesh/target"
	"github.com/gorping/gorping/rping"
)

// fakeConn answers every ping at once with a fixed RTT and split, allocating nothing.
type fakeConn struct {
	rtt, nic time.Duration
	done     chan struct{}
}

func (c *fakeConn) Ping(time.Duration) (time.Duration, error) { return c.rtt, nil }
func (c *fakeConn) LastSplit() (nic, host time.Duration, ok bool) {
	return c.nic, c.rtt - c.nic, c.nic > 0
}
func (c *fakeConn) TSSource() string {
	if c.nic > 0 {
		return "nic"
	}
	return "sw"
}
func (c *fakeConn) Done() <-chan struct{} { return c.done }
func (c *fakeConn) Device() string        { return "rxe0" }
func (c *fakeConn) Port() int             { return 1 }
func (c *fakeConn) Flow() rping.Flow      { return rping.Flow{LocalQPN: 17, RemoteQPN: 18} }
func (c *fakeConn) Close() error          { return nil }

// countRec counts what a path records.
type countRec struct {
	successes, splits, failures, connected int
}

func (r *countRec) Target(target.Target, int) TargetRecorder { return r }
func (r *countRec) SlotDelay(time.Duration)                  {}
func (r *countRec) Path(int) PathRecorder                    { return r }
func (r *countRec) Remove()                                  {}
func (r *countRec) Success(_, _, _ time.Duration, ok bool) {
	r.successes++
	if ok {
		r.splits++
	}
}
func (r *countRec) Failed(string, int)                           { r.failures++ }
func (r *countRec) Down(string)                                  { r.failures++ }
func (r *countRec) Connected(string, string, rping.Flow, string) { r.connected++ }
func (r *countRec) DeadConnection()                              {}

// TestSlotAllocs: a slot that succeeds allocates nothing in the loop, the RTT split's
// included (the agent's metrics' side is mesh's TestRecordAllocs).
func TestSlotAllocs(t *testing.T) {
	for _, tc := range []struct {
		name string
		nic  time.Duration
	}{{"sw", 0}, {"nic", 7 * time.Microsecond}} {
		t.Run(tc.name, func(t *testing.T) {
			conn := &fakeConn{rtt: 10 * time.Microsecond, nic: tc.nic, done: make(chan struct{})}
			s := &Settings{Interval: time.Second, Timeout: time.Second, ConnectTimeout: time.Second, BackoffMax: time.Second,
				Paths: 1, Log: slog.New(slog.DiscardHandler), Resolver: nil,
				Dial: func(context.Context, netip.Addr, netip.AddrPort, int, io.Writer) (Conn, error) { return conn, nil }}
			rec := &countRec{}
			tg := target.Target{Host: "192.0.2.1", Port: 7174, Source: target.SourcePeers}
			l := newTargetLoop(tg, s, &shared{working: make([]bool, 1)}, rec, rec.Target(tg, 1), 0, 1)
			l.dials = make(chan struct{}, 1)
			ctx := context.Background()
			if reason := l.dial(ctx); reason != "" {
				t.Fatalf("dial: %s", reason)
			}
			if per := testing.AllocsPerRun(1000, func() { l.slot(ctx) }); per != 0 {
				t.Errorf("%g allocations per slot", per)
			}
			if l.conn == nil || l.lastReason != "" {
				t.Fatalf("the slots failed: %q", l.lastReason)
			}
			splits := 0
			if tc.nic > 0 {
				splits = 1001
			}
			if rec.successes != 1001 || rec.splits != splits || rec.failures != 0 || rec.connected != 1 {
				t.Errorf("recorded %+v, want 1001 successes, %d split, no failure, one connection", *rec, splits)
			}
			l.closeConn()
		})
	}
}
