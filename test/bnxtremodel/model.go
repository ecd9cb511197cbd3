// Package bnxtremodel is a test-only model of a Broadcom NetXtreme-E/Thor adapter and
// its bnxt_re kernel driver, in process: bnxt_re's and the device's half of the
// provider's queues plugged into the fake uverbs kernel of test/providertest, which
// answers the core commands and executes the work between QPs. This package answers the
// driver data as the bnxt_re driver does (page and CQE size, chip, WQE mode; PD, CQ and
// QP ids; the shared page and the doorbell page through mmap), learns of doorbells from
// the provider's stores to the doorbell page (internal/mmio's recorder), reads the send
// and receive WQEs from the provider's rings of 16-byte slots, and writes 32-byte CQEs
// with the phase bit of the lap. The formats are written out here from the device's
// layout as the oracle confirmed it (test/bnxtreoracle), independently of the provider.
//
// It checks what a device would reject: a doorbell that is not one 8-byte store, one
// for a queue the context does not have or beyond the WQEs in the ring, a WQE header
// that is not one (opcode, size), an SGE list beyond its WQE, a PSN search entry that
// does not match its WQE, keys and access rights, CQ overrun. Violations are recorded
// (Errors).
package bnxtremodel

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
	Chip     uint16 // 0: 0x1750 (BCM57508, Thor); a gen P4 chip has 8-byte PSN entries
	Variable bool   // the WQE mode the kernel answers (else static 128-byte WQEs)
	PageSize int    // the kernel's page size (0: 4096)
	// Fail, if set, is asked before every command (its uverbs number, bit 31 for the
	// extended ones); an error fails the command with it.
	Fail func(cmd uint32) error
}

