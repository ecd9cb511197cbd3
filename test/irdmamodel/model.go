// Package irdmamodel is a test-only model of an Intel E810 (GEN_2) in RoCEv2 mode and
// its irdma kernel driver, in process: irdma's and the device's half of the provider's
// queues plugged into the fake uverbs kernel of test/providertest, which answers the core
// commands and executes the work between QPs. This package answers the driver data as
// the irdma driver does (the device's limits and features, the doorbell page through
// mmap; PD, CQ and QP ids), keeps the queue memory the provider registers (REG_MR of type
// QP or CQ) and finds it again at CREATE_QP/CREATE_CQ, learns of doorbells from the
// provider's stores to the doorbell page (internal/mmio's recorder), reads the send WQEs
// a doorbell announces (by their valid bits, as the device does, when it is rung) and the
// receive WQEs when a message arrives, and writes 32-byte CQEs with the valid bit of the
// lap, an extension CQE for immediate data, and one flush CQE for a queue in error (the
// provider completes the rest from it). The formats are written out here from the
// device's layout as the oracle confirmed it (test/irdmaoracle), independently of the
// provider.
//
// It checks what a device would reject or never see: a doorbell that is not one 4-byte
// store at offset 0 or 64, one for a QP or CQ the context does not have, a WQE whose
// fragments or inline quanta lack the valid bit, an unknown opcode, an arm whose sequence
// number did not change, queue memory not registered before the create, CQ overrun
// (judged by the consumer index the provider writes to the shadow area). Violations are
// recorded (Errors).
package irdmamodel

import (
	"encoding/binary"
	"fmt"
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

// Config shapes the modelled device.
type Config struct {
	// Features are GET_CONTEXT's feature_flags (0: RTS_AE and CQ_RESIZE, current firmware;
	// NoCQResize clears CQ_RESIZE: the CQ's shadow area after its ring).
	Features   uint64
	NoCQResize bool
	PageSize   int // the kernel's page size (0: 4096)
	// Fail, if set, is asked before every command (its uverbs number, bit 31 for the
	// extended ones); an error fails the command with it.
	Fail func(cmd uint32) error
}

const (
	vendorID  = 0x8086
	partID    = 0x1593
	driverID  = 9 // RDMA_DRIVER_IRDMA
	maxFrags  = 13
	maxInline = 101
	maxQuanta = 32768
	maxCQSize = 1048575
	sqChunk   = 8
	qpCaps    = 2 | 1 | 4 | 8 // SEND_WITH_IMM, WRITE_WITH_IMM, ROCE, PUSH_MODE
	hwPage    = 4096
	quantum   = 32
	cqeSize   = 32

	featureCQResize = 2
)

// NIC is one modelled adapter. Contexts opened on it can reach each other's QPs.
type NIC struct {
	*providertest.Model
	d *driver
}

// Stats counts what the model executed: the kernel's counters, the rings' laps, the send
// doorbells and the CQ arms.
type Stats = providertest.Stats

// New starts a model; Close stops it. It panics without the mmio recorder
// (providertest.RecorderAvailable).
func New(cfg Config) *NIC {
	if err := providertest.RecorderAvailable(); err != nil {
		panic(err)
	}
	if cfg.PageSize == 0 {
		cfg.PageSize = 4096
	}
	if cfg.Features == 0 {
		cfg.Features = 1 | featureCQResize
	}
	if cfg.NoCQResize {
		cfg.Features &^= featureCQResize
	}
	d := &driver{cfg: cfg, qps: map[uint32]*mqp{}, cqs: map[uint32]*mcq{}, pbls: map[uint64]pbl{},
		liveQP: map[uint32]*sqView{}, liveCQ: map[uint32]*armView{}}
	m, err := providertest.StartModel(device, "irdma0", d, d.ring, cfg.Fail)
	if err != nil {
		panic(fmt.Sprintf("irdmamodel: %v", err))
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
	return uverbs.Device{Name: name, Index: 0, Uverbs: "uverbs0", Path: "/dev/infiniband/irdmamodel-" + name,
		Driver: "irdma", DriverID: driverID, ABI: 5, NodeGUID: 0xb69691fffe000001}
}

var le = binary.LittleEndian

func load64(b []byte, off int) uint64 { return atomic.LoadUint64((*uint64)(unsafe.Pointer(&b[off]))) }
func store64(b []byte, off int, v uint64) {
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&b[off])), v)
}

