package irdma

import (
	"errors"
	"fmt"
	"math/bits"
	"os"
	"sync"
	"sync/atomic"

	"github.com/gorping/gorping/internal/mmio"
	"github.com/gorping/gorping/internal/umem"
	"github.com/gorping/gorping/internal/wire"
	"github.com/gorping/gorping/uverbs/driver"
	"github.com/gorping/gorping/uverbs/providerkit"
	"golang.org/x/sys/unix"
)

// Errors of the posting path are preallocated: posting must not allocate.
var (
	errState      = fmt.Errorf("irdma: the QP is in error (an error completion, or moved to ERR): %w", unix.EINVAL)
	errBadOpcode  = providerkit.ErrBadOpcode("irdma")
	errNoImm      = fmt.Errorf("irdma: the QP does not take this opcode with immediate data (qp_caps): %w", unix.EINVAL)
	errTooManySGE = providerkit.ErrTooManySGE("irdma", unix.EINVAL)
	errReadSGE    = fmt.Errorf("irdma: more SGEs for an RDMA READ than the device reads into: %w", unix.EINVAL)
	errInlineLen  = providerkit.ErrInlineLen("irdma", unix.EINVAL)
	errFull       = providerkit.ErrFull("irdma")
)

// wq is one work queue: a ring of 32-byte quanta in the QP's buffer (the send queue's
// WQEs take 1 to 8, the receive queue's mult each), head (where the next goes) and tail
// (what the CQ says completed), the valid bit of this lap, and the software entries.
type wq struct {
	mu       sync.Mutex
	ring     []byte
	size     uint32 // send queue: quanta; receive queue: WQEs
	head     uint32
	tail     uint32
	polarity uint64
	mult     uint32   // receive queue: quanta per WQE
	trk      []sqTrk  // send queue: per quantum index, what its WQE completes as
	wrid     []uint64 // receive queue: per WQE
	db       uint32   // the doorbell, staged
}

// sqTrk is libirdma's irdma_sq_uk_wr_trk_info (and the WQE's operation).
type sqTrk struct {
	wrid   uint64
	length uint32
	quanta uint8
	op     uint8
}

func (w *wq) used() uint32 { return (w.head + w.size - w.tail) % w.size }

// quantum is the i-th quantum of the ring.
func (w *wq) quantum(i uint32) []byte { return w.ring[i*quantum : (i+1)*quantum] }

// wqeShift is irdma_get_wqe_shift for GEN_2: the quanta a WQE of sge fragments and
// inline bytes needs, as a power of two.
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

// wqDepth is irdma_get_sqdepth/rqdepth: the ring's quanta for wr requests of 1<<shift
// quanta and the reserve, a power of two, at least minWQSize WRs.
func wqDepth(wr, shift, reserve, maxQuanta uint32) (uint32, error) {
	d := providerkit.RoundupPow2(wr<<shift + reserve)
	if d < minWQSize<<shift {
		d = minWQSize << shift
	} else if d > maxQuanta {
		return 0, fmt.Errorf("irdma: a work queue of %d WRs needs %d quanta, the device has %d: %w", wr, d, maxQuanta, unix.EINVAL)
	}
	return d, nil
}

