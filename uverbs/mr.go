package uverbs

import (
	"errors"
	"fmt"
	"github.com/gorping/gorping/uverbs/driver"
	"sync"

	"github.com/gorping/gorping/internal/umem"
	"golang.org/x/sys/unix"
)

// Buffer is memory for RDMA: an anonymous mapping (umem), never Go heap, so the kernel may
// pin it and DMA into it while the garbage collector knows nothing about it.
type Buffer struct {
	mem *umem.Mem
}

// NewBuffer maps size bytes of zeroed, page-aligned memory.
func NewBuffer(size int) (*Buffer, error) {
	if size <= 0 {
		return nil, fmt.Errorf("uverbs: buffer size %d", size)
	}
	mem, err := umem.Anon(size)
	if err != nil {
		return nil, fmt.Errorf("uverbs: %d-byte buffer: %w", size, err)
	}
	return &Buffer{mem: mem}, nil
}

// Bytes returns the buffer's memory. It is invalid after Free.
func (b *Buffer) Bytes() []byte { return b.mem.Bytes() }

// Addr returns the buffer's virtual address (what SGEs and remote peers use), 0 after Free.
func (b *Buffer) Addr() uint64 { return b.mem.Addr() }

// Len returns the buffer size in bytes, 0 after Free.
func (b *Buffer) Len() int { return b.mem.Len() }

// Free unmaps the buffer. Deregister its MRs first.
func (b *Buffer) Free() error {
	if err := b.mem.Free(); err != nil {
		return fmt.Errorf("uverbs: buffer: %w", err)
	}
	return nil
}

// PD is a protection domain.
type PD struct {
	ctx    *Context
	handle uint32
	mu     sync.Mutex
	dead   bool
}

// AllocPD allocates a protection domain (ALLOC_PD).
func (c *Context) AllocPD() (*PD, error) {
	var in []byte
	var outLen int
	hooks, _ := c.prov.(driver.PDHooks)
	if hooks != nil {
		in, outLen = hooks.PDUdata()
	}
	var req allocPDReq
	var resp allocPDResp
	drv, err := call(c.cmd, cmdAllocPD, &req, &resp, in, outLen)
	if err != nil {
		return nil, fmt.Errorf("uverbs: %s: %w", c.dev.Name, err)
	}
	pd := &PD{ctx: c, handle: resp.PDHandle}
	if hooks != nil {
		if err := hooks.PDAllocated(resp.PDHandle, drv); err != nil {
			pd.Dealloc()
			return nil, fmt.Errorf("uverbs: %s: %s provider: %w", c.dev.Name, c.info.Driver, err)
		}
	}
	return pd, nil
}

// Context returns the PD's context.
func (pd *PD) Context() *Context { return pd.ctx }

// Dealloc frees the PD (DEALLOC_PD). The kernel refuses (EBUSY) while QPs or MRs use it.
func (pd *PD) Dealloc() error {
	pd.mu.Lock()
	defer pd.mu.Unlock()
	if pd.dead || pd.ctx.isClosed() {
		pd.dead = true
		return nil
	}
	req := deallocPDReq{PDHandle: pd.handle}
	if _, err := call(pd.ctx.cmd, cmdDeallocPD, &req, &noResp{}, nil, 0); err != nil {
		return fmt.Errorf("uverbs: %s: %w", pd.ctx.dev.Name, err)
	}
	pd.dead = true
	return nil
}

// MR is a registered memory region.
type MR struct {
	pd     *PD
	handle uint32
	LKey   uint32
	RKey   uint32
	Addr   uint64
	Len    int
	mu     sync.Mutex
	dead   bool
}

