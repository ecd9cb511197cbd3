package uverbs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/gorping/gorping/uverbs/driver"
	"os"
	"sync"
	"testing"
	"unsafe"

	"github.com/gorping/gorping/internal/hostenv"
	"github.com/gorping/gorping/internal/wire"
	"golang.org/x/sys/unix"
)

// fakeKernel stands in for the uverbs char device: it checks the write header, records the
// request, and answers by writing into the response buffer the request points at, which
// must lie inside the command arena (exactly what the real kernel would dereference).
type fakeKernel struct {
	t        testing.TB
	mu       sync.Mutex
	record   bool
	writes   [][]byte // every request, header included
	handlers map[uint32]func(req []byte) ([]byte, error)
}

func newFakeKernel(t testing.TB) *fakeKernel {
	return &fakeKernel{t: t, record: true, handlers: map[uint32]func([]byte) ([]byte, error){}}
}

func (k *fakeKernel) on(cmd uint32, h func(req []byte) ([]byte, error)) { k.handlers[cmd] = h }

// write implements cmdPath.write. p is a prefix of the arena.
func (k *fakeKernel) write(fd int, p []byte) (int, error) {
	if len(p) < 8 {
		return 0, unix.EINVAL
	}
	cmd := binary.LittleEndian.Uint32(p[0:4])
	inWords := int(binary.LittleEndian.Uint16(p[4:6]))
	outWords := int(binary.LittleEndian.Uint16(p[6:8]))
	if inWords*4 != len(p) {
		return 0, unix.EINVAL
	}
	if k.record {
		k.mu.Lock()
		k.writes = append(k.writes, append([]byte(nil), p...))
		k.mu.Unlock()
	}
	h := k.handlers[cmd]
	if h == nil {
		return 0, unix.EOPNOTSUPP
	}
	resp, err := h(p[8:])
	if err != nil {
		return 0, err
	}
	if outWords > 0 {
		arena := p[:cap(p)]
		addr := binary.LittleEndian.Uint64(p[8:16])
		off := int(addr - uint64(uintptr(unsafe.Pointer(&arena[0]))))
		if off < 0 || off+outWords*4 > len(arena) {
			return 0, unix.EFAULT
		}
		// Like the kernel: copy what fits, zero the rest of the core area.
		n := copy(arena[off:off+outWords*4], resp)
		clear(arena[off+n : off+outWords*4])
	}
	return len(p), nil
}

func (k *fakeKernel) last() []byte {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.writes) == 0 {
		return nil
	}
	return k.writes[len(k.writes)-1]
}

func (k *fakeKernel) find(cmd uint32) []byte {
	k.mu.Lock()
	defer k.mu.Unlock()
	for i := len(k.writes) - 1; i >= 0; i-- {
		if binary.LittleEndian.Uint32(k.writes[i]) == cmd {
			return k.writes[i]
		}
	}
	return nil
}

// le builds little-endian bytes from fixed-width values.
func le(vals ...any) []byte {
	var b []byte
	for _, v := range vals {
		switch x := v.(type) {
		case uint8:
			b = append(b, x)
		case uint16:
			b = binary.LittleEndian.AppendUint16(b, x)
		case uint32:
			b = binary.LittleEndian.AppendUint32(b, x)
		case int32:
			b = binary.LittleEndian.AppendUint32(b, uint32(x))
		case uint64:
			b = binary.LittleEndian.AppendUint64(b, x)
		case []byte:
			b = append(b, x...)
		default:
			panic(fmt.Sprintf("le: %T", v))
		}
	}
	return b
}

func zeros(n int) []byte { return make([]byte, n) }

// fakeProvider exercises the provider seam: it has driver data on GET_CONTEXT and
// CREATE_CQ/QP and a data path that goes through the driver.Commander.
type fakeProvider struct{}

const fakeDriverID = 99

func (fakeProvider) Info() driver.Info {
	return driver.Info{Driver: "fake", DriverID: fakeDriverID, ABIMin: 1, ABIMax: 1, Transport: TransportIB,
		RawCommands: []uint32{cmdReqNotifyCQ}}
}
func (fakeProvider) NewContext(dev driver.Device, cc driver.ContextCommander) (driver.Context, error) {
	resp, err := cc.GetContext([]byte{1, 2, 3, 4}, 8)
	if err != nil {
		return nil, err
	}
	if len(resp) != 8 {
		return nil, fmt.Errorf("fake: context resp %d bytes", len(resp))
	}
	return &fakeProvCtx{ctxResp: append([]byte(nil), resp...)}, nil
}

