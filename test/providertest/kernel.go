package providertest

import (
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gorping/gorping/test/internal/kcmd"
	"github.com/gorping/gorping/uverbs"
	"github.com/gorping/gorping/uverbs/driver"
)

// Kernel is the fake uverbs kernel of the tests: one for every provider. It answers the
// core commands of every context opened on it (test/internal/kcmd reads them, with the
// offsets of the generated ABI), keeps the objects, and executes posted work between its
// QPs: SEND into the peer's next receive, RDMA WRITE and READ against the peer's memory
// regions, error completions, the flush of a QP in ERR, completion events on armed CQs.
// Everything driver-specific is the Driver's: the driver data of the commands, the
// format of the queues in memory, and how work is announced.
//
// Two kinds of driver plug in. A driver whose data path the kernel runs (rxe, siw) rings
// with POST_SEND (no work requests): the kernel runs the send queue inside that command,
// as rxe does. A hardware driver (mlx5, bnxt_re, irdma, hns) implements Engine: the
// device runs on a goroutine of its own, learns of doorbells from the stores to device
// memory (internal/mmio's recorder) and runs the queues they announce. A SEND that finds
// no receive posted waits for one (a device retrying RNR NAKs), in both.
//
// The kernel runs in the test process: it reads and writes user memory by address, which
// it accepts only inside registered memory regions, as a device would. Contexts opened on
// one Kernel share its fabric: QPs reach each other by number.
type Kernel struct {
	dev  uverbs.Device
	prov driver.Provider // nil: the registered provider of dev's driver
	drv  Driver
	opt  Options

	mu     sync.Mutex
	handle uint32
	mrs    map[uint32]*MR // by key (lkey = rkey)
	cqs    map[uint32]*CQ // by handle
	qps    map[uint32]*QP // by handle
	byQPN  map[uint32]*QP
	order  []*QP // live QPs in creation order: the engine runs them in this order
	pds    map[uint32]bool
	export exportArea
	errs   []string
	stats  Stats
	retry  *time.Timer // re-runs send queues that wait for a receive
	closed bool

	stop, done chan struct{} // the engine goroutine (Engine drivers)
}

// Options vary a Kernel.
type Options struct {
	// Fail, if set, is asked before every command (its number, ORed with kcmd.ExFlag for
	// an extended one); an error fails the command with it, as the kernel would.
	Fail func(cmd uint32) error
}

// Stats counts what the kernel executed. The driver counts its own (doorbells, laps)
// through Kernel.Count.
type Stats struct {
	Sends, Writes, Reads, Recvs, CQEs, ErrorCQEs, Events int
	SQLaps, RQLaps, CQLaps                               int // times a ring index wrapped
	Doorbells, BlueFlames, Arms                          int // doorbells rung (POST_SEND or device memory), whole-WQE copies, CQ arms
}

// Driver is the kernel half of a provider in the fake kernel. The kernel calls it under
// its lock.
type Driver interface {
	// GetContext fills the driver response of GET_CONTEXT (out has the room the
	// provider gave) from the provider's request in; c.Driver may keep state.
	GetContext(c *Context, in, out []byte) error
	// RegMR fills the driver response of REG_MR (mr.Key may be changed).
	RegMR(mr *MR, in, out []byte) error
	// CreateCQ sets cq up (its queue memory from Kernel.Export, or the provider's named in
	// in) and fills the driver response; it returns the depth granted.
	CreateCQ(k *Kernel, cq *CQ, in, out []byte) (depth int, err error)
	// CreateQP sets qp up and fills the driver response; it may change qp.Cap to what
	// the queues hold and qp.QPN.
	CreateQP(k *Kernel, qp *QP, in, out []byte) error
	// NextSend takes the next send work request the provider posted on qp (and
	// announced, for a hardware driver).
	NextSend(qp *QP) (SendWR, bool)
	// NextRecv takes the next receive work request the provider posted on qp.
	NextRecv(qp *QP) (RecvWR, bool)
	// Complete writes c into cq's queue; false if the queue is full. A driver whose
	// provider flushes in software may drop flush completions (and report true).
	Complete(cq *CQ, c Completion) bool
	// Armed reports (and clears) an arm the provider made in memory (siw's control word);
	// a driver armed by REQ_NOTIFY_CQ or a doorbell (Kernel.ArmCQ) returns false.
	Armed(cq *CQ) bool
}

// Engine is a hardware Driver: the kernel runs the device on a goroutine, which calls
// Doorbells first in every pass, then runs the send queues of the QPs in RTS and flushes
// those in ERR.
type Engine interface {
	// Doorbells acts on the doorbells rung since the last call (recorded from the
	// provider's stores) and reports whether there were any.
	Doorbells(k *Kernel) bool
}

// Optional Driver interfaces.

// Queryer changes the answers of the device and port queries (vendor, limits).
type Queryer interface {
	QueryDevice(r *kcmd.QueryDeviceResp)
	QueryDeviceEx(r *kcmd.ExQueryDeviceResp)
	QueryPort(port uint8, r *kcmd.QueryPortResp)
}

// PDDriver answers ALLOC_PD's driver data.
type PDDriver interface {
	AllocPD(c *Context, handle uint32, in, out []byte) error
}

// Mmapper maps what a hardware driver hands out through mmap of the device file (doorbell
// pages); the default maps the queue memory of Kernel.Export.
type Mmapper interface {
	Mmap(c *Context, off int64, length, prot int) ([]byte, error)
}

