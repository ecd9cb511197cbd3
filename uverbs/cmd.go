package uverbs

import (
	"errors"
	"fmt"
	"github.com/gorping/gorping/uverbs/driver"
	"sync"
	"unsafe"

	"github.com/gorping/gorping/internal/trace"
	"github.com/gorping/gorping/internal/umem"
	"github.com/gorping/gorping/internal/wire"
	"golang.org/x/sys/unix"
)

// Commands travel through a per-context arena of mmap'd memory (umem): the kernel receives
// the response buffer as a plain integer address inside the request, so that buffer must
// not be Go memory (goroutine stacks move). The arena is used under a mutex, one command at
// a time; requests are built at the start, responses land at arenaRespOff.
//
// The providers' commands (Write: rxe's doorbell and CQ arm above all) each take a lane
// of their own after the arena, under a read lock: two goroutines ringing doorbells on one context (a
// prober and the responder of one process) must not queue on one mutex, whose wait
// record the runtime may allocate, once per contended ping.
const (
	arenaSize    = 4096
	arenaRespOff = arenaSize / 2
	maxReqLen    = arenaRespOff
	maxRespLen   = arenaSize - arenaRespOff

	laneCount = 8
	laneSize  = 512 // request in the first half, response in the second
)

// cmdBuf is one command buffer: requests at the start of b, responses in its second half,
// at user address resp.
type cmdBuf struct {
	mu   sync.Mutex // a lane's; the arena is guarded by cmdPath.mu
	b    []byte
	resp uint64
}

// cmdError is a failed uverbs command. It unwraps to the kernel's errno, so
// errors.Is(err, unix.EINVAL) works.
type cmdError struct {
	Cmd   string // e.g. "CREATE_QP"
	Errno unix.Errno
}

func (e *cmdError) Error() string { return "uverbs " + e.Cmd + ": " + e.Errno.Error() }
func (e *cmdError) Unwrap() error { return e.Errno }

// cmdName names a command as the uapi header does; an extended one (its flag set) is
// IB_USER_VERBS_EX_CMD_*, which reuses the base command's number where there is one.
func cmdName(cmd uint32) string {
	if cmd&exCmdFlag != 0 {
		if n, ok := cmdNames[cmd&^exCmdFlag]; ok {
			return "EX_" + n
		}
		return fmt.Sprintf("extended command %d", cmd&^exCmdFlag)
	}
	if n, ok := cmdNames[cmd]; ok {
		return n
	}
	return fmt.Sprintf("command %d", cmd)
}

// cmdPath is a context's command channel: the uverbs fd plus the arena. Every command of
// the core goes through call, every provider command through Write, the ioctls through
// ioctlCmd; all of them run under mu (Write under its read lock, in a lane) and check
// that the fd is still open, so none can reach a closed (or reused) fd number while
// Context.Close runs.
type cmdPath struct {
	mu     sync.RWMutex
	fd     int
	mem    *umem.Mem // the arena, then the lanes
	arena  cmdBuf
	lanes  [laneCount]cmdBuf
	closed bool
	// fdClosed: Context.Close closed fd (under mu); commands and mappings must stop.
	fdClosed bool
	// write issues one command; unix.Write in production, a fake kernel in tests.
	write func(fd int, p []byte) (int, error)
	// dataWrite issues the commands the provider listed in driver.Info.RawCommands
	// (raw: bits by command number): rawWrite in production, write in tests.
	dataWrite func(fd int, p []byte) (int, error)
	raw       uint64
	// ioctl issues one ioctl; unix.Syscall in production.
	ioctl func(fd int, req uint, arg uintptr) error
	// backend, if set, replaces the device file entirely (WithBackend).
	backend driver.Backend
	// tr receives a record per command and mapping (--trace); nil: none.
	tr *trace.Tracer
}

func sysWrite(fd int, p []byte) (int, error) { return unix.Write(fd, p) }

func sysIoctl(fd int, req uint, arg uintptr) error {
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(req), arg); errno != 0 {
		return errno
	}
	return nil
}

// rawWrite is write(2) without telling the Go scheduler. The data path's
// commands never sleep in the kernel, but rxe's doorbell runs the whole send
// inline (packet build, loopback, the peer's receive) and can take longer
// than the 20 µs after which the runtime hands a syscall's P to another
// thread: with one P that is a thread wake-up, a scheduler pass and a thread
// park for every doorbell (docs/architecture.md has the measurement).
// Only for commands that cannot block: nothing else runs on the P meanwhile.
// A provider opts in per command (driver.Info.RawCommands).
func rawWrite(fd int, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	n, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e != 0 {
		return int(n), e
	}
	return int(n), nil
}

// rawAllowed are the commands a provider may list in RawCommands: the data path's.
const rawAllowed = 1<<cmdPostSend | 1<<cmdReqNotifyCQ

