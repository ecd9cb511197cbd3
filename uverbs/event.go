package uverbs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// eventFile is a kernel event fd (async events, completion channel) set O_NONBLOCK and
// wrapped in an *os.File, so a read parks the goroutine in the runtime netpoller instead of
// blocking an OS thread, and deadlines/Close interrupt it.
type eventFile struct {
	f      *os.File
	mu     sync.Mutex // one reader at a time: deadlines are per file, not per reader
	closed atomic.Bool
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
	return &eventFile{f: f}, nil
}

// read reads exactly one event of n ≤ 16 bytes. It returns ctx.Err() when ctx ends first and
// ErrClosed when the file is closed meanwhile.
func (e *eventFile) read(ctx context.Context, n int) ([16]byte, error) {
	var buf [16]byte
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return buf, err
	}
	// A cancellation of an earlier read may have left a past deadline behind.
	if err := e.f.SetReadDeadline(time.Time{}); err != nil {
		return buf, e.closedOr(err)
	}
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, func() { e.f.SetReadDeadline(aLongTimeAgo) })
		defer stop()
	}
	for {
		k, err := e.f.Read(buf[:n])
		switch {
		case err == nil && k == n:
			return buf, nil
		case err == nil && k == 0, errors.Is(err, io.EOF):
			return buf, fmt.Errorf("uverbs: %s: unexpected end of file", e.f.Name())
		case err == nil:
			return buf, fmt.Errorf("uverbs: %s: short event read (%d of %d bytes)", e.f.Name(), k, n)
		case errors.Is(err, os.ErrDeadlineExceeded):
			if cerr := ctx.Err(); cerr != nil {
				return buf, cerr
			}
			// A late cancellation of an earlier read; our context is alive, keep waiting.
			if err := e.f.SetReadDeadline(time.Time{}); err != nil {
				return buf, e.closedOr(err)
			}
		default:
			return buf, e.closedOr(fmt.Errorf("uverbs: read %s: %w", e.f.Name(), err))
		}
	}
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
	return e.f.Close()
}
