package bnxtre

import (
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/gorping/gorping/internal/umem"
	"github.com/gorping/gorping/internal/wire"
	"github.com/gorping/gorping/uverbs/driver"
	"github.com/gorping/gorping/uverbs/providerkit"
	"golang.org/x/sys/unix"
)

// Errors of the posting path are preallocated: posting must not allocate.
var (
	errState      = fmt.Errorf("bnxt_re: the QP is not in a state that takes this work request: %w", unix.EINVAL)
	errBadOpcode  = providerkit.ErrBadOpcode("bnxt_re")
	errTooManySGE = providerkit.ErrTooManySGE("bnxt_re", unix.ENOMEM)
	errInlineLen  = providerkit.ErrInlineLen("bnxt_re", unix.ENOMEM)
)

// queue is one work queue: a ring of 16-byte slots (head: the device's side, as the CQ
// tells it; tail: where the next WQE goes), and the software entries of its work
// requests (one per WQE, in posting order: startIdx is the next free, lastIdx the next
// to complete).
type queue struct {
	mu       sync.Mutex
	mem      *umem.Mem
	buf      []byte
	depth    uint32 // slots
	head     uint32
	tail     uint32
	diff     uint32 // slots the queue keeps free beyond the WQE being posted
	maxSlots uint32 // slots a doorbell index counts in
	swque    []swqe
	nwr      uint32
	startIdx uint32
	lastIdx  uint32
	db       uint64 // the doorbell, staged 8-byte aligned
	// send queues: the PSN search entries after the slots, one per software entry.
	psnOff, psnSize int
}

// swqe is libbnxt_re's struct bnxt_re_wrid: what a completion of the WQE reports.
type swqe struct {
	wrid     uint64
	bytes    uint32
	stSlot   uint32
	slots    uint8
	sig      bool
	wcOpcode driver.WCOpcode
}

// slot is the i-th slot from the queue's tail, wrapping at its end.
func (q *queue) slot(i uint32) []byte {
	s := (q.tail + i) % q.depth
	return q.buf[s*slotSize : (s+1)*slotSize]
}

// full is bnxt_re_is_que_full: fewer than slots+diff free between tail and head.
func (q *queue) full(slots uint32) bool {
	avail := int32(q.head) - int32(q.tail)
	if q.head <= q.tail {
		avail += int32(q.depth)
	}
	return avail <= int32(slots+q.diff)
}

// flush completes what is left on the queue with WR_FLUSH_ERR (the QP is in error).
func (q *queue) flush(wc []driver.WC, qpn uint32, send bool) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for n < len(wc) && q.head != q.tail {
		e := &q.swque[q.lastIdx]
		op := driver.WCRecv
		if send {
			op = e.wcOpcode
		}
		wc[n] = driver.WC{WRID: e.wrid, Status: driver.WCWRFlushErr, Opcode: op, QPNum: qpn}
		q.lastIdx = (q.lastIdx + 1) % q.nwr
		q.head = (q.head + uint32(e.slots)) % q.depth
		n++
	}
	return n
}

// wqeBytes is the size of a WQE for nsge SGEs (bnxt_re_calc_wqe_sz).
func wqeBytes(nsge uint32) uint32 { return slotSize*nsge + sqeHdrSize }

// sqGeometry sizes a send queue of nwr WQEs with nsge SGEs and ils bytes of inline data,
// as libbnxt_re's bnxt_re_get_sq_slots (and the kernel) do: the WQE size, the slots a
// doorbell counts in, the slots of the ring, and the inline room it leaves.
func sqGeometry(variable bool, nwr, nsge, ils, maxSGE uint32) (esize, maxSlots, slots, inline uint32, err error) {
	esize = wqeBytes(nsge)
	if ilsize := uint32(providerkit.Align(int(ils), sqeHdrSize)); ilsize != 0 {
		esize = uint32(providerkit.Align(int(max(sqeHdrSize+ilsize, esize)), sqeHdrSize))
	}
	if esize > wqeBytes(maxSGE) {
		return 0, 0, 0, 0, fmt.Errorf("bnxt_re: a send WQE of %d bytes is beyond the device's %d: %w", esize, wqeBytes(maxSGE), unix.EINVAL)
	}
	maxSlots = 1
	if !variable {
		esize, maxSlots = wqeBytes(staticSGE), wqeBytes(staticSGE)/slotSize
	}
	if ils != 0 {
		inline = esize - sqeHdrSize
	}
	return esize, maxSlots, nwr * esize / slotSize, inline, nil
}

// rqGeometry is the receive queue's: the WQE size and the ring's slots.
func rqGeometry(variable bool, nwr, nsge, maxSGE uint32) (esize, slots uint32, err error) {
	esize = slotSize*nsge + rqeHdrSize
	if esize > wqeBytes(maxSGE) {
		return 0, 0, fmt.Errorf("bnxt_re: a receive WQE of %d bytes is beyond the device's %d: %w", esize, wqeBytes(maxSGE), unix.EINVAL)
	}
	if !variable {
		esize = wqeBytes(staticSGE)
	}
	return esize, nwr * esize / slotSize, nil
}

func even(n uint32) uint32 { return n + n%2 }

// PrepareQP sizes the queues as libbnxt_re does, allocates them and reserves the handle
// the QP's CQEs will carry. It changes the request's max_inline_data to what the WQE
// size allows and clamps the WR counts to the device's, as libbnxt_re does.
func (c *context) PrepareQP(req *driver.QPRequest) (driver.PendingQP, error) {
	if req.Type != driver.QPTypeRC {
		return nil, fmt.Errorf("bnxt_re: QP type %d not supported by gorping (RC only): %w", req.Type, unix.EOPNOTSUPP)
	}
	cp := &req.Cap
	if cp.MaxSendSGE > c.maxSGE || cp.MaxRecvSGE > c.maxSGE || cp.MaxInlineData > maxInline {
		return nil, fmt.Errorf("bnxt_re: QP capabilities %+v beyond the device's (%d SGEs, %d bytes inline): %w", *cp, c.maxSGE, maxInline, unix.EINVAL)
	}
	cp.MaxSendWR, cp.MaxRecvWR = min(cp.MaxSendWR, c.maxQPWR), min(cp.MaxRecvWR, c.maxQPWR)
	p := &pendingQP{c: c, sigAll: req.SigAll}
	p.sendCQ, _ = req.SendCQ.(*cq)
	p.recvCQ, _ = req.RecvCQ.(*cq)

	diff := uint32(0)
	if !c.variable {
		diff = fullDelta
	}
	nswr := roundupPow2(cp.MaxSendWR + 1 + diff)
	esize, maxSlots, slots, inline, err := sqGeometry(c.variable, nswr, even(cp.MaxSendSGE), cp.MaxInlineData, c.maxSGE)
	if err != nil {
		return nil, err
	}
	cp.MaxInlineData = inline
	psnSz := psnSize
	if c.genP5() {
		psnSz = psnExtSize
	}
	psnSlots := (int(nswr)*psnSz + slotSize - 1) / slotSize
	p.sq, p.rq = &queue{}, &queue{}
	sq := p.sq
	sq.depth, sq.maxSlots, sq.diff, sq.nwr = slots, maxSlots, diff*esize/slotSize, nswr
	sq.psnOff, sq.psnSize = int(slots)*slotSize, psnSz
	if sq.mem, err = umem.Anon(providerkit.Align((int(slots)+psnSlots)*slotSize, c.pgSize)); err != nil {
		return nil, fmt.Errorf("bnxt_re: send queue: %w", err)
	}

	nrwr := roundupPow2(cp.MaxRecvWR + 1)
	resize, rslots, err := rqGeometry(c.variable, nrwr, even(cp.MaxRecvSGE), c.maxSGE)
	if err != nil {
		sq.mem.Free()
		return nil, err
	}
	rq := p.rq
	rq.depth, rq.maxSlots, rq.nwr = rslots, resize/slotSize, nrwr
	if rq.mem, err = umem.Anon(providerkit.Align(int(rslots)*slotSize, c.pgSize)); err != nil {
		sq.mem.Free()
		return nil, fmt.Errorf("bnxt_re: receive queue: %w", err)
	}
	p.handle = c.qps.Reserve()
	p.req = qpReq{Qpsva: sq.mem.Addr(), Qprva: rq.mem.Addr(), QPHandle: p.handle}
	return p, nil
}

type pendingQP struct {
	c              *context
	sq, rq         *queue
	handle         uint64
	sigAll         bool
	req            qpReq
	sendCQ, recvCQ *cq
}

func (p *pendingQP) Udata() ([]byte, int) { return wire.Bytes(&p.req), qpRespLen }

func (p *pendingQP) Abort() {
	p.sq.mem.Free()
	p.rq.mem.Free()
}

func (p *pendingQP) Commit(cmd driver.Commander, core *driver.QPCore, resp []byte) (driver.QP, error) {
	if err := providerkit.ShortResp("bnxt_re", "CREATE_QP", len(resp), qpRespLen); err != nil {
		p.Abort()
		return nil, err
	}
	var r qpResp
	wire.Decode(&r, resp)
	q := &qp{c: p.c, qpn: r.Qpid, handle: p.handle, sigAll: p.sigAll, scq: p.sendCQ, rcq: p.recvCQ,
		maxSSGE: core.Cap.MaxSendSGE, maxRSGE: core.Cap.MaxRecvSGE, maxInline: core.Cap.MaxInlineData, p5: p.c.genP5()}
	q.sq, q.rq = p.sq, p.rq
	for _, qu := range []*queue{q.sq, q.rq} {
		qu.buf = qu.mem.Bytes()
		qu.swque = make([]swqe, qu.nwr)
	}
	p.c.qps.Set(q.handle, q)
	return q, nil
}

// qp is a bnxt_re RC queue pair: its send and receive queues, the state libbnxt_re keeps
// of it (posting needs RTS), and the send PSN the next WQE starts at.
type qp struct {
	c        *context
	qpn      uint32
	handle   uint64
	sigAll   bool
	scq, rcq *cq
	sq, rq   *queue
	state    atomic.Uint32
	sqPSN    uint32 // under sq.mu
	mtu      uint32
	p5       bool

	maxSSGE, maxRSGE, maxInline uint32

	inSFlush, inRFlush bool // on its CQs' flush lists (c.flushMu)
	closed             bool
}

// Modified follows MODIFY_QP as libbnxt_re does: the state, a reset emptying the queues,
// and the send PSN and path MTU the PSN search entries are written from.
func (q *qp) Modified(attr *driver.QPAttr, mask driver.QPAttrMask) error {
	q.sq.mu.Lock()
	defer q.sq.mu.Unlock()
	if mask&driver.QPAttrState != 0 {
		q.state.Store(uint32(attr.State))
		if attr.State == driver.QPSReset {
			q.sq.head, q.sq.tail = 0, 0
			q.rq.mu.Lock()
			q.rq.head, q.rq.tail = 0, 0
			q.rq.mu.Unlock()
		}
	}
	if mask&driver.QPAttrSQPSN != 0 {
		q.sqPSN = attr.SQPSN
	}
	if mask&driver.QPAttrPathMTU != 0 {
		q.mtu = 0x80 << attr.PathMTU
	}
	return nil
}

// wrOpcode is the WQE opcode and the completion's opcode of a work request.
func wrOpcode(op driver.WROpcode) (uint32, driver.WCOpcode, bool) {
	switch op {
	case driver.WRSend:
		return opSend, driver.WCSend, true
	case driver.WRSendWithImm:
		return opSendImm, driver.WCSend, true
	case driver.WRRDMAWrite:
		return opRDMAWrite, driver.WCRDMAWrite, true
	case driver.WRRDMAWriteWithImm:
		return opRDMAWriteImm, driver.WCRDMAWrite, true
	case driver.WRRDMARead:
		return opRDMARead, driver.WCRDMARead, true
	}
	return 0, 0, false
}

// PostSend writes one send WQE, its software entry and its PSN search entry, and rings
// the send doorbell. It does not allocate.
func (q *qp) PostSend(wr *driver.SendWR) error {
	opcode, wcOp, ok := wrOpcode(wr.Opcode)
	if !ok {
		return errBadOpcode
	}
	nsge := uint32(len(wr.SGE))
	total := uint32(0)
	for i := range wr.SGE {
		total += wr.SGE[i].Length
	}
	var flags uint32
	if wr.Flags&driver.SendSignaled != 0 || q.sigAll {
		flags |= wrSignaled
	}
	if wr.Flags&driver.SendFence != 0 {
		flags |= wrUCFence
	}
	if wr.Flags&driver.SendSolicited != 0 {
		flags |= wrSE
	}
	inline := wr.Flags&driver.SendInline != 0
	size := wqeBytes(nsge)
	if inline {
		flags |= wrInline
		if total > q.maxInline {
			return errInlineLen
		}
		size = uint32(providerkit.Align(int(total), slotSize)) + sqeHdrSize
	}
	ws := size / slotSize
	sq := q.sq
	sq.mu.Lock()
	defer sq.mu.Unlock()
	if sq.buf == nil {
		return driver.ErrClosed
	}
	if st := driver.QPState(q.state.Load()); st != driver.QPSRTS && st != driver.QPSSQD {
		return errState
	}
	slots := ws
	if sq.maxSlots != 1 {
		slots = sq.maxSlots // a static-mode WQE takes all its slots
	}
	if sq.full(slots) {
		return driver.ErrQueueFull
	}
	if nsge > q.maxSSGE {
		return errTooManySGE
	}
	hdr := sq.slot(0)
	le.PutUint32(hdr[hdrWord:], opcode|flags<<8|(ws&0xff)<<16)
	if wr.Opcode == driver.WRSendWithImm || wr.Opcode == driver.WRRDMAWriteWithImm {
		// The immediate is given in network order; the device takes it in host order.
		le.PutUint32(hdr[hdrKeyImmd:], bits.ReverseBytes32(wr.Imm))
	}
	second := sq.slot(1)
	if opcode == opSend || opcode == opSendImm {
		clear(second)
	} else {
		le.PutUint64(second[rdmaVA:], wr.RemoteAddr)
		le.PutUint32(second[rdmaRKey:], wr.RKey)
	}
	if inline && opcode != opRDMARead {
		sq.putInline(wr.SGE)
	} else {
		for i := range wr.SGE {
			s := sq.slot(2 + uint32(i))
			le.PutUint64(s[0:], wr.SGE[i].Addr)
			le.PutUint32(s[8:], wr.SGE[i].LKey)
			le.PutUint32(s[12:], wr.SGE[i].Length)
		}
	}
	le.PutUint64(hdr[hdrLen:], uint64(total))
	e := &sq.swque[sq.startIdx]
	*e = swqe{wrid: wr.ID, bytes: total, stSlot: sq.tail, slots: uint8(slots), sig: flags&wrSignaled != 0, wcOpcode: wcOp}
	q.putPSN(sq.startIdx, wcOp, total, sq.tail)
	sq.startIdx = (sq.startIdx + 1) % sq.nwr
	sq.tail = (sq.tail + slots) % sq.depth
	q.c.doorbell(&sq.db, sq.tail/sq.maxSlots, q.qpn, dbTypeSQ)
	return nil
}

// putInline copies the SGEs' bytes into the slots from the third on, wrapping at the
// queue's end.
func (sq *queue) putInline(sges []driver.SGE) {
	s, off := uint32(2), 0
	dst := sq.slot(s)
	for i := range sges {
		src := providerkit.UserBytes(sges[i].Addr, sges[i].Length)
		for len(src) > 0 {
			if off == slotSize {
				s, off = s+1, 0
				dst = sq.slot(s)
			}
			n := copy(dst[off:], src)
			src, off = src[n:], off+n
		}
	}
}