// driver is the irdma kernel driver and the device (providertest.Driver and Engine).
type driver struct {
	cfg    Config
	k      *providertest.Kernel
	nextID uint32
	qps    map[uint32]*mqp // by qp_id, for doorbells
	cqs    map[uint32]*mcq // by cq_id
	pbls   map[uint64]pbl  // queue memory registered, by address, until a create takes it

	// Doorbells from the recorder, which runs on the provider's goroutine without the
	// kernel's lock.
	rmu    sync.Mutex
	pages  []dbPage
	queue  []doorbell
	liveQP map[uint32]*sqView // the send queues that exist, as ring reads them
	liveCQ map[uint32]*armView
}

// pbl is one REG_MR of queue memory (irdma's reg_type QP or CQ) and its page counts.
type pbl struct {
	typ                       uint16
	addr                      uint64
	length                    int
	cqPages, sqPages, rqPages int
}

type dbPage struct {
	start, end uintptr
	x          *mctx
}

// doorbell is one store to a doorbell page, and what the device read when it was rung:
// for a QP's, the WQEs from where it last read, by their valid bits; for a CQ's, the arm
// word of its shadow area.
type doorbell struct {
	x    *mctx
	val  uint32
	off  int
	size int
	live bool // the QP or CQ it names existed when it was rung
	from uint32
	snap []byte
	arm  uint64
	// written: the CQ's CQEs written when its arm was rung.
	written uint32
	bad     string // what the device found wrong in the WQEs it read
}

// sqView is a send queue as the doorbell reads it: the ring, the quantum it reads next
// and that quantum's lap's valid bit.
type sqView struct {
	buf   []byte
	size  uint32 // quanta
	rung  uint32
	valid uint64
}

// armView is a CQ's shadow area as the arm doorbell reads it.
type armView struct {
	shadow []byte
	cq     *mcq
}

// mctx is one context: its doorbell page.
type mctx struct{ db []byte }

// mcq is a CQ as the device sees it: the ring in the provider's memory, its shadow area,
// how many CQEs were written, the last arm sequence number, and the queues it holds a
// flush CQE of (whose further flushes the provider completes itself).
type mcq struct {
	cq      *providertest.CQ
	cqid    uint32
	buf     []byte
	shadow  []byte
	size    uint32
	pi      uint32        // CQEs written
	written atomic.Uint32 // pi, for the doorbells
	lastSeq uint64
	armed   bool // an arm was ever seen (lastSeq holds)
}

// mqp is a QP as the device sees it.
type mqp struct {
	qp      *providertest.QP
	qpid    uint32
	ctx     uint64 // the completion context its CQEs carry
	x       *mctx
	sq      []byte // the ring as the doorbells found it (what the device reads)
	sqSize  uint32 // quanta
	sqCI    uint32 // the next quantum to execute
	sqTo    uint32 // the quantum after the last one rung
	ops     []uint8
	rq      []byte
	rqSize  uint32 // WQEs
	rqMult  uint32 // quanta per WQE
	rqCI    uint32
	rqValid uint64 // the valid bit of rqCI's lap
	// flushed: the queue's flush CQE is written; the provider completes the rest.
	sqFlushed, rqFlushed bool
}

