package hns

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"sync"
	"unsafe"

	"github.com/gorping/gorping/internal/mmio"
	"github.com/gorping/gorping/internal/umem"
	"github.com/gorping/gorping/internal/wire"
	"github.com/gorping/gorping/uverbs/driver"
	"github.com/gorping/gorping/uverbs/providerkit"
	"golang.org/x/sys/unix"
)

var le = binary.LittleEndian

// PrepareCQ allocates the CQE ring (the depth asked rounded up to a power of two, at
// least 64; whole 4 KiB pages, zeroed: every owner bit clear, and a new CQ's CQEs have it
// set) and its doorbell record (the consumer index the engine reads).
func (c *context) PrepareCQ(req *driver.CQRequest) (driver.PendingCQ, error) {
	if req.CQE < 1 || uint32(req.CQE) > c.maxCQE {
		return nil, fmt.Errorf("hns: CQ depth %d out of range (1..%d): %w", req.CQE, c.maxCQE, unix.EINVAL)
	}
	if req.Flags&driver.CQTimestamps != 0 {
		return nil, fmt.Errorf("hns: completion timestamps are not supported by gorping's hns provider: %w", unix.EOPNOTSUPP)
	}
	depth := max(uint32(minCQE), providerkit.RoundupPow2(uint32(req.CQE)))
	mem, err := umem.Anon(providerkit.Align(int(depth*c.cqeSize), hwPage))
	if err != nil {
		return nil, fmt.Errorf("hns: CQ buffer: %w", err)
	}
	db, err := c.allocDB(dbKindCQ)
	if err != nil {
		mem.Free()
		return nil, err
	}
	req.CQE = int(depth)
	p := &pendingCQ{c: c, mem: mem, db: db, depth: depth}
	p.req = cqReq{BufAddr: mem.Addr(), DbAddr: uint64(uintptr(unsafe.Pointer(db))), CQESize: c.cqeSize}
	return p, nil
}

type pendingCQ struct {
	c     *context
	mem   *umem.Mem
	db    *uint32
	depth uint32
	req   cqReq
}

func (p *pendingCQ) Udata() ([]byte, int) { return wire.Bytes(&p.req), cqRespLen }

func (p *pendingCQ) Abort() {
	p.c.freeDB(dbKindCQ, p.db)
	p.mem.Free()
}

func (p *pendingCQ) Commit(cmd driver.Commander, core driver.CQCore, resp []byte) (driver.CQ, error) {
	if err := providerkit.ShortResp("hns", "CREATE_CQ", len(resp), cqRespLen); err != nil {
		p.Abort()
		return nil, err
	}
	var r cqResp
	wire.Decode(&r, resp)
	return &cq{c: p.c, mem: p.mem, buf: p.mem.Bytes()[:int(p.depth*p.c.cqeSize)], db: p.db, depth: p.depth,
		cqn: uint32(r.Cqn), record: r.CapFlags&cqCapRecordDb != 0, armSN: 1, size: p.c.cqeSize}, nil
}

// cq is an hns completion queue: the CQE ring, its free-running consumer index (whose
// depth bit is the lap's owner bit), the doorbell record or the consumer-index doorbell,
// and the arm's sequence number.
type cq struct {
	c      *context
	mem    *umem.Mem
	mu     sync.Mutex
	buf    []byte
	db     *uint32 // the consumer index record
	depth  uint32
	size   uint32 // CQE bytes
	ci     uint32
	cqn    uint32
	record bool // the engine reads the consumer index from the record (else a doorbell)
	armSN  uint32
	stage  [2]uint32 // the doorbell, staged 8-byte aligned
	cur    *qp       // the QP of the last CQE (libhns' cur_qp)

	lastErr string
}