// PrepareQP sizes the queues as libirdma does (and the kernel, which has to agree),
// allocates them in one buffer (send queue, receive queue, each whole 4 KiB pages, then
// the QP's shadow area), registers it with the kernel on the QP's PD (REG_MR type QP)
// and reserves the completion context its CQEs will carry. The WR counts the kernel is
// told are the rings' sizes in WQEs.
func (c *context) PrepareQP(req *driver.QPRequest) (driver.PendingQP, error) {
	if req.Type != driver.QPTypeRC {
		return nil, fmt.Errorf("irdma: QP type %d not supported by gorping (RC only): %w", req.Type, unix.EOPNOTSUPP)
	}
	cp := &req.Cap
	a := &c.attrs
	if cp.MaxSendSGE > a.MaxHwWqFrags || cp.MaxRecvSGE > a.MaxHwWqFrags || cp.MaxInlineData > a.MaxHwInline {
		return nil, fmt.Errorf("irdma: QP capabilities %+v beyond the device's (%d SGEs, %d bytes inline): %w", *cp, a.MaxHwWqFrags, a.MaxHwInline, unix.EINVAL)
	}
	sqShift := wqeShift(cp.MaxSendSGE+1, cp.MaxInlineData)
	sqDepth, err := wqDepth(cp.MaxSendWR, sqShift, sqReserved, a.MaxHwWqQuanta)
	if err != nil {
		return nil, err
	}
	rqShift := wqeShift(cp.MaxRecvSGE, 0)
	rqDepth, err := wqDepth(cp.MaxRecvWR, rqShift, rqReserved, a.MaxHwRQQuanta)
	if err != nil {
		return nil, err
	}
	cp.MaxSendWR, cp.MaxRecvWR = sqDepth>>sqShift, rqDepth>>rqShift
	p := &pendingQP{c: c, sqShift: sqShift, rqShift: rqShift, sqDepth: sqDepth, rqDepth: rqDepth, sigAll: req.SigAll}
	p.sendCQ, _ = req.SendCQ.(*cq)
	p.recvCQ, _ = req.RecvCQ.(*cq)
	p.sqBytes = providerkit.Align(int(sqDepth)*quantum, hwPage)
	p.rqBytes = providerkit.Align(int(rqDepth)*quantum, hwPage)
	total := p.sqBytes + p.rqBytes + shadowAreaSize
	if p.mem, err = umem.Anon(providerkit.Align(total, os.Getpagesize())); err != nil {
		return nil, fmt.Errorf("irdma: QP buffer: %w", err)
	}
	mr := memRegReq{RegType: memregTypeQP, SQPages: uint16(p.sqBytes / hwPage), RQPages: uint16(p.rqBytes / hwPage)}
	if p.mr, err = c.regMR(req.PD, p.mem.Addr(), total, mr); err != nil {
		p.mem.Free()
		return nil, fmt.Errorf("irdma: register the QP buffer: %w", err)
	}
	p.ctx = c.qps.Reserve()
	p.req = qpReq{UserWQEBufs: p.mem.Addr(), UserComplCtx: p.ctx}
	return p, nil
}

type pendingQP struct {
	c                *context
	mem              *umem.Mem
	mr               uint32
	ctx              uint64
	sqShift, rqShift uint32
	sqDepth, rqDepth uint32
	sqBytes, rqBytes int
	sigAll           bool
	req              qpReq
	sendCQ, recvCQ   *cq
}

func (p *pendingQP) Udata() ([]byte, int) { return wire.Bytes(&p.req), qpRespLen }

func (p *pendingQP) Abort() {
	p.c.deregMR(p.mr)
	p.mem.Free()
}

// Commit takes the queue sizes the kernel answered and reports the WRs they hold beyond
// the reserve, as libirdma does.
func (p *pendingQP) Commit(cmd driver.Commander, core *driver.QPCore, resp []byte) (driver.QP, error) {
	fail := func(err error) (driver.QP, error) {
		p.Abort()
		return nil, err
	}
	if len(resp) < qpRespLen {
		return fail(fmt.Errorf("irdma: CREATE_QP driver response is %d bytes, want %d", len(resp), qpRespLen))
	}
	var r qpResp
	wire.Decode(&r, resp)
	if r.Lsmm != 0 {
		// iWARP: the first send WQEs are the connection's; not the RoCE data path.
		return fail(fmt.Errorf("irdma: the kernel created an iWARP QP (lsmm); gorping's irdma provider drives RoCEv2 only: %w", unix.EOPNOTSUPP))
	}
	if r.ActualSQSize<<p.sqShift > p.sqDepth || r.ActualRQSize<<p.rqShift > p.rqDepth || r.ActualSQSize == 0 || r.ActualRQSize == 0 {
		return fail(fmt.Errorf("irdma: the kernel sized the queues %d/%d WRs, beyond the %d/%d quanta allocated", r.ActualSQSize, r.ActualRQSize, p.sqDepth, p.rqDepth))
	}
	buf := p.mem.Bytes()
	q := &qp{c: p.c, mem: p.mem, mr: p.mr, ctx: p.ctx, qpID: r.QPID, caps: r.QPCaps, sigAll: p.sigAll,
		sendCQ: p.sendCQ, recvCQ: p.recvCQ, maxSendSGE: core.Cap.MaxSendSGE, maxRecvSGE: core.Cap.MaxRecvSGE,
		maxInline: core.Cap.MaxInlineData, chunk: uint32(p.c.attrs.MaxHwSQChunk), maxReadSGE: p.c.attrs.MaxHwReadSges}
	q.sq = wq{ring: buf[:p.sqBytes], size: r.ActualSQSize << p.sqShift}
	q.sq.trk = make([]sqTrk, q.sq.size)
	q.rq = wq{ring: buf[p.sqBytes : p.sqBytes+p.rqBytes], size: r.ActualRQSize, mult: 1 << p.rqShift}
	q.rq.wrid = make([]uint64, q.rq.size)
	core.Cap.MaxSendWR = (p.sqDepth - sqReserved) >> p.sqShift
	core.Cap.MaxRecvWR = (p.rqDepth - rqReserved) >> p.rqShift
	p.c.qps.Set(p.ctx, q)
	return q, nil
}

