package irdma

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"os"
	"sync"

	"github.com/gorping/gorping/internal/mmio"
	"github.com/gorping/gorping/internal/umem"
	"github.com/gorping/gorping/internal/wire"
	"github.com/gorping/gorping/uverbs/driver"
	"github.com/gorping/gorping/uverbs/providerkit"
	"golang.org/x/sys/unix"
)

var le = binary.LittleEndian

// cqEntries is libirdma's get_cq_size for GEN_2: the depth asked plus one, doubled (a
// completion with immediate takes two CQEs), at least four.
func cqEntries(cqe int) int { return max((cqe+1)*2, minCQSize) }

// PrepareCQ allocates the CQE ring (whole 4 KiB pages of 32-byte CQEs, zeroed: every
// valid bit clear, and a new CQ's CQEs are valid with 1) and its shadow area (after the
// ring, or a page of its own when the device can resize CQs), and registers both with the
// kernel on the context's PD (REG_MR type CQ) before CREATE_CQ, which names them.
func (c *context) PrepareCQ(req *driver.CQRequest) (driver.PendingCQ, error) {
	if req.CQE < 1 || req.CQE > int(c.attrs.MaxHwCQSize) {
		return nil, fmt.Errorf("irdma: CQ depth %d out of range (1..%d): %w", req.CQE, c.attrs.MaxHwCQSize, unix.EINVAL)
	}
	if req.Flags&driver.CQTimestamps != 0 {
		return nil, fmt.Errorf("irdma: completion timestamps are not supported by gorping's irdma provider: %w", unix.EOPNOTSUPP)
	}
	size := cqEntries(req.CQE)
	ringBytes := providerkit.Align(size*cqeSize, hwPage)
	total := ringBytes
	split := c.feature(featureCQResize)
	if !split {
		total += shadowAreaSize
	}
	p := &pendingCQ{c: c, size: uint32(size), ringBytes: ringBytes, split: split}
	var err error
	if p.mem, err = umem.Anon(providerkit.Align(total, os.Getpagesize())); err != nil {
		return nil, fmt.Errorf("irdma: CQ buffer: %w", err)
	}
	if p.mr, err = c.regMR(c.pdHandle, p.mem.Addr(), total, memRegReq{RegType: memregTypeCQ, CQPages: uint16(ringBytes / hwPage)}); err != nil {
		p.mem.Free()
		return nil, fmt.Errorf("irdma: register the CQ buffer: %w", err)
	}
	var shadow uint64
	if !split {
		shadow = p.mem.AddrAt(ringBytes)
	} else {
		if p.shadowMem, err = umem.Anon(os.Getpagesize()); err != nil {
			p.Abort()
			return nil, fmt.Errorf("irdma: CQ shadow area: %w", err)
		}
		if p.shadowMR, err = c.regMR(c.pdHandle, p.shadowMem.Addr(), shadowAreaSize, memRegReq{RegType: memregTypeCQ, CQPages: 1}); err != nil {
			p.shadowMem.Free()
			p.shadowMem = nil
			p.Abort()
			return nil, fmt.Errorf("irdma: register the CQ shadow area: %w", err)
		}
		shadow = p.shadowMem.Addr()
	}
	// The kernel is told the CQEs the ring has; the provider's CQ reports the depth the
	// kernel grants (libirdma reports the depth asked).
	req.CQE = size
	p.req = cqReq{UserCQBuf: p.mem.Addr(), UserShadowArea: shadow}
	return p, nil
}

type pendingCQ struct {
	c              *context
	mem, shadowMem *umem.Mem
	mr, shadowMR   uint32
	size           uint32
	ringBytes      int
	split          bool
	req            cqReq
}

func (p *pendingCQ) Udata() ([]byte, int) { return wire.Bytes(&p.req), cqRespLen }

// Abort deregisters and frees what PrepareCQ made (CREATE_CQ failed).
func (p *pendingCQ) Abort() {
	p.c.deregMR(p.mr)
	p.mem.Free()
	if p.shadowMem != nil {
		p.c.deregMR(p.shadowMR)
		p.shadowMem.Free()
	}
}

