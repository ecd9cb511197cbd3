package rdmacm

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// drained asserts that id has no queued event (Event with a cancelled
// context returns a queued event first).
func drained(t *testing.T, id *ID) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if ev, err := id.Event(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("unexpected event %v (status %d), err %v", ev.Type, ev.Status, err)
	}
}

// sync waits until the reader has dispatched everything queued so far, by
// sending a marker event to a spare ID and waiting for it.
func syncReader(t *testing.T, f *fakeDev, spare *ID) {
	t.Helper()
	f.queue(spare.uid, spare.handle, EventTimewaitExit, 0, nil)
	if ev := nextEvent(t, spare); ev.Type != EventTimewaitExit {
		t.Fatalf("marker: got %v", ev.Type)
	}
}

func TestDispatchByUID(t *testing.T) {
	t.Parallel()
	ch, f := newTestChannel(t)
	a, b, spare := mustID(t, ch), mustID(t, ch), mustID(t, ch)
	f.queue(b.uid, b.handle, EventAddrResolved, 0, nil)
	f.queue(a.uid, a.handle, EventRouteResolved, 0, nil)
	f.queue(999, 1, EventEstablished, 0, nil) // unknown uid: dropped
	f.queue(0, a.handle, EventDisconnected, 0, nil)
	f.queue(999, 777, EventConnectRequest, 0, nil) // nobody's child: destroyed
	f.queue(a.uid, a.handle, EventAddrError, -int32(unix.ENODEV), nil)
	syncReader(t, f, spare)

	if ev := nextEvent(t, a); ev.Type != EventRouteResolved {
		t.Fatalf("a: first event %v", ev.Type)
	}
	if ev := nextEvent(t, a); ev.Type != EventAddrError || ev.Status != -19 {
		t.Fatalf("a: second event %v status %d", ev.Type, ev.Status)
	}
	if ev := nextEvent(t, b); ev.Type != EventAddrResolved {
		t.Fatalf("b: %v", ev.Type)
	}
	drained(t, a)
	drained(t, b)
	destroyed := false
	for _, body := range f.commands(cmdDestroyID) {
		destroyed = destroyed || ne.Uint32(body[8:]) == 777
	}
	if !destroyed {
		t.Fatal("the child handle of a CONNECT_REQUEST for an unknown uid was not destroyed")
	}
}

func TestConnectRequestAndAccept(t *testing.T) {
	t.Parallel()
	ch, f := newTestChannel(t)
	l := mustID(t, ch)
	if err := l.Listen(3); err != nil {
		t.Fatal(err)
	}
	req := connParam{QPNum: 0x11, ResponderResources: 1, InitiatorDepth: 1, PrivateDataLen: 56}
	f.queue(l.uid, 500, EventConnectRequest, 0, &req)
	ev := nextEvent(t, l)
	c := ev.Child
	if ev.Type != EventConnectRequest || c == nil {
		t.Fatalf("got %v with child %v", ev.Type, c)
	}
	if c.handle != 500 || c.uid == 0 || c.uid == l.uid {
		t.Fatalf("child handle %d uid %d (listener uid %d)", c.handle, c.uid, l.uid)
	}
	if ev.Param.QPNum != 0x11 || len(ev.Param.PrivateData) != 56 {
		t.Fatalf("param %+v", ev.Param)
	}
	// rdma_accept(child, NULL): the REQ's values, retry/rnr 7.
	if err := c.Accept(ConnParam{ResponderResources: MaxRDAtomic, InitiatorDepth: MaxRDAtomic,
		RetryCount: 7, RNRRetryCount: 7, QPNum: 0x22}); err != nil {
		t.Fatal(err)
	}
	checkBody(t, "ACCEPT", f.last(cmdAccept), make(golden, 296).u64(0, c.uid).u32(8, 0x22).
		u8(8+266, 1).u8(8+267, 1).u8(8+269, 7).u8(8+270, 7).u8(8+271, 1).u32(280, 500))
	f.queue(c.uid, 500, EventEstablished, 0, nil)
	if ev := nextEvent(t, c); ev.Type != EventEstablished {
		t.Fatalf("child: %v", ev.Type)
	}
	drained(t, l)
}