func (d *driver) GetContext(c *providertest.Context, in, out []byte) error {
	if len(in) < 8 || in[4] < 4 || in[4] > 5 {
		c.Kernel().Fail("GET_CONTEXT with %d bytes of driver request (userspace_ver %v); irdma takes 8 with version 4 or 5", len(in), in)
		return unix.EINVAL
	}
	if len(out) < 64 {
		c.Kernel().Fail("GET_CONTEXT with room for %d bytes of response: the i40iw layout, which GEN_2 refuses", len(out))
		return unix.EOPNOTSUPP
	}
	x := &mctx{}
	var err error
	if x.db, err = unix.Mmap(-1, 0, d.cfg.PageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS); err != nil {
		return err
	}
	c.Driver = x
	d.rmu.Lock()
	start := uintptr(unsafe.Pointer(&x.db[0]))
	d.pages = append(d.pages, dbPage{start: start, end: start + uintptr(len(x.db)), x: x})
	d.rmu.Unlock()
	le.PutUint32(out[0:], 0x40000)
	le.PutUint32(out[4:], 0x40000)
	le.PutUint32(out[8:], 0x2000)
	out[12] = 5
	le.PutUint64(out[16:], d.cfg.Features)
	le.PutUint64(out[24:], d.dbKey())
	le.PutUint32(out[32:], maxFrags)
	le.PutUint32(out[36:], maxFrags)
	le.PutUint32(out[40:], maxInline)
	le.PutUint32(out[44:], maxQuanta)
	le.PutUint32(out[48:], maxQuanta)
	le.PutUint32(out[52:], 8)
	le.PutUint32(out[56:], maxCQSize)
	le.PutUint16(out[60:], sqChunk)
	out[62] = 2 // GEN_2
	return nil
}

func (d *driver) dbKey() uint64 { return 3 * uint64(d.cfg.PageSize) }

func (d *driver) QueryDevice(r *kcmd.QueryDeviceResp) {
	r.VendorID, r.VendorPartID, r.MaxSGE, r.MaxSGERd, r.MaxCQE = vendorID, partID, maxFrags, maxFrags, maxCQSize-1
	r.MaxQPRdAtom, r.MaxQPInitRdAtom = 127, 255
}

func (d *driver) QueryDeviceEx(*kcmd.ExQueryDeviceResp) {}

func (d *driver) QueryPort(_ uint8, r *kcmd.QueryPortResp) {
	r.GIDTblLen, r.MaxMTU, r.ActiveMTU, r.LinkLayer = 32, 5, 3, 2
}

// AllocPD: the PD id.
func (d *driver) AllocPD(_ *providertest.Context, h uint32, in, out []byte) error {
	if len(out) < 8 {
		return unix.EINVAL
	}
	le.PutUint32(out, h)
	return nil
}

// RegMR keeps queue memory (reg_type QP or CQ) for the create that names it.
func (d *driver) RegMR(mr *providertest.MR, in, out []byte) error {
	mr.Key = mr.Handle<<8 | 0x11
	if len(in) < 8 {
		return nil // reg_type MEM
	}
	p := pbl{typ: le.Uint16(in[0:]), addr: mr.Addr, length: int(mr.Len), cqPages: int(le.Uint16(in[2:])),
		rqPages: int(le.Uint16(in[4:])), sqPages: int(le.Uint16(in[6:]))}
	switch p.typ {
	case 0:
	case 1:
		if (p.sqPages+p.rqPages)*hwPage+64 > p.length || p.sqPages == 0 || p.rqPages == 0 {
			d.k.Fail("REG_MR of QP memory: %d+%d pages and the shadow area in %d bytes", p.sqPages, p.rqPages, p.length)
			return unix.EINVAL
		}
		d.pbls[p.addr] = p
	case 2:
		if p.cqPages == 0 || p.cqPages*hwPage > p.length && p.length != 64 {
			d.k.Fail("REG_MR of CQ memory: %d pages in %d bytes", p.cqPages, p.length)
			return unix.EINVAL
		}
		d.pbls[p.addr] = p
	default:
		d.k.Fail("REG_MR reg_type %d", p.typ)
		return unix.EINVAL
	}
	return nil
}

// Mmap: the doorbell page, at the key GET_CONTEXT answered.
func (d *driver) Mmap(c *providertest.Context, off int64, length, prot int) ([]byte, error) {
	x, _ := c.Driver.(*mctx)
	if x == nil || uint64(off) != d.dbKey() || length > d.cfg.PageSize {
		c.Kernel().Fail("mmap offset %#x length %d: not the doorbell page", off, length)
		return nil, unix.EINVAL
	}
	if prot&unix.PROT_WRITE == 0 {
		c.Kernel().Fail("doorbell page mapped without PROT_WRITE (%#x)", prot)
	}
	return x.db, nil
}