// Error statuses of the CQE (get_wc_status); any other is GENERAL_ERR.
var wcStatus = map[uint32]driver.WCStatus{0x00: driver.WCSuccess, 0x01: driver.WCLocLenErr, 0x02: driver.WCLocQPOpErr,
	0x04: driver.WCLocProtErr, 0x05: driver.WCWRFlushErr, 0x06: driver.WCMWBindErr, 0x10: driver.WCBadRespErr,
	0x11: driver.WCLocAccessErr, 0x12: driver.WCRemInvReqErr, 0x13: driver.WCRemAccessErr, 0x14: driver.WCRemOpErr,
	0x15: driver.WCRetryExcErr, 0x16: driver.WCRNRRetryExcErr, 0x22: driver.WCRemAbortErr, 0x23: driver.WCGeneralErr,
	0x24: driver.WCRemInvRDReqErr}

var sendWCOp = [...]driver.WCOpcode{opSend: driver.WCSend, 1: driver.WCSend, opSendImm: driver.WCSend, opWrite: driver.WCRDMAWrite,
	opWriteImm: driver.WCRDMAWrite, opRead: driver.WCRDMARead, 6: driver.WCCompSwap, 7: driver.WCFetchAdd,
	0xb: driver.WCLocalInv, 0xc: driver.WCBindMW}

// cqe is the CQE the consumer index n points at, if the engine wrote it this lap.
func (q *cq) cqe(n uint32) []byte {
	e := q.buf[(n&(q.depth-1))*q.size : (n&(q.depth-1)+1)*q.size]
	owner := providerkit.Load32(e, 0)&cqeOwner != 0
	if owner == (n&q.depth != 0) {
		return nil
	}
	return e
}

var errPoll = fmt.Errorf("hns: a CQE for no QP of this context: %w", unix.EIO)

// Poll returns up to len(wc) completions, then tells the engine how far it read. It
// allocates nothing (a CQE with an error status moves its QP to ERR: one command).
func (q *cq) Poll(wc []driver.WC) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.buf == nil {
		return 0, driver.ErrClosed
	}
	var err error
	n := 0
	for ; n < len(wc); n++ {
		e := q.cqe(q.ci)
		if e == nil {
			break
		}
		q.ci++
		mmio.FromDevice()
		if err = q.pollOne(&wc[n], e); err != nil {
			break
		}
	}
	if n > 0 || err == errPoll {
		q.updateCI()
	}
	return n, err
}

// updateCI tells the engine the consumer index: the record, or the pointer doorbell.
func (q *cq) updateCI() {
	if q.record {
		mmio.StoreRecord(q.db, q.ci&cqRecordCIMask)
		return
	}
	q.c.doorbell(&q.stage, q.cqn, dbCQPtr, q.ci&cqRecordCIMask|1<<dbSNShift)
}

// pollOne decodes a CQE (hns_roce_poll_one). q.mu held.
func (q *cq) pollOne(wc *driver.WC, e []byte) error {
	w := le.Uint32(e[cqeByte4:])
	qpn := le.Uint32(e[cqeByte16:]) & qpnMask
	if q.cur == nil || q.cur.qpn != qpn {
		if q.cur = q.c.qps.Get(qpn); q.cur == nil {
			q.lastErr = fmt.Sprintf("CQE for QP %d, which this context does not have", qpn)
			return errPoll
		}
	}
	qp := q.cur
	*wc = driver.WC{}
	op := w & wqeOpMask
	if w&cqeSR == 0 {
		qp.pollSend(wc, e, w, op)
	} else {
		wc.ByteLen = le.Uint32(e[cqeByteCnt:])
		switch op {
		case rcvSend:
			wc.Opcode = driver.WCRecv
		case rcvSendInv:
			wc.Opcode, wc.Flags, wc.Imm = driver.WCRecv, driver.WCFlagWithInv, le.Uint32(e[cqeImmKey:])
		case rcvWriteImm, rcvSendImm:
			wc.Opcode, wc.Flags = driver.WCRecv, driver.WCFlagWithImm
			if op == rcvWriteImm {
				wc.Opcode = driver.WCRecvRDMAWithImm
			}
			wc.Imm = bits.ReverseBytes32(le.Uint32(e[cqeImmKey:])) // WC.Imm is in network order in memory
		}
		if !qp.pollRecv(wc, e, w, op) {
			q.lastErr = fmt.Sprintf("inline receive of %d bytes longer than its WQE's buffers on QP %d", wc.ByteLen, qpn)
			wc.Status = driver.WCLocLenErr
			return errPoll
		}
	}
	st := w >> 8 & 0xff
	s, ok := wcStatus[st]
	if !ok {
		s = driver.WCGeneralErr
	}
	wc.Status, wc.VendorErr, wc.QPNum = s, le.Uint32(e[cqeByte16:])>>24, qpn
	if st != statusSuccess && st != statusGeneral {
		q.lastErr = fmt.Sprintf("%v (status %#x, sub-status %#x) for wr %d of QP %d", s, st, wc.VendorErr, wc.WRID, qpn)
		if st != statusWRFlush {
			// The engine flushes the rest once the QP is in ERR: libhns moves it there.
			qp.toError()
		}
	}
	return nil
}

