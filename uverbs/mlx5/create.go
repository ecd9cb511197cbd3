package mlx5

import (
	"fmt"
	"unsafe"

	"github.com/gorping/gorping/internal/umem"
	"github.com/gorping/gorping/internal/wire"
	"github.com/gorping/gorping/uverbs/driver"
	"github.com/gorping/gorping/uverbs/providerkit"
	"golang.org/x/sys/unix"
)

// PrepareCQ allocates the CQE buffer (every CQE invalid and device-owned) and the doorbell
// record, and tells the kernel the depth the ring really has.
func (c *context) PrepareCQ(req *driver.CQRequest) (driver.PendingCQ, error) {
	ncqe, err := cqEntries(req.CQE)
	if err != nil {
		return nil, err
	}
	ts := req.Flags&driver.CQTimestamps != 0
	if ts && c.clock == nil {
		return nil, fmt.Errorf("mlx5: completion timestamps need the kernel's clock_info page, which %s's context lacks: %w", c.dev.Name, unix.EOPNOTSUPP)
	}
	mem, err := umem.Anon(ncqe * cqeSize)
	if err != nil {
		return nil, fmt.Errorf("mlx5: CQ buffer: %w", err)
	}
	initCQEs(mem.Bytes())
	db, err := c.dbrs.alloc()
	if err != nil {
		mem.Free()
		return nil, err
	}
	req.CQE = ncqe - 1
	p := &pendingCQ{c: c, mem: mem, db: db, ncqe: ncqe, ts: ts}
	p.req = createCQReq{BufAddr: mem.Addr(), DbAddr: db.addr(), CQESize: cqeSize}
	return p, nil
}

type pendingCQ struct {
	c    *context
	mem  *umem.Mem
	db   dbrec
	ncqe int
	ts   bool // created with completion timestamps
	req  createCQReq
}

func (p *pendingCQ) Udata() ([]byte, int) { return wire.Bytes(&p.req), createCQRespLen }

func (p *pendingCQ) Abort() {
	p.mem.Free()
	p.c.dbrs.release(p.db)
}

func (p *pendingCQ) Commit(cmd driver.Commander, core driver.CQCore, resp []byte) (driver.CQ, error) {
	if err := providerkit.ShortResp("mlx5", "CREATE_CQ", len(resp), createCQRespLen); err != nil {
		p.Abort()
		return nil, err
	}
	if core.CQE != p.ncqe-1 {
		p.Abort()
		return nil, fmt.Errorf("mlx5: kernel made the CQ %d deep, the ring has %d entries", core.CQE, p.ncqe)
	}
	var r createCQResp
	wire.Decode(&r, resp)
	q := &cq{c: p.c, mem: p.mem, db: p.db}
	q.ring = cqRing{
		buf: p.mem.Bytes(), ncqe: uint32(p.ncqe), cqn: r.Cqn, dbrec: p.db.words(),
		uarDB: unsafe.Pointer(&p.c.uars[0][cqDoorbellOffset]), table: &p.c.table, ts: p.ts,
	}
	return q, nil
}

// cq is an mlx5 completion queue.
type cq struct {
	c    *context
	mem  *umem.Mem
	db   dbrec
	ring cqRing
}

func (q *cq) Poll(wc []driver.WC) (int, error) { return q.ring.poll(wc) }
func (q *cq) Arm(solicitedOnly bool) error     { return q.ring.arm(solicitedOnly) }
func (q *cq) CompEvent()                       { q.ring.event() }

// TimestampNS converts a completion timestamp (cycles of the device's free-running clock)
// to nanoseconds with the kernel's clock_info page (driver.TimestampConverter).
func (q *cq) TimestampNS(ts uint64) (uint64, bool) {
	ck := q.c.clock
	if ck == nil || !q.ring.ts {
		return 0, false
	}
	ci, ok := ck.snapshot()
	if !ok {
		return 0, false
	}
	return tsToNS(&ci, ts), true
}

func (q *cq) Close() error {
	q.ring.mu.Lock()
	defer q.ring.mu.Unlock()
	if q.ring.buf == nil {
		return nil
	}
	q.ring.buf = nil
	q.c.dbrs.release(q.db)
	return q.mem.Free()
}

func (q *cq) Describe() string {
	q.ring.mu.Lock()
	defer q.ring.mu.Unlock()
	s := fmt.Sprintf("mlx5 CQ %#x: %d CQEs of %d bytes at %#x, doorbell record %#x, arm doorbell UAR page 0 +%#x, consumer index %d, arm sn %d",
		q.ring.cqn, q.ring.ncqe, cqeSize, q.mem.Addr(), q.db.addr(), cqDoorbellOffset, q.ring.ci, q.ring.armSN.Load()&3)
	if q.ring.ts {
		s += ", completion timestamps"
	}
	if q.ring.lastErr != "" {
		s += "; last error CQE: " + q.ring.lastErr
	}
	return s
}