// qp is an irdma RC queue pair.
type qp struct {
	c              *context
	mem            *umem.Mem
	mr             uint32
	ctx            uint64 // the completion context its CQEs carry
	qpID           uint32
	caps           uint32
	sigAll         bool
	sendCQ, recvCQ *cq
	sq, rq         wq
	maxSendSGE     uint32
	maxRecvSGE     uint32
	maxInline      uint32
	maxReadSGE     uint32
	chunk          uint32 // max_hw_sq_chunk: a WQE never crosses a chunk of this many quanta
	closed         bool
	// inError: an error CQE was read for the QP, or it was moved to ERR. The device
	// flushed what it had then; what is posted after that would never complete (libirdma
	// posts it, and asks the kernel to flush again when the queue was empty), so gorping
	// refuses it.
	inError atomic.Bool
}

// SetState (driver.QPStateObserver): ERR refuses further posts, RESET takes them again.
func (q *qp) SetState(s driver.QPState) error {
	switch s {
	case driver.QPSErr:
		q.inError.Store(true)
	case driver.QPSReset:
		q.inError.Store(false)
	}
	return nil
}

// setFragment writes one 16-byte fragment (address, then length, STag and the valid
// bit); g nil: an empty fragment with only the valid bit (irdma_set_fragment).
func setFragment(wqe []byte, off int, g *driver.SGE, valid uint64) {
	if g == nil {
		le.PutUint64(wqe[off:], 0)
		le.PutUint64(wqe[off+8:], valid<<63)
		return
	}
	le.PutUint64(wqe[off:], g.Addr)
	le.PutUint64(wqe[off+8:], valid<<63|uint64(g.Length&0x7fffffff)<<fragLenShift|uint64(g.LKey))
}

// quantaOfFrags is irdma_fragcnt_to_quanta_sq.
func quantaOfFrags(n int) (uint32, bool) {
	if n > 15 {
		return 0, false
	}
	return uint32(n)/2 + 1, true
}

// quantaOfInline is irdma_inline_data_size_to_quanta: 8 bytes in the first quantum, 31
// in each further one.
func quantaOfInline(n uint32) uint32 {
	if n <= 8 {
		return 1
	}
	return min(2+(n-9)/31, 8)
}

// PostSend posts one work request and rings the send doorbell, as libirdma's
// irdma_upost_send does after its chain, even when the request was refused. It allocates
// nothing.
func (q *qp) PostSend(wr *driver.SendWR) error {
	sq := &q.sq
	sq.mu.Lock()
	defer sq.mu.Unlock()
	if q.closed {
		return driver.ErrClosed
	}
	if q.inError.Load() {
		return errState
	}
	err := q.post(wr)
	q.c.doorbell(&sq.db, 0, q.qpID)
	return err
}