// Arm requests an event for the next completion (solicitedOnly: the next solicited
// one): the arm doorbell, with the consumer index and the sequence number that the
// completion events count.
func (q *cq) Arm(solicitedOnly bool) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.buf == nil {
		return driver.ErrClosed
	}
	p := q.ci&(q.depth<<1-1) | (q.armSN&3)<<dbSNShift
	if solicitedOnly {
		p |= 1 << dbNotifyShift
	}
	q.c.doorbell(&q.stage, q.cqn, dbCQNtr, p)
	return nil
}

// CompEvent: every completion event read counts up the arm sequence number.
func (q *cq) CompEvent() {
	q.mu.Lock()
	q.armSN++
	q.mu.Unlock()
}

// clean removes a QP's CQEs from the ring (libhns' __hns_roce_v2_cq_clean): the later
// CQEs of other QPs move down over them, keeping the owner bits of their new slots, and
// the engine is told the consumer index that skipped them.
func (q *cq) clean(qpn uint32) {
	if q == nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.buf == nil {
		return
	}
	prod := q.ci
	for q.cqe(prod) != nil {
		if prod > q.ci+q.depth-1 {
			break
		}
		prod++
	}
	freed := uint32(0)
	for prod--; int32(prod-q.ci) >= 0; prod-- {
		e := q.buf[(prod&(q.depth-1))*q.size : (prod&(q.depth-1)+1)*q.size]
		if le.Uint32(e[cqeByte16:])&qpnMask == qpn {
			freed++
		} else if freed > 0 {
			d := q.buf[((prod+freed)&(q.depth-1))*q.size : ((prod+freed)&(q.depth-1)+1)*q.size]
			owner := le.Uint32(d) & cqeOwner
			copy(d, e)
			le.PutUint32(d, le.Uint32(d)&^cqeOwner|owner)
		}
	}
	if freed > 0 {
		q.ci += freed
		mmio.ToDevice()
		q.c.doorbell(&q.stage, q.cqn, dbCQPtr, q.ci&cqRecordCIMask|1<<dbSNShift)
	}
	if q.cur != nil && q.cur.qpn == qpn {
		q.cur = nil
	}
}

// Close runs after DESTROY_CQ.
func (q *cq) Close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.buf == nil {
		return nil
	}
	q.buf = nil
	q.c.freeDB(dbKindCQ, q.db)
	return q.mem.Free()
}

func (q *cq) Describe() string {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := fmt.Sprintf("hns CQ %d: %d CQEs of %d bytes at %#x, consumer index %d, arm sn %d, record %v", q.cqn, q.depth, q.size, q.mem.Addr(), q.ci, q.armSN&3, q.record)
	if q.lastErr != "" {
		s += "; last error: " + q.lastErr
	}
	return s
}