// take is the queue memory registered at addr, of type typ (and forgets it, as the
// kernel takes it off its list).
func (d *driver) take(addr uint64, typ uint16) (pbl, bool) {
	p, ok := d.pbls[addr]
	if !ok || p.typ != typ {
		return pbl{}, false
	}
	delete(d.pbls, addr)
	return p, true
}

func (d *driver) CreateCQ(k *providertest.Kernel, c *providertest.CQ, in, out []byte) (int, error) {
	if len(in) < 16 || len(out) < 8 {
		k.Fail("CREATE_CQ with %d/%d bytes of driver data, irdma takes 16/8", len(in), len(out))
		return 0, unix.EINVAL
	}
	ring, ok := d.take(le.Uint64(in[0:]), 2)
	if !ok {
		k.Fail("CREATE_CQ: the ring at %#x was not registered (REG_MR type CQ) first", le.Uint64(in[0:]))
		return 0, unix.EPROTO
	}
	shadow := ring.addr + uint64(ring.cqPages*hwPage)
	if d.cfg.Features&featureCQResize != 0 {
		s, ok := d.take(le.Uint64(in[8:]), 2)
		if !ok {
			k.Fail("CREATE_CQ: the shadow area at %#x was not registered (REG_MR type CQ) first", le.Uint64(in[8:]))
			return 0, unix.EPROTO
		}
		shadow = s.addr
	} else if le.Uint64(in[8:]) != shadow || ring.length < ring.cqPages*hwPage+64 {
		k.Fail("CREATE_CQ: shadow area %#x, want the one after the ring's %d pages", le.Uint64(in[8:]), ring.cqPages)
		return 0, unix.EPROTO
	}
	size := uint32(c.CQE)
	if size < 4 || int(size)*cqeSize > ring.cqPages*hwPage {
		k.Fail("CREATE_CQ of %d CQEs in %d pages", size, ring.cqPages)
		return 0, unix.EINVAL
	}
	d.nextID++
	q := &mcq{cq: c, cqid: d.nextID, buf: kcmd.Mem(ring.addr, int(size)*cqeSize), shadow: kcmd.Mem(shadow, 64), size: size}
	c.Driver = q
	d.cqs[q.cqid] = q
	d.rmu.Lock()
	d.liveCQ[q.cqid] = &armView{shadow: q.shadow, cq: q}
	d.rmu.Unlock()
	le.PutUint32(out[0:], q.cqid)
	le.PutUint32(out[4:], size)
	return int(size), nil
}

// wqeShift is the power of two of quanta a WQE of sge fragments and inline bytes takes:
// the kernel sizes the rings with the provider's rule.
func wqeShift(sge, inline uint32) uint32 {
	switch {
	case sge <= 1 && inline <= 8:
		return 0
	case sge < 4 && inline <= 39:
		return 1
	case sge < 8 && inline <= 101:
		return 2
	}
	return 3
}