// post writes one send WQE (sq.mu held).
func (q *qp) post(wr *driver.SendWR) error {
	var op uint8
	imm := false
	switch wr.Opcode {
	case driver.WRSendWithImm:
		if q.caps&capSendWithImm == 0 {
			return errNoImm
		}
		imm = true
		fallthrough
	case driver.WRSend:
		op = opSend
		if wr.Flags&driver.SendSolicited != 0 {
			op = opSendSol
		}
	case driver.WRRDMAWriteWithImm:
		if q.caps&capWriteWithImm == 0 {
			return errNoImm
		}
		imm = true
		fallthrough
	case driver.WRRDMAWrite:
		op = opRDMAWrite
		if wr.Flags&driver.SendSolicited != 0 {
			op = opWriteSol
		}
	case driver.WRRDMARead:
		if uint32(len(wr.SGE)) > q.maxReadSGE {
			return errReadSGE
		}
		op = opRDMARead
	default:
		return errBadOpcode
	}
	if uint32(len(wr.SGE)) > q.maxSendSGE {
		return errTooManySGE
	}
	total := uint32(0)
	for i := range wr.SGE {
		total += wr.SGE[i].Length
	}
	inline := wr.Flags&driver.SendInline != 0 && op != opRDMARead
	var quanta uint32
	frags := len(wr.SGE)
	if imm {
		frags++
	}
	if inline {
		if total > q.maxInline {
			return errInlineLen
		}
		quanta = quantaOfInline(total)
	} else {
		var ok bool
		if quanta, ok = quantaOfFrags(frags); !ok {
			return errTooManySGE
		}
	}
	idx, ok := q.nextSendWQE(quanta, total, wr.ID, op)
	if !ok {
		return errFull
	}
	q.clearAhead(idx)
	sq := &q.sq
	wqe := sq.ring[idx*quantum : (idx+quanta)*quantum]
	pol := sq.polarity
	hdr := uint64(op)<<hdrOpcodeShift | pol<<63
	if wr.Flags&driver.SendSignaled != 0 || q.sigAll {
		hdr |= hdrSignaled
	}
	if wr.Flags&driver.SendFence != 0 {
		hdr |= hdrReadFence
	}
	if imm {
		le.PutUint64(wqe[0:], uint64(bits.ReverseBytes32(wr.Imm))) // host order in the WQE
		hdr |= hdrImmDataFlag
	}
	switch op {
	case opRDMAWrite, opWriteSol, opRDMARead:
		le.PutUint64(wqe[16:], wr.RemoteAddr)
		hdr |= uint64(wr.RKey)
	default:
		le.PutUint64(wqe[16:], 0) // qkey and destination QP: UD only
	}
	if inline {
		hdr |= hdrInlineFlag | uint64(total)<<hdrInlineLenSh
		copyInline(wqe, wr.SGE, pol)
	} else {
		addl := uint64(max(frags, 1) - 1)
		i, off := 0, 32
		if !imm {
			var g *driver.SGE
			if len(wr.SGE) > 0 {
				g = &wr.SGE[0]
			}
			setFragment(wqe, 0, g, pol)
			i = 1
		}
		for ; i < len(wr.SGE); i++ {
			setFragment(wqe, off, &wr.SGE[i], pol)
			off += 16
		}
		if frags%2 == 0 && frags != 0 {
			setFragment(wqe, off, nil, pol) // GEN_2: an even count ends with an empty, valid fragment
			addl++
		}
		hdr |= addl << hdrAddFragShift
	}
	mmio.ToDevice() // the WQE before its valid bit
	providerkit.Store64(wqe, wqeHdr, hdr)
	return nil
}

// copyInline copies the data the SGEs name into the WQE (irdma_copy_inline_data): 8
// bytes in the first quantum (bytes 8 to 15), 31 in each further one, whose last byte
// holds the valid bit (and the byte after the data in a last, partial quantum).
func copyInline(wqe []byte, sges []driver.SGE, pol uint64) {
	valid := byte(pol << inlineValidShift)
	pos, room, first := 8, 8, true
	for i := range sges {
		src := providerkit.UserBytes(sges[i].Addr, sges[i].Length)
		for len(src) > 0 {
			n := copy(wqe[pos:pos+min(len(src), room)], src)
			pos, room, src = pos+n, room-n, src[n:]
			if room == 0 {
				room = 31
				if first {
					first = false
					pos += 16
				} else {
					wqe[pos] = valid
					pos++
				}
			}
		}
	}
	if !first && room < 31 {
		wqe[pos+room] = valid
	}
}

