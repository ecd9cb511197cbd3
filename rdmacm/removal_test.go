package rdmacm

import (
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func removedYet(ch *Channel) bool {
	select {
	case <-ch.Removed():
		return true
	default:
		return false
	}
}

// DEVICE_REMOVAL closes Removed before the event reaches its ID, reaches the
// ID like any event, and the channel still tears down every ID (the kernel
// has destroyed their cm_ids; commands on them fail) without waiting forever.
func TestDeviceRemoval(t *testing.T) {
	t.Parallel()
	ch, f := newTestChannel(t)
	l, conn, spare := mustID(t, ch), mustID(t, ch), mustID(t, ch)
	qp := &fakeQP{log: f.log, num: 0x42}
	f.attrs = cmAttrs()
	if err := conn.attachQP(qp, false); err != nil {
		t.Fatal(err)
	}
	f.queue(l.uid, 500, EventConnectRequest, 0, nil) // a child nobody accepted yet
	syncReader(t, f, spare)
	if removedYet(ch) {
		t.Fatal("Removed closed before any removal")
	}

	f.queue(conn.uid, conn.handle, EventDeviceRemoval, 0, nil)
	f.queue(l.uid, l.handle, EventDeviceRemoval, 0, nil)
	if ev := nextEvent(t, conn); ev.Type != EventDeviceRemoval {
		t.Fatalf("connection got %v, want DEVICE_REMOVAL", ev.Type)
	}
	if !removedYet(ch) {
		t.Fatal("the ID had its DEVICE_REMOVAL before Removed was closed")
	}
	if ev := nextEvent(t, l); ev.Type != EventConnectRequest || ev.Child == nil {
		t.Fatalf("listener: first %v", ev.Type)
	}
	if ev := nextEvent(t, l); ev.Type != EventDeviceRemoval {
		t.Fatalf("listener: second %v, want DEVICE_REMOVAL", ev.Type)
	}

	// The kernel's cm_ids are gone: commands fail, teardown still completes.
	f.mu.Lock()
	f.fail[cmdDisconnect] = unix.ENXIO
	f.mu.Unlock()
	if err := conn.Disconnect(); !errors.Is(err, unix.ENXIO) {
		t.Fatalf("Disconnect after removal: %v, want ENXIO", err)
	}
	done := make(chan error, 1)
	go func() { done <- ch.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(testTimeout):
		t.Fatal("Close hung after a device removal")
	}
	handles := map[uint32]bool{}
	for _, body := range f.commands(cmdDestroyID) {
		handles[ne.Uint32(body[8:])] = true
	}
	for _, h := range []uint32{l.handle, conn.handle, spare.handle, 500} {
		if !handles[h] {
			t.Errorf("handle %d not destroyed (destroyed: %v)", h, handles)
		}
	}
}

// A removal for an ID this channel no longer knows still says the device is
// going away.
func TestDeviceRemovalUnknownUID(t *testing.T) {
	t.Parallel()
	ch, f := newTestChannel(t)
	spare := mustID(t, ch)
	f.queue(12345, 9, EventDeviceRemoval, 0, nil)
	syncReader(t, f, spare)
	if !removedYet(ch) {
		t.Fatal("Removed not closed")
	}
	drained(t, spare)
}
