// Package hnsmodel is a test-only model of a HiSilicon HIP08/HIP09 RoCE engine and its
// hns_roce_hw_v2 kernel driver, in process: hns's and the engine's half of the provider's
// queues plugged into the fake uverbs kernel of test/providertest, which answers the core
// commands and executes the work between QPs. This package answers the driver data as
// the hns driver does (the CQE size, the hardware version and limits; CQ and QP numbers,
// record doorbells; the UAR page through mmap), learns of doorbells from the provider's
// stores to the UAR page (internal/mmio's recorder) and reads the send WQEs a doorbell
// announces when it is rung, reads a receive queue's head from its doorbell record when
// a message arrives, and writes CQEs with the owner bit of the lap, judging overrun by
// the consumer index record. The formats are written out here from the engine's layout
// as the oracle confirmed it (test/hnsoracle), independently of the provider.
//
// It checks what an engine would reject or never see: a doorbell that is not one 8-byte
// store to the doorbell register, for a queue the context does not have, a send WQE whose
// owner bit is not the lap's when its doorbell is rung, an unknown opcode, CQ overrun.
// Violations are recorded (Errors).
package hnsmodel

import (
	"encoding/binary"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/gorping/gorping/internal/mmio"
	"github.com/gorping/gorping/test/internal/kcmd"
	"github.com/gorping/gorping/test/providertest"
	"github.com/gorping/gorping/uverbs"
	"golang.org/x/sys/unix"
)

// Config shapes the modelled engine.
type Config struct {
	HIP09    bool // hw_ver 0x130, 64-byte CQEs, no reserved receive SGE, the owner-bit barrier
	NoRecord bool // no record doorbells: receive and consumer-index doorbells instead
	PageSize int  // the kernel's page size (0: this kernel's)
	// Fail, if set, is asked before every command (its uverbs number, bit 31 for the
	// extended ones); an error fails the command with it.
	Fail func(cmd uint32) error
}

const (
	vendorID = 0x19e5
	partID   = 0xa222
	driverID = 12 // RDMA_DRIVER_HNS
	maxQPWR  = 0x8000
	maxSGE   = 64
	maxCQE   = 0x400000
	dbOff    = 0x230
	wqeSize  = 64
	sgeSize  = 16
)

// NIC is one modelled engine. Contexts opened on it can reach each other's QPs.
type NIC struct {
	*providertest.Model
	d *driver
}

// Stats counts what the model executed.
type Stats = providertest.Stats

// New starts a model; Close stops it. It panics without the mmio recorder
// (providertest.RecorderAvailable).
func New(cfg Config) *NIC {
	if err := providertest.RecorderAvailable(); err != nil {
		panic(err)
	}
	if cfg.PageSize == 0 {
		cfg.PageSize = os.Getpagesize()
	}
	d := &driver{cfg: cfg, qps: map[uint32]*mqp{}, cqs: map[uint32]*mcq{}, goneCQ: map[uint32]bool{}, liveQP: map[uint32]*mqp{}, liveCQ: map[uint32]*mcq{}}
	m, err := providertest.StartModel(device, "hns_0", d, d.ring, cfg.Fail)
	if err != nil {
		panic(fmt.Sprintf("hnsmodel: %v", err))
	}
	d.k = m.Kernel()
	return &NIC{Model: m, d: d}
}

// NewForTest is New for tests: without the mmio recorder it skips t loudly, or fails it
// under CI=true; the model is closed when t ends.
func NewForTest(t testing.TB, cfg Config) *NIC {
	t.Helper()
	providertest.SkipWithoutRecorder(t)
	n := New(cfg)
	t.Cleanup(n.Close)
	return n
}

func device(name string) uverbs.Device {
	return uverbs.Device{Name: name, Index: 0, Uverbs: "uverbs0", Path: "/dev/infiniband/hnsmodel-" + name,
		Driver: "hns", DriverID: driverID, ABI: 1, NodeGUID: 0x5e4a89fffe000001}
}

var le = binary.LittleEndian

func load32(b []byte) uint32     { return atomic.LoadUint32((*uint32)(unsafe.Pointer(&b[0]))) }
func store32(b []byte, v uint32) { atomic.StoreUint32((*uint32)(unsafe.Pointer(&b[0])), v) }

func (d *driver) cqeSize() uint32 {
	if d.cfg.HIP09 {
		return 64
	}
	return 32
}

