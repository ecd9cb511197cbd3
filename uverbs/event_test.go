package uverbs

import (
	"context"
	"errors"
	"testing"
	"time"
)

// within fails the test if f does not return within d (a deadline, not a sleep).
func within[T any](t *testing.T, d time.Duration, f func() T) T {
	t.Helper()
	ch := make(chan T, 1)
	go func() { ch <- f() }()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("did not return within %v", d)
		panic("unreachable")
	}
}

type waitResult struct {
	cq  *CQ
	err error
}

func TestCompChannelWaitAckDestroy(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	ch, err := e.ctx.CreateCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	cq, err := e.ctx.CreateCQ(8, ch, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The kernel writes the CQ's user_handle cookie.
	if _, err := e.chanW[0].Write(le(cq.cookie)); err != nil {
		t.Fatal(err)
	}
	r := within(t, 5*time.Second, func() waitResult { c, err := ch.Wait(context.Background()); return waitResult{c, err} })
	if r.err != nil || r.cq != cq {
		t.Fatalf("Wait = %v, %v; want the CQ", r.cq, r.err)
	}
	if got := cq.prov.(*fakeProvCQ).events; got != 1 {
		t.Errorf("provider saw %d completion events, want 1", got)
	}
	// Unacknowledged: Destroy refuses and leaves the CQ alive.
	err = cq.Destroy()
	if !errors.Is(err, ErrUnackedEvents) {
		t.Fatalf("Destroy with an unacked event: %v, want ErrUnackedEvents", err)
	}
	if e.k.find(cmdDestroyCQ) != nil {
		t.Fatal("DESTROY_CQ was sent despite unacked events")
	}
	cq.Ack(1)
	if err := cq.Destroy(); err != nil {
		t.Fatalf("Destroy after Ack: %v", err)
	}
}

// An event read concurrently with Destroy is counted by the kernel: Destroy waits for its Ack.
func TestDestroyWaitsForRacingAck(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	cq, err := e.ctx.CreateCQ(8, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	destroyed := make(chan struct{})
	e.k.on(cmdDestroyCQ, func(req []byte) ([]byte, error) {
		defer close(destroyed)
		return le(uint32(1), uint32(0)), nil // one event was read meanwhile
	})
	done := make(chan error, 1)
	go func() { done <- cq.Destroy() }()
	select {
	case <-destroyed:
	case <-time.After(5 * time.Second):
		t.Fatal("DESTROY_CQ not sent")
	}
	select {
	case err := <-done:
		t.Fatalf("Destroy returned (%v) before the racing event was acked", err)
	default:
	}
	cq.Ack(1)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Destroy did not return after Ack")
	}
	if !cq.prov.(*fakeProvCQ).closed {
		t.Error("provider CQ not closed")
	}
}

func TestWaitCancelAndClose(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	ch, err := e.ctx.CreateCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := e.ctx.CreateCQ(8, ch, 0)
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	res := make(chan waitResult, 1)
	go func() {
		close(started)
		c, err := ch.Wait(ctx)
		res <- waitResult{c, err}
	}()
	<-started
	cancel()
	select {
	case r := <-res:
		if !errors.Is(r.err, context.Canceled) {
			t.Fatalf("Wait after cancel: %v, want context.Canceled", r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not return after cancel")
	}

	// The canceled read must not poison the next one.
	if _, err := e.chanW[0].Write(le(cq.cookie)); err != nil {
		t.Fatal(err)
	}
	r := within(t, 5*time.Second, func() waitResult { c, err := ch.Wait(context.Background()); return waitResult{c, err} })
	if r.err != nil || r.cq != cq {
		t.Fatalf("Wait after a canceled Wait = %v, %v", r.cq, r.err)
	}
	cq.Ack(1)

	// Deadline.
	dctx, dcancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer dcancel()
	r = within(t, 5*time.Second, func() waitResult { c, err := ch.Wait(dctx); return waitResult{c, err} })
	if !errors.Is(r.err, context.DeadlineExceeded) {
		t.Fatalf("Wait with deadline: %v", r.err)
	}

	// Close interrupts a pending Wait.
	res2 := make(chan waitResult, 1)
	go func() { c, err := ch.Wait(context.Background()); res2 <- waitResult{c, err} }()
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-res2:
		if !errors.Is(r.err, ErrClosed) {
			t.Fatalf("Wait after Close: %v, want ErrClosed", r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not return after Close")
	}
}

func TestAsyncEvent(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	pd, _ := e.ctx.AllocPD()
	cq, _ := e.ctx.CreateCQ(8, nil, 0)
	qp, err := pd.CreateQP(QPInitAttr{SendCQ: cq, RecvCQ: cq})
	if err != nil {
		t.Fatal(err)
	}
	sub := e.ctx.SubscribeAsync()
	defer sub.Close()
	other := e.ctx.SubscribeAsync() // every subscriber sees every event
	defer other.Close()
	events := [][]byte{
		le(qp.cookie, uint32(EventCommEst), uint32(0)),
		le(cq.cookie, uint32(EventCQErr), uint32(0)),
		le(uint64(1), uint32(EventPortActive), uint32(0)),
	}
	for _, ev := range events {
		if _, err := e.asyncW.Write(ev); err != nil {
			t.Fatal(err)
		}
	}
	type res struct {
		ev  AsyncEvent
		err error
	}
	get := func() res {
		return within(t, 5*time.Second, func() res { ev, err := sub.Next(context.Background()); return res{ev, err} })
	}
	if r := get(); r.err != nil || r.ev.Type != EventCommEst || r.ev.QP != qp || r.ev.Element != qp.cookie {
		t.Errorf("event 1 = %+v, %v", r.ev, r.err)
	}
	if r := get(); r.err != nil || r.ev.Type != EventCQErr || r.ev.CQ != cq {
		t.Errorf("event 2 = %+v, %v", r.ev, r.err)
	}
	if r := get(); r.err != nil || r.ev.Type != EventPortActive || r.ev.Element != 1 || r.ev.CQ != nil || r.ev.QP != nil {
		t.Errorf("event 3 = %+v, %v", r.ev, r.err)
	}
	for i, want := range []AsyncEventType{EventCommEst, EventCQErr, EventPortActive} {
		r := within(t, 5*time.Second, func() res { ev, err := other.Next(context.Background()); return res{ev, err} })
		if r.err != nil || r.ev.Type != want {
			t.Errorf("second subscriber's event %d = %+v, %v; want %v", i+1, r.ev, r.err, want)
		}
	}
	// Cancelling one subscriber's wait leaves the other's alone.
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := other.Next(cctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Next with a cancelled context: %v", err)
	}
	if _, err := e.asyncW.Write(le(uint64(1), uint32(EventPortErr), uint32(0))); err != nil {
		t.Fatal(err)
	}
	if r := get(); r.err != nil || r.ev.Type != EventPortErr {
		t.Errorf("event after the other's cancel = %+v, %v", r.ev, r.err)
	}
	// Close interrupts a pending Next.
	done := make(chan error, 1)
	go func() { _, err := sub.Next(context.Background()); done <- err }()
	e.ctx.Close()
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("Next after Close: %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Next did not return after Close")
	}
}