// CreateQP takes the queue memory the provider registered and sizes the rings as the
// kernel does from the capabilities.
func (d *driver) CreateQP(k *providertest.Kernel, p *providertest.QP, in, out []byte) error {
	if len(in) < 16 || len(out) < 24 {
		k.Fail("CREATE_QP with %d/%d bytes of driver data, irdma takes 16/24", len(in), len(out))
		return unix.EINVAL
	}
	if p.Type != uverbs.QPTypeRC {
		return unix.EOPNOTSUPP
	}
	c := p.Cap
	if c.MaxSendSGE > maxFrags || c.MaxRecvSGE > maxFrags || c.MaxInlineData > maxInline {
		return unix.EINVAL
	}
	buf, ok := d.take(le.Uint64(in[0:]), 1)
	if !ok {
		k.Fail("CREATE_QP: the queues at %#x were not registered (REG_MR type QP) first", le.Uint64(in[0:]))
		return unix.ENODATA
	}
	sqShift, rqShift := wqeShift(c.MaxSendSGE+1, c.MaxInlineData), wqeShift(c.MaxRecvSGE, 0)
	q := &mqp{qp: p, ctx: le.Uint64(in[8:]), x: p.Ctx.Driver.(*mctx), sqSize: c.MaxSendWR << sqShift, rqSize: c.MaxRecvWR, rqMult: 1 << rqShift, rqValid: 1}
	if q.sqSize == 0 || q.rqSize == 0 || int(q.sqSize)*quantum > buf.sqPages*hwPage || int(q.rqSize*q.rqMult)*quantum > buf.rqPages*hwPage {
		k.Fail("CREATE_QP: %d send quanta and %d receive WQEs of %d quanta in %d+%d pages", q.sqSize, q.rqSize, q.rqMult, buf.sqPages, buf.rqPages)
		return unix.EINVAL
	}
	sqMem := kcmd.Mem(buf.addr, int(q.sqSize)*quantum)
	q.rq = kcmd.Mem(buf.addr+uint64(buf.sqPages*hwPage), int(q.rqSize*q.rqMult)*quantum)
	q.sq, q.ops = make([]byte, len(sqMem)), make([]uint8, q.sqSize)
	d.nextID++
	q.qpid = d.nextID
	p.QPN, p.Driver = q.qpid, q
	d.qps[q.qpid] = q
	d.rmu.Lock()
	d.liveQP[q.qpid] = &sqView{buf: sqMem, size: q.sqSize, valid: 1}
	d.rmu.Unlock()
	le.PutUint32(out[0:], q.qpid)
	le.PutUint32(out[4:], c.MaxSendWR)
	le.PutUint32(out[8:], c.MaxRecvWR)
	le.PutUint32(out[20:], qpCaps) // lsmm 0: RoCE
	return nil
}

func (d *driver) DestroyQP(p *providertest.QP) {
	q := p.Driver.(*mqp)
	delete(d.qps, q.qpid)
	d.rmu.Lock()
	delete(d.liveQP, q.qpid)
	d.rmu.Unlock()
}

func (d *driver) DestroyCQ(c *providertest.CQ) {
	q := c.Driver.(*mcq)
	delete(d.cqs, q.cqid)
	d.rmu.Lock()
	delete(d.liveCQ, q.cqid)
	d.rmu.Unlock()
}

// ring hears every MMIO store of the process and keeps those to a doorbell page of this
// NIC, with what the device reads when it is rung.
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
		db := doorbell{x: p.x, val: le.Uint32(e.Data[:4]), off: int(e.Addr - p.start), size: e.Len}
		if e.Len == 4 {
			switch db.off {
			case 0:
				if v := d.liveQP[db.val]; v != nil {
					db.live = true
					db.from = v.rung
					db.snap, db.bad = v.read()
				}
			case 64:
				if v := d.liveCQ[db.val]; v != nil {
					db.live, db.arm, db.written = true, load64(v.shadow, 32), v.cq.written.Load()
				}
			}
		}
		d.queue = append(d.queue, db)
		return
	}
}

// read reads the WQEs from where the doorbells have read to, as long as their valid bits
// say they are this lap's, and returns their quanta (what the device fetched).
func (v *sqView) read() (snap []byte, bad string) {
	for n := uint32(0); n < v.size; {
		q := v.buf[v.rung*quantum : (v.rung+1)*quantum]
		hdr := load64(q, 24)
		if hdr>>63 != v.valid {
			break
		}
		k := wqeQuanta(hdr)
		if v.rung%sqChunk+k > sqChunk {
			return snap, fmt.Sprintf("a WQE of %d quanta at quantum %d crosses an %d-quanta chunk", k, v.rung, sqChunk)
		}
		snap = append(snap, v.buf[v.rung*quantum:(v.rung+k)*quantum]...)
		n += k
		if v.rung = (v.rung + k) % v.size; v.rung == 0 {
			v.valid ^= 1
		}
	}
	return snap, ""
}

// WQE header fields.
const (
	hdrOpShift     = 32
	hdrAddlShift   = 38
	hdrImm         = 1 << 47
	hdrInlineLenSh = 48
	hdrInline      = 1 << 57
	hdrSignaled    = 1 << 62

	opWrite    = 0x00
	opRead     = 0x01
	opSend     = 0x03
	opSendSol  = 0x05
	opNOP      = 0x0c
	opWriteSol = 0x0d
)