// Destroyer is told of every QP and CQ destroyed (and of MODIFY_QP), before the kernel
// forgets it.
type Destroyer interface {
	DestroyQP(qp *QP)
	DestroyCQ(cq *CQ)
}

// Modifier sees every successful MODIFY_QP (after the kernel applied it).
type Modifier interface {
	ModifyQP(qp *QP, req *kcmd.ModifyQP)
}

// SendWR is a send work request as the kernel takes it from a send queue.
type SendWR struct {
	uverbs.SendWR
	Signaled bool   // the WR asks for a completion (or the QP signals every WR)
	Inline   []byte // the data, carried in the WQE (nil: the SGEs name it)
	Slot     uint32 // the driver's place of the WR, handed back in its Completion
}

// RecvWR is a receive work request as the kernel takes it from a receive queue.
type RecvWR struct {
	uverbs.RecvWR
	Slot uint32
}

// Completion is what the kernel completes: the work completion, the QP and the WR.
type Completion struct {
	uverbs.WC
	QP       *QP
	Recv     bool            // a receive's completion (else a send's)
	Slot     uint32          // the WR's Slot
	WROpcode uverbs.WROpcode // a send's opcode
}

// Context is one open of the device (one ucontext).
type Context struct {
	Driver any // the driver's state of the context
	k      *Kernel
	async  *os.File         // write end of the async event pipe
	chans  map[int]*channel // completion channels by the fd handed out
}

// Kernel is the kernel the context is open on.
func (c *Context) Kernel() *Kernel { return c.k }

// channel is a completion channel: the write end of its pipe, and the cookies written to
// it, for the events DESTROY_CQ reports.
type channel struct {
	w   *os.File
	log []uint64
}

// MR is a registered memory region. Its lkey and rkey are one key.
type MR struct {
	Handle uint32
	Key    uint32
	Addr   uint64
	Len    uint64
	Access uverbs.AccessFlags
	PD     uint32
}

// CQ is a completion queue; Driver keeps the driver's state (its queue).
type CQ struct {
	Handle uint32
	Cookie uint64 // user_handle: what a completion event carries
	CQE    int    // depth asked for
	Flags  uint32 // CREATE_CQ_EX's flags
	Ctx    *Context
	Driver any
	ch     *channel // nil: none
	armed  bool
	events uint32
}

// QP is a queue pair; Driver keeps the driver's state (its queues).
type QP struct {
	Handle uint32
	QPN    uint32
	PD     uint32
	Type   uverbs.QPType
	Cap    uverbs.QPCap
	SigAll bool
	SendCQ *CQ
	RecvCQ *CQ
	State  uverbs.QPState
	Dest   uint32             // peer QPN (RTR)
	Access uverbs.AccessFlags // the QP's remote access flags
	Ctx    *Context
	Driver any
	head   *SendWR // taken from the send queue, waiting for the peer's receive
}

// NewKernel is a fake kernel with driver drv for provider prov's devices (prov nil: the
// registered one); dev is the device its contexts are opened on. It is released when t
// ends.
func NewKernel(t testing.TB, dev uverbs.Device, prov driver.Provider, drv Driver) *Kernel {
	t.Helper()
	k, err := StartKernel(dev, prov, drv, Options{})
	if err != nil {
		t.Fatalf("fake kernel: %v", err)
	}
	t.Cleanup(k.Close)
	return k
}

// StartKernel is NewKernel for a caller that releases the kernel itself (Close), with
// options. An Engine driver's device starts running.
func StartKernel(dev uverbs.Device, prov driver.Provider, drv Driver, opt Options) (*Kernel, error) {
	k := &Kernel{dev: dev, prov: prov, drv: drv, opt: opt, handle: 0x100,
		mrs: map[uint32]*MR{}, cqs: map[uint32]*CQ{}, qps: map[uint32]*QP{}, byQPN: map[uint32]*QP{}, pds: map[uint32]bool{}}
	if err := k.export.init(); err != nil {
		return nil, err
	}
	if e, ok := drv.(Engine); ok {
		k.stop, k.done = make(chan struct{}), make(chan struct{})
		go k.engine(e)
	}
	return k, nil
}

// Close stops the device and frees the queue memory. Contexts opened on the kernel must
// be closed first.
func (k *Kernel) Close() {
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return
	}
	k.closed = true
	if k.retry != nil {
		k.retry.Stop()
	}
	k.mu.Unlock()
	if k.stop != nil {
		close(k.stop)
		<-k.done
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.export.free()
}

// Device is the kernel's device, named name (its driver, ids and ABI as given).
func (k *Kernel) Device(name string) uverbs.Device {
	d := k.dev
	if name != "" {
		d.Name = name
	}
	return d
}

// Open opens a context on the kernel through the provider (the suite's Device).
func (k *Kernel) Open(t *testing.T) *uverbs.Context {
	t.Helper()
	c, err := k.OpenAs(k.dev)
	if err != nil {
		t.Fatalf("open %s on the fake kernel: %v", k.dev.Name, err)
	}
	return c
}

// OpenAs opens a context on the kernel as device dev (a model's name for it).
func (k *Kernel) OpenAs(dev uverbs.Device, opts ...uverbs.Option) (*uverbs.Context, error) {
	if k.prov != nil {
		opts = append([]uverbs.Option{uverbs.WithProvider(k.prov)}, opts...)
	}
	return uverbs.OpenBackend(dev, &backend{k: k}, opts...)
}

// Errors are the protocol violations the kernel and its driver saw (bad commands,
// memory outside any region, malformed queue entries).
func (k *Kernel) Errors() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.errs...)
}

