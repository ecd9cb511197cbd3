package rping

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorping/gorping/uverbs"
)

// fakeCQ is a CQ with the kernel's one-shot notification: an armed CQ raises
// one event on its channel for the next completion added.
type fakeCQ struct {
	mu      sync.Mutex
	queue   []uverbs.WC
	armed   bool
	arms    int
	polls   int
	acks    int
	pollErr error
	onArm   func(cq *fakeCQ) // runs inside Arm, before it returns (mu not held)
	events  chan struct{}
}

func newFakeCQ() *fakeCQ { return &fakeCQ{events: make(chan struct{}, 64)} }

// add queues completions as the NIC would: an event if armed, then disarmed.
func (q *fakeCQ) add(wcs ...uverbs.WC) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.queue = append(q.queue, wcs...)
	if q.armed {
		q.armed = false
		q.events <- struct{}{}
	}
}

// addSilently queues completions without raising an event, as if they had
// landed just before the CQ was armed.
func (q *fakeCQ) addSilently(wcs ...uverbs.WC) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.queue = append(q.queue, wcs...)
}

func (q *fakeCQ) Poll(wc []uverbs.WC) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.polls++
	if q.pollErr != nil {
		return 0, q.pollErr
	}
	n := copy(wc, q.queue)
	q.queue = q.queue[:copy(q.queue, q.queue[n:])] // keep the array: no allocations
	return n, nil
}

func (q *fakeCQ) Arm(bool) error {
	q.mu.Lock()
	q.armed = true
	q.arms++
	hook := q.onArm
	q.mu.Unlock()
	if hook != nil {
		hook(q)
	}
	return nil
}

func (q *fakeCQ) Ack(n int) {
	q.mu.Lock()
	q.acks += n
	q.mu.Unlock()
}

func (q *fakeCQ) counts() (arms, acks int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.arms, q.acks
}

// fakeChannel is the completion channel of one fakeCQ.
type fakeChannel struct {
	cq      *fakeCQ
	waits   atomic.Int32
	waitErr error
}