// wqeQuanta is how many quanta the WQE with header hdr takes: by its inline length, or
// by its fragment count (the first fragment in quantum 0, two in each further one).
func wqeQuanta(hdr uint64) uint32 {
	if hdr>>hdrOpShift&0x3f == opNOP {
		return 1
	}
	if hdr&hdrInline != 0 {
		n := uint32(hdr >> hdrInlineLenSh & 0xff)
		if n <= 8 {
			return 1
		}
		return min(2+(n-9)/31, 8)
	}
	addl := uint32(hdr >> hdrAddlShift & 0xf)
	return (addl+1)/2 + 1
}

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

// doorbell acts on one doorbell: a QP's id at offset 0 (its send queue's new WQEs), or a
// CQ's id at offset 64 (the arm request in its shadow area).
func (d *driver) doorbell(k *providertest.Kernel, db doorbell) {
	if db.size != 4 || db.off != 0 && db.off != 64 {
		k.Fail("a %d-byte store at doorbell page +%#x; the device takes 4-byte doorbells at +0 (QP) and +64 (CQ)", db.size, db.off)
		return
	}
	switch db.off {
	case 0:
		q := d.qps[db.val]
		if q == nil || q.x != db.x {
			if q != nil || !db.live {
				k.Fail("doorbell for unknown QP %#x", db.val)
			}
			return
		}
		if db.bad != "" {
			k.Fail("QP %#x: %s", q.qpid, db.bad)
		}
		for i := 0; i < len(db.snap); i += quantum {
			s := (db.from + uint32(i/quantum)) % q.sqSize
			copy(q.sq[s*quantum:(s+1)*quantum], db.snap[i:i+quantum])
		}
		q.sqTo = (db.from + uint32(len(db.snap)/quantum)) % q.sqSize
		k.Count().Doorbells++
	case 64:
		c := d.cqs[db.val]
		if c == nil {
			if !db.live {
				k.Fail("CQ doorbell for unknown CQ %#x", db.val)
			}
			return
		}
		seq := db.arm >> 16 & 3
		if c.armed && seq == c.lastSeq {
			k.Fail("CQ %#x: arm doorbell with the arm sequence number unchanged (%d): the device ignores it", c.cqid, seq)
			return
		}
		if db.arm&(1<<14|1<<15) == 0 {
			k.Fail("CQ %#x: arm doorbell without a request in the shadow area (%#x)", c.cqid, db.arm)
			return
		}
		c.armed, c.lastSeq = true, seq
		// The arm took effect when it was rung: CQEs written since then (before the
		// engine got to the doorbell) raise the event now.
		k.ArmCQ(c.cq, c.written.Load() != db.written)
	}
}

var wrOps = map[uint8]uverbs.WROpcode{opWrite: uverbs.WRRDMAWrite, opWriteSol: uverbs.WRRDMAWrite, opRead: uverbs.WRRDMARead,
	opSend: uverbs.WRSend, opSendSol: uverbs.WRSend}

// fragments reads the SGEs of a WQE whose slots (16 bytes: the first at byte 0, then
// from byte 32 on) hold them, from slot first; each must carry the lap's valid bit. An
// empty fragment (the one that evens the count) is no SGE.
func fragments(w []byte, first, addl uint32, valid uint64) ([]uverbs.SGE, string) {
	var s []uverbs.SGE
	for k := first; k <= addl; k++ {
		off := 0
		if k > 0 {
			off = 16 + 16*int(k)
		}
		a, w1 := le.Uint64(w[off:]), le.Uint64(w[off+8:])
		if w1>>63 != valid {
			return s, fmt.Sprintf("fragment %d without the valid bit (%#x)", k, w1)
		}
		g := uverbs.SGE{Addr: a, Length: uint32(w1>>32) & 0x7fffffff, LKey: uint32(w1)}
		if g.Addr == 0 && g.Length == 0 && g.LKey == 0 && k == addl {
			continue
		}
		s = append(s, g)
	}
	return s, ""
}