func (p *pendingCQ) Commit(cmd driver.Commander, core driver.CQCore, resp []byte) (driver.CQ, error) {
	if err := providerkit.ShortResp("irdma", "CREATE_CQ", len(resp), cqRespLen); err != nil {
		p.Abort()
		return nil, err
	}
	var r cqResp
	wire.Decode(&r, resp)
	q := &cq{c: p.c, mem: p.mem, shadowMem: p.shadowMem, mr: p.mr, shadowMR: p.shadowMR, size: p.size, cqid: r.CQID, polarity: 1}
	q.buf = p.mem.Bytes()[:int(p.size)*cqeSize]
	if p.split {
		q.shadow = p.shadowMem.Bytes()[:shadowAreaSize]
	} else {
		q.shadow = p.mem.Bytes()[p.ringBytes : p.ringBytes+shadowAreaSize]
	}
	return q, nil
}

// cq is an irdma completion queue: the CQE ring, its head and the valid bit of this lap,
// the shadow area, and libirdma's arm state.
type cq struct {
	c              *context
	mem, shadowMem *umem.Mem
	mr, shadowMR   uint32
	mu             sync.Mutex
	buf            []byte
	shadow         []byte
	size           uint32
	head           uint32
	polarity       uint64 // the valid bit of this lap's CQEs
	cqid           uint32
	db             uint32 // the arm doorbell, staged

	// libirdma's arm state: an arm while armed is deferred to the next completion event
	// (skipArm) unless it widens a solicited-only arm.
	isArmed, armSol, skipArm, skipSol bool

	lastErr string
}

// Error statuses of a flushed WQE by the minor code (irdma_flush_err_to_ib_wc_status).
var flushStatus = [...]driver.WCStatus{1: driver.WCWRFlushErr, 2: driver.WCLocProtErr, 3: driver.WCRemAccessErr,
	4: driver.WCLocQPOpErr, 5: driver.WCRemOpErr, 6: driver.WCLocLenErr, 7: driver.WCFatalErr, 8: driver.WCRetryExcErr,
	9: driver.WCMWBindErr, 10: driver.WCRemInvReqErr}

func flushWCStatus(minor uint64) driver.WCStatus {
	if minor == 0 || minor >= uint64(len(flushStatus)) {
		return driver.WCFatalErr
	}
	return flushStatus[minor]
}

// The outcomes of reading one CQE (irdma_uk_cq_poll_cmpl).
const (
	cqeGot     = iota // a completion
	cqeEmpty          // none (or a flush CQE for a queue with nothing left: read, and the poll ends)
	cqeSkipped        // the CQE of a destroyed QP: read, no completion
)

// Poll returns up to len(wc) completions. It allocates nothing.
func (q *cq) Poll(wc []driver.WC) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.buf == nil {
		return 0, driver.ErrClosed
	}
	n := 0
	// At most one lap of CQEs per poll: CQEs that all look valid but complete nothing (a
	// device that got the valid bit wrong) must not keep the poller in here for ever. A
	// flush CQE read again for each WQE it flushes moves through the QP's ring instead,
	// which ends.
	for read := uint32(0); n < len(wc) && read <= q.size; {
		r, consumed := q.pollOne(&wc[n])
		read += consumed
		if r == cqeEmpty {
			break
		}
		if r == cqeGot {
			n++
		}
	}
	return n, nil
}