// RegMR registers the whole buffer (REG_MR, I/O virtual address = its address).
func (pd *PD) RegMR(b *Buffer, access AccessFlags) (*MR, error) {
	if b == nil || b.Len() == 0 {
		return nil, errors.New("uverbs: RegMR of a nil or freed buffer")
	}
	c := pd.ctx
	var in []byte
	var outLen int
	hooks, _ := c.prov.(driver.MRHooks)
	if hooks != nil {
		in, outLen = hooks.MRUdata(access)
	}
	req := regMRReq{
		Start:       b.Addr(),
		Length:      uint64(b.Len()),
		HcaVa:       b.Addr(),
		PDHandle:    pd.handle,
		AccessFlags: uint32(access),
	}
	var resp regMRResp
	drv, err := call(c.cmd, cmdRegMR, &req, &resp, in, outLen)
	if err != nil {
		return nil, regMRError(c.dev.Name, b.Len(), err, c.memlock)
	}
	mr := &MR{pd: pd, handle: resp.MRHandle, LKey: resp.Lkey, RKey: resp.Rkey, Addr: b.Addr(), Len: b.Len()}
	if hooks != nil {
		if err := hooks.MRRegistered(resp.MRHandle, drv); err != nil {
			mr.Dereg()
			return nil, fmt.Errorf("uverbs: %s: %s provider: %w", c.dev.Name, c.info.Driver, err)
		}
	}
	return mr, nil
}

// regMRError explains the usual cause of ENOMEM/EPERM: pinned pages are charged to
// RLIMIT_MEMLOCK.
func regMRError(dev string, size int, err error, memlock func() (unix.Rlimit, error)) error {
	if !errors.Is(err, unix.ENOMEM) && !errors.Is(err, unix.EPERM) {
		return fmt.Errorf("uverbs: %s: register %d bytes: %w", dev, size, err)
	}
	lim, lerr := memlock()
	if lerr != nil {
		return fmt.Errorf("uverbs: %s: register %d bytes: %w (pinned memory counts against RLIMIT_MEMLOCK; check `ulimit -l`)", dev, size, err)
	}
	if lim.Cur == unix.RLIM_INFINITY {
		return fmt.Errorf("uverbs: %s: register %d bytes: %w (RLIMIT_MEMLOCK is unlimited, so the kernel itself is short of memory)", dev, size, err)
	}
	return &MemlockError{Device: dev, Size: size, Limit: lim.Cur, Err: err}
}

// MemlockError is RegMR's error when the locked-memory limit is the likely cause: the
// kernel charges pinned pages to RLIMIT_MEMLOCK and answers EPERM (limit 0) or ENOMEM
// (limit reached). It unwraps to the kernel's error.
type MemlockError struct {
	Device string
	Size   int    // bytes that failed to register
	Limit  uint64 // RLIMIT_MEMLOCK's soft limit in bytes
	Err    error
}

func (e *MemlockError) Error() string {
	return fmt.Sprintf("uverbs: %s: register %d bytes: %v: %s", e.Device, e.Size, e.Err, e.Advice())
}

func (e *MemlockError) Unwrap() error { return e.Err }

// Advice is gorping's one explanation of a too-low locked-memory limit and its fix.
func (e *MemlockError) Advice() string {
	return fmt.Sprintf("RLIMIT_MEMLOCK is %d bytes; raise it with ulimit -l or systemd LimitMEMLOCK=", e.Limit)
}

// Dereg deregisters the MR (DEREG_MR).
func (mr *MR) Dereg() error {
	mr.mu.Lock()
	defer mr.mu.Unlock()
	c := mr.pd.ctx
	if mr.dead || c.isClosed() {
		mr.dead = true
		return nil
	}
	req := deregMRReq{MRHandle: mr.handle}
	if _, err := call(c.cmd, cmdDeregMR, &req, &noResp{}, nil, 0); err != nil {
		return fmt.Errorf("uverbs: %s: %w", c.dev.Name, err)
	}
	mr.dead = true
	return nil
}

// BufferAt maps size bytes of zeroed memory at exactly addr, failing if anything is mapped
// there. Tests use it to register buffers at the addresses of a recorded run.
func BufferAt(addr uint64, size int) (*Buffer, error) {
	mem, err := umem.AnonAt(addr, size)
	if err != nil {
		return nil, fmt.Errorf("uverbs: %d-byte buffer at %#x: %w", size, addr, err)
	}
	return &Buffer{mem: mem}, nil
}
