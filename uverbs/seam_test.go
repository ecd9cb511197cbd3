package uverbs

import (
	"encoding/binary"
	"errors"
	"github.com/gorping/gorping/uverbs/driver"
	"testing"

	"github.com/gorping/gorping/internal/umem"
	"golang.org/x/sys/unix"
)

// udProvider is an mlx5-shaped test provider: it retries GET_CONTEXT, allocates the
// memory its create requests point at, changes the core requests, reports its own QP
// caps and takes the ALLOC_PD response. last is the context it made last.
type udProvider struct{ last *udCtx }

const udDriverID = 97

func (*udProvider) Info() driver.Info {
	return driver.Info{Driver: "udfake", DriverID: udDriverID, ABIMin: 1, ABIMax: 1, Transport: TransportIB}
}

type udCtx struct {
	dev      driver.Device
	cmd      driver.Commander
	gets     int
	aborted  int
	live     int // allocations not yet freed
	failNext bool
	pdns     []uint32
	failPD   bool
}

func (p *udProvider) NewContext(dev driver.Device, cc driver.ContextCommander) (driver.Context, error) {
	c := &udCtx{dev: dev, cmd: cc}
	p.last = c
	// First a request the "kernel" refuses, then the one it takes.
	for _, v := range []uint32{2, 1} {
		c.gets++
		if _, err := cc.GetContext(le(v, uint32(0)), 8); err == nil {
			return c, nil
		} else if !errors.Is(err, unix.EINVAL) {
			return nil, err
		}
	}
	return nil, errors.New("no version accepted")
}

func (c *udCtx) Close() error { return nil }

type udPending struct {
	c   *udCtx
	mem *umem.Mem
	req []byte
}

func (c *udCtx) alloc() (*udPending, error) {
	m, err := umem.Anon(4096)
	if err != nil {
		return nil, err
	}
	c.live++
	return &udPending{c: c, mem: m, req: le(m.Addr())}, nil
}

func (p *udPending) Udata() ([]byte, int) { return p.req, 8 }
func (p *udPending) Abort()               { p.c.aborted++; p.c.live--; p.mem.Free() }

func (c *udCtx) PrepareCQ(req *driver.CQRequest) (driver.PendingCQ, error) {
	req.CQE = 1<<bitsLen(req.CQE) - 1 // the ring's real depth
	p, err := c.alloc()
	return (*udPendingCQ)(p), err
}

func bitsLen(n int) int {
	l := 0
	for ; n > 0; n >>= 1 {
		l++
	}
	return l
}

type udPendingCQ udPending

func (p *udPendingCQ) Udata() ([]byte, int) { return (*udPending)(p).Udata() }
func (p *udPendingCQ) Abort()               { (*udPending)(p).Abort() }
func (p *udPendingCQ) Commit(cmd driver.Commander, core driver.CQCore, resp []byte) (driver.CQ, error) {
	if p.c.failNext {
		(*udPending)(p).Abort()
		return nil, errors.New("commit refused")
	}
	return &fakeProvCQ{cmd: cmd, core: core}, nil
}

type udPendingQP udPending

func (c *udCtx) PrepareQP(req *driver.QPRequest) (driver.PendingQP, error) {
	req.Cap.MaxInlineData = 60
	p, err := c.alloc()
	return (*udPendingQP)(p), err
}

func (p *udPendingQP) Udata() ([]byte, int) { return (*udPending)(p).Udata() }
func (p *udPendingQP) Abort()               { (*udPending)(p).Abort() }
func (p *udPendingQP) Commit(cmd driver.Commander, core *driver.QPCore, resp []byte) (driver.QP, error) {
	core.Cap.MaxSendWR = 25 // what the queue really takes
	return &fakeProvQP{core: *core}, nil
}

func (c *udCtx) PDUdata() ([]byte, int) { return nil, 4 }
func (c *udCtx) PDAllocated(handle uint32, resp []byte) error {
	if c.failPD {
		return errors.New("pd refused")
	}
	c.pdns = append(c.pdns, binary.LittleEndian.Uint32(resp))
	return nil
}