// pollOne reads the CQE at the head: the valid bit of word 3 first, then (after the
// barrier) the rest, and the extension in the next slot if it has one; it consumes the
// CQE (moves the head and writes it to the shadow area) unless it is a flush CQE with
// WQEs left to flush, which is read again for the next one. consumed counts the CQE
// slots the head moved. q.mu held.
func (q *cq) pollOne(wc *driver.WC) (result int, consumed uint32) {
	cqe := q.buf[q.head*cqeSize : (q.head+1)*cqeSize]
	w3 := providerkit.Load64(cqe, cqeWord3)
	if w3>>63 != q.polarity {
		return cqeEmpty, 0
	}
	mmio.FromDevice()
	ext := w3&cqeExtCQE != 0
	immValid, imm := false, uint32(0)
	if ext {
		peek := (q.head + 1) % q.size
		e := q.buf[peek*cqeSize : (peek+1)*cqeSize]
		w7 := providerkit.Load64(e, cqeWord3)
		pol := w7 >> 63
		if peek == 0 {
			pol ^= 1
		}
		if pol != q.polarity {
			return cqeEmpty, 0
		}
		mmio.FromDevice()
		if immValid = w7&extImmValid != 0; immValid {
			imm = uint32(le.Uint64(e[0:]))
		}
	}
	flushed, failed := false, w3&cqeError != 0
	major, minor := (w3>>cqeMajErrShift)&0xffff, w3&cqeMinErrMask
	if failed && major == majErrFlush {
		flushed = true
		if minor != flushGeneralEr {
			// The rest of the queue this CQE flushes completes as a plain flush.
			w3 = w3&^cqeMinErrMask | flushGeneralEr
			providerkit.Store64(cqe, cqeWord3, w3)
		}
	}
	w0, w2 := le.Uint64(cqe[0:]), le.Uint64(cqe[16:])
	qpID := uint32(w2>>cqeQPIDShift) & cqeQPIDMask
	qp := q.c.qps.Get(le.Uint64(cqe[8:]))
	result, more, tail := cqeSkipped, false, uint32(0)
	if qp != nil && failed {
		qp.inError.Store(true)
	}
	switch {
	case qp == nil:
	case w3&cqeSQ == 0:
		result, more, tail = q.pollRecv(qp, wc, w0, w2, w3, failed)
	default:
		result, more, tail = q.pollSend(qp, wc, w3, flushed)
	}
	moveHead := true
	if result == cqeGot {
		wc.QPNum, wc.SrcQP = qpID, qpID
		if failed {
			wc.Status = driver.WCGeneralErr
			if flushed {
				wc.Status = flushWCStatus(minor)
			}
			wc.VendorErr = uint32(major<<16 | minor)
			q.lastErr = fmt.Sprintf("%v for wr %d of QP %d (major %#x, minor %#x)", wc.Status, wc.WRID, qpID, major, minor)
		}
		if immValid {
			wc.Imm = bits.ReverseBytes32(imm) // WC.Imm is in network order in memory
			wc.Flags |= driver.WCFlagWithImm
		}
		if flushed && more {
			moveHead = false
		}
	}
	if !moveHead {
		// Read again for the ring's next WQE: the CQE now names where its tail is.
		w3 = w3&^(cqeWQEIdxMask<<cqeWQEIdxShift) | uint64(tail)<<cqeWQEIdxShift
		providerkit.Store64(cqe, cqeWord3, w3)
		return result, 0
	}
	consumed = 1
	q.advance()
	if ext {
		q.advance()
		consumed++
	}
	providerkit.Store64(q.shadow, shadowHead, uint64(q.head))
	return result, consumed
}

func (q *cq) advance() {
	if q.head++; q.head == q.size {
		q.head, q.polarity = 0, q.polarity^1
	}
}

// pollRecv completes the receive a CQE names (or, failed, the oldest the QP has); more:
// WQEs are left after it, tail: the ring's tail then.
func (q *cq) pollRecv(qp *qp, wc *driver.WC, w0, w2, w3 uint64, failed bool) (result int, more bool, tail uint32) {
	rq := &qp.rq
	rq.mu.Lock()
	defer rq.mu.Unlock()
	idx := uint32(w3>>cqeWQEIdxShift&cqeWQEIdxMask) / rq.mult
	if failed {
		if rq.used() == 0 {
			return cqeEmpty, false, rq.tail
		}
		idx = rq.tail
	}
	if idx >= rq.size {
		q.lastErr = fmt.Sprintf("receive CQE for WQE %d of QP %d, whose queue has %d", idx, qp.qpID, rq.size)
		idx = rq.tail
	}
	*wc = driver.WC{WRID: rq.wrid[idx], Opcode: driver.WCRecv, ByteLen: uint32(w0)}
	if op := w3 >> cqeOpShift & 0x3f; op == ibOpWriteOnlyImm || op == ibOpWriteLastImm {
		wc.Opcode = driver.WCRecvRDMAWithImm
	}
	if w3&cqeStag != 0 {
		wc.Flags |= driver.WCFlagWithInv
		wc.Imm = uint32(w2)
	}
	rq.tail = (idx + 1) % rq.size
	return cqeGot, rq.used() != 0, rq.tail
}