// NextSend takes the next rung send WQE (NOPs skipped): its opcode, flags, the RDMA
// address and key, and the SGEs or the inline data.
func (d *driver) NextSend(p *providertest.QP) (providertest.SendWR, bool) {
	q := p.Driver.(*mqp)
	for q.sqCI != q.sqTo {
		idx := q.sqCI
		hdr := le.Uint64(q.sq[idx*quantum+24:])
		n := wqeQuanta(hdr)
		q.sqCI = (q.sqCI + n) % q.sqSize
		if q.sqCI < idx || q.sqCI == 0 {
			d.k.Count().SQLaps++
		}
		op := uint8(hdr >> hdrOpShift & 0x3f)
		if op == opNOP {
			continue
		}
		w := q.sq[idx*quantum : (idx+n)*quantum]
		valid := hdr >> 63
		wr := providertest.SendWR{Signaled: hdr&hdrSignaled != 0, Slot: idx}
		var known bool
		if wr.Opcode, known = wrOps[op]; !known {
			d.k.Fail("QP %#x: send WQE opcode %#x at quantum %d", p.QPN, op, idx)
			wr.Opcode = 0xff
		}
		q.ops[idx] = op
		imm := hdr&hdrImm != 0
		if imm {
			if wr.Opcode == uverbs.WRSend {
				wr.Opcode = uverbs.WRSendWithImm
			} else if wr.Opcode == uverbs.WRRDMAWrite {
				wr.Opcode = uverbs.WRRDMAWriteWithImm
			}
			wr.Imm = swap32(uint32(le.Uint64(w[0:]))) // host order in the WQE; the kernel carries it in network order
		}
		if op != opSend && op != opSendSol {
			wr.RemoteAddr, wr.RKey = le.Uint64(w[16:]), uint32(hdr)
		}
		if hdr&hdrInline != 0 {
			length := uint32(hdr >> hdrInlineLenSh & 0xff)
			wr.Inline = make([]byte, 0, length)
			for i := uint32(0); i < length; i++ {
				var off uint32
				if i < 8 {
					off = 8 + i
				} else {
					j := i - 8
					off = 32*(1+j/31) + j%31
				}
				wr.Inline = append(wr.Inline, w[off])
			}
			for k := uint32(1); k < n; k++ {
				if uint64(w[32*k+31]>>7) != valid {
					d.k.Fail("QP %#x: inline WQE at quantum %d: quantum %d without the valid bit", p.QPN, idx, k)
				}
			}
		} else {
			first := uint32(0)
			if imm {
				first = 1
			}
			var bad string
			if wr.SGE, bad = fragments(w, first, uint32(hdr>>hdrAddlShift&0xf), valid); bad != "" {
				d.k.Fail("QP %#x: send WQE at quantum %d: %s", p.QPN, idx, bad)
			}
		}
		return wr, true
	}
	return providertest.SendWR{}, false
}

// NextRecv takes the receive WQE at the queue's head if its valid bit says the provider
// posted it (the device reads receive queues on demand, without doorbells).
func (d *driver) NextRecv(p *providertest.QP) (providertest.RecvWR, bool) {
	q := p.Driver.(*mqp)
	w := q.rq[q.rqCI*q.rqMult*quantum : (q.rqCI+1)*q.rqMult*quantum]
	hdr := load64(w, 24)
	if hdr>>63 != q.rqValid {
		return providertest.RecvWR{}, false
	}
	wr := providertest.RecvWR{Slot: q.rqCI * q.rqMult}
	var bad string
	if wr.SGE, bad = fragments(w, 0, uint32(hdr>>hdrAddlShift&0xf), q.rqValid); bad != "" {
		d.k.Fail("QP %#x: receive WQE %d: %s", p.QPN, q.rqCI, bad)
	}
	if q.rqCI = (q.rqCI + 1) % q.rqSize; q.rqCI == 0 {
		q.rqValid ^= 1
		d.k.Count().RQLaps++
	}
	return wr, true
}

func swap32(v uint32) uint32 { return v>>24 | v>>8&0xff00 | v<<8&0xff0000 | v<<24 }