// The CONNECT_RESPONSE hidden steps of librdmacm for an ID that owns its QP.
func TestConnectResponseHiddenSteps(t *testing.T) {
	t.Parallel()
	for _, ib := range []bool{false, true} {
		t.Run(fmt.Sprintf("ib=%v", ib), func(t *testing.T) {
			ch, f := newTestChannel(t)
			f.attrs = cmAttrs()
			id := mustID(t, ch)
			qp := &fakeQP{log: f.log, num: 0x22}
			f.log.take()
			if err := id.attachQP(qp, ib); err != nil {
				t.Fatal(err)
			}
			wantOps(t, f.log.take(), "INIT_QP_ATTR(1)", "modify(1, 0x39)")
			if err := id.Connect(ConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7,
				RNRRetryCount: 7, QPNum: 0x999}); err != nil {
				t.Fatal(err)
			}
			wantOps(t, f.log.take(), "CONNECT")
			if got := ne.Uint32(f.last(cmdConnect)); got != 0x22 {
				t.Fatalf("CONNECT qp_num %#x, want the attached QP's 0x22", got)
			}

			f.queue(id.uid, id.handle, EventConnectResponse, 0, &connParam{QPNum: 0x33})
			ev := nextEvent(t, id)
			if ev.Type != EventEstablished || ev.Status != 0 || ev.Param.QPNum != 0x33 {
				t.Fatalf("got %v status %d param %+v, want ESTABLISHED", ev.Type, ev.Status, ev.Param)
			}
			rtrMask := cmAttrs()[qpsRTR].AttrMask
			if ib {
				rtrMask &^= 0xE00000
			}
			wantOps(t, f.log.take(),
				"INIT_QP_ATTR(1)", "modify(1, 0x39)",
				"INIT_QP_ATTR(2)", fmt.Sprintf("modify(2, %#x)", rtrMask),
				"INIT_QP_ATTR(3)", "modify(3, 0x12e01)",
				"ACCEPT valid=0")
			m := qp.modifies()
			// Active side: librdmacm passes RDMA_MAX_RESP_RES / RDMA_MAX_INIT_DEPTH,
			// i.e. keeps the kernel's rd_atomic values.
			if rtr, rts := m[2].attr, m[3].attr; rtr.MaxDestRdAtomic != 9 || rts.MaxRdAtomic != 9 ||
				rtr.DestQPNum != 0x11 || rtr.RQPSN != 0x1234 || rts.SQPSN != 0x5678 {
				t.Fatalf("modify attributes changed: rtr %+v rts %+v", rtr, rts)
			}
			checkBody(t, "ACCEPT", f.last(cmdAccept), make(golden, 296).u32(280, id.handle))
		})
	}
}

func TestConnectResponseFailure(t *testing.T) {
	t.Parallel()
	ch, f := newTestChannel(t)
	f.attrs = cmAttrs()
	id, spare := mustID(t, ch), mustID(t, ch)
	qp := &fakeQP{log: f.log, num: 0x22, failAt: qpsRTR}
	if err := id.attachQP(qp, false); err != nil {
		t.Fatal(err)
	}
	f.log.take()
	f.queue(id.uid, id.handle, EventConnectResponse, 0, nil)
	ev := nextEvent(t, id)
	if ev.Type != EventConnectError || ev.Status != -int32(unix.EINVAL) {
		t.Fatalf("got %v status %d, want CONNECT_ERROR -22", ev.Type, ev.Status)
	}
	rtrMask := cmAttrs()[qpsRTR].AttrMask
	wantOps(t, f.log.take(), "INIT_QP_ATTR(1)", "modify(1, 0x39)",
		"INIT_QP_ATTR(2)", fmt.Sprintf("modify(2, %#x)", rtrMask), "modify(6, 0x1)")
	// librdmacm swallows the REJECTED / DISCONNECTED that follow.
	f.queue(id.uid, id.handle, EventRejected, 28, nil)
	f.queue(id.uid, id.handle, EventDisconnected, 0, nil)
	f.queue(id.uid, id.handle, EventTimewaitExit, 0, nil)
	if ev := nextEvent(t, id); ev.Type != EventTimewaitExit {
		t.Fatalf("got %v after a connect error, want TIMEWAIT_EXIT", ev.Type)
	}
	syncReader(t, f, spare)
	wantOps(t, f.log.take()) // REJECTED after the error does not touch the QP again
}