// pollSend completes the send WQE a CQE names (the unsignaled ones before it complete
// silently), or, flushed, the oldest the QP has that is not a NOP; more and tail as
// pollRecv's.
func (q *cq) pollSend(qp *qp, wc *driver.WC, w3 uint64, flushed bool) (result int, more bool, tail uint32) {
	sq := &qp.sq
	sq.mu.Lock()
	defer sq.mu.Unlock()
	defer func() { more, tail = sq.used() != 0, sq.tail }()
	if !flushed {
		idx := uint32(w3>>cqeWQEIdxShift&cqeWQEIdxMask) % sq.size
		t := &sq.trk[idx]
		*wc = driver.WC{WRID: t.wrid, Opcode: sendWCOpcode(uint8(w3 >> cqeOpShift & 0x3f))}
		if w3&cqeError == 0 {
			wc.ByteLen = t.length
		}
		if wc.Opcode == 0xff {
			wc.Opcode, wc.Status = driver.WCSend, driver.WCGeneralErr
		}
		sq.tail = (idx + uint32(max(t.quanta, 1))) % sq.size
		return cqeGot, false, 0
	}
	for sq.used() != 0 {
		t := &sq.trk[sq.tail]
		sq.tail = (sq.tail + uint32(max(t.quanta, 1))) % sq.size
		if t.op != opNOP {
			*wc = driver.WC{WRID: t.wrid, Opcode: sendWCOpcode(t.op), ByteLen: t.length}
			return cqeGot, false, 0
		}
	}
	return cqeEmpty, false, 0
}

// sendWCOpcode is the completion opcode of a send WQE's operation (0xff: none).
func sendWCOpcode(op uint8) driver.WCOpcode {
	switch op {
	case opRDMAWrite, opWriteSol:
		return driver.WCRDMAWrite
	case opRDMARead:
		return driver.WCRDMARead
	case opSend, opSendSol, 0x04, 0x06: // and the SEND_INV forms
		return driver.WCSend
	}
	return 0xff
}

// Arm requests an event for the next completion (solicitedOnly: the next solicited
// one), as libirdma's irdma_uarm_cq: while an arm is outstanding another only widens it
// from solicited to all; else it is remembered for when the event comes.
func (q *cq) Arm(solicitedOnly bool) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.buf == nil {
		return driver.ErrClosed
	}
	switch {
	case !q.isArmed, q.armSol && !solicitedOnly:
		q.arm(solicitedOnly)
	default:
		q.skipArm, q.skipSol = true, solicitedOnly
	}
	return nil
}

// CompEvent is irdma_cq_event: a deferred arm is made now; else the CQ is no longer
// armed.
func (q *cq) CompEvent() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.buf == nil {
		return
	}
	if q.skipArm {
		q.arm(false)
	} else {
		q.isArmed = false
	}
}

// arm writes the arm request to the shadow area (the sequence number counts up; the
// solicited bit is always set, the next-completion bit unless solicited only) and rings
// the CQ's doorbell. q.mu held.
func (q *cq) arm(solicitedOnly bool) {
	q.isArmed, q.armSol, q.skipArm, q.skipSol = true, true, false, true
	v := providerkit.Load64(q.shadow, shadowArm)
	seq := (v>>armSeqShift + 1) & armSeqMask
	w := seq<<armSeqShift | v&armSelMask | armNextSE
	if !solicitedOnly {
		w |= armNext
	}
	providerkit.Store64(q.shadow, shadowArm, w)
	q.c.doorbell(&q.db, dbCQOffset, q.cqid)
}

// clean forgets a destroyed QP's CQEs (irdma_uk_clean_cq): the valid CQEs from the head
// on that carry its completion context get none.
func (q *cq) clean(ctx uint64) {
	if q == nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.buf == nil {
		return
	}
	head, pol := q.head, q.polarity
	for range q.size {
		cqe := q.buf[head*cqeSize : (head+1)*cqeSize]
		if providerkit.Load64(cqe, cqeWord3)>>63 != pol {
			break
		}
		if le.Uint64(cqe[8:]) == ctx {
			le.PutUint64(cqe[8:], 0)
		}
		if head = (head + 1) % q.size; head == 0 {
			pol ^= 1
		}
	}
}

// Close runs after DESTROY_CQ: the ring's and the shadow area's registrations go, then
// the memory.
func (q *cq) Close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.buf == nil {
		return nil
	}
	q.buf = nil
	err := q.c.deregMR(q.mr)
	q.mem.Free()
	if q.shadowMem != nil {
		if e := q.c.deregMR(q.shadowMR); err == nil {
			err = e
		}
		q.shadowMem.Free()
	}
	return err
}

func (q *cq) Describe() string {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := fmt.Sprintf("irdma CQ %d: %d CQEs at %#x, head %d, valid bit %d, armed %v", q.cqid, q.size, q.mem.Addr(), q.head, q.polarity, q.isArmed)
	if q.lastErr != "" {
		s += "; last error: " + q.lastErr
	}
	return s
}