type fakeProvCtx struct {
	ctxResp []byte
	closed  bool
	qps     []*fakeProvQP
	onClose func() // if set, Close runs it first (after the core closed the fd)
}

func (p *fakeProvCtx) PrepareCQ(req *driver.CQRequest) (driver.PendingCQ, error) {
	return fakePendingCQ{p}, nil
}
func (p *fakeProvCtx) PrepareQP(req *driver.QPRequest) (driver.PendingQP, error) {
	return fakePendingQP{p}, nil
}

type fakePendingCQ struct{ p *fakeProvCtx }

func (f fakePendingCQ) Udata() ([]byte, int) { return nil, 16 }
func (f fakePendingCQ) Abort()               {}
func (f fakePendingCQ) Commit(cmd driver.Commander, core driver.CQCore, resp []byte) (driver.CQ, error) {
	return f.p.NewCQ(cmd, core, resp)
}

type fakePendingQP struct{ p *fakeProvCtx }

func (f fakePendingQP) Udata() ([]byte, int) { return nil, 32 }
func (f fakePendingQP) Abort()               {}
func (f fakePendingQP) Commit(cmd driver.Commander, core *driver.QPCore, resp []byte) (driver.QP, error) {
	return f.p.NewQP(cmd, *core, resp)
}

func (p *fakeProvCtx) NewCQ(cmd driver.Commander, core driver.CQCore, resp []byte) (driver.CQ, error) {
	if len(resp) != 16 {
		return nil, fmt.Errorf("fake: cq resp %d bytes", len(resp))
	}
	return &fakeProvCQ{cmd: cmd, core: core, resp: append([]byte(nil), resp...)}, nil
}
func (p *fakeProvCtx) NewQP(cmd driver.Commander, core driver.QPCore, resp []byte) (driver.QP, error) {
	q := &fakeProvQP{core: core}
	p.qps = append(p.qps, q)
	return q, nil
}
func (p *fakeProvCtx) Close() error {
	if p.onClose != nil {
		p.onClose()
	}
	p.closed = true
	return nil
}

type fakeProvCQ struct {
	cmd      driver.Commander
	core     driver.CQCore
	resp     []byte
	arm      reqNotifyCQ
	events   int
	closed   bool
	pending  []WC
	closeErr error
}

func (q *fakeProvCQ) Poll(wc []WC) (int, error) {
	n := copy(wc, q.pending)
	q.pending = q.pending[n:]
	return n, nil
}
func (q *fakeProvCQ) Arm(solicited bool) error {
	q.arm = reqNotifyCQ{CQHandle: q.core.Handle}
	if solicited {
		q.arm.SolicitedOnly = 1
	}
	return q.cmd.Write(cmdReqNotifyCQ, wire.Bytes(&q.arm), nil)
}
func (q *fakeProvCQ) Close() error { q.closed = true; return q.closeErr }
func (q *fakeProvCQ) CompEvent()   { q.events++ }

type fakeProvQP struct {
	core   driver.QPCore
	sends  int
	recvs  int
	states []QPState
	closed bool
}

func (q *fakeProvQP) PostSend(wr *SendWR) error { q.sends++; return nil }
func (q *fakeProvQP) PostRecv(wr *RecvWR) error { q.recvs++; return nil }
func (q *fakeProvQP) Close() error              { q.closed = true; return nil }
func (q *fakeProvQP) SetState(s QPState) error  { q.states = append(q.states, s); return nil }

// stubProvider is a provider known only by its Info: what discovery's sysfs rules and
// the registry read.
type stubProvider driver.Info

func (p stubProvider) Info() driver.Info { return driver.Info(p) }
func (p stubProvider) NewContext(driver.Device, driver.ContextCommander) (driver.Context, error) {
	return nil, errors.New("stub provider")
}

