package uverbs

import (
	"errors"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// gidEnv is a context whose fake kernel answers QUERY_DEVICE (one port) and QUERY_PORT
// (a 4-entry GID table). The GID ioctl fails with EBADF if the context's fd is closed,
// else answers ENOTTY as a kernel without the ioctl interface does (GIDTable then reads
// the sysfs of a device that has none: no entries). It is not sent to the fd itself
// (/dev/null): qemu-user, which runs the arm64 tests, answers unknown ioctls ENOSYS.
func gidEnv(t *testing.T) *testEnv {
	e := newTestEnv(t)
	e.ctx.cmd.ioctl = func(fd int, _ uint, _ uintptr) error {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
			return err
		}
		return unix.ENOTTY
	}
	dev := make([]byte, sizeofQueryDeviceResp)
	dev[171] = 1 // phys_port_cnt
	e.k.on(cmdQueryDevice, func([]byte) ([]byte, error) { return dev, nil })
	port := make([]byte, sizeofQueryPortResp)
	port[16] = 4 // gid_tbl_len
	e.k.on(cmdQueryPort, func([]byte) ([]byte, error) { return port, nil })
	return e
}

// GID reads that run while the context closes end in a table or in ErrClosed, never in
// an ioctl on the closed (possibly already reused) fd number: the ioctl goes through the
// command path, which checks the fd's own closed state under the command lock. Before it
// did, a read that had passed QUERY_PORT when Close closed the fd issued its ioctl on the
// closed fd (EBADF here; on a busy process, whatever file had taken the number). The
// provider's Close, which the core calls after closing the fd, holds Close there until
// every reader has finished a read, so each round has such a read.
func TestGIDTableDuringClose(t *testing.T) {
	t.Parallel()
	const rounds, readers = 50, 4
	for range rounds {
		e := gidEnv(t)
		var wg sync.WaitGroup
		errs := make(chan error, readers)
		ended := make(chan struct{}, readers) // a reader's read ended in an error
		for range readers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					_, err := e.ctx.GIDTable()
					if err != nil {
						if !errors.Is(err, ErrClosed) {
							errs <- err
						}
						ended <- struct{}{}
						return
					}
				}
			}()
		}
		e.ctx.prov.(*fakeProvCtx).onClose = func() {
			deadline := time.After(10 * time.Second)
			for range readers {
				select {
				case <-ended:
				case <-deadline:
					t.Error("readers still running 10 s after the fd was closed")
					return
				}
			}
		}
		if err := e.ctx.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("GIDTable during Close: %v (want a table or ErrClosed)", err)
		}
	}
}

// The GID ioctl is a command like the others: it reaches the context's ioctl with the
// fd, RDMA_VERBS_IOCTL and the buffer, and after Close it is refused without a system
// call.
func TestGIDTableIoctlPath(t *testing.T) {
	t.Parallel()
	var calls []uint
	e := newTestEnv(t)
	e.ctx.cmd.ioctl = func(fd int, req uint, arg uintptr) error {
		if fd != e.ctx.cmd.fd || arg == 0 {
			t.Errorf("ioctl on fd %d (context fd %d) arg %#x", fd, e.ctx.cmd.fd, arg)
		}
		calls = append(calls, req)
		return unix.EPERM
	}
	if _, err := e.ctx.queryGIDTableIoctl(4); !errors.Is(err, unix.EPERM) {
		t.Errorf("queryGIDTableIoctl = %v, want the ioctl's EPERM", err)
	}
	if len(calls) != 1 || calls[0] != rdmaVerbsIoctl {
		t.Errorf("ioctls %#x, want one RDMA_VERBS_IOCTL", calls)
	}
	e.ctx.Close()
	if _, err := e.ctx.queryGIDTableIoctl(4); !errors.Is(err, ErrClosed) || len(calls) != 1 {
		t.Errorf("after Close: %v with %d ioctls, want ErrClosed and none", err, len(calls))
	}
}