// Fail records a violation (under the kernel's lock: from a Driver method).
func (k *Kernel) Fail(format string, args ...any) {
	k.errs = append(k.errs, fmt.Sprintf(format, args...))
}

// Stats returns the counters.
func (k *Kernel) Stats() Stats {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.stats
}

// Count gives a driver the counters to add to (under the kernel's lock).
func (k *Kernel) Count() *Stats { return &k.stats }

// Live counts the QPs, CQs and memory regions not destroyed yet: after a user released
// everything they are 0.
func (k *Kernel) Live() (qps, cqs, mrs int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.qps), len(k.cqs), len(k.mrs)
}

// Lock and Unlock take the kernel's lock, for a driver that acts outside its methods
// (a doorbell recorder queueing work).
func (k *Kernel) Lock()   { k.mu.Lock() }
func (k *Kernel) Unlock() { k.mu.Unlock() }

// QP is the live QP numbered qpn, or nil (under the kernel's lock).
func (k *Kernel) QP(qpn uint32) *QP { return k.byQPN[qpn] }

// ArmCQ arms cq (a hardware driver's arm doorbell): its next completion raises an event;
// pending: completions the arm's consumer index does not cover exist already, and the
// event is raised now.
func (k *Kernel) ArmCQ(cq *CQ, pending bool) {
	cq.armed = true
	k.stats.Arms++
	if pending {
		k.event(cq)
	}
}

// Export allocates size bytes of zeroed queue memory the provider maps at the returned
// offset (Driver.CreateCQ/CreateQP hand the offset out in their responses).
func (k *Kernel) Export(size int) (off int64, mem []byte) {
	off, mem, err := k.export.add(size)
	if err != nil {
		k.Fail("queue memory of %d bytes: %v", size, err)
	}
	return off, mem
}

func (k *Kernel) next() uint32 { k.handle++; return k.handle }

// backend is one context's device file.
type backend struct {
	k   *Kernel
	ctx *Context
	pds map[uint32]bool // the PDs allocated through it
}

// Close is the device file's close (uverbs.Context.Close calls it where it would close
// the fd): as the kernel's uverbs release does, every object the context made goes, QPs
// first, before the provider frees the memory they named; a peer's send to one of its QPs
// then finds none.
func (b *backend) Close() error {
	k := b.k
	k.mu.Lock()
	defer k.mu.Unlock()
	if b.ctx == nil {
		return nil
	}
	d, _ := k.drv.(Destroyer)
	for _, qp := range append([]*QP(nil), k.order...) {
		if qp.Ctx == b.ctx {
			if d != nil {
				d.DestroyQP(qp)
			}
			k.removeQP(qp)
		}
	}
	for h, cq := range k.cqs {
		if cq.Ctx == b.ctx {
			if d != nil {
				d.DestroyCQ(cq)
			}
			delete(k.cqs, h)
		}
	}
	for key, mr := range k.mrs {
		if b.pds[mr.PD] {
			delete(k.mrs, key)
		}
	}
	for h := range b.pds {
		delete(k.pds, h)
	}
	b.ctx = nil
	return nil
}

// removeQP forgets a destroyed QP.
func (k *Kernel) removeQP(qp *QP) {
	delete(k.qps, qp.Handle)
	delete(k.byQPN, qp.QPN)
	for i, q := range k.order {
		if q == qp {
			k.order = append(k.order[:i:i], k.order[i+1:]...)
			break
		}
	}
}

func (b *backend) Mmap(off int64, length, prot int) ([]byte, error) {
	k := b.k
	k.mu.Lock()
	defer k.mu.Unlock()
	if m, ok := k.drv.(Mmapper); ok {
		if b.ctx == nil {
			return nil, unix.EINVAL
		}
		return m.Mmap(b.ctx, off, length, prot)
	}
	return k.export.mmap(off, length, prot)
}

func (b *backend) Munmap(m []byte) error {
	if _, ok := b.k.drv.(Mmapper); ok {
		return nil // the driver's pages live until the kernel closes
	}
	return unix.Munmap(m)
}

// Write executes one command and writes the response where the command says.
func (b *backend) Write(p []byte) (int, error) {
	k := b.k
	c, err := kcmd.Decode(p)
	if err != nil {
		if err != unix.EOPNOTSUPP {
			k.mu.Lock()
			k.Fail("command %d: %d bytes, header words %d/%d: %v", c.Num, len(p), c.InWords, c.OutWords, err)
			k.mu.Unlock()
		}
		return 0, err
	}
	if k.opt.Fail != nil {
		num := c.Num
		if c.Ex {
			num |= kcmd.ExFlag
		}
		if err := k.opt.Fail(num); err != nil {
			return 0, err
		}
	}
	drvOut := make([]byte, c.DriverOut)
	k.mu.Lock()
	core, err := b.exec(c, drvOut)
	k.mu.Unlock()
	if err != nil {
		return 0, err
	}
	kcmd.Reply(c, core, drvOut)
	return len(p), nil
}