// driver is the hns kernel driver and the engine (providertest.Driver and Engine).
type driver struct {
	cfg    Config
	k      *providertest.Kernel
	nextID uint32
	qps    map[uint32]*mqp // by QPN
	cqs    map[uint32]*mcq // by CQN

	// Doorbells from the recorder, which runs on the provider's goroutine without the
	// kernel's lock.
	rmu    sync.Mutex
	pages  []dbPage
	queue  []doorbell
	liveQP map[uint32]*mqp
	liveCQ map[uint32]*mcq
	// goneCQ: CQs destroyed (with d.cqs' lock). A consumer-index doorbell for one is
	// ignored, as by the engine: a QP's close cleans its CQEs from a CQ that a context's
	// teardown may already have destroyed.
	goneCQ map[uint32]bool
}

type dbPage struct {
	start, end uintptr
	x          *mctx
}

// doorbell is one store to a UAR page, and the send WQEs the engine read when it was
// rung.
type doorbell struct {
	x          *mctx
	w0, w1     uint32
	off, size  int
	live       bool
	wrs        []providertest.SendWR
	bad        string
	cqWritten  uint32 // an arm's CQ: the CQEs written when it was rung
	armPending bool
}

// mctx is one context: its UAR page.
type mctx struct{ uar []byte }

// mcq is a CQ as the engine sees it.
type mcq struct {
	cq      *providertest.CQ
	cqn     uint32
	buf     []byte
	db      []byte // the consumer index record
	depth   uint32
	size    uint32
	pi      uint32        // CQEs written
	written atomic.Uint32 // pi, for the doorbells
	ci      uint32        // the consumer index of the last pointer doorbell (no record)
	record  bool
}

// mqp is a QP as the engine sees it.
type mqp struct {
	qp      *providertest.QP
	qpn     uint32
	x       *mctx
	sq      []byte // the send queue's WQEs
	sqCnt   uint32
	sge     []byte // the extended SGE area
	sgeCnt  uint32
	rung    uint32 // the send index the doorbells have read to
	pending []providertest.SendWR
	rq      []byte
	rqCnt   uint32
	rqGS    uint32
	rqCI    uint32
	rqPI    uint32 // the last receive doorbell's index (no record)
	rdb     []byte
	ops     map[uint32]uint8 // a send index's WQE opcode, for its CQE
}

func (d *driver) GetContext(c *providertest.Context, in, out []byte) error {
	if len(out) < 24 {
		c.Kernel().Fail("GET_CONTEXT with room for %d bytes of response; hns writes 24", len(out))
		return unix.EINVAL
	}
	x := &mctx{}
	var err error
	if x.uar, err = unix.Mmap(-1, 0, d.cfg.PageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS); err != nil {
		return err
	}
	c.Driver = x
	d.rmu.Lock()
	start := uintptr(unsafe.Pointer(&x.uar[0]))
	d.pages = append(d.pages, dbPage{start: start, end: start + uintptr(len(x.uar)), x: x})
	d.rmu.Unlock()
	le.PutUint32(out[0:], 0x80000)
	le.PutUint32(out[4:], d.cqeSize())
	le.PutUint32(out[8:], 0x100000)
	return nil
}

func (d *driver) QueryDevice(r *kcmd.QueryDeviceResp) {
	r.VendorID, r.VendorPartID, r.MaxQPWR, r.MaxSGE, r.MaxSGERd, r.MaxCQE = vendorID, partID, maxQPWR, maxSGE, maxSGE, maxCQE
	r.HwVer = 0x100
	if d.cfg.HIP09 {
		r.HwVer = 0x130
	}
	r.MaxQPRdAtom, r.MaxQPInitRdAtom = 128, 128
}

func (d *driver) QueryDeviceEx(*kcmd.ExQueryDeviceResp) {}

func (d *driver) QueryPort(_ uint8, r *kcmd.QueryPortResp) {
	r.GIDTblLen, r.MaxMTU, r.ActiveMTU, r.LinkLayer = 256, 5, 3, 2
}

func (d *driver) AllocPD(_ *providertest.Context, h uint32, in, out []byte) error {
	if len(out) >= 4 {
		le.PutUint32(out, h)
	}
	return nil
}

func (d *driver) RegMR(mr *providertest.MR, in, out []byte) error {
	mr.Key = mr.Handle<<8 | 0x5e
	return nil
}

// Mmap: offset 0 is the UAR page.
func (d *driver) Mmap(c *providertest.Context, off int64, length, prot int) ([]byte, error) {
	x, _ := c.Driver.(*mctx)
	if x == nil || off != 0 || length != d.cfg.PageSize {
		c.Kernel().Fail("mmap offset %#x length %d: not the %d-byte UAR page", off, length, d.cfg.PageSize)
		return nil, unix.EINVAL
	}
	return x.uar, nil
}