// Flush minor codes by status (the provider maps them back); a status it has no code for
// is FATAL.
var flushCode = map[uverbs.WCStatus]uint64{uverbs.WCWRFlushErr: 1, uverbs.WCLocProtErr: 2, uverbs.WCRemAccessErr: 3,
	uverbs.WCLocQPOpErr: 4, uverbs.WCRemOpErr: 5, uverbs.WCLocLenErr: 6, uverbs.WCFatalErr: 7, uverbs.WCRetryExcErr: 8,
	uverbs.WCMWBindErr: 9, uverbs.WCRemInvReqErr: 10}

// IB opcodes of a receive's CQE.
const (
	ibSendOnly        = 0x04
	ibSendOnlyImm     = 0x05
	ibWriteOnlyImm    = 0x0b
	cqeSQ             = 1 << 62
	cqeError          = 1 << 55
	cqeExt            = 1 << 50
	cqeStag           = 1 << 53
	majorFlush        = 1
	extImmValid       = 1 << 62
	shadowConsumerIdx = 0
)

// Complete writes one CQE (and, for immediate data, its extension in the next slot), the
// word with the valid bit last. An error is the queue's flush CQE, its minor code the
// status; the provider completes the queue's other work requests from that one CQE, so
// the further flush completions are not written.
func (d *driver) Complete(c *providertest.CQ, e providertest.Completion) bool {
	m := c.Driver.(*mcq)
	q := e.QP.Driver.(*mqp)
	flushed := &q.sqFlushed
	if e.Recv {
		flushed = &q.rqFlushed
	}
	if e.Status != uverbs.WCSuccess && *flushed {
		return true
	}
	ext := e.Flags&uverbs.WCFlagWithImm != 0
	slots := uint32(1)
	if ext {
		slots = 2
	}
	// The provider's consumer index (the shadow area) says how far it read; one slot
	// stays free, so a full ring is never taken for an empty one.
	if m.unread()+slots > m.size-1 {
		return false
	}
	w3 := uint64(e.Slot&0x7fff) << 32
	w0, w2 := uint64(0), uint64(q.qpid)<<32
	if e.Recv {
		w0 = uint64(e.ByteLen)
		op := uint64(ibSendOnly)
		switch {
		case e.Opcode == uverbs.WCRecvRDMAWithImm:
			op = ibWriteOnlyImm
		case ext:
			op = ibSendOnlyImm
		}
		w3 |= op << 56
		if e.Flags&uverbs.WCFlagWithInv != 0 {
			w3 |= cqeStag
			w2 |= uint64(e.Imm)
		}
	} else {
		w3 |= cqeSQ | uint64(q.ops[e.Slot%q.sqSize])<<56
	}
	if e.Status != uverbs.WCSuccess {
		code, ok := flushCode[e.Status]
		if !ok {
			code = 7
		}
		w3 |= cqeError | majorFlush<<16 | code
		*flushed = true
		w0 = 0
	}
	valid := func(n uint32) uint64 { return uint64(1 ^ (n/m.size)&1) }
	if ext {
		x := m.slot(m.pi + 1)
		le.PutUint64(x[0:], uint64(swap32(e.Imm)))
		clear(x[8:24])
		store64(x, 24, extImmValid|valid(m.pi+1)<<63)
		w3 |= cqeExt
	}
	b := m.slot(m.pi)
	le.PutUint64(b[0:], w0)
	le.PutUint64(b[8:], q.ctx)
	le.PutUint64(b[16:], w2)
	store64(b, 24, w3|valid(m.pi)<<63)
	for range slots {
		if m.pi%m.size == m.size-1 {
			d.k.Count().CQLaps++
		}
		m.pi++
	}
	m.written.Store(m.pi)
	return true
}

// unread is how many CQE slots the provider has not read, by the consumer index it
// writes to the shadow area (one slot always stays free, so this is exact).
func (m *mcq) unread() uint32 {
	head := uint32(load64(m.shadow, shadowConsumerIdx)) % m.size
	return (m.pi%m.size + m.size - head) % m.size
}

func (m *mcq) slot(n uint32) []byte {
	s := n % m.size
	return m.buf[s*cqeSize : (s+1)*cqeSize]
}

// Armed: the arm doorbell arms the CQ (Kernel.ArmCQ).
func (d *driver) Armed(*providertest.CQ) bool { return false }