// PrepareQP sizes the queues by libmlx5's rules, allocates the QP buffer (RQ first, then
// the SQ) and the doorbell record, and reserves the user index CQEs will carry. It raises
// the core request's max_inline_data to what the WQE size allows, as libmlx5 does.
func (c *context) PrepareQP(req *driver.QPRequest) (driver.PendingQP, error) {
	if req.Type != driver.QPTypeRC && req.Type != driver.QPTypeUC {
		return nil, fmt.Errorf("mlx5: QP type %d not supported by gorping (RC and UC only)", req.Type)
	}
	g, err := sizeQP(c.lim, int(req.Cap.MaxSendWR), int(req.Cap.MaxRecvWR), int(req.Cap.MaxSendSGE), int(req.Cap.MaxRecvSGE), int(req.Cap.MaxInlineData))
	if err != nil {
		return nil, err
	}
	size := align(max(g.rqBytes+g.sqBytes, 1), c.pageSize)
	mem, err := umem.Anon(size)
	if err != nil {
		return nil, fmt.Errorf("mlx5: QP buffer: %w", err)
	}
	db, err := c.dbrs.alloc()
	if err != nil {
		mem.Free()
		return nil, err
	}
	if g.sqWQECnt > 0 {
		req.Cap.MaxInlineData = uint32(g.maxInline)
	}
	p := &pendingQP{c: c, mem: mem, db: db, g: g, sigAll: req.SigAll, sendSGE: req.Cap.MaxSendSGE}
	p.sendCQ, _ = req.SendCQ.(*cq)
	p.recvCQ, _ = req.RecvCQ.(*cq)
	p.uidx = c.table.add(nil)
	p.req = createQPReq{
		BufAddr: mem.Addr(), DbAddr: db.addr(),
		SQWQECount: uint32(g.sqWQECnt), RQWQECount: uint32(g.rqWQECnt), RQWQEShift: uint32(g.rqWQEShift),
		Uidx: p.uidx,
	}
	return p, nil
}

type pendingQP struct {
	c       *context
	mem     *umem.Mem
	db      dbrec
	g       qpGeometry
	sigAll  bool
	sendSGE uint32
	uidx    uint32
	req     createQPReq
	sendCQ  *cq // nil if not this provider's (the core refuses that)
	recvCQ  *cq
}

func (p *pendingQP) Udata() ([]byte, int) { return wire.Bytes(&p.req), createQPRespLen }

func (p *pendingQP) Abort() {
	p.c.table.remove(p.uidx)
	p.mem.Free()
	p.c.dbrs.release(p.db)
}

func (p *pendingQP) Commit(cmd driver.Commander, core *driver.QPCore, resp []byte) (driver.QP, error) {
	if err := providerkit.ShortResp("mlx5", "CREATE_QP", len(resp), createQPRespLen); err != nil {
		p.Abort()
		return nil, err
	}
	var r createQPResp
	wire.Decode(&r, resp)
	bf, err := p.c.bfreg(int(r.BfregIndex))
	if err != nil {
		p.Abort()
		return nil, err
	}
	g := p.g
	buf := p.mem.Bytes()
	q := &qp{qpn: core.QPN, uidx: p.uidx, c: p.c, mem: p.mem, db: p.db, bf: bf, g: g, sendCQ: p.sendCQ, recvCQ: p.recvCQ}
	if g.sqWQECnt > 0 {
		q.sq = newSendQueue(buf[g.rqBytes:g.rqBytes+g.sqBytes], g, core.QPN, p.sigAll, p.db.words(), bf)
	}
	if g.rqWQECnt > 0 {
		q.rq = newRecvQueue(buf[:g.rqBytes], g, p.db.words())
	}
	p.c.table.set(p.uidx, q)
	// Report what the queues really take, as libmlx5 does.
	core.Cap = driver.QPCap{
		MaxSendWR: uint32(g.sqMaxPost), MaxRecvWR: uint32(g.rqMaxPost),
		MaxSendSGE: p.sendSGE, MaxRecvSGE: uint32(g.maxRecvSGE), MaxInlineData: uint32(g.maxInline),
	}
	return q, nil
}

// Close runs after DESTROY_QP: like libmlx5 it removes the QP's CQEs that are still in
// its CQs (shared CQs keep serving their other QPs, and the user index may be given to
// a new QP at once), then frees the QP's memory.
func (q *qp) Close() error {
	if q.mem != nil {
		cleanCQs(q.recvCQ, q.sendCQ, q.uidx)
	}
	q.c.table.remove(q.uidx)
	if q.sq != nil {
		q.sq.mu.Lock()
		q.sq.buf = nil
		defer q.sq.mu.Unlock()
	}
	if q.rq != nil {
		q.rq.mu.Lock()
		q.rq.buf = nil
		defer q.rq.mu.Unlock()
	}
	if q.mem == nil {
		return nil
	}
	q.c.releaseBfreg(q.bf)
	q.c.dbrs.release(q.db)
	err := q.mem.Free()
	q.mem = nil
	return err
}

func (q *qp) Describe() string {
	bf := q.bf
	mode := "doorbell only (no BlueFlame)"
	if bf.bufSize > 0 {
		mode = fmt.Sprintf("BlueFlame halves of %d bytes", bf.bufSize)
	}
	share := "dedicated"
	if bf.lock != nil {
		share = "shared, locked"
	}
	sys := bf.index / (bfregsPerUAR * q.c.nupp)
	return fmt.Sprintf("mlx5 QP %#x uidx %d: bfreg %d (UAR page %d, %s, %s); SQ %d blocks of 64 bytes (%d WRs of %d bytes, inline %d); RQ %d slots of %d bytes; buffer %#x, doorbell record %#x",
		q.qpn, q.uidx, bf.index, sys, mode, share, q.g.sqWQECnt, q.g.sqMaxPost, q.g.sqWQESize, q.g.maxInline,
		q.g.rqWQECnt, 1<<q.g.rqWQEShift, q.mem.Addr(), q.db.addr())
}