// exec runs command c under k.mu and returns the core response; the driver's goes to
// drvOut.
func (b *backend) exec(c kcmd.Command, drvOut []byte) ([]byte, error) {
	k := b.k
	if c.Num != kcmd.CmdGetContext && b.ctx == nil {
		return nil, unix.EINVAL // the kernel needs a ucontext first
	}
	if c.Ex {
		switch c.Num {
		case kcmd.CmdQueryDevice:
			var r kcmd.ExQueryDeviceResp
			k.queryDevice(&r.Base)
			if q, ok := k.drv.(Queryer); ok {
				q.QueryDeviceEx(&r)
			}
			r.ResponseLength = uint32(min(c.CoreOut, int(unsafeSizeof(&r))))
			return kcmd.Bytes(&r), nil
		case kcmd.CmdCreateCQ:
			req := kcmd.Req[kcmd.ExCreateCQ](c)
			if req.CompMask != 0 {
				return nil, unix.EINVAL
			}
			base, err := b.createCQ(req.UserHandle, req.CQE, req.CompChannel, req.Flags, c.Driver, drvOut)
			if err != nil {
				return nil, err
			}
			r := kcmd.ExCreateCQResp{Base: base, ResponseLength: uint32(min(c.CoreOut, 16))}
			return kcmd.Bytes(&r), nil
		}
		return nil, unix.EOPNOTSUPP
	}
	switch c.Num {
	case kcmd.CmdGetContext:
		if b.ctx != nil {
			return nil, unix.EINVAL // one ucontext per open file
		}
		ctx := &Context{k: k, chans: map[int]*channel{}}
		fd, w, err := pipe()
		if err != nil {
			return nil, err
		}
		if err := k.drv.GetContext(ctx, c.Driver, drvOut); err != nil {
			unix.Close(fd)
			w.Close()
			return nil, err
		}
		ctx.async, b.ctx = w, ctx
		r := kcmd.GetContextResp{AsyncFD: uint32(fd), NumCompVectors: 1}
		return kcmd.Bytes(&r), nil
	case kcmd.CmdQueryDevice:
		var r kcmd.QueryDeviceResp
		k.queryDevice(&r)
		return kcmd.Bytes(&r), nil
	case kcmd.CmdQueryPort:
		req := kcmd.Req[kcmd.QueryPort](c)
		if req.PortNum != 1 {
			return nil, unix.EINVAL
		}
		r := kcmd.QueryPortResp{MaxMsgSz: 1 << 31, GIDTblLen: 16, PkeyTblLen: 1, State: 4, MaxMTU: 5, ActiveMTU: 3,
			PhysState: 5, LinkLayer: 2, ActiveWidth: 2, ActiveSpeed: 32}
		if q, ok := k.drv.(Queryer); ok {
			q.QueryPort(req.PortNum, &r)
		}
		return kcmd.Bytes(&r), nil
	case kcmd.CmdAllocPD:
		h := k.next()
		if d, ok := k.drv.(PDDriver); ok {
			if err := d.AllocPD(b.ctx, h, c.Driver, drvOut); err != nil {
				return nil, err
			}
		}
		k.pds[h] = true
		if b.pds == nil {
			b.pds = map[uint32]bool{}
		}
		b.pds[h] = true
		r := kcmd.AllocPDResp{PDHandle: h}
		return kcmd.Bytes(&r), nil
	case kcmd.CmdDeallocPD:
		req := kcmd.Req[kcmd.DeallocPD](c)
		if !k.pds[req.PDHandle] {
			return nil, unix.EINVAL
		}
		delete(k.pds, req.PDHandle)
		return nil, nil
	case kcmd.CmdRegMR:
		req := kcmd.Req[kcmd.RegMR](c)
		if !k.pds[req.PDHandle] {
			return nil, unix.EINVAL
		}
		mr := &MR{Addr: req.Start, Len: req.Length, PD: req.PDHandle, Access: uverbs.AccessFlags(req.AccessFlags)}
		mr.Handle = k.next()
		mr.Key = mr.Handle
		if err := k.drv.RegMR(mr, c.Driver, drvOut); err != nil {
			return nil, err
		}
		k.mrs[mr.Key] = mr
		r := kcmd.RegMRResp{MRHandle: mr.Handle, Lkey: mr.Key, Rkey: mr.Key}
		return kcmd.Bytes(&r), nil
	case kcmd.CmdDeregMR:
		req := kcmd.Req[kcmd.DeregMR](c)
		for key, mr := range k.mrs {
			if mr.Handle == req.MRHandle {
				delete(k.mrs, key)
				return nil, nil
			}
		}
		return nil, unix.EINVAL
	case kcmd.CmdCreateCompChannel:
		fd, w, err := pipe()
		if err != nil {
			return nil, err
		}
		b.ctx.chans[fd] = &channel{w: w}
		r := kcmd.CreateCompChannelResp{FD: uint32(fd)}
		return kcmd.Bytes(&r), nil
	case kcmd.CmdCreateCQ:
		req := kcmd.Req[kcmd.CreateCQ](c)
		r, err := b.createCQ(req.UserHandle, req.CQE, req.CompChannel, 0, c.Driver, drvOut)
		if err != nil {
			return nil, err
		}
		return kcmd.Bytes(&r), nil
	case kcmd.CmdDestroyCQ:
		req := kcmd.Req[kcmd.DestroyCQ](c)
		cq := k.cqs[req.CQHandle]
		if cq == nil {
			return nil, unix.EINVAL
		}
		for _, q := range k.qps {
			if q.SendCQ == cq || q.RecvCQ == cq {
				return nil, unix.EBUSY
			}
		}
		if d, ok := k.drv.(Destroyer); ok {
			d.DestroyCQ(cq)
		}
		delete(k.cqs, cq.Handle)
		r := kcmd.DestroyCQResp{CompEventsReported: cq.eventsRead()}
		return kcmd.Bytes(&r), nil
	case kcmd.CmdReqNotifyCQ:
		req := kcmd.Req[kcmd.ReqNotifyCQ](c)
		cq := k.cqs[req.CQHandle]
		if cq == nil {
			return nil, unix.EINVAL
		}
		cq.armed = true
		k.stats.Arms++
		return nil, nil
	case kcmd.CmdCreateQP:
		return b.createQP(kcmd.Req[kcmd.CreateQP](c), c.Driver, drvOut)
	case kcmd.CmdModifyQP:
		req := kcmd.Req[kcmd.ModifyQP](c)
		qp := k.qps[req.QPHandle]
		if qp == nil {
			return nil, unix.EINVAL
		}
		mask := uverbs.QPAttrMask(req.AttrMask)
		if mask&uverbs.QPAttrDestQPN != 0 {
			qp.Dest = req.DestQPNum
		}
		if mask&uverbs.QPAttrAccessFlags != 0 {
			qp.Access = uverbs.AccessFlags(req.QPAccessFlags)
		}
		if mask&uverbs.QPAttrState != 0 {
			qp.State = uverbs.QPState(req.QPState)
			if qp.State == uverbs.QPSReset {
				qp.head = nil
			}
		}
		if m, ok := k.drv.(Modifier); ok {
			m.ModifyQP(qp, &req)
		}
		if qp.State == uverbs.QPSErr && k.stop == nil {
			k.flush(qp)
		}
		return nil, nil
	case kcmd.CmdDestroyQP:
		req := kcmd.Req[kcmd.DestroyQP](c)
		qp := k.qps[req.QPHandle]
		if qp == nil {
			return nil, unix.EINVAL
		}
		if d, ok := k.drv.(Destroyer); ok {
			d.DestroyQP(qp)
		}
		k.removeQP(qp)
		r := kcmd.DestroyQPResp{}
		return kcmd.Bytes(&r), nil
	case kcmd.CmdPostSend:
		req := kcmd.Req[kcmd.PostSend](c)
		qp := k.qps[req.QPHandle]
		if qp == nil || req.WRCount != 0 {
			return nil, unix.EINVAL // the fake takes the doorbell form only
		}
		if qp.State != uverbs.QPSRTS && qp.State != uverbs.QPSErr {
			return nil, unix.EINVAL // rxe refuses it before RTS
		}
		k.stats.Doorbells++
		k.run(qp)
		r := kcmd.PostSendResp{}
		return kcmd.Bytes(&r), nil
	}
	return nil, unix.EOPNOTSUPP
}