func (d *driver) CreateCQ(k *providertest.Kernel, c *providertest.CQ, in, out []byte) (int, error) {
	if len(in) < 20 || len(out) < 16 {
		k.Fail("CREATE_CQ with %d/%d bytes of driver data, hns takes 24/16", len(in), len(out))
		return 0, unix.EINVAL
	}
	depth := uint32(c.CQE)
	if depth < 64 || depth&(depth-1) != 0 || le.Uint32(in[16:]) != d.cqeSize() {
		k.Fail("CREATE_CQ of %d CQEs of %d bytes: not a power of two of at least 64, or not the context's CQE size", depth, le.Uint32(in[16:]))
		return 0, unix.EINVAL
	}
	d.nextID++
	q := &mcq{cq: c, cqn: d.nextID, buf: kcmd.Mem(le.Uint64(in[0:]), int(depth*d.cqeSize())), db: kcmd.Mem(le.Uint64(in[8:]), 4),
		depth: depth, size: d.cqeSize(), record: !d.cfg.NoRecord}
	c.Driver = q
	d.cqs[q.cqn] = q
	d.rmu.Lock()
	d.liveCQ[q.cqn] = q
	d.rmu.Unlock()
	le.PutUint64(out[0:], uint64(q.cqn))
	if q.record {
		le.PutUint64(out[8:], 1) // RECORD_DB
	}
	return int(depth) - 1, nil // the kernel reports the ring's mask
}

// CreateQP finds the queues in the buffer the provider named, sized as the kernel sizes
// them from the capabilities and the send queue's log size.
func (d *driver) CreateQP(k *providertest.Kernel, p *providertest.QP, in, out []byte) error {
	if len(in) < 32 || len(out) < 16 {
		k.Fail("CREATE_QP with %d/%d bytes of driver data, hns takes 32/16", len(in), len(out))
		return unix.EINVAL
	}
	if p.Type != uverbs.QPTypeRC {
		return unix.EOPNOTSUPP
	}
	c := p.Cap
	sqCnt := uint32(1) << in[16]
	if in[17] != 6 || sqCnt < c.MaxSendWR || c.MaxRecvWR&(c.MaxRecvWR-1) != 0 || c.MaxRecvSGE&(c.MaxRecvSGE-1) != 0 {
		k.Fail("CREATE_QP: send queue of 2^%d WQEs of 2^%d bytes for %d WRs, receive queue of %d WRs of %d segments", in[16], in[17], c.MaxSendWR, c.MaxRecvWR, c.MaxRecvSGE)
		return unix.EINVAL
	}
	sgeCnt := uint32(0)
	if c.MaxSendSGE > 2 {
		sgeCnt = max(pow2(sqCnt*(c.MaxSendSGE-2)), 256)
	}
	sqBytes := align(int(sqCnt)*wqeSize, 4096)
	sgeBytes := align(int(sgeCnt)*sgeSize, 4096)
	buf := le.Uint64(in[0:])
	d.nextID++
	q := &mqp{qp: p, qpn: d.nextID, x: p.Ctx.Driver.(*mctx), sqCnt: sqCnt, sgeCnt: sgeCnt, rqCnt: c.MaxRecvWR, rqGS: c.MaxRecvSGE,
		sq: kcmd.Mem(buf, int(sqCnt)*wqeSize), ops: map[uint32]uint8{}}
	if sgeCnt > 0 {
		q.sge = kcmd.Mem(buf+uint64(sqBytes), int(sgeCnt)*sgeSize)
	}
	if q.rqCnt > 0 {
		q.rq = kcmd.Mem(buf+uint64(sqBytes+sgeBytes), int(q.rqCnt*q.rqGS)*sgeSize)
		if !d.cfg.NoRecord {
			q.rdb = kcmd.Mem(le.Uint64(in[8:]), 4)
		}
	}
	p.QPN, p.Driver = q.qpn, q
	d.qps[q.qpn] = q
	d.rmu.Lock()
	d.liveQP[q.qpn] = q
	d.rmu.Unlock()
	caps := uint64(0)
	if !d.cfg.NoRecord {
		caps |= 1 | 2 // RQ_RECORD_DB, SQ_RECORD_DB
	}
	if d.cfg.HIP09 {
		caps |= 4 // OWNER_DB
	}
	le.PutUint64(out[0:], caps)
	return nil
}