func TestConnectResponseAcceptFails(t *testing.T) {
	t.Parallel()
	ch, f := newTestChannel(t)
	f.attrs = cmAttrs()
	id := mustID(t, ch)
	qp := &fakeQP{log: f.log, num: 0x22}
	if err := id.attachQP(qp, true); err != nil {
		t.Fatal(err)
	}
	f.fail[cmdAccept] = unix.EIO
	f.queue(id.uid, id.handle, EventConnectResponse, 0, nil)
	ev := nextEvent(t, id)
	if ev.Type != EventConnectError || ev.Status != -int32(unix.EIO) {
		t.Fatalf("got %v status %d, want CONNECT_ERROR -5", ev.Type, ev.Status)
	}
	if m := qp.modifies(); m[len(m)-1].attr.State != qpsErr {
		t.Fatalf("QP left in state %d", m[len(m)-1].attr.State)
	}
}

// -q mode: no QP attached, the kernel's CONNECT_RESPONSE reaches the app.
func TestConnectResponseWithoutQP(t *testing.T) {
	t.Parallel()
	ch, f := newTestChannel(t)
	id := mustID(t, ch)
	f.log.take()
	f.queue(id.uid, id.handle, EventConnectResponse, 0, &connParam{QPNum: 0x33})
	ev := nextEvent(t, id)
	if ev.Type != EventConnectResponse || ev.Param.QPNum != 0x33 {
		t.Fatalf("got %v %+v", ev.Type, ev.Param)
	}
	if err := id.Establish(); err != nil {
		t.Fatal(err)
	}
	wantOps(t, f.log.take(), "ACCEPT valid=0")

	f.attrs = cmAttrs()
	if err := id.attachQP(&fakeQP{log: f.log}, false); err != nil {
		t.Fatal(err)
	}
	if err := id.Establish(); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("Establish with an attached QP: %v, want EINVAL", err)
	}
	if err := id.attachQP(&fakeQP{log: f.log}, false); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("second AttachQP: %v, want EINVAL", err)
	}
}

func TestAcceptHiddenSteps(t *testing.T) {
	t.Parallel()
	ch, f := newTestChannel(t)
	f.attrs = cmAttrs()
	l := mustID(t, ch)
	f.queue(l.uid, 600, EventConnectRequest, 0, &connParam{ResponderResources: 8, InitiatorDepth: 6})
	c := nextEvent(t, l).Child
	qp := &fakeQP{log: f.log, num: 0x44}
	if err := c.attachQP(qp, true); err != nil {
		t.Fatal(err)
	}
	limits := ConnParam{MaxResponderResources: 4, MaxInitiatorDepth: 16}

	bad := limits
	bad.ResponderResources, bad.InitiatorDepth = 5, 1
	f.log.take()
	if err := c.Accept(bad); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("responder resources above the device limit: %v, want EINVAL", err)
	}
	wantOps(t, f.log.take())

	p := limits
	p.ResponderResources, p.InitiatorDepth, p.RetryCount, p.RNRRetryCount = MaxRDAtomic, MaxRDAtomic, 7, 7
	if err := c.Accept(p); err != nil {
		t.Fatal(err)
	}
	rtrMask := cmAttrs()[qpsRTR].AttrMask &^ 0xE00000
	wantOps(t, f.log.take(), "INIT_QP_ATTR(1)", "modify(1, 0x39)",
		"INIT_QP_ATTR(2)", fmt.Sprintf("modify(2, %#x)", rtrMask),
		"INIT_QP_ATTR(3)", "modify(3, 0x12e01)", "ACCEPT valid=1")
	m := qp.modifies()
	// responder resources min(8, 4) = 4, initiator depth min(6, 16) = 6
	if rtr, rts := m[len(m)-2].attr, m[len(m)-1].attr; rtr.MaxDestRdAtomic != 4 || rts.MaxRdAtomic != 6 {
		t.Fatalf("overrides: max_dest_rd_atomic %d (want 4), max_rd_atomic %d (want 6)",
			rtr.MaxDestRdAtomic, rts.MaxRdAtomic)
	}
	checkBody(t, "ACCEPT", f.last(cmdAccept), make(golden, 296).u64(0, c.uid).u32(8, 0x44).
		u8(8+266, 4).u8(8+267, 6).u8(8+269, 7).u8(8+270, 7).u8(8+271, 1).u32(280, 600))

	// A failing ACCEPT moves the QP to ERR.
	f.fail[cmdAccept] = unix.EINVAL
	if err := c.Accept(p); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("got %v", err)
	}
	if m := qp.modifies(); m[len(m)-1].attr.State != qpsErr || m[len(m)-1].mask != qpMaskState {
		t.Fatalf("after a failed ACCEPT the QP got %+v", m[len(m)-1])
	}
}

func TestRejectedAndDisconnectMoveQPToErr(t *testing.T) {
	t.Parallel()
	ch, f := newTestChannel(t)
	f.attrs = cmAttrs()
	id := mustID(t, ch)
	qp := &fakeQP{log: f.log, num: 1}
	if err := id.attachQP(qp, false); err != nil {
		t.Fatal(err)
	}
	f.log.take()
	f.queue(id.uid, id.handle, EventRejected, 8, nil)
	if ev := nextEvent(t, id); ev.Type != EventRejected || ev.Status != 8 {
		t.Fatalf("got %v %d", ev.Type, ev.Status)
	}
	// The QP is in ERR before the app sees REJECTED.
	wantOps(t, f.log.take(), "modify(6, 0x1)")

	if err := id.Disconnect(); err != nil {
		t.Fatal(err)
	}
	wantOps(t, f.log.take(), "modify(6, 0x1)", "DISCONNECT")

	qp.failAt = qpsErr
	if err := id.Disconnect(); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("got %v", err)
	}
	wantOps(t, f.log.take(), "modify(6, 0x1)") // no DISCONNECT when the QP cannot move
}

// Destroy returns only after the events the kernel reported for the ID have
// passed the reader (librdmacm's events_completed == events_reported).
func TestDestroyWaitsForReportedEvents(t *testing.T) {
	t.Parallel()
	ch, f := newTestChannel(t)
	id := mustID(t, ch)
	f.gate = make(chan struct{})
	f.queue(id.uid, id.handle, EventAddrResolved, 0, nil)
	// Wait until the fake kernel has counted the event as reported.
	deadline := time.Now().Add(testTimeout)
	for {
		f.mu.Lock()
		n := f.given[id.uid]
		f.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the reader never took the event")
		}
		time.Sleep(time.Millisecond)
	}
	done := make(chan error, 1)
	go func() { done <- id.Destroy() }()
	for len(f.commands(cmdDestroyID)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("DESTROY_ID was not sent")
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("Destroy returned (%v) while a reported event was still in the reader", err)
	default:
	}
	close(f.gate)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(testTimeout):
		t.Fatal("Destroy did not return")
	}
	id.mu.Lock()
	got := id.received
	id.mu.Unlock()
	if got != 1 {
		t.Fatalf("received %d events, want 1", got)
	}
	if ev, err := id.Event(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Event after Destroy: %v, %v", ev.Type, err)
	}
	if ch.lookup(id.uid) != nil {
		t.Fatal("destroyed ID still in the dispatch map")
	}
}