func unsafeSizeof[T any](v *T) int { return len(kcmd.Bytes(v)) }

// queryDevice fills the base device attributes, the driver's changes last.
func (k *Kernel) queryDevice(r *kcmd.QueryDeviceResp) {
	*r = kcmd.QueryDeviceResp{FwVer: 1, MaxMRSize: ^uint64(0), PageSizeCap: 0xfffff000,
		MaxQP: 1 << 16, MaxQPWR: 1 << 14, MaxSGE: 6, MaxSGERd: 6, MaxCQ: 1 << 16, MaxCQE: 1 << 16,
		MaxMR: 1 << 16, MaxPD: 1 << 16, MaxQPRdAtom: 16, MaxQPInitRdAtom: 16, MaxResRdAtom: 16,
		MaxPkeys: 1, PhysPortCnt: 1}
	var guid [8]byte
	binary.BigEndian.PutUint64(guid[:], k.dev.NodeGUID)
	r.NodeGUID = binary.LittleEndian.Uint64(guid[:]) // __be64 as the kernel sends it
	r.SysImageGUID = r.NodeGUID
	if q, ok := k.drv.(Queryer); ok {
		q.QueryDevice(r)
	}
}

func (b *backend) createCQ(cookie uint64, cqe uint32, ch int32, flags uint32, in, out []byte) (kcmd.CreateCQResp, error) {
	k := b.k
	cq := &CQ{Handle: k.next(), Cookie: cookie, CQE: int(cqe), Flags: flags, Ctx: b.ctx}
	if ch >= 0 {
		c, ok := b.ctx.chans[int(ch)]
		if !ok {
			return kcmd.CreateCQResp{}, unix.EINVAL
		}
		cq.ch = c
	}
	depth, err := k.drv.CreateCQ(k, cq, in, out)
	if err != nil {
		return kcmd.CreateCQResp{}, err
	}
	k.cqs[cq.Handle] = cq
	return kcmd.CreateCQResp{CQHandle: cq.Handle, CQE: uint32(depth)}, nil
}

func (b *backend) createQP(req kcmd.CreateQP, in, out []byte) ([]byte, error) {
	k := b.k
	send, recv := k.cqs[req.SendCQHandle], k.cqs[req.RecvCQHandle]
	if send == nil || recv == nil || !k.pds[req.PDHandle] {
		return nil, unix.EINVAL
	}
	qp := &QP{Handle: k.next(), PD: req.PDHandle, SendCQ: send, RecvCQ: recv, Ctx: b.ctx,
		Type: uverbs.QPType(req.QPType), SigAll: req.SQSigAll != 0,
		Cap: uverbs.QPCap{MaxSendWR: req.MaxSendWR, MaxRecvWR: req.MaxRecvWR, MaxSendSGE: req.MaxSendSGE,
			MaxRecvSGE: req.MaxRecvSGE, MaxInlineData: req.MaxInlineData}}
	qp.QPN = qp.Handle
	if err := k.drv.CreateQP(k, qp, in, out); err != nil {
		return nil, err
	}
	if k.byQPN[qp.QPN] != nil {
		k.Fail("driver numbered two QPs %#x", qp.QPN)
		return nil, unix.EINVAL
	}
	k.qps[qp.Handle], k.byQPN[qp.QPN] = qp, qp
	k.order = append(k.order, qp)
	r := kcmd.CreateQPResp{QPHandle: qp.Handle, QPN: qp.QPN, MaxSendWR: qp.Cap.MaxSendWR, MaxRecvWR: qp.Cap.MaxRecvWR,
		MaxSendSGE: qp.Cap.MaxSendSGE, MaxRecvSGE: qp.Cap.MaxRecvSGE, MaxInlineData: qp.Cap.MaxInlineData}
	return kcmd.Bytes(&r), nil
}