func align(n, a int) int { return (n + a - 1) / a * a }

func pow2(n uint32) uint32 {
	r := uint32(1)
	for r < n {
		r <<= 1
	}
	return r
}

func (d *driver) DestroyQP(p *providertest.QP) {
	q := p.Driver.(*mqp)
	delete(d.qps, q.qpn)
	d.rmu.Lock()
	delete(d.liveQP, q.qpn)
	d.rmu.Unlock()
}

func (d *driver) DestroyCQ(c *providertest.CQ) {
	q := c.Driver.(*mcq)
	delete(d.cqs, q.cqn)
	d.goneCQ[q.cqn] = true
	d.rmu.Lock()
	delete(d.liveCQ, q.cqn)
	d.rmu.Unlock()
}

// ModifyQP: a QP reset starts its queues over (the provider's indices start over too).
func (d *driver) ModifyQP(p *providertest.QP, req *kcmd.ModifyQP) {
	if req.AttrMask&1 != 0 && p.State == uverbs.QPSReset {
		q := p.Driver.(*mqp)
		d.rmu.Lock()
		q.rung = 0
		d.rmu.Unlock()
		q.rqCI, q.rqPI, q.pending = 0, 0, nil
	}
}

// ring hears every MMIO store of the process and keeps those to a UAR page of this
// engine; for a send doorbell it reads the WQEs it announces, as the engine does then.
func (d *driver) ring(e mmio.Event) {
	if e.Op != mmio.OpStore64 && e.Op != mmio.OpStore32 && e.Op != mmio.OpCopy64 {
		return
	}
	d.rmu.Lock()
	defer d.rmu.Unlock()
	for _, p := range d.pages {
		if e.Addr < p.start || e.Addr >= p.end {
			continue
		}
		db := doorbell{x: p.x, off: int(e.Addr - p.start), size: e.Len, w0: le.Uint32(e.Data[0:]), w1: le.Uint32(e.Data[4:])}
		if db.size == 8 && db.off == dbOff {
			tag, cmd := db.w0&0xffffff, db.w0>>24&0xf
			switch cmd {
			case 0:
				if q := d.liveQP[tag]; q != nil && q.x == p.x {
					db.live = true
					for pi := db.w1 & 0xffff; q.rung&0xffff != pi; q.rung++ {
						wr, bad := q.decode(q.rung)
						if bad != "" {
							db.bad = bad
							break
						}
						db.wrs = append(db.wrs, wr)
					}
				}
			case 1:
				db.live = d.liveQP[tag] != nil
			case 3, 4:
				if c := d.liveCQ[tag]; c != nil {
					db.live, db.cqWritten = true, c.written.Load()
				}
			}
		}
		d.queue = append(d.queue, db)
		return
	}
}

var wrOps = map[uint32]uverbs.WROpcode{0x0: uverbs.WRSend, 0x2: uverbs.WRSendWithImm, 0x3: uverbs.WRRDMAWrite,
	0x4: uverbs.WRRDMAWriteWithImm, 0x5: uverbs.WRRDMARead}

