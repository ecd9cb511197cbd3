package mlx5model

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/gorping/gorping/internal/mmio"
	"github.com/gorping/gorping/test/providertest"
)

// Doorbells reach the model as they reach a device: as stores to the UAR pages. The
// provider's MMIO stores go through internal/mmio, whose recorder (built with -tags
// mmiorecord) calls ring for every one of them on the provider's goroutine. ring looks
// only at stores into this NIC's UAR pages, checks there and then what a device would
// check at that moment (the doorbell record already says what the doorbell rings), and
// queues the doorbell for the engine. Nothing else starts a send queue or arms a CQ: a
// provider that never rings is never served.

// ErrNoRecorder is returned by Available when the test binary cannot show the model its
// doorbells.
var ErrNoRecorder = errors.New("mlx5model: this test binary has no mmio recorder, so the model cannot see doorbells (build with -tags mmiorecord, as make unit does)")

// Available reports whether the model can run in this binary.
func Available() error {
	if !mmio.Recording {
		return ErrNoRecorder
	}
	return nil
}

// doorbell is one ring the engine has still to act on.
type doorbell struct {
	x     *mctx
	uar   int    // 4 KiB UAR within the context's static UARs (page·nupp + uar in page)
	off   int    // offset inside that UAR
	bytes []byte // the doorbell (8 bytes) or the whole BlueFlame copy (64·n bytes)
	bf    bool
	rec   uint32 // the doorbell record at the time of the ring (SQ: send counter, CQ: arm word)
	// live: the QP or CQ it names existed at the time of the ring. One destroyed before
	// the engine gets to the doorbell is no violation (teardown right after a post or an
	// arm); the doorbell then does nothing, as on a device.
	live bool
}

// uarRange is one UAR page of a context, for ring's address lookup.
type uarRange struct {
	start, end uintptr
	x          *mctx
	page       int
}

// ringState is what ring needs without taking the kernel's lock (the engine holds that
// for long).
type ringState struct {
	mu     sync.Mutex
	uars   []uarRange
	qps    map[uint32]*mqp // by QPN: live QPs (their dbrec pointers are fixed)
	cqs    map[uint32]*mcq // by CQN
	bfPart map[uintptr][]byte
	queue  []doorbell
	errs   []string // violations ring found, moved to the kernel's by the engine
}

func (d *driver) ring(e mmio.Event) {
	if e.Op != mmio.OpStore64 && e.Op != mmio.OpCopy64 {
		return
	}
	r := &d.rs
	r.mu.Lock()
	defer r.mu.Unlock()
	var u *uarRange
	for i := range r.uars {
		if e.Addr >= r.uars[i].start && e.Addr < r.uars[i].end {
			u = &r.uars[i]
			break
		}
	}
	if u == nil {
		return // not this NIC's
	}
	inPage := int(e.Addr - u.start)
	db := doorbell{x: u.x, uar: u.page*u.x.nupp + inPage/uarSize, off: inPage % uarSize}
	data := append([]byte(nil), e.Data[:e.Len]...)
	if db.off == cqDoorbell && e.Op == mmio.OpStore64 {
		if c := r.cqs[binary.BigEndian.Uint32(data[4:])]; c != nil && c.x == u.x {
			db.rec, db.live = beLoad(&c.db[1]), true
		}
		db.bytes = data
		r.queue = append(r.queue, db)
		return
	}
	if e.Op == mmio.OpStore64 {
		db.bytes = data
		db.rec, db.live = r.sqRecord(data)
		r.queue = append(r.queue, db)
		return
	}
	// BlueFlame: the chunks of one copy arrive one by one, ascending from the half's start.
	db.bf = true
	if first := d.cfg.BfRegSize == 0 || (db.off-bfOffset)%(d.cfg.BfRegSize/2) == 0; !first {
		part := r.bfPart[e.Addr-64]
		if part == nil {
			r.errs = append(r.errs, fmt.Sprintf("BlueFlame chunk at UAR %d +%#x continues no copy (bf_reg_size %d)", db.uar, db.off, d.cfg.BfRegSize))
			return
		}
		delete(r.bfPart, e.Addr-64)
		data = append(part, data...)
		db.off -= len(part)
	}
	ds := int(data[7] & 0x3f)
	if need := alignUp(ds*16, 64); len(data) < need {
		r.bfPart[e.Addr] = data // wait for the next chunk
		return
	}
	db.bytes = data
	db.rec, db.live = r.sqRecord(data)
	r.queue = append(r.queue, db)
}

// sqRecord returns the send doorbell record of the QP a doorbell names, and whether it
// is live (r.mu held).
func (r *ringState) sqRecord(ctrl []byte) (uint32, bool) {
	if q := r.qps[binary.BigEndian.Uint32(ctrl[4:])>>8]; q != nil {
		return beLoad(&q.db[1]), true
	}
	return 0, false
}

// doorbells acts on the queued doorbells (the kernel's lock held).
func (d *driver) doorbells(k *providertest.Kernel) bool {
	d.rs.mu.Lock()
	q := d.rs.queue
	d.rs.queue = nil
	for _, e := range d.rs.errs {
		k.Fail("%s", e)
	}
	d.rs.errs = nil
	d.rs.mu.Unlock()
	for _, db := range q {
		if db.off == cqDoorbell {
			d.armDoorbell(k, db)
		} else {
			d.sqDoorbell(k, db)
		}
	}
	return len(q) > 0
}