func newUDEnv(t *testing.T) (*testEnv, *udCtx) {
	t.Helper()
	e := udKernel(t)
	devnull, err := unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	p := &udProvider{}
	ctx, err := openContext(udDev, p, devnull, kernelOptions(e.k))
	if err != nil {
		unix.Close(devnull)
		t.Fatal(err)
	}
	e.ctx = ctx
	t.Cleanup(func() { ctx.Close() })
	return e, p.last
}

var udDev = Device{Name: "ud0", Path: "/dev/null", Driver: "udfake", DriverID: udDriverID, ABI: 1}

// udKernel is a fake kernel that answers udProvider's contexts.
func udKernel(t *testing.T) *testEnv {
	t.Helper()
	e := &testEnv{k: newFakeKernel(t), nextHandle: 100}
	asyncR, asyncW := pipe(t)
	t.Cleanup(func() { asyncR.Close(); asyncW.Close() })
	e.k.on(cmdGetContext, func(req []byte) ([]byte, error) {
		if binary.LittleEndian.Uint32(req[8:]) != 1 {
			return nil, unix.EINVAL
		}
		return le(dupFd(t, asyncR), uint32(1), zeros(8)), nil
	})
	handle := func() uint32 { e.nextHandle++; return e.nextHandle }
	e.k.on(cmdAllocPD, func(req []byte) ([]byte, error) { return le(handle(), uint32(0xabc)), nil })
	e.k.on(cmdDeallocPD, func(req []byte) ([]byte, error) { return nil, nil })
	e.k.on(cmdDestroyCQ, func(req []byte) ([]byte, error) { return le(uint32(0), uint32(0)), nil })
	e.k.on(cmdDestroyQP, func(req []byte) ([]byte, error) { return le(uint32(0)), nil })
	return e
}

func TestSeamProviderRunsGetContext(t *testing.T) {
	t.Parallel()
	e, ud := newUDEnv(t)
	if ud.gets != 2 || ud.dev.Name != "ud0" || ud.dev.Driver != "udfake" {
		t.Errorf("provider made %d GET_CONTEXTs on %+v, want 2 on ud0", ud.gets, ud.dev)
	}
	if e.ctx.NumCompVectors() != 1 {
		t.Errorf("num_comp_vectors %d from the successful GET_CONTEXT, want 1", e.ctx.NumCompVectors())
	}
}