// decode reads send WQE i (and its extended SGEs or inline data): it must be the lap's,
// by its owner bit. d.rmu held, on the provider's goroutine.
func (q *mqp) decode(i uint32) (providertest.SendWR, string) {
	w := q.sq[(i&(q.sqCnt-1))*wqeSize : (i&(q.sqCnt-1)+1)*wqeSize]
	b4 := load32(w)
	if want := i&q.sqCnt == 0; (b4&(1<<7) != 0) != want {
		return providertest.SendWR{}, fmt.Sprintf("send WQE %d: owner bit %d, the lap's is %v", i, b4>>7&1, want)
	}
	op := b4 & 0x1f
	wr := providertest.SendWR{Slot: i & 0xffff, Signaled: b4&(1<<8) != 0 || q.qp.SigAll}
	var ok bool
	if wr.Opcode, ok = wrOps[op]; !ok {
		return wr, fmt.Sprintf("send WQE %d: opcode %#x", i, op)
	}
	q.ops[i&0xffff] = uint8(op)
	if op == 0x2 || op == 0x4 {
		wr.Imm = swap32(le.Uint32(w[8:]))
	}
	if op >= 0x3 {
		wr.RKey, wr.RemoteAddr = le.Uint32(w[20:]), le.Uint64(w[24:])
	}
	length := le.Uint32(w[4:])
	nsge := le.Uint32(w[12:]) >> 24
	start := le.Uint32(w[16:]) & 0xffffff
	ext := func(k uint32) []byte {
		if q.sgeCnt == 0 {
			return nil
		}
		s := (start + k) & (q.sgeCnt - 1)
		return q.sge[s*sgeSize : (s+1)*sgeSize]
	}
	if b4&(1<<12) != 0 {
		if le.Uint32(w[16:])>>31 == 0 {
			if length > 32 {
				return wr, fmt.Sprintf("send WQE %d: %d bytes inline in the WQE", i, length)
			}
			wr.Inline = append([]byte(nil), w[32:32+length]...)
		} else {
			for k := uint32(0); uint32(len(wr.Inline)) < length; k++ {
				s := ext(k)
				if s == nil {
					return wr, fmt.Sprintf("send WQE %d: inline data in an extended SGE area the QP has not", i)
				}
				wr.Inline = append(wr.Inline, s[:min(sgeSize, int(length)-len(wr.Inline))]...)
			}
		}
		return wr, ""
	}
	for k := uint32(0); k < nsge; k++ {
		var s []byte
		if k < 2 {
			s = w[32+16*k : 48+16*k]
		} else if s = ext(k - 2); s == nil {
			return wr, fmt.Sprintf("send WQE %d: %d SGEs without an extended SGE area", i, nsge)
		}
		wr.SGE = append(wr.SGE, uverbs.SGE{Length: le.Uint32(s[0:]), LKey: le.Uint32(s[4:]), Addr: le.Uint64(s[8:])})
	}
	total := uint32(0)
	for _, g := range wr.SGE {
		total += g.Length
	}
	if total != length {
		return wr, fmt.Sprintf("send WQE %d: length %d, its SGEs hold %d", i, length, total)
	}
	return wr, ""
}

func swap32(v uint32) uint32 { return v>>24 | v>>8&0xff00 | v<<8&0xff0000 | v<<24 }

// Doorbells acts on the doorbells rung since the last pass.
func (d *driver) Doorbells(k *providertest.Kernel) bool {
	d.rmu.Lock()
	q := d.queue
	d.queue = nil
	d.rmu.Unlock()
	for _, db := range q {
		d.doorbell(k, db)
	}
	return len(q) > 0
}

func (d *driver) doorbell(k *providertest.Kernel, db doorbell) {
	if db.size != 8 || db.off != dbOff {
		k.Fail("a %d-byte store at UAR page +%#x; the engine takes 8-byte doorbells at +%#x", db.size, db.off, dbOff)
		return
	}
	tag, cmd := db.w0&0xffffff, db.w0>>24&0xf
	switch cmd {
	case 0, 1:
		q := d.qps[tag]
		if q == nil || q.x != db.x {
			if q != nil || !db.live {
				k.Fail("doorbell for unknown QP %#x (command %d)", tag, cmd)
			}
			return
		}
		if cmd == 1 {
			q.rqPI = db.w1 & 0xffff
			return
		}
		if db.bad != "" {
			k.Fail("QP %#x: %s", tag, db.bad)
		}
		q.pending = append(q.pending, db.wrs...)
		k.Count().Doorbells++
	case 3, 4:
		c := d.cqs[tag]
		if c == nil {
			if !db.live && !d.goneCQ[tag] {
				k.Fail("CQ doorbell for unknown CQ %#x (command %d)", tag, cmd)
			}
			return
		}
		ci := db.w1 & 0xffffff
		if cmd == 3 {
			c.ci = ci
			return
		}
		// The arm: an event for the next CQE, or at once for CQEs its consumer index has
		// not read (those written before it was rung as well as after).
		ring := c.depth<<1 - 1
		k.ArmCQ(c.cq, c.written.Load()&ring != ci&ring)
	default:
		k.Fail("doorbell command %d for queue %#x: not one the model knows", cmd, tag)
	}
}

// NextSend takes the next send WR the doorbells announced.
func (d *driver) NextSend(p *providertest.QP) (providertest.SendWR, bool) {
	q := p.Driver.(*mqp)
	if len(q.pending) == 0 {
		return providertest.SendWR{}, false
	}
	wr := q.pending[0]
	q.pending = q.pending[1:]
	if wr.Slot&(q.sqCnt-1) == q.sqCnt-1 {
		d.k.Count().SQLaps++
	}
	return wr, true
}

