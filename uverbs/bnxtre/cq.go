package bnxtre

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gorping/gorping/internal/mmio"
	"github.com/gorping/gorping/internal/umem"
	"github.com/gorping/gorping/internal/wire"
	"github.com/gorping/gorping/uverbs/driver"
	"github.com/gorping/gorping/uverbs/providerkit"
	"golang.org/x/sys/unix"
)

var le = binary.LittleEndian

// PrepareCQ allocates the CQE ring: the next power of two above the depth asked for (at
// most the device's), zeroed, whose CQEs the device writes with the phase bit of the lap.
func (c *context) PrepareCQ(req *driver.CQRequest) (driver.PendingCQ, error) {
	maxCQD := int(c.resp.MaxCqd)
	if req.CQE < 1 || req.CQE > maxCQD {
		return nil, fmt.Errorf("bnxt_re: CQ depth %d out of range (1..%d): %w", req.CQE, maxCQD, unix.EINVAL)
	}
	if req.Flags&driver.CQTimestamps != 0 {
		return nil, fmt.Errorf("bnxt_re: completion timestamps are not supported by gorping's bnxt_re provider: %w", unix.EOPNOTSUPP)
	}
	depth := min(roundupPow2(uint32(req.CQE)+1), uint32(maxCQD)+1)
	mem, err := umem.Anon(providerkit.Align(int(depth)*int(c.resp.CQESz), c.pgSize))
	if err != nil {
		return nil, fmt.Errorf("bnxt_re: CQ buffer: %w", err)
	}
	p := &pendingCQ{c: c, mem: mem, depth: depth}
	// The kernel does not use cq_handle for a user CQ; it only has to be unique.
	p.req = cqReq{CQVa: mem.Addr(), CQHandle: mem.Addr()}
	return p, nil
}

type pendingCQ struct {
	c     *context
	mem   *umem.Mem
	depth uint32
	req   cqReq
}

func (p *pendingCQ) Udata() ([]byte, int) { return wire.Bytes(&p.req), cqRespLen }

func (p *pendingCQ) Abort() { p.mem.Free() }

func (p *pendingCQ) Commit(cmd driver.Commander, core driver.CQCore, resp []byte) (driver.CQ, error) {
	if err := providerkit.ShortResp("bnxt_re", "CREATE_CQ", len(resp), cqRespLen); err != nil {
		p.Abort()
		return nil, err
	}
	var r cqResp
	wire.Decode(&r, resp)
	if r.Phase > 1 {
		p.Abort()
		return nil, fmt.Errorf("bnxt_re: kernel gave the CQ phase %d", r.Phase)
	}
	return &cq{c: p.c, mem: p.mem, buf: p.mem.Bytes(), depth: p.depth, cqid: r.Cqid, phase: uint32(r.Phase), firstArm: true}, nil
}

// cq is a bnxt_re completion queue: the CQE ring, its consumer index and phase, the arm
// state, and the flush lists of its QPs in error.
type cq struct {
	c     *context
	mem   *umem.Mem
	mu    sync.Mutex
	buf   []byte
	depth uint32
	head  uint32
	phase uint32 // the phase bit of valid CQEs in this lap
	cqid  uint32
	db    uint64 // the doorbell, staged 8-byte aligned

	// libbnxt_re arms the CQ at the first request, and after that rings the arm
	// doorbell at the end of the next poll (with the consumer index it then has).
	firstArm    bool
	deferredArm bool
	armType     uint32

	// QPs whose send or receive queue this CQ flushes (under c.flushMu).
	sflush, rflush []*qp
	lastErr        string
}

// Error statuses as rdma-core maps them (bnxt_re_to_ibv_wc_status).
var reqStatus = [...]driver.WCStatus{reqBadResp: driver.WCBadRespErr, reqLocLen: driver.WCLocLenErr, reqLocQPOp: driver.WCLocQPOpErr,
	reqProt: driver.WCLocProtErr, reqMemOp: driver.WCMWBindErr, reqRemInval: driver.WCRemInvReqErr, reqRemAcc: driver.WCRemAccessErr,
	reqRemOp: driver.WCRemOpErr, reqRNRNakXced: driver.WCRNRRetryExcErr, reqTrnspXced: driver.WCRetryExcErr, reqWRFlush: driver.WCWRFlushErr}

var rspStatus = [...]driver.WCStatus{rspLocAcc: driver.WCLocAccessErr, rspLocLen: driver.WCLocLenErr, rspLocProt: driver.WCLocProtErr,
	rspLocQPOp: driver.WCLocQPOpErr, rspMemOp: driver.WCMWBindErr, rspRemInval: driver.WCRemInvReqErr, rspWRFlush: driver.WCWRFlushErr,
	rspHWFlush: driver.WCFatalErr}

func wcStatus(st uint32, req bool) driver.WCStatus {
	t := rspStatus[:]
	if req {
		t = reqStatus[:]
	}
	if st == 0 || int(st) >= len(t) {
		return driver.WCGeneralErr
	}
	return t[st]
}

// word is the CQE's flg_st_typ_ph, loaded atomically: the device writes it last, and the
// load orders the reads of the body that follow (FromDevice against DMA).
func word(cqe []byte) uint32 {
	return atomic.LoadUint32((*uint32)(unsafe.Pointer(&cqe[cqeFlgStTypPh])))
}

// Poll returns up to len(wc) completions: the device's CQEs first, then the flush
// completions of the QPs in error. It allocates nothing.
func (q *cq) Poll(wc []driver.WC) (int, error) {
	q.mu.Lock()
	if q.buf == nil {
		q.mu.Unlock()
		return 0, driver.ErrClosed
	}
	n := q.pollHW(wc)
	if q.deferredArm {
		q.c.doorbell(&q.db, q.head, q.cqid, q.armType)
		q.deferredArm = false
	}
	q.mu.Unlock()
	if n < len(wc) {
		q.c.flushMu.Lock()
		n += q.pollFlush(wc[n:])
		q.c.flushMu.Unlock()
	}
	return n, nil
}

// pollHW reads the CQEs of the current phase, as libbnxt_re's bnxt_re_poll_one: a send
// CQE completes every WQE up to its con_indx (one at a time, the CQE read again for each),
// then the consumer index moves on and the qp_handle is cleared (the CQE is read); the CQ
// doorbell tells the device how far it was read. q.mu held.
func (q *cq) pollHW(wc []driver.WC) int {
	n, polled := 0, 0
	// At most one lap of CQEs per poll: CQEs that all look valid but complete nothing
	// (a device that got the phase wrong) must not keep the poller in here for ever. (A
	// send CQE read again for each WQE it completes moves through the software entries,
	// which its con_indx, masked to them, ends.)
	for n < len(wc) && polled < int(q.depth) {
		cqe := q.buf[int(q.head)*cqeSize : int(q.head+1)*cqeSize]
		w := word(cqe)
		// The barrier comes after every look at the phase, as libbnxt_re's
		// bnxt_re_is_cqe_valid has it: before the body of a valid CQE is read.
		mmio.FromDevice()
		if w&1 != q.phase {
			break
		}
		handleOff, more, got := -1, false, false
		switch (w >> 1) & 0xf {
		case cqeTypeSend:
			handleOff = cqeQPHandleReq
			if qp := q.c.qps.Get(le.Uint64(cqe[handleOff:])); qp != nil {
				var failed bool
				more, got, failed = q.pollSend(qp, &wc[n], cqe, w)
				if failed {
					q.c.flushMu.Lock()
					q.addFlush(qp, true)
					q.c.flushMu.Unlock()
				}
			}
		case cqeTypeRecvRC, cqeTypeRecvUD:
			handleOff = cqeQPHandleResp
			if qp := q.c.qps.Get(le.Uint64(cqe[handleOff:])); qp != nil {
				var failed bool
				got, failed = q.pollRecv(qp, &wc[n], cqe, w)
				if failed {
					q.c.flushMu.Lock()
					q.addFlush(qp, false)
					q.c.flushMu.Unlock()
				}
			}
		case cqeTypeTerm:
			handleOff = cqeQPHandleReq
			if qp := q.c.qps.Get(le.Uint64(cqe[handleOff:])); qp != nil {
				qp.state.Store(uint32(driver.QPSErr))
				q.c.flushMu.Lock()
				qp.rcq.addFlush(qp, false)
				qp.scq.addFlush(qp, true)
				q.c.flushMu.Unlock()
			}
		}
		if !more {
			polled++
			if handleOff >= 0 {
				*(*uint64)(unsafe.Pointer(&cqe[handleOff])) = 0 // read
			}
			if q.head++; q.head == q.depth {
				q.head, q.phase = 0, q.phase^1
			}
		}
		if got {
			n++
		}
	}
	if polled > 0 {
		q.c.doorbell(&q.db, q.head, q.cqid, dbTypeCQ)
	}
	return n
}

// pollSend completes the send WQE at the head of qp's queue; more: the CQE completes
// further ones (it is read again); got: it made a completion (unsignaled ones make none);
// failed: an error completion, after which the QP's queues are flushed.
func (q *cq) pollSend(qp *qp, wc *driver.WC, cqe []byte, w uint32) (more, got, failed bool) {
	sq := qp.sq
	sq.mu.Lock()
	defer sq.mu.Unlock()
	e := &sq.swque[sq.lastIdx]
	st := (w >> 8) & 0xff
	if st != reqOK {
		*wc = driver.WC{WRID: e.wrid, Status: wcStatus(st, true), Opcode: e.wcOpcode, QPNum: qp.qpn}
		sq.head = (sq.head + uint32(e.slots)) % sq.depth
		sq.lastIdx = (sq.lastIdx + 1) % sq.nwr
		qp.state.Store(uint32(driver.QPSErr))
		q.lastErr = fmt.Sprintf("send status %#x (%v) for wr %d", st, wc.Status, e.wrid)
		return false, true, true
	}
	cindx := le.Uint32(cqe[cqeConIndx:]) & (sq.nwr - 1)
	if e.sig {
		*wc = driver.WC{WRID: e.wrid, Opcode: e.wcOpcode, QPNum: qp.qpn}
		if e.wcOpcode == driver.WCRDMARead {
			wc.ByteLen = e.bytes
		}
		got = true
	}
	sq.head = (sq.head + uint32(e.slots)) % sq.depth
	sq.lastIdx = (sq.lastIdx + 1) % sq.nwr
	return sq.lastIdx != cindx, got, false
}

// pollRecv completes the receive at the head of qp's queue (got); a flush the device
// reports (HW_FLUSH) makes none and leaves the receive for the flush list; failed: an
// error completion.
func (q *cq) pollRecv(qp *qp, wc *driver.WC, cqe []byte, w uint32) (got, failed bool) {
	rq := qp.rq
	rq.mu.Lock()
	defer rq.mu.Unlock()
	e := &rq.swque[rq.lastIdx]
	st := (w >> 8) & 0xff
	if st != rspOK {
		if st == rspHWFlush {
			return false, false
		}
		*wc = driver.WC{WRID: e.wrid, Status: wcStatus(st, false), Opcode: driver.WCRecv, QPNum: qp.qpn}
		rq.lastIdx = (rq.lastIdx + 1) % rq.nwr
		rq.head = (rq.head + uint32(e.slots)) % rq.depth
		q.lastErr = fmt.Sprintf("receive status %#x (%v) for wr %d", st, wc.Status, e.wrid)
		return true, true
	}
	*wc = driver.WC{WRID: e.wrid, Opcode: driver.WCRecv, ByteLen: le.Uint32(cqe[cqeLength:]), QPNum: qp.qpn}
	if flags := w >> 16; flags&rcFlagImm != 0 {
		wc.Flags = driver.WCFlagWithImm
		// The CQE has the immediate in host order; WC.Imm is in network order in memory.
		wc.Imm = bits.ReverseBytes32(le.Uint32(cqe[cqeImmKey:]))
		if flags&rcFlagRDMA != 0 {
			wc.Opcode = driver.WCRecvRDMAWithImm
		}
	}
	rq.lastIdx = (rq.lastIdx + 1) % rq.nwr
	rq.head = (rq.head + uint32(e.slots)) % rq.depth
	return true, false
}

// addFlush puts qp on the CQ's send or receive flush list, once (c.flushMu held).
func (q *cq) addFlush(qp *qp, send bool) {
	if q == nil {
		return
	}
	if send && !qp.inSFlush {
		qp.inSFlush = true
		q.sflush = append(q.sflush, qp)
	} else if !send && !qp.inRFlush {
		qp.inRFlush = true
		q.rflush = append(q.rflush, qp)
	}
}

// delFlush takes qp off both lists (c.flushMu held).
func (q *cq) delFlush(qp *qp) {
	if q == nil {
		return
	}
	q.sflush = remove(q.sflush, qp)
	q.rflush = remove(q.rflush, qp)
}

func remove(l []*qp, qp *qp) []*qp {
	for i, x := range l {
		if x == qp {
			return append(l[:i], l[i+1:]...)
		}
	}
	return l
}

// pollFlush completes the work requests left on the flush lists' QPs with WR_FLUSH_ERR,
// send queues first (c.flushMu held).
func (q *cq) pollFlush(wc []driver.WC) int {
	n := 0
	for _, qp := range q.sflush {
		if n == len(wc) {
			return n
		}
		n += qp.sq.flush(wc[n:], qp.qpn, true)
	}
	for _, qp := range q.rflush {
		if n == len(wc) {
			return n
		}
		n += qp.rq.flush(wc[n:], qp.qpn, false)
	}
	return n
}

// Arm requests an event for the next completion: the arm doorbell rings now the first
// time, and from then on at the end of each poll (libbnxt_re's deferred arm).
func (q *cq) Arm(solicitedOnly bool) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.buf == nil {
		return driver.ErrClosed
	}
	typ := uint32(dbTypeCQArmAll)
	if solicitedOnly {
		typ = dbTypeCQArmSE
	}
	if q.firstArm {
		q.c.doorbell(&q.db, q.head, q.cqid, typ)
		q.firstArm = false
	}
	q.deferredArm, q.armType = true, typ
	return nil
}

// clean forgets a destroyed QP's CQEs: their qp_handle is cleared, as a read CQE's is.
func (q *cq) clean(h uint64) {
	if q == nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for i := 0; i < int(q.depth); i++ {
		cqe := q.buf[i*cqeSize : (i+1)*cqeSize]
		off := cqeQPHandleResp
		switch (word(cqe) >> 1) & 0xf {
		case 0x0f: // COFF
			continue
		case cqeTypeSend, cqeTypeTerm:
			off = cqeQPHandleReq
		}
		if le.Uint64(cqe[off:]) == h {
			*(*uint64)(unsafe.Pointer(&cqe[off])) = 0
		}
	}
}

func (q *cq) Close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.buf == nil {
		return nil
	}
	q.buf = nil
	return q.mem.Free()
}

func (q *cq) Describe() string {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := fmt.Sprintf("bnxt_re CQ %d: %d CQEs of %d bytes at %#x, head %d, phase %d", q.cqid, q.depth, cqeSize, q.mem.Addr(), q.head, q.phase)
	if q.lastErr != "" {
		s += "; last error: " + q.lastErr
	}
	return s
}
