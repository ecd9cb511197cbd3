package hns

import (
	"errors"
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

// Errors of the posting path are preallocated: posting must not allocate.
var (
	errState      = fmt.Errorf("hns: the QP is not in a state that takes sends (RTS, SQD or ERR): %w", unix.EINVAL)
	errRecvState  = fmt.Errorf("hns: the QP is in RESET, which takes no receives: %w", unix.EINVAL)
	errBadOpcode  = providerkit.ErrBadOpcode("hns")
	errTooManySGE = providerkit.ErrTooManySGE("hns", unix.EINVAL)
	errInline     = fmt.Errorf("hns: inline data longer than the QP's max_inline_data or its path MTU, or inline RDMA READ: %w", unix.EINVAL)
	errFull       = providerkit.ErrFull("hns")
)

// wq is one work queue: its WQEs in the QP's buffer, a free-running head (where the next
// goes) and tail (what the CQ says completed), and the work requests' ids.
type wq struct {
	mu      sync.Mutex
	ring    []byte
	cnt     uint32 // WQEs, a power of two
	shift   uint32 // providerkit.Log2(cnt): that bit of an index is the lap's
	wqe     uint32 // log2 of the WQE bytes
	head    uint32
	tail    uint32
	maxPost uint32
	maxGS   uint32
	wrid    []uint64
}

func (w *wq) entry(i uint32) []byte {
	i &= w.cnt - 1
	return w.ring[i<<w.wqe : (i+1)<<w.wqe]
}

// rinl is what a receive WQE's SGEs were, for an inline receive the engine writes into
// the WQE itself (libhns' rq_rinl_buf).
type rinl struct {
	addr []uint64
	len  []uint32
	n    int
}

// PrepareQP sizes the queues as libhns does (and the kernel, which has to agree):
// powers of two of at least 64 WQEs, 64-byte send WQEs with an extended SGE area beyond
// two SGEs, receive WQEs of a power of two of 16-byte segments (HIP08 reserves one to end
// the list); allocates them in one buffer and the doorbell records.
func (c *context) PrepareQP(req *driver.QPRequest) (driver.PendingQP, error) {
	if req.Type != driver.QPTypeRC {
		return nil, fmt.Errorf("hns: QP type %d not supported by gorping (RC only): %w", req.Type, unix.EOPNOTSUPP)
	}
	cp := &req.Cap
	if cp.MaxSendWR > c.maxQPWR || cp.MaxRecvWR > c.maxQPWR || cp.MaxSendSGE > c.maxSGE || cp.MaxRecvSGE > c.maxSGE {
		return nil, fmt.Errorf("hns: QP capabilities %+v beyond the device's (%d WRs, %d SGEs): %w", *cp, c.maxQPWR, c.maxSGE, unix.EINVAL)
	}
	cp.MaxSendWR = max(cp.MaxSendWR, minWQE)
	if cp.MaxRecvWR != 0 {
		cp.MaxRecvWR = max(cp.MaxRecvWR, minWQE)
		if cp.MaxRecvSGE == 0 {
			return nil, fmt.Errorf("hns: receive WRs without SGEs: %w", unix.EINVAL)
		}
	}
	p := &pendingQP{c: c, sigAll: req.SigAll}
	p.sendCQ, _ = req.SendCQ.(*cq)
	p.recvCQ, _ = req.RecvCQ.(*cq)
	if cp.MaxRecvWR != 0 {
		if c.hwVer == hwVer2 {
			p.rsv = 1
		}
		p.rqGS = providerkit.RoundupPow2(cp.MaxRecvSGE + p.rsv)
		p.rqShift = providerkit.Log2(sgeSize * p.rqGS)
		p.rqCnt = providerkit.RoundupPow2(cp.MaxRecvWR)
		cp.MaxRecvWR, cp.MaxRecvSGE = p.rqCnt, p.rqGS
	}
	p.sqCnt = providerkit.RoundupPow2(cp.MaxSendWR)
	if cp.MaxSendSGE > sgeInWQE {
		p.sgeCnt = max(providerkit.RoundupPow2(p.sqCnt*(cp.MaxSendSGE-sgeInWQE)), hwPage/sgeSize)
	}
	p.sqPost, p.sqGS = min(c.maxQPWR, p.sqCnt), min(c.maxSGE, cp.MaxSendSGE)
	cp.MaxSendWR = p.sqPost
	p.sqBytes = providerkit.Align(int(p.sqCnt)<<sqWQEShift, hwPage)
	if p.sgeCnt > 0 {
		p.sgeBytes = providerkit.Align(int(p.sgeCnt)*sgeSize, hwPage)
	}
	p.rqBytes = providerkit.Align(int(p.rqCnt)<<p.rqShift, hwPage)
	var err error
	if p.mem, err = umem.Anon(p.sqBytes + p.sgeBytes + p.rqBytes); err != nil {
		return nil, fmt.Errorf("hns: QP buffer: %w", err)
	}
	if p.sdb, err = c.allocDB(dbKindQP); err != nil {
		p.Abort()
		return nil, err
	}
	if cp.MaxRecvSGE != 0 {
		if p.rdb, err = c.allocDB(dbKindQP); err != nil {
			p.Abort()
			return nil, err
		}
	}
	p.req = qpReq{BufAddr: p.mem.Addr(), LogSQBbCount: uint8(providerkit.Log2(p.sqCnt)), LogSQStride: sqWQEShift,
		SdbAddr: uint64(uintptr(unsafe.Pointer(p.sdb)))}
	if p.rdb != nil {
		p.req.DbAddr = uint64(uintptr(unsafe.Pointer(p.rdb)))
	}
	return p, nil
}

type pendingQP struct {
	c                         *context
	mem                       *umem.Mem
	sdb, rdb                  *uint32
	sigAll                    bool
	sendCQ, recvCQ            *cq
	sqCnt, sqPost, sqGS       uint32
	sgeCnt                    uint32
	rqCnt, rqGS, rqShift, rsv uint32
	sqBytes, sgeBytes         int
	rqBytes                   int
	req                       qpReq
}

func (p *pendingQP) Udata() ([]byte, int) { return wire.Bytes(&p.req), qpRespLen }

func (p *pendingQP) Abort() {
	p.c.freeDB(dbKindQP, p.sdb)
	p.c.freeDB(dbKindQP, p.rdb)
	p.mem.Free()
}

// Commit takes the receive queue the kernel granted and reports its WRs and SGEs as
// libhns does (the reserved SGE not counted).
func (p *pendingQP) Commit(cmd driver.Commander, core *driver.QPCore, resp []byte) (driver.QP, error) {
	if err := providerkit.ShortResp("hns", "CREATE_QP", len(resp), qpRespLen); err != nil {
		p.Abort()
		return nil, err
	}
	var r qpResp
	wire.Decode(&r, resp)
	buf := p.mem.Bytes()
	q := &qp{c: p.c, mem: p.mem, handle: core.Handle, qpn: core.QPN, flags: uint32(r.CapFlags), sigBits: !p.sigAll,
		sendCQ: p.sendCQ, recvCQ: p.recvCQ, sdb: p.sdb, rdb: p.rdb, rsv: p.rsv, maxInline: core.Cap.MaxInlineData}
	q.sq = wq{ring: buf[:p.sqBytes], cnt: p.sqCnt, shift: providerkit.Log2(p.sqCnt), wqe: sqWQEShift, maxPost: p.sqPost, maxGS: p.sqGS,
		wrid: make([]uint64, p.sqCnt)}
	q.sge, q.sgeOff, q.sgeCnt = buf[p.sqBytes:p.sqBytes+p.sgeBytes], p.sqBytes, p.sgeCnt
	if p.rqCnt != 0 {
		if core.Cap.MaxRecvWR > p.rqCnt || core.Cap.MaxRecvSGE > p.rqGS || core.Cap.MaxRecvSGE < p.rsv {
			p.Abort()
			return nil, fmt.Errorf("hns: the kernel granted a receive queue of %d WRs of %d SGEs, beyond the %d of %d allocated",
				core.Cap.MaxRecvWR, core.Cap.MaxRecvSGE, p.rqCnt, p.rqGS)
		}
		q.rq = wq{ring: buf[p.sqBytes+p.sgeBytes:], cnt: core.Cap.MaxRecvWR, wqe: p.rqShift, maxGS: core.Cap.MaxRecvSGE,
			wrid: make([]uint64, p.rqCnt)}
		q.rq.shift = providerkit.Log2(q.rq.cnt)
		core.Cap.MaxRecvWR = min(p.c.maxQPWR, core.Cap.MaxRecvWR)
		core.Cap.MaxRecvSGE -= p.rsv
		q.rq.maxPost = core.Cap.MaxRecvWR
		q.rinl = make([]rinl, p.rqCnt)
		for i := range q.rinl {
			q.rinl[i] = rinl{addr: make([]uint64, core.Cap.MaxRecvSGE), len: make([]uint32, core.Cap.MaxRecvSGE)}
		}
	}
	q.state.Store(uint32(driver.QPSReset))
	p.c.qps.Set(q.qpn, q)
	return q, nil
}

// qp is an hns RC queue pair.
type qp struct {
	c              *context
	mem            *umem.Mem
	handle         uint32 // the kernel's, for the MODIFY_QP to ERR
	qpn            uint32
	flags          uint32 // CREATE_QP's cap_flags: record doorbells, owner doorbell
	sigBits        bool   // not every WR signaled: a send CQE completes the ones before it
	sendCQ, recvCQ *cq
	sq, rq         wq
	sge            []byte // the extended SGE area
	sgeOff         int    // its offset in the buffer
	sgeCnt         uint32
	nextSGE        uint32
	rinl           []rinl
	sdb, rdb       *uint32
	rsv            uint32
	maxInline      uint32
	sl             uint8
	pathMTU        driver.MTU
	state          atomic.Uint32
	stage          [2]uint32 // the doorbell, staged 8-byte aligned
	closed         bool
}

// Modified (driver.QPAttrObserver) keeps what posting needs of the attributes (state,
// SL, path MTU); a QP reset forgets its CQEs and starts its queues over, as libhns does.
func (q *qp) Modified(attr *driver.QPAttr, mask driver.QPAttrMask) error {
	if mask&driver.QPAttrState != 0 {
		q.state.Store(uint32(attr.State))
		if attr.State == driver.QPSReset {
			q.recvCQ.clean(q.qpn)
			if q.sendCQ != q.recvCQ {
				q.sendCQ.clean(q.qpn)
			}
			q.sq.mu.Lock()
			q.rq.mu.Lock()
			q.sq.head, q.sq.tail, q.rq.head, q.rq.tail, q.nextSGE = 0, 0, 0, 0, 0
			q.rq.mu.Unlock()
			q.sq.mu.Unlock()
		}
	}
	if mask&driver.QPAttrAV != 0 {
		q.sl = attr.AH.SL
	}
	if mask&driver.QPAttrPathMTU != 0 {
		q.pathMTU = attr.PathMTU
	}
	return nil
}

// toError moves the QP to ERR (MODIFY_QP from the data path, as libhns does after an
// error completion and after a post on a QP in ERR): the engine then flushes what the
// queues hold.
func (q *qp) toError() {
	q.sq.mu.Lock()
	q.rq.mu.Lock()
	req := modifyQPCmd{QPHandle: q.handle, AttrMask: uint32(driver.QPAttrState), QPState: uint8(driver.QPSErr)}
	q.c.cmd.Write(cmdModifyQP, wire.Bytes(&req), nil)
	q.rq.mu.Unlock()
	q.sq.mu.Unlock()
	q.state.Store(uint32(driver.QPSErr))
}

func mtuBytes(m driver.MTU) uint32 {
	if m < driver.MTU256 || m > driver.MTU4096 {
		return 0
	}
	return 128 << m
}

var wqeOps = map[driver.WROpcode]uint32{driver.WRSend: opSend, driver.WRSendWithImm: opSendImm, driver.WRRDMAWrite: opWrite,
	driver.WRRDMAWriteWithImm: opWriteImm, driver.WRRDMARead: opRead}

// PostSend posts one work request and rings the send doorbell (then writes the send
// queue's head to its record). It allocates nothing.
func (q *qp) PostSend(wr *driver.SendWR) error {
	switch driver.QPState(q.state.Load()) {
	case driver.QPSReset, driver.QPSInit, driver.QPSRTR:
		return errState
	}
	sq := &q.sq
	sq.mu.Lock()
	if q.closed {
		sq.mu.Unlock()
		return driver.ErrClosed
	}
	err := q.post(wr)
	if err == nil {
		sq.head++
		mmio.ToDevice()
		q.c.doorbell(&q.stage, q.qpn, dbSQ, sq.head&0xffff|uint32(q.sl&7)<<dbSLShift)
		if q.flags&qpCapSQRecordDb != 0 {
			mmio.StoreRecord(q.sdb, sq.head&0xffff)
		}
	}
	sq.mu.Unlock()
	if driver.QPState(q.state.Load()) == driver.QPSErr {
		q.toError()
	}
	return err
}

// post writes the send WQE at the head (set_rc_wqe): the fields libhns writes, the rest
// of the WQE as it was, the owner bit of the lap last. sq.mu held.
func (q *qp) post(wr *driver.SendWR) error {
	sq := &q.sq
	if sq.head-sq.tail >= sq.maxPost {
		return errFull
	}
	if uint32(len(wr.SGE)) > sq.maxGS {
		return errTooManySGE
	}
	op, ok := wqeOps[wr.Opcode]
	if !ok {
		return errBadOpcode
	}
	inline := wr.Flags&driver.SendInline != 0
	total := uint32(0)
	for i := range wr.SGE {
		total += wr.SGE[i].Length
	}
	idx := sq.head & (sq.cnt - 1)
	wqe := sq.entry(sq.head)
	sq.wrid[idx] = wr.ID
	w := le.Uint32(wqe[wqeByte4:])
	w &^= wqeCQE | wqeFence | wqeSE | wqeInline | wqeSO | wqeOpMask
	if wr.Flags&driver.SendSignaled != 0 {
		w |= wqeCQE
	}
	if wr.Flags&driver.SendFence != 0 {
		w |= wqeFence
	}
	if wr.Flags&driver.SendSolicited != 0 {
		w |= wqeSE
	}
	if inline {
		w |= wqeInline
	}
	w |= op
	imm := uint32(0)
	if op == opSendImm || op == opWriteImm {
		imm = bits.ReverseBytes32(wr.Imm) // host order in the WQE
	}
	le.PutUint32(wqe[wqeImm:], imm)
	if op == opWrite || op == opWriteImm || op == opRead {
		le.PutUint64(wqe[wqeVA:], wr.RemoteAddr)
		le.PutUint32(wqe[wqeRKey:], wr.RKey)
	}
	mask := q.sgeCnt - 1 // all ones without an extended SGE area, as libhns computes it
	start := q.nextSGE
	b20 := le.Uint32(wqe[wqeByte20:])&^startSGEMsk | start&mask&startSGEMsk
	le.PutUint32(wqe[wqeByte20:], b20)
	index, valid := start, uint32(0)
	for i := range wr.SGE {
		g := &wr.SGE[i]
		if g.Length == 0 {
			continue
		}
		valid++
		if inline {
			continue
		}
		var seg []byte
		if valid <= sgeInWQE {
			seg = wqe[wqeSeg+16*(valid-1):]
		} else {
			seg = q.sge[(index&mask)*sgeSize:]
			index++
		}
		le.PutUint32(seg[0:], g.Length)
		le.PutUint32(seg[4:], g.LKey)
		le.PutUint64(seg[8:], g.Addr)
	}
	le.PutUint32(wqe[wqeMsgLen:], total)
	setSGENum := func(n uint32) {
		le.PutUint32(wqe[wqeByte16:], le.Uint32(wqe[wqeByte16:])&^(0xff<<wqeSGEShift)|n<<wqeSGEShift)
	}
	setSGENum(valid)
	if inline {
		// A refused inline WR leaves the WQE as libhns leaves it: written but for its
		// owner bit, which still says it is not the device's.
		if op == opRead || total > q.maxInline || total > mtuBytes(q.pathMTU) {
			le.PutUint32(wqe[wqeByte4:], w)
			return errInline
		}
		if total <= inlineInWQ {
			le.PutUint32(wqe[wqeByte20:], b20&^wqeInlType)
			off := wqeSeg
			for i := range wr.SGE {
				off += copy(wqe[off:], providerkit.UserBytes(wr.SGE[i].Addr, wr.SGE[i].Length))
			}
		} else {
			le.PutUint32(wqe[wqeByte20:], b20|wqeInlType)
			if total > sq.maxGS*sgeSize {
				le.PutUint32(wqe[wqeByte4:], w)
				return errInline
			}
			q.copyExtInline(index&mask, wr.SGE)
			valid = (total + sgeSize - 1) / sgeSize
			index += valid
			setSGENum(valid)
		}
	}
	q.nextSGE = index
	if q.flags&qpCapOwnerDb != 0 {
		mmio.ToDevice()
	}
	w &^= wqeOwner
	if sq.head&(1<<sq.shift) == 0 {
		w |= wqeOwner
	}
	providerkit.Store32(wqe, 0, w)
	return nil
}

// copyExtInline copies inline data into the extended SGE area from SGE slot at on. It
// does not wrap at the area's end: libhns' fill_ext_sge_inl_data means to, but its bound
// is the area's start (sge_cnt & (sge_cnt-1) is 0), so it copies straight on, into the
// receive queue's pages if it must; gorping writes the same bytes (within the buffer).
func (q *qp) copyExtInline(at uint32, sges []driver.SGE) {
	dst := q.mem.Bytes()[q.sgeOff+int(at)*sgeSize:]
	for i := range sges {
		dst = dst[copy(dst, providerkit.UserBytes(sges[i].Addr, sges[i].Length)):]
	}
}

// PostRecv posts one receive WQE (its non-empty SGEs, then the reserved one or zeros)
// and writes the receive queue's head to its record (or rings its doorbell). It
// allocates nothing.
func (q *qp) PostRecv(wr *driver.RecvWR) error {
	rq := &q.rq
	rq.mu.Lock()
	err := q.postRecv(wr)
	rq.mu.Unlock()
	if err == nil && driver.QPState(q.state.Load()) == driver.QPSErr {
		q.toError()
	}
	return err
}

func (q *qp) postRecv(wr *driver.RecvWR) error {
	rq := &q.rq
	if q.closed {
		return driver.ErrClosed
	}
	if driver.QPState(q.state.Load()) == driver.QPSReset {
		return errRecvState
	}
	if rq.cnt == 0 || rq.head-rq.tail >= rq.maxPost {
		return errFull
	}
	maxSGE := rq.maxGS - q.rsv
	if uint32(len(wr.SGE)) > maxSGE {
		return errTooManySGE
	}
	idx := rq.head & (rq.cnt - 1)
	wqe := rq.entry(rq.head)
	n := uint32(0)
	for i := range wr.SGE {
		g := &wr.SGE[i]
		if g.Length == 0 {
			continue
		}
		seg := wqe[n*sgeSize:]
		le.PutUint32(seg[0:], g.Length)
		le.PutUint32(seg[4:], g.LKey)
		le.PutUint64(seg[8:], g.Addr)
		n++
	}
	if q.rsv != 0 {
		seg := wqe[n*sgeSize:]
		le.PutUint32(seg[0:], invalidSGELen)
		le.PutUint32(seg[4:], 0)
		le.PutUint64(seg[8:], 0)
	} else if n < maxSGE {
		clear(wqe[n*sgeSize : maxSGE*sgeSize])
	}
	r := &q.rinl[idx]
	r.n = len(wr.SGE)
	for i := range wr.SGE {
		r.addr[i], r.len[i] = wr.SGE[i].Addr, wr.SGE[i].Length
	}
	rq.wrid[idx] = wr.ID
	rq.head++
	mmio.ToDevice()
	if q.flags&qpCapRQRecordDb != 0 {
		mmio.StoreRecord(q.rdb, rq.head&0xffff)
	} else {
		q.c.doorbell(&q.stage, q.qpn, dbRQ, rq.head&0xffff)
	}
	return nil
}

// pollSend completes the send WQE a CQE names; with not every WR signaled, the CQE's
// index says how many WQEs it completes.
func (q *qp) pollSend(wc *driver.WC, e []byte, w, op uint32) {
	sq := &q.sq
	sq.mu.Lock()
	defer sq.mu.Unlock()
	if q.sigBits {
		sq.tail += (w>>16 - sq.tail) & (sq.cnt - 1)
	}
	wc.WRID = sq.wrid[sq.tail&(sq.cnt-1)]
	sq.tail++
	switch op {
	case opSendImm, opWriteImm:
		wc.Flags = driver.WCFlagWithImm
	case 0xb: // LOCAL_INV
		wc.Flags = driver.WCFlagWithInv
	case opRead, 6, 7:
		wc.ByteLen = le.Uint32(e[cqeByteCnt:])
	}
	if int(op) < len(sendWCOp) && (op != 8 && op != 9 && op != 0xa) {
		wc.Opcode = sendWCOp[op]
	}
}

// pollRecv completes the oldest receive; an inline receive (the engine wrote the data
// into the WQE) is copied to the WQE's buffers. false: they are too short.
func (q *qp) pollRecv(wc *driver.WC, e []byte, w, op uint32) bool {
	rq := &q.rq
	rq.mu.Lock()
	defer rq.mu.Unlock()
	if rq.cnt == 0 {
		return true
	}
	wc.WRID = rq.wrid[rq.tail&(rq.cnt-1)]
	rq.tail++
	if w&cqeRQInline == 0 || op != rcvSend && op != rcvSendImm && op != rcvSendInv {
		return true
	}
	i := (w >> 16) & (rq.cnt - 1)
	r := &q.rinl[i]
	src := rq.entry(i)
	left := wc.ByteLen
	for j := 0; j < r.n && left > 0; j++ {
		n := min(r.len[j], left)
		copy(providerkit.UserBytes(r.addr[j], n), src[:n])
		src, left = src[n:], left-n
	}
	return left == 0
}

// Close runs after DESTROY_QP: the CQs forget the QP's CQEs, then the records and the
// buffer go.
func (q *qp) Close() error {
	if !providerkit.CloseOnce(&q.closed, &q.sq.mu, &q.rq.mu) {
		return nil
	}
	q.c.qps.Set(q.qpn, nil)
	q.recvCQ.clean(q.qpn)
	if q.sendCQ != q.recvCQ {
		q.sendCQ.clean(q.qpn)
	}
	q.c.freeDB(dbKindQP, q.sdb)
	q.c.freeDB(dbKindQP, q.rdb)
	return errors.Join(q.mem.Free())
}

func (q *qp) Describe() string {
	q.sq.mu.Lock()
	defer q.sq.mu.Unlock()
	return fmt.Sprintf("hns QP %d: send queue %d WQEs (head %d, tail %d, %d extended SGEs), receive queue %d WQEs of %d segments, caps %#x, state %v",
		q.qpn, q.sq.cnt, q.sq.head, q.sq.tail, q.sgeCnt, q.rq.cnt, q.rq.maxGS, q.flags, driver.QPState(q.state.Load()))
}