// shippedLike is a registry with providers that describe themselves as rxe, siw and mlx5
// do (uverbs' own tests cannot import them), and the fake provider.
func shippedLike(t testing.TB) *registry {
	t.Helper()
	r := &registry{}
	for _, p := range []driver.Provider{
		stubProvider{Driver: "rxe", DriverID: 14, ABIMin: 2, ABIMax: 2, Transport: TransportIB, Sysfs: driver.SysfsMatch{SoftParent: true}},
		stubProvider{Driver: "siw", DriverID: 18, ABIMin: 1, ABIMax: 1, Transport: TransportIWARP, Sysfs: driver.SysfsMatch{SoftNode: true}},
		stubProvider{Driver: "mlx5", DriverID: 1, ABIMin: 1, ABIMax: 1, Transport: TransportIB, Sysfs: driver.SysfsMatch{BusDrivers: []string{"mlx5_core"}}},
		fakeProvider{},
	} {
		if err := r.add(p); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// testHost is the host env with the shippedLike providers.
func testHost(t testing.TB, env hostenv.Env) Host {
	h := NewHost(env)
	h.reg = shippedLike(t)
	return h
}

// kernelOptions open a context on a fake kernel's write (the fd is real: /dev/null).
func kernelOptions(k *fakeKernel, opts ...Option) options {
	o := applyOptions(opts)
	o.write = k.write
	return o
}

// testEnv is a context on a fake kernel. Event fds are pipes the test writes events into.
type testEnv struct {
	k          *fakeKernel
	ctx        *Context
	asyncW     *os.File // write end of the async event pipe
	chanW      []*os.File
	nextHandle uint32
}

var fakeDev = Device{Name: "fake0", Index: 3, Uverbs: "uverbs7", Path: "/dev/null", DriverID: fakeDriverID, Driver: "fake", ABI: 1}

func pipe(t testing.TB) (r, w *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	return r, w
}

// dupFd hands the "kernel's" fd to the context, which then owns (and closes) it.
func dupFd(t testing.TB, f *os.File) uint32 {
	t.Helper()
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var nfd int
	var derr error
	rc.Control(func(fd uintptr) { nfd, derr = unix.Dup(int(fd)) })
	if derr != nil {
		t.Fatal(derr)
	}
	return uint32(nfd)
}

func newTestEnv(t testing.TB, opts ...Option) *testEnv {
	t.Helper()
	e := &testEnv{k: newFakeKernel(t), nextHandle: 100}
	asyncR, asyncW := pipe(t)
	e.asyncW = asyncW
	t.Cleanup(func() { asyncR.Close(); asyncW.Close() })
	e.k.on(cmdGetContext, func(req []byte) ([]byte, error) {
		return le(dupFd(t, asyncR), uint32(4), []byte("drvresp!")), nil
	})
	e.k.on(cmdCreateCompChannel, func(req []byte) ([]byte, error) {
		r, w := pipe(t)
		e.chanW = append(e.chanW, w)
		t.Cleanup(func() { r.Close(); w.Close() })
		return le(dupFd(t, r)), nil
	})
	handle := func() uint32 { e.nextHandle++; return e.nextHandle }
	e.k.on(cmdAllocPD, func(req []byte) ([]byte, error) { return le(handle()), nil })
	e.k.on(cmdDeallocPD, func(req []byte) ([]byte, error) { return nil, nil })
	e.k.on(cmdRegMR, func(req []byte) ([]byte, error) { return le(handle(), uint32(0x1111), uint32(0x2222)), nil })
	e.k.on(cmdDeregMR, func(req []byte) ([]byte, error) { return nil, nil })
	e.k.on(cmdCreateCQ, func(req []byte) ([]byte, error) {
		cqe := binary.LittleEndian.Uint32(req[16:20])
		return le(handle(), cqe+1, []byte("cq-mminfo-16byte")), nil
	})
	e.k.on(cmdDestroyCQ, func(req []byte) ([]byte, error) { return le(uint32(0), uint32(0)), nil })
	e.k.on(cmdReqNotifyCQ, func(req []byte) ([]byte, error) { return nil, nil })
	e.k.on(cmdCreateQP, func(req []byte) ([]byte, error) {
		return le(handle(), uint32(0x11), uint32(31), uint32(3), uint32(2), uint32(1), uint32(64), uint32(0), zeros(32)), nil
	})
	e.k.on(cmdModifyQP, func(req []byte) ([]byte, error) { return nil, nil })
	e.k.on(cmdDestroyQP, func(req []byte) ([]byte, error) { return le(uint32(0)), nil })
	devnull, err := unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, err := openContext(fakeDev, fakeProvider{}, devnull, kernelOptions(e.k, opts...))
	if err != nil {
		unix.Close(devnull)
		t.Fatal(err)
	}
	e.ctx = ctx
	t.Cleanup(func() { ctx.Close() })
	return e
}