// putPSN writes the PSN search entry of the WQE with software index i: its first PSN
// and opcode, the next WQE's PSN (one packet per path MTU of data, at least one), and on
// gen P5 the WQE's first slot.
func (q *qp) putPSN(i uint32, op driver.WCOpcode, n, stSlot uint32) {
	sq := q.sq
	pkts := uint32(1)
	if q.mtu != 0 && n != 0 {
		pkts = (n + q.mtu - 1) / q.mtu
	}
	next := (q.sqPSN + pkts) & 0xffffff
	e := sq.buf[sq.psnOff+int(i)*sq.psnSize:]
	le.PutUint32(e[0:], q.sqPSN&0xffffff|uint32(op)<<24)
	le.PutUint32(e[4:], next)
	if q.p5 {
		le.PutUint16(e[8:], uint16(stSlot))
	}
	q.sqPSN = next
}

// PostRecv writes one receive WQE and rings the receive doorbell. It does not allocate.
func (q *qp) PostRecv(wr *driver.RecvWR) error {
	rq := q.rq
	rq.mu.Lock()
	defer rq.mu.Unlock()
	if rq.buf == nil {
		return driver.ErrClosed
	}
	if st := driver.QPState(q.state.Load()); st == driver.QPSReset || st == driver.QPSErr {
		return errState
	}
	nsge := uint32(len(wr.SGE))
	if rq.full(rq.maxSlots) {
		return driver.ErrQueueFull
	}
	if nsge > q.maxRSGE {
		return errTooManySGE
	}
	ws := nsge + rqeHdrSize/slotSize
	if nsge == 0 {
		ws++ // the device wants room for one SGE
	}
	hdr := rq.slot(0)
	le.PutUint32(hdr[hdrWord:], opRecv|(ws&0xff)<<16)
	le.PutUint32(hdr[rqeWRID:], rq.startIdx)
	clear(rq.slot(1))
	total := uint32(0)
	for i := range wr.SGE {
		s := rq.slot(2 + uint32(i))
		le.PutUint64(s[0:], wr.SGE[i].Addr)
		le.PutUint32(s[8:], wr.SGE[i].LKey)
		le.PutUint32(s[12:], wr.SGE[i].Length)
		total += wr.SGE[i].Length
	}
	rq.swque[rq.startIdx] = swqe{wrid: wr.ID, bytes: total, stSlot: rq.tail, slots: uint8(rq.maxSlots)}
	rq.startIdx = (rq.startIdx + 1) % rq.nwr
	rq.tail = (rq.tail + rq.maxSlots) % rq.depth
	q.c.doorbell(&rq.db, rq.tail/rq.maxSlots, q.qpn, dbTypeRQ)
	return nil
}

// Close runs after DESTROY_QP: like libbnxt_re it clears the QP's handle from the CQEs
// left in its CQs (which then count as read) and takes it off their flush lists.
func (q *qp) Close() error {
	if q.closed {
		return nil
	}
	q.closed = true
	q.rcq.clean(q.handle)
	if q.scq != q.rcq {
		q.scq.clean(q.handle)
	}
	q.c.flushMu.Lock()
	q.rcq.delFlush(q)
	q.scq.delFlush(q)
	q.c.flushMu.Unlock()
	q.c.qps.Set(q.handle, nil)
	var errs []error
	for _, qu := range []*queue{q.sq, q.rq} {
		qu.mu.Lock()
		qu.buf = nil
		errs = append(errs, qu.mem.Free())
		qu.mu.Unlock()
	}
	return errors.Join(errs...)
}

func (q *qp) Describe() string {
	mode := "static"
	if q.sq.maxSlots == 1 {
		mode = "variable"
	}
	return fmt.Sprintf("bnxt_re QP %d handle %d: %s WQEs; SQ %d slots (%d WRs), RQ %d slots (%d WRs); max inline %d, SGEs %d/%d; doorbell page dpi %d",
		q.qpn, q.handle, mode, q.sq.depth, q.sq.nwr, q.rq.depth, q.rq.nwr, q.maxInline, q.maxSSGE, q.maxRSGE, q.c.dpi)
}
