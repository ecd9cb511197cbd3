package rdmacm

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// iWARP: ESTABLISHED arrives directly (iw_cm moved the QP to RTS in the kernel), so the
// reader leaves the QP alone; Disconnect moves it to SQD, not ERR.
func TestIWARPEstablishedAndDisconnect(t *testing.T) {
	t.Parallel()
	ch, f := newTestChannel(t)
	f.attrs = cmAttrs()
	id := mustID(t, ch)
	qp := &fakeQP{log: f.log, num: 1, iw: true}
	if err := id.attachQP(qp, false); err != nil {
		t.Fatal(err)
	}
	f.log.take()
	f.queue(id.uid, id.handle, EventEstablished, 0, nil)
	if ev := nextEvent(t, id); ev.Type != EventEstablished {
		t.Fatalf("got %v, want ESTABLISHED", ev.Type)
	}
	wantOps(t, f.log.take()) // no hidden transitions, no RTU

	if err := id.Disconnect(); err != nil {
		t.Fatal(err)
	}
	wantOps(t, f.log.take(), "modify(4, 0x1)", "DISCONNECT")

	qp.failAt = 4
	if err := id.Disconnect(); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("got %v", err)
	}
	wantOps(t, f.log.take(), "modify(4, 0x1)") // no DISCONNECT when the QP cannot move
}

// A rejected iWARP connection still flushes through ERR, as in librdmacm.
func TestIWARPRejectedMovesQPToErr(t *testing.T) {
	t.Parallel()
	ch, f := newTestChannel(t)
	f.attrs = cmAttrs()
	id := mustID(t, ch)
	if err := id.attachQP(&fakeQP{log: f.log, num: 1, iw: true}, false); err != nil {
		t.Fatal(err)
	}
	f.log.take()
	f.queue(id.uid, id.handle, EventRejected, 8, nil)
	if ev := nextEvent(t, id); ev.Type != EventRejected {
		t.Fatalf("got %v", ev.Type)
	}
	wantOps(t, f.log.take(), "modify(6, 0x1)")
}