// NextRecv takes the oldest receive WQE if the queue's head (its record, or its last
// doorbell) says the provider posted it: its segments up to the reserved or an empty one.
func (d *driver) NextRecv(p *providertest.QP) (providertest.RecvWR, bool) {
	q := p.Driver.(*mqp)
	if q.rqCnt == 0 {
		return providertest.RecvWR{}, false
	}
	head := q.rqPI
	if q.rdb != nil {
		head = load32(q.rdb)
	}
	if (head-q.rqCI)&0xffff == 0 {
		return providertest.RecvWR{}, false
	}
	i := q.rqCI & (q.rqCnt - 1)
	w := q.rq[i*q.rqGS*sgeSize : (i+1)*q.rqGS*sgeSize]
	wr := providertest.RecvWR{Slot: q.rqCI & 0xffff}
	for s := uint32(0); s < q.rqGS; s++ {
		seg := w[s*sgeSize:]
		g := uverbs.SGE{Length: le.Uint32(seg[0:]), LKey: le.Uint32(seg[4:]), Addr: le.Uint64(seg[8:])}
		if g.Length == 0x80000000 || g.Length == 0 && g.LKey == 0 && g.Addr == 0 {
			break
		}
		wr.SGE = append(wr.SGE, g)
	}
	if q.rqCI++; q.rqCI&(q.rqCnt-1) == 0 {
		d.k.Count().RQLaps++
	}
	return wr, true
}

// CQE statuses (the engine's).
var cqeStatus = map[uverbs.WCStatus]uint32{uverbs.WCLocLenErr: 0x01, uverbs.WCLocQPOpErr: 0x02, uverbs.WCLocProtErr: 0x04,
	uverbs.WCWRFlushErr: 0x05, uverbs.WCMWBindErr: 0x06, uverbs.WCBadRespErr: 0x10, uverbs.WCLocAccessErr: 0x11,
	uverbs.WCRemInvReqErr: 0x12, uverbs.WCRemAccessErr: 0x13, uverbs.WCRemOpErr: 0x14, uverbs.WCRetryExcErr: 0x15,
	uverbs.WCRNRRetryExcErr: 0x16, uverbs.WCRemAbortErr: 0x22}

var cqeOps = map[uverbs.WROpcode]uint32{uverbs.WRSend: 0x0, uverbs.WRSendWithImm: 0x2, uverbs.WRRDMAWrite: 0x3,
	uverbs.WRRDMAWriteWithImm: 0x4, uverbs.WRRDMARead: 0x5}

// Complete writes one CQE, its first word (the owner bit of the lap) last. Every
// completion is the engine's, flushes included.
func (d *driver) Complete(c *providertest.CQ, e providertest.Completion) bool {
	m := c.Driver.(*mcq)
	q := e.QP.Driver.(*mqp)
	ci := m.ci
	if m.record {
		ci = load32(m.db)
	}
	if (m.pi-ci)&0xffffff >= m.depth {
		return false
	}
	st := uint32(0)
	if e.Status != uverbs.WCSuccess {
		var ok bool
		if st, ok = cqeStatus[e.Status]; !ok {
			st = 0x23 // GENERAL_ERR
		}
	}
	s := m.pi & (m.depth - 1)
	b := m.buf[s*m.size : (s+1)*m.size]
	clear(b[4:])
	w := st<<8 | (e.Slot&0xffff)<<16
	if m.pi&m.depth == 0 {
		w |= 1 << 7
	}
	if e.Recv {
		w |= 1 << 6
		op := uint32(0x1) // SEND
		switch {
		case e.Opcode == uverbs.WCRecvRDMAWithImm:
			op = 0x0
		case e.Flags&uverbs.WCFlagWithImm != 0:
			op = 0x2
		case e.Flags&uverbs.WCFlagWithInv != 0:
			op = 0x3
		}
		w |= op
		le.PutUint32(b[16:], e.ByteLen)
		if e.Flags&uverbs.WCFlagWithImm != 0 {
			le.PutUint32(b[4:], swap32(e.Imm))
		} else if e.Flags&uverbs.WCFlagWithInv != 0 {
			le.PutUint32(b[4:], e.Imm)
		}
	} else {
		w |= cqeOps[e.WROpcode]
		le.PutUint32(b[16:], e.ByteLen)
	}
	le.PutUint32(b[12:], q.qpn)
	store32(b, w)
	if s == m.depth-1 {
		d.k.Count().CQLaps++
	}
	m.pi++
	m.written.Store(m.pi)
	return true
}

// Armed: the arm doorbell arms the CQ (Kernel.ArmCQ).
func (d *driver) Armed(*providertest.CQ) bool { return false }
