package uverbs

import (
	"context"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// newPipeEvents is an eventFile over a pipe, which behaves like the kernel's event fds
// for reads: pollable, one write = one event.
func newPipeEvents(t *testing.T) (*eventFile, int) {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	e, err := newEventFile(p[0], "pipe")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.close(); unix.Close(p[1]) })
	return e, p[1]
}

// The ping loop waits on the completion channel for every completion, so reading
// an event must not allocate, also with a cancellable context.
func TestEventReadAllocatesNothing(t *testing.T) {
	e, w := newPipeEvents(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ev := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := unix.Write(w, ev); err != nil {
			t.Fatal(err)
		}
		b, err := e.read(ctx, 8)
		if err != nil || b[0] != 1 || b[7] != 8 {
			t.Fatalf("read = %v, %v", b, err)
		}
	})
	if allocs != 0 {
		t.Fatalf("eventFile.read allocates %v times per event", allocs)
	}
}

// Cancelling the context wakes a blocked read; a later read with a fresh context
// still gets the next event (the past deadline the cancellation left is cleared).
func TestEventReadCancelThenReuse(t *testing.T) {
	t.Parallel()
	e, w := newPipeEvents(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := e.read(ctx, 8); done <- err }()
	cancel()
	select {
	case err := <-done:
		if err != context.Canceled {
			t.Fatalf("cancelled read returned %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("cancel did not wake the read")
	}
	if _, err := unix.Write(w, []byte("abcdefgh")); err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	b, err := e.read(ctx2, 8)
	if err != nil || string(b[:8]) != "abcdefgh" {
		t.Fatalf("read after cancel = %q, %v", b[:8], err)
	}
}

// Close wakes a blocked read with ErrClosed.
func TestEventReadClose(t *testing.T) {
	t.Parallel()
	e, _ := newPipeEvents(t)
	done := make(chan error, 1)
	go func() { _, err := e.read(context.Background(), 8); done <- err }()
	// Wait until the reader holds the lock, i.e. is inside Read.
	deadline := time.Now().Add(10 * time.Second)
	for e.mu.TryLock() {
		e.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatal("reader never started")
		}
		time.Sleep(time.Millisecond)
	}
	e.close()
	select {
	case err := <-done:
		if err != ErrClosed {
			t.Fatalf("read after close returned %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("close did not wake the read")
	}
}

// A cancellation that lands while a read clears the past deadline an earlier
// context's cancellation left behind must still wake that read. (The async
// event watcher hung this way in a guest run: each connection reads with a new
// context, cancelled at teardown, racing the previous one's hook.)
func TestEventReadCancelRacesStaleDeadline(t *testing.T) {
	t.Parallel()
	e, _ := newPipeEvents(t)
	for i := 0; i < 3000; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { _, err := e.read(ctx, 8); done <- err }()
		// Cancel at a varying point: before, during or after the read starts.
		for j := 0; j < i%64; j++ {
			runtime.Gosched()
		}
		cancel()
		select {
		case err := <-done:
			if err != context.Canceled {
				t.Fatalf("round %d: cancelled read returned %v", i, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: cancel did not wake the read", i)
		}
	}
}