func TestCloseDestroysEverything(t *testing.T) {
	t.Parallel()
	ch, f := newTestChannel(t)
	a, l, spare := mustID(t, ch), mustID(t, ch), mustID(t, ch)
	f.queue(l.uid, 500, EventConnectRequest, 0, nil)
	delivered := nextEvent(t, l).Child
	f.queue(l.uid, 600, EventConnectRequest, 0, nil) // stays queued
	syncReader(t, f, spare)

	waiting := make(chan error, 1)
	go func() {
		_, err := a.Event(context.Background())
		waiting <- err
	}()
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	handles := map[uint32]bool{}
	for _, body := range f.commands(cmdDestroyID) {
		handles[ne.Uint32(body[8:])] = true
	}
	for _, h := range []uint32{a.handle, l.handle, spare.handle, delivered.handle, 600} {
		if !handles[h] {
			t.Errorf("handle %d not destroyed by Close (destroyed: %v)", h, handles)
		}
	}
	select {
	case err := <-waiting:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("blocked Event returned %v, want ErrClosed", err)
		}
	case <-time.After(testTimeout):
		t.Fatal("Close did not wake a blocked Event")
	}
	select {
	case <-f.closed:
	default:
		t.Fatal("device not closed")
	}
	if err := a.Listen(1); !errors.Is(err, ErrClosed) {
		t.Fatalf("command after Close: %v", err)
	}
	if _, err := ch.CreateID(); !errors.Is(err, ErrClosed) {
		t.Fatalf("CreateID after Close: %v", err)
	}
	ch.mu.Lock()
	left := len(ch.ids)
	ch.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d ids left in the map", left)
	}
	if err := ch.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// The reader never waits for a consumer: thousands of events queue up.
func TestQueueDoesNotBlockReader(t *testing.T) {
	t.Parallel()
	ch, f := newTestChannel(t)
	busy, spare := mustID(t, ch), mustID(t, ch)
	const n = 5000
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range n {
			f.queue(busy.uid, busy.handle, EventType(i%4), int32(i), nil) // no event types with side effects
		}
	})
	wg.Wait()
	syncReader(t, f, spare)
	for i := range n {
		ev := nextEvent(t, busy)
		if ev.Status != int32(i) {
			t.Fatalf("event %d has status %d: order lost", i, ev.Status)
		}
	}
	drained(t, busy)
}

func TestEventContextAndReaderError(t *testing.T) {
	t.Parallel()
	ch, f := newTestChannel(t)
	id := mustID(t, ch)
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	if _, err := id.Event(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want DeadlineExceeded", err)
	}
	f.queue(id.uid, id.handle, EventAddrResolved, 0, nil)
	syncReader(t, f, mustID(t, ch))
	f.errs <- unix.EFAULT
	<-ch.readerDone
	// Queued events first, then the reader's error.
	if ev := nextEvent(t, id); ev.Type != EventAddrResolved {
		t.Fatalf("got %v", ev.Type)
	}
	if _, err := id.Event(context.Background()); !errors.Is(err, unix.EFAULT) {
		t.Fatalf("got %v, want the reader's EFAULT", err)
	}
	// Destroy must not wait for a reader that is gone.
	if err := id.Destroy(); err != nil {
		t.Fatal(err)
	}
}

func TestConnectNeedsLimitsForDeviceMaximum(t *testing.T) {
	t.Parallel()
	ch, f := newTestChannel(t)
	id := mustID(t, ch)
	if err := id.Connect(ConnParam{ResponderResources: MaxRDAtomic, InitiatorDepth: 1}); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("got %v, want EINVAL", err)
	}
	if err := id.Connect(ConnParam{ResponderResources: MaxRDAtomic, InitiatorDepth: MaxRDAtomic,
		MaxResponderResources: 16, MaxInitiatorDepth: 128}); err != nil {
		t.Fatal(err)
	}
	checkBody(t, "CONNECT", f.last(cmdConnect), make(golden, 288).u8(266, 16).u8(267, 128).
		u8(271, 1).u32(272, id.handle))
	if err := id.Connect(ConnParam{PrivateData: make([]byte, 257)}); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("257 bytes of private data: %v", err)
	}
}