// pipe hands out the read end of a new pipe as a descriptor of its own (the context owns
// and closes it) and keeps the write end.
func pipe() (int, *os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return 0, nil, err
	}
	fd, err := unix.Dup(int(r.Fd()))
	r.Close()
	if err != nil {
		w.Close()
		return 0, nil, err
	}
	return fd, w, nil
}

// eventsRead is the number of cq's completion events user space has read: those written
// to its channel and no longer in the pipe (the pipe holds the last ones written).
func (cq *CQ) eventsRead() uint32 {
	if cq.ch == nil {
		return 0
	}
	pending, err := unix.IoctlGetInt(int(cq.ch.w.Fd()), unix.TIOCINQ)
	if err != nil {
		// Not knowable: say all were read only if the pipe can be seen empty.
		return cq.events
	}
	mine := uint32(0)
	for _, c := range cq.ch.log[max(0, len(cq.ch.log)-pending/8):] {
		if c == cq.Cookie {
			mine++
		}
	}
	return cq.events - mine
}

// engine is the device of an Engine driver: doorbells, then the queues, until Close.
func (k *Kernel) engine(e Engine) {
	defer close(k.done)
	idle := 0
	for {
		select {
		case <-k.stop:
			return
		default:
		}
		k.mu.Lock()
		progress := e.Doorbells(k)
		for _, qp := range k.order {
			switch qp.State {
			case uverbs.QPSRTS:
				progress = k.run(qp) || progress
			case uverbs.QPSErr:
				progress = k.flush(qp) || progress
			}
		}
		k.mu.Unlock()
		if progress {
			idle = 0
			continue
		}
		// Idle: yield first, then sleep a little, as a device would just wait.
		if idle++; idle < 50 {
			runtime.Gosched()
		} else {
			time.Sleep(20 * time.Microsecond)
		}
	}
}

// run executes what qp's send queue holds: each WR against the peer QP, completions to
// the CQs. A WR that fails completes in error and moves qp to ERR, which flushes the
// rest; a SEND the peer has no receive for waits at the head of the queue. It reports
// whether it executed anything.
func (k *Kernel) run(qp *QP) bool {
	progress := false
	for n := 0; qp.State == uverbs.QPSRTS; n++ {
		if n > 1<<16 {
			k.Fail("QP %#x: more than %d send WRs at one pass (an index that does not wrap?)", qp.QPN, n)
			qp.State = uverbs.QPSErr
			break
		}
		wr := qp.head
		if wr == nil {
			w, ok := k.drv.NextSend(qp)
			if !ok {
				break
			}
			wr = &w
		}
		status, byteLen, wait := k.execute(qp, wr)
		if wait {
			qp.head = wr
			k.retryLater()
			return progress
		}
		qp.head, progress = nil, true
		c := Completion{WC: uverbs.WC{WRID: wr.ID, Status: status, Opcode: sendOpcode(wr.Opcode), ByteLen: byteLen, QPNum: qp.QPN},
			QP: qp, Slot: wr.Slot, WROpcode: wr.Opcode}
		if status != uverbs.WCSuccess {
			c.ByteLen = 0
			k.complete(qp.SendCQ, c)
			qp.State = uverbs.QPSErr
			break
		}
		if wr.Signaled {
			k.complete(qp.SendCQ, c)
		}
	}
	if qp.State == uverbs.QPSErr {
		progress = k.flush(qp) || progress
	}
	return progress
}

// retryLater runs the send queues that wait for a receive again shortly, when no device
// engine does (a receive is posted without a command the kernel would see).
func (k *Kernel) retryLater() {
	if k.stop != nil || k.retry != nil || k.closed {
		return
	}
	k.retry = time.AfterFunc(20*time.Microsecond, func() {
		k.mu.Lock()
		defer k.mu.Unlock()
		k.retry = nil
		if k.closed {
			return
		}
		for _, qp := range k.order {
			if qp.head != nil {
				k.run(qp)
			}
		}
	})
}

func sendOpcode(op uverbs.WROpcode) uverbs.WCOpcode {
	switch op {
	case uverbs.WRRDMAWrite, uverbs.WRRDMAWriteWithImm:
		return uverbs.WCRDMAWrite
	case uverbs.WRRDMARead:
		return uverbs.WCRDMARead
	}
	return uverbs.WCSend
}