// armDoorbell arms the CQ the doorbell names: the arm word and CQN, checked against the
// CQ's arm record, which the provider writes before ringing. CQEs beyond the consumer
// index the arm names raise the event at once.
func (d *driver) armDoorbell(k *providertest.Kernel, db doorbell) {
	w, cqn := binary.BigEndian.Uint32(db.bytes), binary.BigEndian.Uint32(db.bytes[4:])
	if db.uar != 0 {
		k.Fail("CQ arm doorbell on UAR %d; the kernel put every CQ of the context on UAR 0", db.uar)
		return
	}
	d.rs.mu.Lock()
	c := d.rs.cqs[cqn]
	d.rs.mu.Unlock()
	if c == nil || c.x != db.x {
		if !db.live {
			k.Fail("arm doorbell for unknown CQ %#x", cqn)
		}
		return
	}
	if db.rec != w {
		k.Fail("CQ %#x arm doorbell %#08x, but its doorbell record says %#08x", cqn, w, db.rec)
		return
	}
	c.armCI = w & 0xffffff
	n := (c.pi - c.armCI) & 0xffffff
	k.ArmCQ(c.cq, n > 0 && n <= c.ncqe)
}

// sqDoorbell lets the named QP's send queue run up to the rung WQE, after checking the
// doorbell as a device would: the QP is on this bfreg, the bytes are the first 8 bytes of
// that WQE's control segment (BlueFlame: the whole WQE) as it lies in the send queue, and
// the doorbell record announces exactly the WQEs up to and including it.
func (d *driver) sqDoorbell(k *providertest.Kernel, db doorbell) {
	w0, w1 := binary.BigEndian.Uint32(db.bytes), binary.BigEndian.Uint32(db.bytes[4:])
	qpn, idx, ds := w1>>8, w0>>8&0xffff, int(w1&0x3f)
	p := k.QP(qpn)
	var q *mqp
	if p != nil {
		q = p.Driver.(*mqp)
	}
	if q == nil || q.x != db.x {
		if !db.live || q != nil {
			k.Fail("doorbell for unknown QP %#x (UAR %d +%#x)", qpn, db.uar, db.off)
		}
		return
	}
	kk := q.bfreg % 2
	reg := bfOffset + kk*d.cfg.BfRegSize
	if db.uar != q.bfreg/2 || (db.off != reg && db.off != reg+d.cfg.BfRegSize/2) {
		k.Fail("QP %#x rang UAR %d +%#x; its bfreg %d is UAR %d +%#x", qpn, db.uar, db.off, q.bfreg, q.bfreg/2, reg)
		return
	}
	if db.bf && (d.cfg.BfRegSize == 0 || q.bfreg == 0) {
		k.Fail("QP %#x: BlueFlame write on a bfreg without BlueFlame (bf_reg_size %d, bfreg %d)", qpn, d.cfg.BfRegSize, q.bfreg)
		return
	}
	blocks := uint32((ds*16 + 63) / 64)
	if db.rec != (idx+blocks)&0xffff {
		k.Fail("QP %#x: doorbell for WQE %d (%d blocks), but the doorbell record says %d", qpn, idx, blocks, db.rec)
		return
	}
	// The rung WQE must be in the queue as rung: the doorbell is its first 8 bytes, a
	// BlueFlame copy all of it (whole 64-byte blocks, wrapping at the SQ end).
	start := q.block(idx)
	for i := range db.bytes {
		if b := q.buf[q.sqAt(start, i)]; b != db.bytes[i] {
			kind := "doorbell"
			if db.bf {
				kind = "BlueFlame copy"
			}
			k.Fail("QP %#x: %s byte %d is %#02x, the WQE %d in the send queue has %#02x", qpn, kind, i, db.bytes[i], idx, b)
			return
		}
	}
	if db.bf {
		k.Count().BlueFlames++
	} else {
		k.Count().Doorbells++
	}
	q.rung = (idx + blocks) & 0xffff
}

// addUARs, setQP and setCQ keep ringState in step with the objects (under the kernel's
// lock).
func (d *driver) addUARs(x *mctx) {
	d.rs.mu.Lock()
	defer d.rs.mu.Unlock()
	for i, p := range x.uars {
		start := uintptrOf(p)
		d.rs.uars = append(d.rs.uars, uarRange{start: start, end: start + uintptr(len(p)), x: x, page: i})
	}
}

func (d *driver) setQP(q *mqp, live bool) {
	d.rs.mu.Lock()
	defer d.rs.mu.Unlock()
	if live {
		d.rs.qps[q.qpn] = q
	} else {
		delete(d.rs.qps, q.qpn)
	}
}

func (d *driver) setCQ(c *mcq, live bool) {
	d.rs.mu.Lock()
	defer d.rs.mu.Unlock()
	if live {
		d.rs.cqs[c.cqn] = c
	} else {
		delete(d.rs.cqs, c.cqn)
	}
}

func uintptrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }
