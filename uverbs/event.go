package uverbs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// eventFile is a kernel event fd (async events, completion channel) set O_NONBLOCK and
// wrapped in an *os.File, so a read parks the goroutine in the runtime netpoller instead of
// blocking an OS thread, and deadlines/Close interrupt it.
type eventFile struct {
	f      *os.File
	mu     sync.Mutex // one reader at a time: deadlines are per file, not per reader
	closed atomic.Bool

	buf         [16]byte        // read target; returned by value
	rc          syscall.RawConn // f's, for rawRead
	readFn      func(fd uintptr) bool
	want, got   int             // rawRead's request and result
	readErr     error           // rawRead's error (EAGAIN excluded)
	watched     context.Context // the ctx whose cancellation hook is registered
	stopWatch   func() bool
	deadlineSet bool // a cancellation set a past read deadline
}

// aLongTimeAgo is a deadline in the past: it makes a pending read return at once.
var aLongTimeAgo = time.Unix(1, 0)

func newEventFile(fd int, name string) (*eventFile, error) {
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("uverbs: set %s non-blocking: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	if f == nil {
		unix.Close(fd)
		return nil, fmt.Errorf("uverbs: bad %s fd %d", name, fd)
	}
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("uverbs: %s: %w", name, err)
	}
	e := &eventFile{f: f, rc: rc}
	e.readFn = e.rawRead // bound once: a method value per read would allocate
	return e, nil
}

// rawRead is the read(2) under rc.Read: a raw syscall, which the Go scheduler
// does not see. A read that follows readiness never blocks, and a scheduled
// one costs the ping loop, on every wake-up, a wake of the runtime's monitor
// thread (entersyscall wakes it whenever all Ps were idle, which they are
// while the loop waits). It returns false on EAGAIN: rc.Read then waits in
// the netpoller.
func (e *eventFile) rawRead(fd uintptr) bool {
	for {
		k, _, errno := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&e.buf[0])), uintptr(e.want))
		switch errno {
		case 0:
			e.got, e.readErr = int(k), nil
			return true
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		}
		e.got, e.readErr = 0, errno
		return true
	}
}

// read reads exactly one event of n ≤ 16 bytes. It returns ctx.Err() when ctx ends first and
// ErrClosed when the file is closed meanwhile.
//
// It allocates nothing in the steady state (the ping loop waits here for every
// completion): the read buffer lives in e, and the cancellation hook is registered once
// per distinct ctx instead of once per call.
func (e *eventFile) read(ctx context.Context, n int) ([16]byte, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return e.buf, err
	}
	e.watch(ctx)
	// A cancellation of an earlier context may have left a past deadline behind.
	if e.deadlineSet {
		if err := e.clearDeadline(ctx); err != nil {
			return e.buf, err
		}
	}
	e.want, e.got, e.readErr = n, 0, nil
	for {
		err := e.rc.Read(e.readFn)
		k := e.got
		if err == nil {
			err = e.readErr
		}
		switch {
		case err == nil && k == n:
			return e.buf, nil
		case err == nil && k == 0, errors.Is(err, io.EOF):
			return e.buf, fmt.Errorf("uverbs: %s: unexpected end of file", e.f.Name())
		case err == nil:
			return e.buf, fmt.Errorf("uverbs: %s: short event read (%d of %d bytes)", e.f.Name(), k, n)
		case errors.Is(err, os.ErrDeadlineExceeded):
			if cerr := ctx.Err(); cerr != nil {
				return e.buf, cerr
			}
			// A late cancellation of an earlier context; ours is alive, keep waiting.
			if err := e.clearDeadline(ctx); err != nil {
				return e.buf, err
			}
		default:
			return e.buf, e.closedOr(fmt.Errorf("uverbs: read %s: %w", e.f.Name(), err))
		}
	}
}

// clearDeadline removes a past deadline an earlier context's cancellation left
// behind. ctx's own cancellation may set its past deadline just before the
// clear wipes it out, so ctx is checked after the clear: a cancelled context
// is marked done before its hook runs, and a cancellation after the check
// sets a deadline the next Read sees. Called with e.mu held.
func (e *eventFile) clearDeadline(ctx context.Context) error {
	if err := e.f.SetReadDeadline(time.Time{}); err != nil {
		return e.closedOr(err)
	}
	e.deadlineSet = false
	return ctx.Err()
}

// watch makes ctx's cancellation interrupt a pending read by setting a deadline in the
// past. The hook stays registered for as long as callers keep passing the same ctx.
// Called with e.mu held.
func (e *eventFile) watch(ctx context.Context) {
	if ctx == e.watched || ctx.Done() == nil {
		return
	}
	if e.stopWatch != nil {
		e.stopWatch()
	}
	e.watched = ctx
	e.stopWatch = context.AfterFunc(ctx, func() {
		e.f.SetReadDeadline(aLongTimeAgo)
		e.mu.Lock() // serialised with read's own deadline handling
		e.deadlineSet = true
		e.mu.Unlock()
	})
}

// closedOr maps any failure after close (os.ErrClosed from Read, the internal "use of
// closed file" from SetReadDeadline) to ErrClosed.
func (e *eventFile) closedOr(err error) error {
	if e.closed.Load() || errors.Is(err, os.ErrClosed) {
		return ErrClosed
	}
	return err
}

func (e *eventFile) close() error {
	e.closed.Store(true)
	err := e.f.Close() // first: it wakes a read that holds e.mu
	e.mu.Lock()
	if e.stopWatch != nil {
		e.stopWatch()
	}
	e.mu.Unlock()
	return err
}