// execute carries out one send WR of qp and returns its status, the bytes an RDMA READ
// brought, and whether it must wait (a SEND the peer has no receive for).
func (k *Kernel) execute(qp *QP, wr *SendWR) (status uverbs.WCStatus, byteLen uint32, wait bool) {
	peer := k.byQPN[qp.Dest]
	switch {
	case peer == nil || peer.State == uverbs.QPSErr:
		return uverbs.WCRetryExcErr, 0, false // gone or in ERR: nobody answers
	case peer.State != uverbs.QPSRTR && peer.State != uverbs.QPSRTS:
		k.Fail("QP %#x sends to QP %#x in state %d", qp.QPN, qp.Dest, peer.State)
		return uverbs.WCRetryExcErr, 0, false
	}
	switch wr.Opcode {
	case uverbs.WRSend, uverbs.WRSendWithImm, uverbs.WRSendWithInv:
		data, ok := k.gather(qp, wr)
		if !ok {
			return uverbs.WCLocProtErr, 0, false
		}
		st, wait := k.deliver(qp, peer, wr, data)
		if st == uverbs.WCSuccess && !wait {
			k.stats.Sends++
		}
		return st, 0, wait
	case uverbs.WRRDMAWrite, uverbs.WRRDMAWriteWithImm:
		data, ok := k.gather(qp, wr)
		if !ok {
			return uverbs.WCLocProtErr, 0, false
		}
		dst, ok := k.remote(peer, wr.RemoteAddr, wr.RKey, len(data), uverbs.AccessRemoteWrite)
		if !ok {
			return uverbs.WCRemAccessErr, 0, false
		}
		if wr.Opcode == uverbs.WRRDMAWriteWithImm {
			st, wait := k.deliver(qp, peer, wr, nil)
			if wait || st != uverbs.WCSuccess {
				return st, 0, wait
			}
		}
		copy(dst, data)
		k.stats.Writes++
		return uverbs.WCSuccess, 0, false
	case uverbs.WRRDMARead:
		n := 0
		for _, g := range wr.SGE {
			n += int(g.Length)
		}
		src, ok := k.remote(peer, wr.RemoteAddr, wr.RKey, n, uverbs.AccessRemoteRead)
		if !ok {
			return uverbs.WCRemAccessErr, 0, false
		}
		if !k.scatter(qp, wr.SGE, src) {
			return uverbs.WCLocProtErr, 0, false
		}
		k.stats.Reads++
		return uverbs.WCSuccess, uint32(n), false
	}
	k.Fail("QP %#x: send WR opcode %d", qp.QPN, wr.Opcode)
	return uverbs.WCLocQPOpErr, 0, false
}

// deliver consumes peer's next receive for a SEND (data) or an RDMA WRITE with immediate
// (data nil) from qp, and completes it; wait: the peer has none posted. A receive too
// short fails both sides.
func (k *Kernel) deliver(qp, peer *QP, wr *SendWR, data []byte) (uverbs.WCStatus, bool) {
	rwr, ok := k.drv.NextRecv(peer)
	if !ok {
		return 0, true
	}
	c := Completion{WC: uverbs.WC{WRID: rwr.ID, Opcode: uverbs.WCRecv, ByteLen: uint32(len(data)), QPNum: peer.QPN, SrcQP: qp.QPN},
		QP: peer, Recv: true, Slot: rwr.Slot}
	switch wr.Opcode {
	case uverbs.WRSendWithImm:
		c.Flags, c.Imm = uverbs.WCFlagWithImm, wr.Imm
	case uverbs.WRRDMAWriteWithImm:
		c.Opcode, c.Flags, c.Imm, c.ByteLen = uverbs.WCRecvRDMAWithImm, uverbs.WCFlagWithImm, wr.Imm, 0
	case uverbs.WRSendWithInv:
		c.Flags, c.Imm = uverbs.WCFlagWithInv, wr.Imm
	}
	if !k.scatter(peer, rwr.SGE, data) {
		c.Status, c.ByteLen = uverbs.WCLocLenErr, 0
		k.complete(peer.RecvCQ, c)
		peer.State = uverbs.QPSErr
		if k.stop == nil {
			k.flush(peer)
		}
		return uverbs.WCRemInvReqErr, false
	}
	k.complete(peer.RecvCQ, c)
	k.stats.Recvs++
	return uverbs.WCSuccess, false
}

// flush completes every WR still queued on qp (in ERR) with WR_FLUSH_ERR and reports
// whether there was any.
func (k *Kernel) flush(qp *QP) bool {
	progress := false
	if wr := qp.head; wr != nil {
		qp.head = nil
		k.complete(qp.SendCQ, Completion{WC: uverbs.WC{WRID: wr.ID, Status: uverbs.WCWRFlushErr, Opcode: sendOpcode(wr.Opcode), QPNum: qp.QPN},
			QP: qp, Slot: wr.Slot, WROpcode: wr.Opcode})
		progress = true
	}
	for range 1 << 16 {
		wr, ok := k.drv.NextSend(qp)
		if !ok {
			break
		}
		k.complete(qp.SendCQ, Completion{WC: uverbs.WC{WRID: wr.ID, Status: uverbs.WCWRFlushErr, Opcode: sendOpcode(wr.Opcode), QPNum: qp.QPN},
			QP: qp, Slot: wr.Slot, WROpcode: wr.Opcode})
		progress = true
	}
	for range 1 << 16 {
		wr, ok := k.drv.NextRecv(qp)
		if !ok {
			break
		}
		k.complete(qp.RecvCQ, Completion{WC: uverbs.WC{WRID: wr.ID, Status: uverbs.WCWRFlushErr, Opcode: uverbs.WCRecv, QPNum: qp.QPN},
			QP: qp, Recv: true, Slot: wr.Slot})
		progress = true
	}
	return progress
}