func (c *fakeChannel) Wait(ctx context.Context) (*uverbs.CQ, error) {
	c.waits.Add(1)
	if c.waitErr != nil {
		return nil, c.waitErr
	}
	select {
	case <-c.cq.events:
		return nil, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func wcOf(op uverbs.WCOpcode) uverbs.WC { return uverbs.WC{Opcode: op, ByteLen: advertLen} }

func newTestWait(busy bool) (*cqWait, *fakeCQ, *fakeChannel, *syncBuffer) {
	cq := newFakeCQ()
	ch := &fakeChannel{cq: cq}
	stderr := &syncBuffer{}
	out := &printer{stdout: io.Discard, stderr: stderr}
	return newCQWait(cq, ch, out, busy, false), cq, ch, stderr
}

// nextWithin calls next with a deadline, failing the test if it blocks.
func nextWithin(t *testing.T, w *cqWait) completion {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := w.next(ctx)
	if err != nil {
		t.Fatalf("next: %v", err)
	}
	return c
}

func TestCQWaitDeliversCompletionsBeforeCMEvent(t *testing.T) {
	for _, busy := range []bool{false, true} {
		w, cq, _, _ := newTestWait(busy)
		cq.add(wcOf(uverbs.WCSend), wcOf(uverbs.WCRecv), wcOf(uverbs.WCRDMARead))
		if !w.deliverCM(context.Background(), completion{kind: compDisconnected}) {
			t.Fatal("deliverCM refused")
		}
		want := []compKind{compSend, compRecv, compRead, compDisconnected}
		for i, k := range want {
			if got := nextWithin(t, w); got.kind != k {
				t.Fatalf("busy=%v: completion %d is kind %d, want %d", busy, i, got.kind, k)
			}
		}
	}
}

func TestCQWaitMoreCompletionsThanOneBatch(t *testing.T) {
	w, cq, _, _ := newTestWait(false)
	for range 40 {
		cq.add(wcOf(uverbs.WCRecv))
	}
	w.deliverCM(context.Background(), completion{kind: compError})
	for i := range 40 {
		if got := nextWithin(t, w); got.kind != compRecv || got.byteLen != advertLen {
			t.Fatalf("completion %d = %+v, want a recv of %d bytes", i, got, advertLen)
		}
	}
	if got := nextWithin(t, w); got.kind != compError {
		t.Fatalf("after the completions got %+v, want the CM event", got)
	}
}

// A CM event arriving while the loop sleeps on the channel wakes it.
func TestCQWaitCMEventWakesWait(t *testing.T) {
	w, cq, ch, _ := newTestWait(false)
	got := make(chan completion, 1)
	go func() {
		c, _ := w.next(context.Background())
		got <- c
	}()
	// Wait until the loop has armed and sits in Wait, then deliver.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if arms, _ := cq.counts(); arms > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("loop never armed the CQ")
		}
		time.Sleep(time.Millisecond)
	}
	w.deliverCM(context.Background(), completion{kind: compDisconnected})
	select {
	case c := <-got:
		if c.kind != compDisconnected {
			t.Fatalf("got %+v, want the DISCONNECTED event", c)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a CM event did not wake the wait")
	}
	// The loop sleeps again (with a fresh context: the cancelled one would
	// make it spin) until the next completion.
	go func() {
		c, _ := w.next(context.Background())
		got <- c
	}()
	for ch.waits.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("loop did not wait again after the CM event")
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	if n := ch.waits.Load(); n != 2 {
		t.Fatalf("loop waited %d times while idle, want it asleep in its second wait", n)
	}
	cq.add(wcOf(uverbs.WCRDMAWrite))
	select {
	case c := <-got:
		if c.kind != compWrite {
			t.Fatalf("after the CM event got %+v, want the write completion", c)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the completion did not wake the wait")
	}
}

// A completion that lands between the empty poll and the arm raises no event;
// the poll after arming must find it instead of sleeping forever.
func TestCQWaitPollsAgainAfterArming(t *testing.T) {
	w, cq, ch, _ := newTestWait(false)
	cq.onArm = func(q *fakeCQ) {
		q.onArm = nil
		q.addSilently(wcOf(uverbs.WCRecv))
	}
	if c := nextWithin(t, w); c.kind != compRecv {
		t.Fatalf("got %+v, want the recv that raced with the arm", c)
	}
	if n := ch.waits.Load(); n != 0 {
		t.Errorf("waited %d times although a completion was queued", n)
	}
}

// A burst of completions costs one event and one arm, not one per completion.
func TestCQWaitArmsOncePerBurst(t *testing.T) {
	w, cq, _, _ := newTestWait(false)
	go func() {
		// Wait until armed, then complete four work requests at once.
		for {
			if arms, _ := cq.counts(); arms > 0 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		cq.mu.Lock()
		cq.queue = append(cq.queue, wcOf(uverbs.WCSend), wcOf(uverbs.WCSend), wcOf(uverbs.WCRecv), wcOf(uverbs.WCRDMARead))
		cq.armed = false
		cq.events <- struct{}{}
		cq.mu.Unlock()
	}()
	for i := range 4 {
		nextWithin(t, w)
		if arms, acks := cq.counts(); arms != 1 || acks != 1 {
			t.Fatalf("after completion %d: %d arms, %d acks; want 1 and 1", i, arms, acks)
		}
	}
}

func TestCQWaitBusyNeverArmsOrWaits(t *testing.T) {
	w, cq, ch, _ := newTestWait(true)
	go func() {
		time.Sleep(20 * time.Millisecond)
		cq.add(wcOf(uverbs.WCRecv))
	}()
	if c := nextWithin(t, w); c.kind != compRecv {
		t.Fatalf("got %+v", c)
	}
	arms, _ := cq.counts()
	if arms != 0 || ch.waits.Load() != 0 {
		t.Errorf("busy poll armed %d times and waited %d times, want 0 and 0", arms, ch.waits.Load())
	}
	cq.mu.Lock()
	polls := cq.polls
	cq.mu.Unlock()
	if polls < 2 {
		t.Errorf("busy poll polled %d times, want it to spin", polls)
	}
}

func TestCQWaitContextEnds(t *testing.T) {
	for _, busy := range []bool{false, true} {
		w, _, _, _ := newTestWait(busy)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		_, err := w.next(ctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("busy=%v: err = %v, want the context's", busy, err)
		}
	}
}

func TestCQWaitFailures(t *testing.T) {
	w, _, ch, stderr := newTestWait(false)
	ch.waitErr = errors.New("boom")
	for range 2 { // stays failed
		if c := nextWithin(t, w); c.kind != compError {
			t.Fatalf("got %+v, want compError", c)
		}
	}
	if stderr.String() != "Failed to get cq event!\n" {
		t.Errorf("stderr %q, want rping's one line", stderr.String())
	}

	w, cq, _, stderr := newTestWait(false)
	cq.pollErr = errors.New("poll broke")
	if c := nextWithin(t, w); c.kind != compError {
		t.Fatalf("got %+v, want compError", c)
	}
	if !strings.HasPrefix(stderr.String(), "poll error ") {
		t.Errorf("stderr %q, want rping's poll error line", stderr.String())
	}
}

// Steady state: a completion, its event, the ack, the re-arm and the wait
// allocate nothing.
func TestCQWaitAllocatesNothing(t *testing.T) {
	w, cq, _, _ := newTestWait(false)
	ctx := context.Background()
	cq.add(wcOf(uverbs.WCRecv))
	w.next(ctx) // first call creates the wait context
	allocs := testing.AllocsPerRun(200, func() {
		// Arm happens inside next; complete as soon as it is armed, from here:
		// the fake raises the event on the buffered channel.
		cq.onArm = func(q *fakeCQ) { q.add(wcOf(uverbs.WCSend)) }
		if c, err := w.next(ctx); err != nil || c.kind != compSend {
			t.Fatalf("next = %+v, %v", c, err)
		}
	})
	if allocs > 0 {
		t.Errorf("next allocates %.1f times per completion", allocs)
	}
}

// stallWithin waits up to limit for the stall watch's compStall and returns
// when it came.
func stallWithin(t *testing.T, w *cqWait, limit time.Duration) time.Time {
	t.Helper()
	select {
	case c := <-w.cmEvents:
		if c.kind != compStall {
			t.Fatalf("parked %v, want compStall", c.kind)
		}
		return time.Now()
	case <-time.After(limit):
		t.Fatalf("no compStall within %s", limit)
	}
	return time.Time{}
}

// The stall watch, armed on every wait, fires only once its latest deadline has
// passed: re-arms move it without timer operations, a shorter re-arm brings the
// timer forward, a disarm cancels it.
func TestStallWatch(t *testing.T) {
	t.Parallel()
	w := newCQWait(newFakeCQ(), nil, &printer{}, false, false)
	defer w.stop()

	// Re-armed every 2 ms with 100 ms: no compStall, unless this goroutine
	// itself was held up for the whole 100 ms between two re-arms.
	const d = 100 * time.Millisecond
	var maxGap time.Duration
	last := time.Now()
	for end := last.Add(500 * time.Millisecond); time.Now().Before(end); {
		w.stall(time.Now(), d)
		now := time.Now()
		maxGap, last = max(maxGap, now.Sub(last)), now
		time.Sleep(2 * time.Millisecond)
	}
	select {
	case <-w.cmEvents:
		if maxGap < d {
			t.Fatalf("compStall while re-armed (largest gap between re-arms %s < %s)", maxGap, d)
		}
		t.Logf("compStall after a %s gap between re-arms: the machine stalled, not the watch", maxGap)
	default:
	}

	// Then left alone: it fires d after the last arm.
	armed := time.Now()
	w.stall(time.Now(), d)
	if at := stallWithin(t, w, 10*time.Second); at.Sub(armed) < d {
		t.Fatalf("compStall %s after the arm, before its %s", at.Sub(armed), d)
	}

	// A long watch, then a short one: the short deadline holds.
	w.stall(time.Now(), time.Hour)
	armed = time.Now()
	w.stall(time.Now(), 50*time.Millisecond)
	if at := stallWithin(t, w, 10*time.Second); at.Sub(armed) < 50*time.Millisecond {
		t.Fatalf("compStall %s after the short arm", at.Sub(armed))
	}

	// Disarmed, a watch fires nothing: only the next arm's compStall comes, after
	// that arm's deadline.
	w.stall(time.Now(), 20*time.Millisecond)
	w.stall(time.Time{}, 0)
	time.Sleep(60 * time.Millisecond) // past the disarmed deadline
	armed = time.Now()
	w.stall(time.Now(), 50*time.Millisecond)
	if at := stallWithin(t, w, 10*time.Second); at.Sub(armed) < 50*time.Millisecond {
		t.Fatalf("compStall %s after the arm: the disarmed watch fired", at.Sub(armed))
	}
}

// Arming the watch in the ping loop's steady state costs no allocation.
func TestStallWatchAllocs(t *testing.T) {
	w := newCQWait(newFakeCQ(), nil, &printer{}, false, false)
	defer w.stop()
	w.stall(time.Now(), time.Minute)
	if n := testing.AllocsPerRun(1000, func() { w.stall(time.Now(), time.Minute); w.stall(time.Time{}, 0) }); n != 0 {
		t.Fatalf("%v allocations per arm and disarm", n)
	}
}

func BenchmarkStallWatch(b *testing.B) {
	w := newCQWait(newFakeCQ(), nil, &printer{}, false, false)
	defer w.stop()
	from := time.Now()
	for b.Loop() {
		w.stall(from, time.Minute)
		w.stall(time.Time{}, 0)
	}
}