func TestSeamCQPrepareCommitAbort(t *testing.T) {
	t.Parallel()
	e, ud := newUDEnv(t)
	var sentCQE uint32
	var sentAddr uint64
	e.k.on(cmdCreateCQ, func(req []byte) ([]byte, error) {
		sentCQE, sentAddr = binary.LittleEndian.Uint32(req[16:]), binary.LittleEndian.Uint64(req[32:])
		return le(uint32(7), sentCQE, zeros(8)), nil
	})
	cq, err := e.ctx.CreateCQ(10, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if sentCQE != 15 || cq.CQE() != 15 || sentAddr == 0 {
		t.Errorf("CREATE_CQ carried cqe %d, addr %#x; CQ depth %d; want the provider's 15 and its buffer", sentCQE, sentAddr, cq.CQE())
	}
	// The command fails: the provider frees its allocation.
	e.k.on(cmdCreateCQ, func(req []byte) ([]byte, error) { return nil, unix.ENOMEM })
	if _, err := e.ctx.CreateCQ(10, nil, 0); !errors.Is(err, unix.ENOMEM) || ud.aborted != 1 {
		t.Errorf("failed CREATE_CQ: %v, %d aborts", err, ud.aborted)
	}
	// Commit fails: the core destroys the kernel CQ.
	e.k.on(cmdCreateCQ, func(req []byte) ([]byte, error) { return le(uint32(8), uint32(15), zeros(8)), nil })
	ud.failNext = true
	if _, err := e.ctx.CreateCQ(10, nil, 0); err == nil {
		t.Fatal("CreateCQ succeeded although Commit failed")
	}
	if d := e.k.last(); binary.LittleEndian.Uint32(d) != cmdDestroyCQ || binary.LittleEndian.Uint32(d[16:]) != 8 {
		t.Errorf("after a failed Commit the last command is % x, want DESTROY_CQ of handle 8", d)
	}
	if ud.live != 1 {
		t.Errorf("%d provider allocations live, want 1 (the first CQ's)", ud.live)
	}
}

func TestSeamQPCapsAndPD(t *testing.T) {
	t.Parallel()
	e, ud := newUDEnv(t)
	e.k.on(cmdCreateCQ, func(req []byte) ([]byte, error) { return le(uint32(7), uint32(15), zeros(8)), nil })
	var sentInline uint32
	e.k.on(cmdCreateQP, func(req []byte) ([]byte, error) {
		sentInline = binary.LittleEndian.Uint32(req[48:])
		return le(uint32(9), uint32(0x77), uint32(16), uint32(16), uint32(1), uint32(1), sentInline, uint32(0), zeros(8)), nil
	})
	pd, err := e.ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	if len(ud.pdns) != 1 || ud.pdns[0] != 0xabc {
		t.Errorf("provider saw pdns %#x, want [0xabc]", ud.pdns)
	}
	cq, err := e.ctx.CreateCQ(10, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	qp, err := pd.CreateQP(QPInitAttr{SendCQ: cq, RecvCQ: cq, Cap: QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if c := qp.Cap(); sentInline != 60 || c.MaxSendWR != 25 || c.MaxInlineData != 60 || c.MaxRecvWR != 16 {
		t.Errorf("CREATE_QP carried inline %d; QP caps %+v; want the provider's 60 and 25", sentInline, c)
	}
	ud.failPD = true
	if _, err := e.ctx.AllocPD(); err == nil {
		t.Fatal("AllocPD succeeded although the provider refused the response")
	}
	if d := e.k.last(); binary.LittleEndian.Uint32(d) != cmdDeallocPD {
		t.Errorf("after a refused PD the last command is % x, want DEALLOC_PD", d)
	}
}

func TestSeamMmapAfterClose(t *testing.T) {
	t.Parallel()
	e, ud := newUDEnv(t)
	if err := e.ctx.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := ud.cmd.Mmap("test page", 0, 4096, unix.PROT_WRITE); !errors.Is(err, ErrClosed) {
		t.Errorf("Mmap after Close: %v, want ErrClosed", err)
	}
	if err := ud.cmd.Write(cmdAllocPD, zeros(8), zeros(8)); !errors.Is(err, ErrClosed) {
		t.Errorf("Write after Close: %v, want ErrClosed", err)
	}
}

// kernelBackend is a fake kernel as a driver.Backend (withBackend): no fd behind it.
type kernelBackend struct{ k *fakeKernel }

func (b kernelBackend) Write(p []byte) (int, error)          { return b.k.write(-1, p) }
func (b kernelBackend) Mmap(int64, int, int) ([]byte, error) { return nil, unix.ENODEV }
func (b kernelBackend) Munmap([]byte) error                  { return nil }

func TestOpenSharedRefcounts(t *testing.T) {
	t.Parallel()
	e := udKernel(t)
	opened := 0 // successful GET_CONTEXTs
	getContext := e.k.handlers[cmdGetContext]
	e.k.on(cmdGetContext, func(req []byte) ([]byte, error) {
		resp, err := getContext(req)
		if err == nil {
			opened++
		}
		return resp, err
	})
	open := func() Option { return withBackend(kernelBackend{e.k}) }
	// A path of this test's own: the shared table is the process's.
	dev := udDev
	dev.Path = "/dev/infiniband/ud-test-" + t.Name()
	a, err := OpenShared(dev, WithProvider(&udProvider{}), open())
	if err != nil {
		t.Fatal(err)
	}
	b, err := OpenShared(dev, WithProvider(&udProvider{}), open())
	if err != nil {
		t.Fatal(err)
	}
	if a != b || opened != 1 {
		t.Fatalf("two OpenShared gave distinct contexts or opened %d", opened)
	}
	if err := a.Close(); err != nil || a.isClosed() {
		t.Fatalf("first Close: %v, closed %v; want the context still open", err, a.isClosed())
	}
	if _, err := b.AllocPD(); err != nil {
		t.Fatalf("context unusable after one of two Closes: %v", err)
	}
	if err := b.Close(); err != nil || !b.isClosed() {
		t.Fatalf("last Close: %v, closed %v", err, b.isClosed())
	}
	c, err := OpenShared(dev, WithProvider(&udProvider{}), open())
	if err != nil || c == a || opened != 2 {
		t.Fatalf("OpenShared after the last Close: %v, same %v, opened %d", err, c == a, opened)
	}
	c.Close()
}