func newCmdPath(fd int, info driver.Info, o options) (*cmdPath, error) {
	mem, err := umem.Anon(arenaSize + laneCount*laneSize)
	if err != nil {
		return nil, fmt.Errorf("uverbs: command arena: %w", err)
	}
	c := &cmdPath{fd: fd, mem: mem, write: sysWrite, dataWrite: rawWrite, ioctl: sysIoctl, backend: o.backend, tr: o.tracer}
	b := mem.Bytes()
	c.arena = cmdBuf{b: b[:arenaSize:arenaSize], resp: mem.AddrAt(arenaRespOff)}
	for i := range c.lanes {
		off := arenaSize + i*laneSize
		c.lanes[i] = cmdBuf{b: b[off : off+laneSize : off+laneSize], resp: mem.AddrAt(off + laneSize/2)}
	}
	for _, cmd := range info.RawCommands {
		if cmd < 64 {
			c.raw |= 1 << cmd & rawAllowed
		}
	}
	switch {
	case o.backend != nil:
		b := o.backend
		c.write = func(_ int, q []byte) (int, error) { return b.Write(q) }
		c.dataWrite = c.write
		c.ioctl = func(int, uint, uintptr) error { return unix.ENOTTY }
	case o.write != nil:
		c.write, c.dataWrite = o.write, o.write
	}
	if o.ioctl != nil {
		c.ioctl = o.ioctl
	}
	return c, nil
}

// close releases the arena; the fd belongs to the caller.
func (c *cmdPath) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	return c.mem.Free()
}

// noResp is the response type of commands the kernel answers with nothing.
type noResp struct{}

// call runs one command: the core request *req, followed by the driver's udIn, and a
// response buffer of sizeof(Resp)+drvOut bytes. It decodes the core response into *resp and
// returns a copy of the drvOut bytes of driver response after it (nil if drvOut is 0).
// A request with a response must begin with the 8-byte `response` field (checked).
func call[Req, Resp any](c *cmdPath, cmd uint32, req *Req, resp *Resp, udIn []byte, drvOut int) ([]byte, error) {
	core := wire.Size[Resp]()
	c.mu.Lock()
	defer c.mu.Unlock()
	out, err := c.exec(&c.arena, cmd, wire.Bytes(req), udIn, core+drvOut)
	if err != nil {
		if c.tr != nil {
			c.traceCmd(cmd, req, resp, err)
		}
		return nil, err
	}
	wire.Decode(resp, out[:core])
	if c.tr != nil {
		c.traceCmd(cmd, req, resp, nil)
	}
	if drvOut == 0 {
		return nil, nil
	}
	return append([]byte(nil), out[core:]...), nil
}

// callEx is call for an extended command (cmd without the extended flag): header, ex
// header, the core request *req and the driver's udIn; the response is sizeof(Resp) core
// bytes and drvOut driver bytes. All four sizes must be multiples of 8 (the ex header
// counts 8-byte words). Extended requests carry no `response` field: the ex header does.
func callEx[Req, Resp any](c *cmdPath, cmd uint32, req *Req, resp *Resp, udIn []byte, drvOut int) ([]byte, error) {
	core := wire.Size[Resp]()
	c.mu.Lock()
	defer c.mu.Unlock()
	out, err := c.execExLocked(cmd, wire.Bytes(req), udIn, core, drvOut)
	if err != nil {
		if c.tr != nil {
			c.traceCmd(cmd|exCmdFlag, req, resp, err)
		}
		return nil, err
	}
	wire.Decode(resp, out[:core])
	if c.tr != nil {
		c.traceCmd(cmd|exCmdFlag, req, resp, nil)
	}
	if drvOut == 0 {
		return nil, nil
	}
	return append([]byte(nil), out[core:]...), nil
}

// execExLocked lays out and writes one extended command; see callEx.
func (c *cmdPath) execExLocked(cmd uint32, core, udIn []byte, coreOut, drvOut int) ([]byte, error) {
	if c.closed || c.fdClosed {
		return nil, ErrClosed
	}
	name := cmdName(cmd | exCmdFlag)
	n := sizeofCmdHdr + sizeofExCmdHdr + len(core) + len(udIn)
	respLen := coreOut + drvOut
	if len(core)%8 != 0 || len(udIn)%8 != 0 || coreOut%8 != 0 || drvOut%8 != 0 || n > maxReqLen || respLen > maxRespLen {
		return nil, fmt.Errorf("uverbs %s: bad extended command size (request %d+%d, response %d+%d bytes)", name, len(core), len(udIn), coreOut, drvOut)
	}
	a := c.arena.b
	hdr := cmdHdr{Command: cmd | exCmdFlag, InWords: uint16(len(core) / 8), OutWords: uint16(coreOut / 8)}
	ex := exCmdHdr{ProviderInWords: uint16(len(udIn) / 8), ProviderOutWords: uint16(drvOut / 8)}
	resp := a[arenaRespOff : arenaRespOff+respLen]
	if respLen > 0 {
		ex.Response = c.arena.resp
		clear(resp)
	}
	copy(a, wire.Bytes(&hdr))
	copy(a[sizeofCmdHdr:], wire.Bytes(&ex))
	copy(a[sizeofCmdHdr+sizeofExCmdHdr:], core)
	copy(a[sizeofCmdHdr+sizeofExCmdHdr+len(core):], udIn)
	w, err := c.write(c.fd, a[:n])
	if err != nil {
		var errno unix.Errno
		if errors.As(err, &errno) {
			return nil, &cmdError{Cmd: name, Errno: errno}
		}
		return nil, fmt.Errorf("uverbs %s: %w", name, err)
	}
	if w != n {
		return nil, fmt.Errorf("uverbs %s: short write (%d of %d bytes)", name, w, n)
	}
	return resp, nil
}

