package rdmacm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/gorping/gorping/internal/hostenv"
	"golang.org/x/sys/unix"
)

// cmdDevice is the seam between the rdma_cm logic and the character device.
// The real one writes to /dev/infiniband/rdma_cm; unit tests script one.
type cmdDevice interface {
	// exec issues one command. body is the command struct. When resp is not
	// nil, the device puts the address of a kernel-writable buffer holding a
	// copy of resp at body[respOff:respOff+8] and copies the buffer back into
	// resp afterwards (so resp may carry pre-filled defaults).
	exec(cmd uint32, body []byte, respOff int, resp []byte) error
	// getEvent blocks until one GET_EVENT fills resp or the device is closed
	// (then it returns an error wrapping ErrClosed).
	getEvent(resp []byte) error
	// close makes a blocked getEvent return and releases the device once no
	// command is in flight.
	close() error
}

// devName is the rdma_cm node in the host's device directory
// (/dev/infiniband/rdma_cm).
const devName = "rdma_cm"

// abiFiles are where sysfs tells the rdma_cm ABI version (newer kernels, then
// older ones), in librdmacm's order after its netlink query; relative to the
// sysfs mount.
func abiFiles() []string {
	return []string{"class/misc/rdma_cm/abi_version", "class/infiniband_ucma/abi_version"}
}

// fdDevice is the real rdma_cm character device. The fd is non-blocking and
// registered with Go's netpoller: GET_EVENT parks in rc.Read until ucma's poll
// reports POLLIN, and Close wakes it. Other commands go through rc.Control,
// which only pins the fd (no read/write lock), so they run concurrently with a
// parked reader; most return at once, but CONNECT on iWARP waits in the
// driver's TCP connect (see writeOnce).
type fdDevice struct {
	f     *os.File
	rc    syscall.RawConn
	arena *arena
}

func openDevice(env hostenv.Env) (*fdDevice, error) {
	if err := checkABI(env, abiFiles()); err != nil {
		return nil, err
	}
	devPath := env.DevPath(devName)
	fd, err := unix.Open(devPath, unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		// A *fs.PathError, so callers can tell the node's own failure
		// (EACCES, ENOENT) from the ABI check's.
		return nil, fmt.Errorf("rdmacm: %w", &fs.PathError{Op: "open", Path: devPath, Err: err})
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("rdmacm: stat %s: %w", devPath, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR {
		unix.Close(fd)
		return nil, fmt.Errorf("rdmacm: %s is not a character device: %w", devPath, unix.ENODEV)
	}
	a, err := newArena()
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	f := os.NewFile(uintptr(fd), devPath)
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		a.free()
		return nil, fmt.Errorf("rdmacm: %s: %w", devPath, err)
	}
	return &fdDevice{f: f, rc: rc, arena: a}, nil
}

// checkABI accepts the device only if the first of files (relative to env's
// sysfs) that exists says ABI 4. Like librdmacm it proceeds when sysfs has no
// version file (and would fail later on a mismatch).
func checkABI(env hostenv.Env, files []string) error {
	for _, rel := range files {
		p := env.Sys(rel)
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		v, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || v != abiVersion {
			return fmt.Errorf("rdmacm: %s is %q, need %d: %w", p, strings.TrimSpace(string(b)), abiVersion, unix.EPERM)
		}
		return nil
	}
	return nil
}

func (d *fdDevice) exec(cmd uint32, body []byte, respOff int, resp []byte) error {
	slot, err := d.arena.get()
	if err != nil {
		return err
	}
	defer d.arena.put(slot)
	var werr error
	err = d.rc.Control(func(fd uintptr) {
		werr = frame(slot, cmd, body, respOff, resp, func(b []byte) (int, error) {
			return writeOnce(int(fd), b)
		})
	})
	if err != nil {
		return closedErr(err)
	}
	return werr
}

// writeOnce writes one command with every signal blocked on the calling thread.
// A command must run once, and the kernel silently runs a write(2) again when a
// signal whose handler has SA_RESTART (all of Go's) interrupts it; the Go
// runtime signals its own threads at any time (SIGURG, for preemption). On
// iWARP, CONNECT blocks in the driver's TCP connect: interrupted and restarted,
// it connects again from the same port, and the first attempt's socket, if it
// got as far as ESTABLISHED, makes the second fail with EADDRNOTAVAIL
// ("rdma_connect: Cannot assign requested address"). Signals meant for the
// process go to another thread meanwhile; those for this one wait until the
// write is done.
func writeOnce(fd int, b []byte) (int, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	all := unix.Sigset_t{}
	for i := range all.Val {
		all.Val[i] = ^all.Val[i]
	}
	var old unix.Sigset_t
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &all, &old); err != nil {
		return 0, fmt.Errorf("block signals for the command: %w", err)
	}
	n, err := unix.Write(fd, b)
	if merr := unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil); merr != nil && err == nil {
		err = fmt.Errorf("restore the signal mask: %w", merr)
	}
	return n, err
}

func (d *fdDevice) getEvent(resp []byte) error {
	slot, err := d.arena.get()
	if err != nil {
		return err
	}
	defer d.arena.put(slot)
	var body getEvent
	var werr error
	err = d.rc.Read(func(fd uintptr) bool {
		werr = frame(slot, cmdGetEvent, bytesOf(&body), 0, resp, func(b []byte) (int, error) {
			return unix.Write(int(fd), b)
		})
		return !errors.Is(werr, unix.EAGAIN)
	})
	if err != nil {
		return closedErr(err)
	}
	return werr
}

func (d *fdDevice) close() error {
	err := d.f.Close() // wakes a parked getEvent, waits for commands in flight
	if ferr := d.arena.free(); err == nil {
		err = ferr
	}
	return err
}

// closedErr maps the os package's "file closed" errors to ErrClosed.
func closedErr(err error) error {
	if errors.Is(err, os.ErrClosed) {
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return err
}

// frame lays out one command in slot (header, body, response buffer), hands
// header+body to write, and copies the response back. The response buffer
// lives in the slot, i.e. in mmap'd memory the garbage collector never moves.
func frame(s slot, cmd uint32, body []byte, respOff int, resp []byte,
	write func([]byte) (int, error)) error {
	slot := s.b
	n := 8 + len(body)
	clear(slot)
	binary.NativeEndian.PutUint32(slot[0:], cmd)
	binary.NativeEndian.PutUint16(slot[4:], uint16(len(body)))
	binary.NativeEndian.PutUint16(slot[6:], uint16(len(resp)))
	copy(slot[8:], body)
	var rbuf []byte
	if resp != nil {
		rbuf = slot[slotResp : slotResp+len(resp)]
		copy(rbuf, resp)
		binary.NativeEndian.PutUint64(slot[8+respOff:], s.addr+slotResp)
	}
	for {
		w, err := write(slot[:n])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		if w != n {
			// librdmacm's answer to a short write
			return unix.ENODATA
		}
		break
	}
	copy(resp, rbuf)
	return nil
}