// nextSendWQE reserves quanta at the send queue's head for a WQE (irdma_qp_get_next_send_wqe):
// a WQE that would cross a chunk of max_hw_sq_chunk quanta is preceded by NOPs to the
// chunk's end; the valid bit flips where the ring starts over. It fails if the queue
// would keep fewer than its reserve free.
func (q *qp) nextSendWQE(quanta, total uint32, wrid uint64, op uint8) (uint32, bool) {
	sq := &q.sq
	free := int(sq.size) - int(sq.used()) - sqSlack
	avail := q.chunk - sq.head%q.chunk
	if quanta <= avail {
		if int(quanta) > free {
			return 0, false
		}
	} else {
		if int(quanta+avail) > free {
			return 0, false
		}
		for range avail {
			q.nop()
			sq.head = (sq.head + 1) % sq.size
		}
	}
	idx := sq.head
	if idx == 0 {
		sq.polarity ^= 1
	}
	sq.head = (sq.head + quanta) % sq.size
	sq.trk[idx] = sqTrk{wrid: wrid, length: total, quanta: uint8(quanta), op: op}
	return idx, true
}

// nop writes an unsignaled NOP at the send queue's head (irdma_nop_1).
func (q *qp) nop() {
	sq := &q.sq
	w := sq.quantum(sq.head)
	sq.trk[sq.head] = sqTrk{quanta: 1, op: opNOP}
	clear(w[:wqeHdr])
	mmio.ToDevice()
	providerkit.Store64(w, wqeHdr, uint64(opNOP)<<hdrOpcodeShift|sq.polarity<<63)
}

// clearAhead is irdma_clr_wqes: at the start of each 128-quanta chunk, the chunk after it
// is filled so that none of its stale WQEs looks valid in the lap that reaches it.
func (q *qp) clearAhead(idx uint32) {
	if idx%clrChunk != 0 {
		return
	}
	sq := &q.sq
	j := (idx + clrChunk) % sq.size
	fill := byte(0)
	if (j != 0) == (sq.polarity == 0) {
		fill = 0xff
	}
	b := sq.ring[j*quantum : (j+clrChunk)*quantum]
	for i := range b {
		b[i] = fill
	}
}

// PostRecv posts one receive WQE. Receives need no doorbell: the device reads the
// receive queue by the valid bits. It allocates nothing.
func (q *qp) PostRecv(wr *driver.RecvWR) error {
	rq := &q.rq
	rq.mu.Lock()
	defer rq.mu.Unlock()
	if q.closed {
		return driver.ErrClosed
	}
	if q.inError.Load() {
		return errState
	}
	if uint32(len(wr.SGE)) > q.maxRecvSGE {
		return errTooManySGE
	}
	if rq.used() == rq.size-1 {
		return errFull
	}
	idx := rq.head
	rq.head = (rq.head + 1) % rq.size
	if idx == 0 {
		rq.polarity ^= 1
	}
	rq.wrid[idx] = wr.ID
	wqe := rq.ring[idx*rq.mult*quantum : (idx+1)*rq.mult*quantum]
	pol := rq.polarity
	var g *driver.SGE
	if len(wr.SGE) > 0 {
		g = &wr.SGE[0]
	}
	setFragment(wqe, 0, g, pol)
	off := 32
	for i := 1; i < len(wr.SGE); i++ {
		setFragment(wqe, off, &wr.SGE[i], pol)
		off += 16
	}
	addl := uint64(max(len(wr.SGE), 1) - 1)
	if n := len(wr.SGE); n%2 == 0 && n != 0 {
		setFragment(wqe, off, nil, pol)
		addl++
	}
	le.PutUint64(wqe[16:], 0)
	mmio.ToDevice() // the WQE before its valid bit
	providerkit.Store64(wqe, wqeHdr, addl<<hdrAddFragShift|pol<<63)
	return nil
}

// Close runs after DESTROY_QP: the buffer's registration goes, the CQs forget the QP's
// CQEs, then the memory goes.
func (q *qp) Close() error {
	if !providerkit.CloseOnce(&q.closed, &q.sq.mu, &q.rq.mu) {
		return nil
	}
	err := q.c.deregMR(q.mr)
	q.c.qps.Set(q.ctx, nil)
	q.sendCQ.clean(q.ctx)
	if q.recvCQ != q.sendCQ {
		q.recvCQ.clean(q.ctx)
	}
	return errors.Join(err, q.mem.Free())
}

func (q *qp) Describe() string {
	q.sq.mu.Lock()
	defer q.sq.mu.Unlock()
	return fmt.Sprintf("irdma QP %d: send queue %d quanta (head %d, tail %d), receive queue %d WQEs of %d quanta, caps %#x",
		q.qpID, q.sq.size, q.sq.head, q.sq.tail, q.rq.size, q.rq.mult, q.caps)
}