const (
	vendorID = 0x14e4
	maxCQD   = 0xffff
	maxSGE   = 6
	maxQPWR  = 0xffff
	driverID = 6 // RDMA_DRIVER_BNXT_RE
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
	if cfg.Chip == 0 {
		cfg.Chip = 0x1750
	}
	d := &driver{cfg: cfg, qps: map[uint32]*mqp{}, cqs: map[uint32]*mcq{}, liveQP: map[uint32]*rings{}, liveCQ: map[uint32]bool{}}
	m, err := providertest.StartModel(device, "bnxt_re0", d, d.ring, cfg.Fail)
	if err != nil {
		panic(fmt.Sprintf("bnxtremodel: %v", err))
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
	return uverbs.Device{Name: name, Index: 0, Uverbs: "uverbs0", Path: "/dev/infiniband/bnxtremodel-" + name,
		Driver: "bnxt_re", DriverID: driverID, ABI: 1, NodeGUID: 0x0a14e4fffe000001}
}

func (d *driver) genP5() bool {
	return d.cfg.Chip == 0x1750 || d.cfg.Chip == 0x1751 || d.cfg.Chip == 0x1752
}
func (d *driver) dbr() uint64           { return 0x40 * uint64(d.cfg.PageSize) }
func le32(b []byte, off int) uint32     { return binary.LittleEndian.Uint32(b[off:]) }
func le64(b []byte, off int) uint64     { return binary.LittleEndian.Uint64(b[off:]) }
func put32(b []byte, off int, v uint32) { binary.LittleEndian.PutUint32(b[off:], v) }
func put64(b []byte, off int, v uint64) { binary.LittleEndian.PutUint64(b[off:], v) }
func roundupPow2(n uint32) uint32 {
	r := uint32(2)
	for r < n {
		r <<= 1
	}
	return r
}

// driver is the bnxt_re kernel driver and the device (providertest.Driver and Engine).
type driver struct {
	cfg    Config
	k      *providertest.Kernel
	nextID uint32
	qps    map[uint32]*mqp // by qpid, for doorbells
	cqs    map[uint32]*mcq // by cqid

	// Doorbells from the recorder, which runs on the provider's goroutine without the
	// kernel's lock.
	rmu    sync.Mutex
	pages  []dbPage
	queue  []doorbell
	liveQP map[uint32]*rings // the queues that exist, as ring sees them
	liveCQ map[uint32]bool
}

// rings are a QP's send and receive rings as the doorbell sees them: the device reads
// the WQEs a doorbell announces when it is rung, so ring copies them then (a provider
// that rings before the WQE is in memory gets the stale slots executed).
type rings struct{ sq, rq ringView }

type ringView struct {
	buf, view       []byte
	depth, maxSlots uint32
	rung            uint32 // the slot after the last one rung
}

type dbPage struct {
	start, end uintptr
	x          *mctx
}

type doorbell struct {
	x    *mctx
	val  uint64
	off  int
	size int
	// live: the queue it names existed when it was rung. One destroyed before the
	// engine gets to the doorbell (teardown right after a poll) is no violation; the
	// doorbell then does nothing, as on a device.
	live bool
	from uint32 // a QP doorbell: the slots it announces, from here to its index
	snap []byte // and their content when it was rung
}

// mctx is one context: its shared page and doorbell page.
type mctx struct {
	shpg, db []byte
}

// mcq is a CQ as the device sees it: the ring in the provider's memory, where the next
// CQE goes, and how far the provider has read (its CQ doorbells).
type mcq struct {
	cq    *providertest.CQ
	cqid  uint32
	buf   []byte
	depth uint32
	pi    uint32 // CQEs written
	ci    uint32 // the consumer index the last CQ doorbell said (mod depth)
	laps  uint32 // of ci, to compare with pi
}

// mq is one work queue as the device sees it.
type mq struct {
	buf      []byte // the ring in the provider's memory
	view     []byte // the ring as the doorbells found it (what the device reads)
	depth    uint32 // slots
	esize    uint32 // bytes a WQE may take
	maxSlots uint32 // slots a doorbell index counts in
	ci       uint32 // next slot to execute
	pi       uint32 // slot the last doorbell announced
	nwr      uint32 // software entries (send queue: PSN search entries)
	seq      uint32 // WQEs executed
	static   bool
}

// mqp is a QP as the device sees it.
type mqp struct {
	qp       *providertest.QP
	qpid     uint32
	handle   uint64
	x        *mctx
	sq, rq   mq
	psn      []byte // the send queue's PSN search entries
	psnSize  int
	reported uint32 // the con_indx of the last send CQE written
}

func (d *driver) GetContext(c *providertest.Context, in, out []byte) error {
	if len(in) != 0 || len(out) < 48 {
		c.Kernel().Fail("GET_CONTEXT with %d/%d bytes of driver data; bnxt_re takes 0/48", len(in), len(out))
		return unix.EINVAL
	}
	x := &mctx{}
	var err error
	if x.shpg, err = anon(d.cfg.PageSize); err != nil {
		return err
	}
	if x.db, err = anon(d.cfg.PageSize); err != nil {
		return err
	}
	c.Driver = x
	d.rmu.Lock()
	start := uintptr(unsafe.Pointer(&x.db[0]))
	d.pages = append(d.pages, dbPage{start: start, end: start + uintptr(len(x.db)), x: x})
	d.rmu.Unlock()
	mode := uint32(0)
	if d.cfg.Variable {
		mode = 1
	}
	put32(out, 4, 0x10000)
	put32(out, 8, uint32(d.cfg.PageSize))
	put32(out, 12, 32)
	put32(out, 16, maxCQD)
	put64(out, 24, 3) // HAVE_CCTX | HAVE_MODE
	put32(out, 32, uint32(d.cfg.Chip)|1<<16)
	put32(out, 40, mode)
	return nil
}

func anon(n int) ([]byte, error) {
	return unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
}

func (d *driver) QueryDevice(r *kcmd.QueryDeviceResp) {
	r.VendorID, r.VendorPartID, r.MaxQP, r.MaxQPWR, r.MaxSGE, r.MaxSGERd, r.MaxCQE = vendorID, uint32(d.cfg.Chip), 0xffff, maxQPWR, maxSGE, maxSGE, maxCQD
	r.MaxQPRdAtom, r.MaxQPInitRdAtom = 126, 126
}

func (d *driver) QueryDeviceEx(*kcmd.ExQueryDeviceResp) {}

func (d *driver) QueryPort(_ uint8, r *kcmd.QueryPortResp) {
	r.GIDTblLen, r.MaxMTU, r.ActiveMTU, r.LinkLayer = 256, 5, 3, 2
}

// AllocPD: the PD id, the doorbell page's index and where it maps.
func (d *driver) AllocPD(_ *providertest.Context, h uint32, in, out []byte) error {
	if len(out) < 16 {
		return unix.EFAULT
	}
	put32(out, 0, h)
	put32(out, 4, 3)
	put64(out, 8, d.dbr())
	return nil
}

func (d *driver) RegMR(mr *providertest.MR, in, out []byte) error {
	mr.Key = mr.Handle<<8 | 0x01
	return nil
}

// Mmap: offset 0 is the shared page, the dbr offset the doorbell page, one page each.
func (d *driver) Mmap(c *providertest.Context, off int64, length, prot int) ([]byte, error) {
	x, _ := c.Driver.(*mctx)
	if x == nil || length != d.cfg.PageSize {
		c.Kernel().Fail("mmap offset %#x length %d: not one %d-byte page", off, length, d.cfg.PageSize)
		return nil, unix.EINVAL
	}
	switch uint64(off) {
	case 0:
		return x.shpg, nil
	case d.dbr():
		if prot&unix.PROT_WRITE == 0 {
			c.Kernel().Fail("doorbell page mapped without PROT_WRITE (%#x)", prot)
		}
		return x.db, nil
	}
	c.Kernel().Fail("mmap offset %#x: neither the shared page nor the doorbell page", off)
	return nil, unix.EINVAL
}

func (d *driver) CreateCQ(k *providertest.Kernel, c *providertest.CQ, in, out []byte) (int, error) {
	if len(in) < 16 || len(out) < 16 {
		k.Fail("CREATE_CQ with %d/%d bytes of driver data, bnxt_re takes 16/16", len(in), len(out))
		return 0, unix.EINVAL
	}
	if c.CQE < 1 || c.CQE > maxCQD {
		return 0, unix.EINVAL
	}
	depth := min(roundupPow2(uint32(c.CQE)+1), maxCQD+1)
	d.nextID++
	q := &mcq{cq: c, cqid: d.nextID | 0x100, buf: kcmd.Mem(le64(in, 0), int(depth)*32), depth: depth}
	c.Driver = q
	d.cqs[q.cqid] = q
	d.live(d.liveCQ, q.cqid, true)
	put32(out, 0, q.cqid)
	put32(out, 8, 1) // phase: the first lap's CQEs have phase 1
	return int(depth), nil
}

// CreateQP takes the queues the provider allocated and sizes them as the kernel does
// from the capabilities (the same rules the provider followed).
func (d *driver) CreateQP(k *providertest.Kernel, p *providertest.QP, in, out []byte) error {
	if len(in) < 24 || len(out) < 8 {
		k.Fail("CREATE_QP with %d/%d bytes of driver data, bnxt_re takes 24/8", len(in), len(out))
		return unix.EINVAL
	}
	if p.Type != 2 {
		return unix.EINVAL // RC only
	}
	c := p.Cap
	if c.MaxSendSGE > maxSGE || c.MaxRecvSGE > maxSGE || c.MaxInlineData > 0x60 {
		return unix.EINVAL
	}
	diff := uint32(128)
	if d.cfg.Variable {
		diff = 0
	}
	q := &mqp{qp: p, handle: le64(in, 16), x: p.Ctx.Driver.(*mctx), psnSize: 8}
	if d.genP5() {
		q.psnSize = 16
	}
	nsge := c.MaxSendSGE + c.MaxSendSGE%2
	esize := 16*nsge + 32
	if il := (c.MaxInlineData + 31) / 32 * 32; il != 0 {
		esize = (max(32+il, esize) + 31) / 32 * 32
	}
	q.sq = mq{nwr: roundupPow2(c.MaxSendWR + 1 + diff), esize: esize, maxSlots: 1, static: !d.cfg.Variable}
	if q.sq.static {
		q.sq.esize, q.sq.maxSlots = 128, 8
	}
	q.sq.depth = q.sq.nwr * q.sq.esize / 16
	psnBytes := int(q.sq.nwr) * q.psnSize
	sq := kcmd.Mem(le64(in, 0), int(q.sq.depth)*16+psnBytes)
	q.sq.buf, q.psn = sq[:q.sq.depth*16], sq[q.sq.depth*16:]
	rsge := c.MaxRecvSGE + c.MaxRecvSGE%2
	q.rq = mq{nwr: roundupPow2(c.MaxRecvWR + 1), esize: 16*rsge + 32, static: !d.cfg.Variable}
	if q.rq.static {
		q.rq.esize = 128
	}
	q.rq.maxSlots = q.rq.esize / 16
	q.rq.depth = q.rq.nwr * q.rq.esize / 16
	q.rq.buf = kcmd.Mem(le64(in, 8), int(q.rq.depth)*16)
	d.nextID++
	q.qpid = d.nextID | 0x400
	p.QPN, p.Driver = q.qpid, q
	d.qps[q.qpid] = q
	q.sq.view, q.rq.view = make([]byte, len(q.sq.buf)), make([]byte, len(q.rq.buf))
	d.rmu.Lock()
	d.liveQP[q.qpid] = &rings{sq: ringView{buf: q.sq.buf, depth: q.sq.depth, maxSlots: q.sq.maxSlots},
		rq: ringView{buf: q.rq.buf, depth: q.rq.depth, maxSlots: q.rq.maxSlots}}
	d.rmu.Unlock()
	put32(out, 0, q.qpid)
	return nil
}

func (d *driver) DestroyQP(p *providertest.QP) {
	delete(d.qps, p.Driver.(*mqp).qpid)
	d.rmu.Lock()
	delete(d.liveQP, p.Driver.(*mqp).qpid)
	d.rmu.Unlock()
}

func (d *driver) live(m map[uint32]bool, id uint32, on bool) {
	d.rmu.Lock()
	defer d.rmu.Unlock()
	if on {
		m[id] = true
	} else {
		delete(m, id)
	}
}

// ModifyQP: a QP reset to RESET starts its rings over (the software indices go on).
func (d *driver) ModifyQP(p *providertest.QP, req *kcmd.ModifyQP) {
	if req.AttrMask&1 != 0 && p.State == uverbs.QPSReset {
		q := p.Driver.(*mqp)
		q.sq.ci, q.sq.pi, q.rq.ci, q.rq.pi = 0, 0, 0, 0
		d.rmu.Lock()
		if r := d.liveQP[q.qpid]; r != nil {
			r.sq.rung, r.rq.rung = 0, 0
		}
		d.rmu.Unlock()
	}
}
func (d *driver) DestroyCQ(c *providertest.CQ) {
	delete(d.cqs, c.Driver.(*mcq).cqid)
	d.live(d.liveCQ, c.Driver.(*mcq).cqid, false)
}

// ring hears every MMIO store of the process and keeps the 8-byte ones to a doorbell
// page of this NIC.
func (d *driver) ring(e mmio.Event) {
	if e.Op != mmio.OpStore64 && e.Op != mmio.OpStore32 && e.Op != mmio.OpCopy64 {
		return
	}
	d.rmu.Lock()
	defer d.rmu.Unlock()
	for _, p := range d.pages {
		if e.Addr >= p.start && e.Addr < p.end {
			db := doorbell{x: p.x, val: binary.LittleEndian.Uint64(e.Data[:8]), off: int(e.Addr - p.start), size: e.Len}
			idx, qid, typ := uint32(db.val)&0xfffff, uint32(db.val>>32)&0xfffff, uint32(db.val>>60)
			db.live = typ <= 1 && d.liveQP[qid] != nil || typ >= 4 && d.liveCQ[qid]
			if r := d.liveQP[qid]; r != nil && typ <= 1 && e.Len == 8 {
				v := &r.sq
				if typ == 1 {
					v = &r.rq
				}
				to := idx * v.maxSlots
				if to < v.depth {
					db.from = v.rung
					for s := v.rung; s != to; s = (s + 1) % v.depth {
						db.snap = append(db.snap, v.buf[s*16:s*16+16]...)
					}
					v.rung = to
				}
			}
			d.queue = append(d.queue, db)
			return
		}
	}
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

// doorbell acts on one doorbell: its index (20 bits), queue id (20 bits) and type.
func (d *driver) doorbell(k *providertest.Kernel, db doorbell) {
	if db.size != 8 || db.off != 0 {
		k.Fail("a %d-byte store at doorbell page +%#x; the device takes 8-byte doorbells at +0", db.size, db.off)
		return
	}
	idx, qid, typ := uint32(db.val)&0xfffff, uint32(db.val>>32)&0xfffff, uint32(db.val>>60)
	switch typ {
	case 0, 1: // SQ, RQ
		q := d.qps[qid]
		if q == nil || q.x != db.x {
			if q != nil || !db.live {
				k.Fail("doorbell for unknown QP %#x (type %d)", qid, typ)
			}
			return
		}
		w := &q.sq
		if typ == 1 {
			w = &q.rq
		}
		if idx*w.maxSlots >= w.depth {
			k.Fail("QP %#x: %s doorbell index %d beyond the ring (%d slots of %d)", qid, [2]string{"send", "receive"}[typ], idx, w.depth/w.maxSlots, w.maxSlots)
			return
		}
		for i := 0; i < len(db.snap); i += 16 {
			s := (db.from + uint32(i/16)) % w.depth
			copy(w.view[s*16:s*16+16], db.snap[i:i+16])
		}
		w.pi = idx * w.maxSlots
		if typ == 0 {
			k.Count().Doorbells++
		}
	case 4, 5, 6: // CQ consumer index, arm solicited, arm all
		c := d.cqs[qid]
		if c == nil {
			if !db.live {
				k.Fail("CQ doorbell for unknown CQ %#x (type %d)", qid, typ)
			}
			return
		}
		if idx >= c.depth {
			k.Fail("CQ %#x: doorbell index %d beyond its %d CQEs", qid, idx, c.depth)
			return
		}
		if idx < c.ci {
			c.laps++
		}
		c.ci = idx
		if typ != 4 {
			read := c.laps*c.depth + c.ci
			k.ArmCQ(c.cq, c.pi != read)
		}
	default:
		k.Fail("doorbell type %d for queue %#x: not one the model knows", typ, qid)
	}
}

// slot is the 16-byte slot i (mod depth) of a queue, as its doorbell found it.
func (w *mq) slot(i uint32) []byte {
	s := i % w.depth
	return w.view[s*16 : s*16+16]
}

// pending is the number of slots between what ran and what was rung.
func (w *mq) pending() uint32 { return (w.pi + w.depth - w.ci%w.depth) % w.depth }

// take reads the WQE header at the queue's next slot and checks its size; it returns the
// slots the WQE takes (0: none rung).
func (d *driver) take(p *providertest.QP, w *mq, what string) (hdr []byte, ws, slots uint32, ok bool) {
	if w.pending() == 0 {
		return nil, 0, 0, false
	}
	hdr = w.slot(w.ci)
	ws = (le32(hdr, 0) >> 16) & 0xff
	slots = ws
	if w.static {
		slots = w.maxSlots
	}
	if ws < 2 || ws*16 > w.esize || slots > w.pending() {
		if p.State != uverbs.QPSErr {
			d.k.Fail("QP %#x: %s WQE at slot %d: size %d slots, the queue's WQEs take %d bytes, %d slots rung", p.QPN, what, w.ci%w.depth, ws, w.esize, w.pending())
			p.State = uverbs.QPSErr
		}
		w.ci = (w.ci + max(1, min(slots, w.pending()))) % w.depth
		return nil, 0, 0, false
	}
	return hdr, ws, slots, true
}

func (w *mq) advance(slots uint32, laps *int) {
	old := w.ci % w.depth
	w.ci = (w.ci + slots) % w.depth
	if w.ci < old || w.ci == 0 && slots > 0 {
		*laps++
	}
	w.seq++
}

var wrOpcodes = map[uint32]uverbs.WROpcode{0x00: uverbs.WRSend, 0x01: uverbs.WRSendWithImm, 0x04: uverbs.WRRDMAWrite,
	0x05: uverbs.WRRDMAWriteWithImm, 0x06: uverbs.WRRDMARead}

// wcOpcodes are the completion opcodes a PSN search entry names (libibverbs' ibv_wc_opcode).
var wcOpcodes = map[uverbs.WROpcode]uint32{uverbs.WRSend: 0, uverbs.WRSendWithImm: 0, uverbs.WRRDMAWrite: 1,
	uverbs.WRRDMAWriteWithImm: 1, uverbs.WRRDMARead: 2}

// NextSend takes the next rung send WQE: its header (opcode, flags, size), the RDMA
// address or the SEND's second slot, and the SGEs or the inline data; and checks its PSN
// search entry names the same operation.
func (d *driver) NextSend(p *providertest.QP) (providertest.SendWR, bool) {
	q := p.Driver.(*mqp)
	w := &q.sq
	hdr, ws, slots, ok := d.take(p, w, "send")
	if !ok {
		return providertest.SendWR{}, false
	}
	word := le32(hdr, 0)
	op, flags := word&0xff, word>>8&0xff
	wr := providertest.SendWR{Signaled: flags&0x01 != 0, Slot: (w.seq + 1) & 0xffff}
	var known bool
	if wr.Opcode, known = wrOpcodes[op]; !known {
		d.k.Fail("QP %#x: send WQE opcode %#x", p.QPN, op)
		wr.Opcode = 0xff
	}
	if wr.Opcode == uverbs.WRSendWithImm || wr.Opcode == uverbs.WRRDMAWriteWithImm {
		wr.Imm = swap32(le32(hdr, 4)) // host order in the WQE; the kernel carries it in network order
	}
	length := uint32(le64(hdr, 8))
	if op >= 0x04 {
		s := w.slot(w.ci + 1)
		wr.RemoteAddr, wr.RKey = le64(s, 0), le32(s, 8)
	}
	if flags&0x10 != 0 && wr.Opcode != uverbs.WRRDMARead {
		if length > (ws-2)*16 {
			d.k.Fail("QP %#x: %d bytes of inline data in a WQE of %d slots", p.QPN, length, ws)
			length = (ws - 2) * 16
		}
		wr.Inline = make([]byte, length)
		for i := uint32(0); i < length; i++ {
			wr.Inline[i] = w.slot(w.ci + 2 + i/16)[i%16]
		}
	} else {
		total := uint32(0)
		for i := uint32(0); i < ws-2; i++ {
			s := w.slot(w.ci + 2 + i)
			g := uverbs.SGE{Addr: le64(s, 0), LKey: le32(s, 8), Length: le32(s, 12)}
			wr.SGE = append(wr.SGE, g)
			total += g.Length
		}
		if total != length {
			d.k.Fail("QP %#x: send WQE length %d, its SGEs hold %d", p.QPN, length, total)
		}
	}
	if e := q.psn[int(w.seq%w.nwr)*q.psnSize:]; known && le32(e, 0)>>24 != wcOpcodes[wr.Opcode] {
		d.k.Fail("QP %#x: WQE %d is opcode %#x, its PSN search entry names completion opcode %d", p.QPN, w.seq, op, le32(e, 0)>>24)
	}
	w.advance(slots, &d.k.Count().SQLaps)
	return wr, true
}

// NextRecv takes the next rung receive WQE.
func (d *driver) NextRecv(p *providertest.QP) (providertest.RecvWR, bool) {
	q := p.Driver.(*mqp)
	w := &q.rq
	hdr, ws, _, ok := d.take(p, w, "receive")
	if !ok {
		return providertest.RecvWR{}, false
	}
	if op := le32(hdr, 0) & 0xff; op != 0x80 {
		d.k.Fail("QP %#x: receive WQE opcode %#x, want 0x80", p.QPN, op)
	}
	wr := providertest.RecvWR{Slot: le32(hdr, 8)}
	for i := uint32(0); i < ws-2; i++ {
		s := w.slot(w.ci + 2 + i)
		wr.SGE = append(wr.SGE, uverbs.SGE{Addr: le64(s, 0), LKey: le32(s, 8), Length: le32(s, 12)})
	}
	w.advance(w.maxSlots, &d.k.Count().RQLaps)
	return wr, true
}

func swap32(v uint32) uint32 { return v>>24 | v>>8&0xff00 | v<<8&0xff0000 | v<<24 }

// Status codes of the CQE (the device's).
var reqStatus = map[uverbs.WCStatus]uint32{uverbs.WCBadRespErr: 0x01, uverbs.WCLocLenErr: 0x02, uverbs.WCLocQPOpErr: 0x03,
	uverbs.WCLocProtErr: 0x04, uverbs.WCMWBindErr: 0x05, uverbs.WCRemInvReqErr: 0x06, uverbs.WCRemAccessErr: 0x07,
	uverbs.WCRemOpErr: 0x08, uverbs.WCRNRRetryExcErr: 0x09, uverbs.WCRetryExcErr: 0x0a, uverbs.WCWRFlushErr: 0x0b}

var rspStatus = map[uverbs.WCStatus]uint32{uverbs.WCLocAccessErr: 0x01, uverbs.WCLocLenErr: 0x02, uverbs.WCLocProtErr: 0x03,
	uverbs.WCLocQPOpErr: 0x04, uverbs.WCMWBindErr: 0x05, uverbs.WCRemInvReqErr: 0x06, uverbs.WCWRFlushErr: 0x07}

// Complete writes one 32-byte CQE, the word with the phase bit last. A send CQE carries
// the software index after the WQE it completes (and so completes the unsignaled ones
// before it too); an error after unsignaled WQEs nobody completed gets a CQE for those
// first. Flush completions are not the device's: libbnxt_re flushes in software.
func (d *driver) Complete(c *providertest.CQ, e providertest.Completion) bool {
	if e.Status == uverbs.WCWRFlushErr {
		return true
	}
	m := c.Driver.(*mcq)
	q := e.QP.Driver.(*mqp)
	if !e.Recv && e.Status != uverbs.WCSuccess && (e.Slot-1)&0xffff != q.reported {
		if !d.cqe(m, q, 0, e.Slot-1) {
			return false
		}
	}
	st := uint32(0)
	if e.Status != uverbs.WCSuccess {
		t := rspStatus
		if !e.Recv {
			t = reqStatus
		}
		if st = t[e.Status]; st == 0 {
			st = 0x3f // a status the provider does not know: GENERAL_ERR
		}
	}
	if st != 0 {
		// After an error the device reports the QP's end with a terminal CQE, on which
		// libbnxt_re flushes both of its queues.
		defer d.term(e.QP)
	}
	if !e.Recv {
		return d.cqe(m, q, st, e.Slot)
	}
	flags := uint32(0)
	switch {
	case e.Opcode == uverbs.WCRecvRDMAWithImm:
		flags = 0x02 | 0x08
	case e.Flags&uverbs.WCFlagWithImm != 0:
		flags = 0x02
	}
	return d.rcqe(m, q, st, e.ByteLen, swap32(e.Imm), flags)
}

// cqe writes a send CQE with status st completing up to con_indx idx.
func (d *driver) cqe(m *mcq, q *mqp, st, idx uint32) bool {
	b := d.next(m)
	if b == nil {
		return false
	}
	put64(b, 0, q.handle)
	put32(b, 8, idx)
	q.reported = idx & 0xffff
	d.publish(m, b, 0, st, 0)
	return true
}

// term writes the terminal CQE of a QP that went to error, to its receive CQ.
func (d *driver) term(p *providertest.QP) {
	m := p.RecvCQ.Driver.(*mcq)
	b := d.next(m)
	if b == nil {
		d.k.Fail("CQ %#x overrun by the terminal CQE of QP %#x", m.cqid, p.QPN)
		return
	}
	put64(b, 0, p.Driver.(*mqp).handle)
	d.publish(m, b, 0x0e, 0, 0)
}

// rcqe writes a receive CQE.
func (d *driver) rcqe(m *mcq, q *mqp, st, length, imm, flags uint32) bool {
	b := d.next(m)
	if b == nil {
		return false
	}
	put32(b, 0, length)
	put32(b, 4, imm)
	put64(b, 8, q.handle)
	d.publish(m, b, 1, st, flags)
	return true
}

// next is the CQE slot to write, cleared but for its word; nil if the provider has not
// read far enough (overrun).
func (d *driver) next(m *mcq) []byte {
	if m.pi-(m.laps*m.depth+m.ci) >= m.depth {
		return nil
	}
	s := m.pi % m.depth
	b := m.buf[s*32 : s*32+32]
	clear(b[:24])
	put32(b, 28, 0)
	return b
}

// publish writes the CQE's word (phase of the lap, type, status, flags) last.
func (d *driver) publish(m *mcq, b []byte, typ, st, flags uint32) {
	phase := uint32(1) ^ (m.pi/m.depth)&1
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&b[24])), phase|typ<<1|st<<8|flags<<16)
	if m.pi%m.depth == m.depth-1 {
		d.k.Count().CQLaps++
	}
	m.pi++
}

// Armed: the arm doorbell arms the CQ (Kernel.ArmCQ).
func (d *driver) Armed(*providertest.CQ) bool { return false }