// complete writes c to cq and raises the completion event of an armed CQ.
func (k *Kernel) complete(cq *CQ, c Completion) {
	if cq == nil || k.cqs[cq.Handle] != cq {
		return // destroyed
	}
	if !k.drv.Complete(cq, c) {
		k.Fail("CQ %#x overrun (depth %d)", cq.Handle, cq.CQE)
		return
	}
	k.stats.CQEs++
	if c.Status != uverbs.WCSuccess {
		k.stats.ErrorCQEs++
	}
	if k.drv.Armed(cq) || cq.armed {
		k.event(cq)
	}
}

// event raises cq's completion event (if it has a channel) and disarms it.
func (k *Kernel) event(cq *CQ) {
	cq.armed = false
	if cq.ch == nil {
		return
	}
	var ev [8]byte
	binary.LittleEndian.PutUint64(ev[:], cq.Cookie)
	// A full channel means events go unread (a loop that re-arms without reading them):
	// fail then, rather than block under the kernel's lock.
	cq.ch.w.SetWriteDeadline(time.Now().Add(time.Second))
	if _, err := cq.ch.w.Write(ev[:]); err != nil {
		k.Fail("CQ %#x: completion event: %v (is the channel read?)", cq.Handle, err)
		return
	}
	cq.events++
	k.stats.Events++
	cq.ch.log = append(cq.ch.log, cq.Cookie)
	if len(cq.ch.log) > 1<<14 {
		cq.ch.log = append(cq.ch.log[:0], cq.ch.log[len(cq.ch.log)-1<<13:]...)
	}
}

// region is the MR of key if it covers [addr, addr+n) with access (0: local use).
func (k *Kernel) region(key uint32, addr uint64, n int, access uverbs.AccessFlags) *MR {
	mr := k.mrs[key]
	if mr == nil || addr < mr.Addr || addr+uint64(n) > mr.Addr+mr.Len || mr.Access&access != access {
		return nil
	}
	return mr
}

// gather is a send WR's data: inline, or what its SGEs name in qp's regions.
func (k *Kernel) gather(qp *QP, wr *SendWR) ([]byte, bool) {
	if wr.Inline != nil {
		return wr.Inline, true
	}
	var data []byte
	for _, g := range wr.SGE {
		if g.Length == 0 {
			continue
		}
		if mr := k.region(g.LKey, g.Addr, int(g.Length), 0); mr == nil || mr.PD != qp.PD {
			k.Fail("QP %#x: SGE %#x+%d lkey %#x is in no region of its PD", qp.QPN, g.Addr, g.Length, g.LKey)
			return nil, false
		}
		data = append(data, kcmd.Mem(g.Addr, int(g.Length))...)
	}
	return data, true
}

// scatter writes data over sges; false if they are not writable or too short.
func (k *Kernel) scatter(qp *QP, sges []uverbs.SGE, data []byte) bool {
	for _, g := range sges {
		if len(data) == 0 {
			break
		}
		if g.Length == 0 {
			continue
		}
		if mr := k.region(g.LKey, g.Addr, int(g.Length), uverbs.AccessLocalWrite); mr == nil || mr.PD != qp.PD {
			k.Fail("QP %#x: SGE %#x+%d lkey %#x is in no writable region of its PD", qp.QPN, g.Addr, g.Length, g.LKey)
			return false
		}
		n := copy(kcmd.Mem(g.Addr, int(g.Length)), data)
		data = data[n:]
	}
	return len(data) == 0
}

// remote is n bytes of peer's memory at addr under key, if its region and QP allow
// access. An empty access checks nothing (a zero-length RDMA WRITE needs no key).
func (k *Kernel) remote(peer *QP, addr uint64, key uint32, n int, access uverbs.AccessFlags) ([]byte, bool) {
	if n == 0 {
		return nil, true
	}
	mr := k.region(key, addr, n, access)
	if mr == nil || mr.PD != peer.PD || peer.Access&access != access {
		k.Fail("remote access rkey %#x [%#x+%d] (access %#x) at QP %#x refused: no such region of its PD, or the QP or region does not allow it", key, addr, n, access, peer.QPN)
		return nil, false
	}
	return kcmd.Mem(addr, n), true
}

// exportArea is the queue memory the kernel exports for the provider to map: one memfd,
// mapped here whole per region, and by the provider through mmap of the device file.
type exportArea struct {
	fd      int
	size    int64
	regions map[int64][]byte
}

func (a *exportArea) init() error {
	fd, err := unix.MemfdCreate("providertest", unix.MFD_CLOEXEC)
	if err != nil {
		return fmt.Errorf("queue memory: memfd: %w", err)
	}
	a.fd, a.regions = fd, map[int64][]byte{}
	return nil
}

func (a *exportArea) add(size int) (int64, []byte, error) {
	const align = 1 << 16 // a page on every kernel the tests emulate
	n := (int64(size) + align - 1) &^ (align - 1)
	off := a.size
	if err := unix.Ftruncate(a.fd, off+n); err != nil {
		return 0, nil, err
	}
	m, err := unix.Mmap(a.fd, off, int(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return 0, nil, err
	}
	a.size += n
	a.regions[off] = m
	return off, m[:size:size], nil
}

// mmap maps the region at off for the provider (its own mapping of the same pages).
func (a *exportArea) mmap(off int64, length, prot int) ([]byte, error) {
	m, ok := a.regions[off]
	if !ok || length > len(m) {
		return nil, unix.EINVAL
	}
	return unix.Mmap(a.fd, off, length, prot, unix.MAP_SHARED)
}

func (a *exportArea) free() {
	for _, m := range a.regions {
		unix.Munmap(m)
	}
	a.regions = nil
	if a.fd > 0 {
		unix.Close(a.fd)
		a.fd = -1
	}
}