// exec writes header | core | udIn from buf and returns the respLen-byte response, which
// aliases buf: decode it before releasing buf (c.mu for the arena, the lane's mutex). If
// respLen > 0 the first 8 bytes of core are the request's `response` field and are set to
// buf's response address.
func (c *cmdPath) exec(buf *cmdBuf, cmd uint32, core, udIn []byte, respLen int) ([]byte, error) {
	if c.closed || c.fdClosed {
		return nil, ErrClosed
	}
	half := len(buf.b) / 2
	n := sizeofCmdHdr + len(core) + len(udIn)
	if n%4 != 0 || respLen%4 != 0 || n > half || respLen > half || n/4 > 0xffff {
		return nil, fmt.Errorf("uverbs %s: bad command size (request %d, response %d bytes)", cmdName(cmd), n, respLen)
	}
	if respLen > 0 && len(core) < 8 {
		return nil, fmt.Errorf("uverbs %s: request has no response field", cmdName(cmd))
	}
	a := buf.b
	hdr := cmdHdr{Command: cmd, InWords: uint16(n / 4), OutWords: uint16(respLen / 4)}
	copy(a, wire.Bytes(&hdr))
	copy(a[sizeofCmdHdr:], core)
	copy(a[sizeofCmdHdr+len(core):], udIn)
	resp := a[half : half+respLen]
	if respLen > 0 {
		// The request's first field is `__aligned_u64 response`.
		r := respField{Response: buf.resp}
		copy(a[sizeofCmdHdr:], wire.Bytes(&r))
		clear(resp)
	}
	write := c.write
	if cmd < 64 && c.raw&(1<<cmd) != 0 {
		write = c.dataWrite
	}
	w, err := write(c.fd, a[:n])
	if err != nil {
		var errno unix.Errno
		if errors.As(err, &errno) {
			return nil, &cmdError{Cmd: cmdName(cmd), Errno: errno}
		}
		return nil, fmt.Errorf("uverbs %s: %w", cmdName(cmd), err)
	}
	if w != n {
		return nil, fmt.Errorf("uverbs %s: short write (%d of %d bytes)", cmdName(cmd), w, n)
	}
	return resp, nil
}

// ioctlCmd runs one RDMA_VERBS_IOCTL whose buffer is at arg (umem: the kernel
// dereferences it), named name in errors.
func (c *cmdPath) ioctlCmd(name string, arg uintptr) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.fdClosed {
		return ErrClosed
	}
	if err := c.ioctl(c.fd, rdmaVerbsIoctl, arg); err != nil {
		var errno unix.Errno
		if errors.As(err, &errno) {
			return &cmdError{Cmd: name, Errno: errno}
		}
		return fmt.Errorf("uverbs %s: %w", name, err)
	}
	return nil
}

// Write implements driver.Commander: the data path's commands, in a free lane under the read
// lock (Context.Close, which takes the write lock, waits for them).
func (c *cmdPath) Write(cmd uint32, req, resp []byte) error {
	c.mu.RLock()
	l := c.lane()
	out, err := c.exec(l, cmd, req, nil, len(resp))
	if err == nil {
		copy(resp, out)
	}
	l.mu.Unlock()
	if c.tr != nil {
		c.traceWrite(cmd, req, err)
	}
	c.mu.RUnlock()
	return err
}

// lane locks and returns a free lane; only with more than laneCount writers at once does
// one wait, for the first lane.
func (c *cmdPath) lane() *cmdBuf {
	for i := range c.lanes {
		if c.lanes[i].mu.TryLock() {
			return &c.lanes[i]
		}
	}
	c.lanes[0].mu.Lock()
	return &c.lanes[0]
}

// Fd implements driver.Commander.

// Mmap implements driver.Commander: a shared mapping of the device file, made under the command
// lock so it cannot race with Context.Close closing the fd.
func (c *cmdPath) Mmap(what string, off int64, length, prot int) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.fdClosed {
		return nil, ErrClosed
	}
	var b []byte
	var err error
	if c.backend != nil {
		b, err = c.backend.Mmap(off, length, prot)
	} else {
		b, err = unix.Mmap(c.fd, off, length, prot, unix.MAP_SHARED)
	}
	if c.tr != nil {
		c.traceMmap(what, uint64(off), length, err)
	}
	if err != nil {
		return nil, fmt.Errorf("uverbs: mmap %s (%d bytes at offset %#x): %w", what, length, off, err)
	}
	return b, nil
}

// Munmap implements driver.Commander. Mappings outlive the fd, so this works after Close too.
func (c *cmdPath) Munmap(b []byte) error {
	if c.backend != nil {
		return c.backend.Munmap(b)
	}
	return unix.Munmap(b)
}
