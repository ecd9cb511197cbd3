// Package rxe is gorping's provider for Soft-RoCE (the rdma_rxe kernel driver): the send,
// receive and completion queues are rings the kernel shares through mmap on the uverbs fd;
// sends need a POST_SEND doorbell write, receives and polling need no system call, and a CQ
// is armed with a REQ_NOTIFY_CQ write. It registers itself with uverbs on import.
package rxe

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gorping/gorping/internal/wire"
	"github.com/gorping/gorping/uverbs"
	"github.com/gorping/gorping/uverbs/driver"
	"github.com/gorping/gorping/uverbs/providerkit"
	"golang.org/x/sys/unix"
)

func init() { uverbs.Register(provider{}) }

type provider struct{}

func (provider) Info() driver.Info {
	return driver.Info{
		Driver: rxeDriver, DriverID: rxeDriverID, ABIMin: rxeABIMin, ABIMax: rxeABIMax,
		Transport: driver.TransportIB,
		Sysfs:     driver.SysfsMatch{SoftParent: true},
		// The send doorbell and the CQ arm: rxe's doorbell runs the whole send inline
		// (WQE to packet, loopback, the peer's receive), but never sleeps.
		RawCommands: []uint32{driver.CmdPostSend, driver.CmdReqNotifyCQ},
	}
}

// NewContext runs GET_CONTEXT (rxe has no driver data either way).
func (provider) NewContext(dev driver.Device, cc driver.ContextCommander) (driver.Context, error) {
	if _, err := cc.GetContext(nil, 0); err != nil {
		return nil, err
	}
	return &rxeContext{}, nil
}

// rxeContext is an rxe context: rxe keeps no per-context state (the kernel allocates the
// rings, which are mapped through the context's Commander).
type rxeContext struct{}

func (c *rxeContext) Close() error { return nil }

func (c *rxeContext) CQUdata(cqe int) ([]byte, int) { return nil, createCQLen }

// mapRing maps one queue described by mi (each rxe queue can be mapped exactly once).
func (c *rxeContext) mapRing(cmd driver.Commander, mi mminfo, minElem int, what string) (*ring, error) {
	if mi.Size < ringDataOff || mi.Size > 1<<31 {
		return nil, fmt.Errorf("rxe: %s mmap size %d out of range", what, mi.Size)
	}
	if mi.Offset > 1<<62 {
		return nil, fmt.Errorf("rxe: %s mmap offset %#x out of range", what, mi.Offset)
	}
	mem, err := cmd.Mmap("rxe "+what+" ring", int64(mi.Offset), int(mi.Size), unix.PROT_READ|unix.PROT_WRITE)
	if err != nil {
		return nil, fmt.Errorf("rxe: %w", err)
	}
	r, err := newRing(mem, minElem)
	if err != nil {
		cmd.Munmap(mem)
		return nil, fmt.Errorf("rxe: %s: %w", what, err)
	}
	return r, nil
}

func (c *rxeContext) NewCQ(cmd driver.Commander, core driver.CQCore, resp []byte) (driver.CQ, error) {
	if len(resp) < createCQLen {
		return nil, fmt.Errorf("rxe: CREATE_CQ driver response is %d bytes, want %d", len(resp), createCQLen)
	}
	var r createCQResp
	wire.Decode(&r, resp)
	rg, err := c.mapRing(cmd, r.Mi, cqeMinSize, "completion queue")
	if err != nil {
		return nil, err
	}
	cq := &cq{ctx: c, cmd: cmd, ring: rg}
	cq.arm = driver.NewCQArm(core.Handle)
	return cq, nil
}

func (c *rxeContext) QPUdata() ([]byte, int) {
	return nil, createQPLen // rxe rejects any driver input on CREATE_QP
}

func (c *rxeContext) NewQP(cmd driver.Commander, core driver.QPCore, resp []byte) (driver.QP, error) {
	if len(resp) < createQPLen {
		return nil, fmt.Errorf("rxe: CREATE_QP driver response is %d bytes, want %d", len(resp), createQPLen)
	}
	if core.Type != driver.QPTypeRC && core.Type != driver.QPTypeUC {
		return nil, fmt.Errorf("rxe: QP type %d not supported by gorping (RC and UC only)", core.Type)
	}
	var r createQPResp
	wire.Decode(&r, resp)
	sq, err := c.mapRing(cmd, r.SQMi, sendWQESize+sgeSize*int(core.Cap.MaxSendSGE), "send queue")
	if err != nil {
		return nil, err
	}
	var rq *ring
	if r.RQMi.Size != 0 { // no RQ with an SRQ
		rq, err = c.mapRing(cmd, r.RQMi, recvWQESize+sgeSize*int(core.Cap.MaxRecvSGE), "receive queue")
		if err != nil {
			cmd.Munmap(sq.mem)
			return nil, err
		}
	}
	qp := &qp{
		ctx:        c,
		cmd:        cmd,
		sq:         sq,
		rq:         rq,
		sigAll:     core.SigAll,
		maxSendSGE: int(core.Cap.MaxSendSGE),
		maxRecvSGE: int(core.Cap.MaxRecvSGE),
	}
	// SGEs must also fit the slot the kernel sized.
	qp.maxSendSGE = min(qp.maxSendSGE, (sq.elemSize()-sendWQESize)/sgeSize)
	if rq != nil {
		qp.maxRecvSGE = min(qp.maxRecvSGE, (rq.elemSize()-recvWQESize)/sgeSize)
	}
	qp.db = driver.NewDoorbell(core.Handle, doorbellWQE)
	return qp, nil
}

// cq is an rxe completion queue: the kernel produces ib_uverbs_wc CQEs into the ring.
type cq struct {
	ctx    *rxeContext
	cmd    driver.Commander
	mu     sync.Mutex // one consumer; also guards ring against Close
	ring   *ring
	closed atomic.Bool
	arm    driver.CQArm
}

// Poll copies up to len(wc) CQEs and returns them to the kernel in one index update.
func (q *cq) Poll(wc []driver.WC) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ring == nil {
		return 0, driver.ErrClosed
	}
	r := q.ring
	n := min(r.available(), uint32(min(len(wc), 1<<24)))
	for i := uint32(0); i < n; i++ {
		e := (*cqe)(r.slot(r.own + i))
		wc[i] = driver.WC{
			WRID:         e.WRID,
			Status:       driver.WCStatus(e.Status),
			Opcode:       driver.WCOpcode(e.Opcode),
			VendorErr:    e.VendorErr,
			ByteLen:      e.ByteLen,
			Imm:          e.Ex,
			QPNum:        e.QPNum,
			SrcQP:        e.SrcQP,
			Flags:        driver.WCFlags(e.WcFlags),
			PKeyIndex:    e.PkeyIndex,
			SLID:         e.SLID,
			SL:           e.SL,
			DLIDPathBits: e.DLIDPathBits,
			PortNum:      e.PortNum,
		}
	}
	if n > 0 {
		r.release(n)
	}
	return int(n), nil
}

// Arm asks the kernel for one completion event (REQ_NOTIFY_CQ).
func (q *cq) Arm(solicitedOnly bool) error {
	if q.closed.Load() {
		return driver.ErrClosed
	}
	return q.arm.Arm(q.cmd, solicitedOnly)
}

// Close unmaps the ring; the core calls it after DESTROY_CQ.
func (q *cq) Close() error {
	q.closed.Store(true)
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ring == nil {
		return nil
	}
	err := q.cmd.Munmap(q.ring.mem)
	q.ring = nil
	if err != nil {
		return fmt.Errorf("rxe: munmap completion queue: %w", err)
	}
	return nil
}

// Errors of the posting path are preallocated: posting must not allocate.
var (
	errTooManySGE  = providerkit.ErrTooManySGE("rxe", unix.EINVAL)
	errBadOpcode   = providerkit.ErrBadOpcode("rxe")
	errInline      = fmt.Errorf("rxe: inline sends are not supported by gorping: %w", unix.EOPNOTSUPP)
	errTooLong     = fmt.Errorf("rxe: work request longer than 4 GiB: %w", unix.EINVAL)
	errNoRQ        = providerkit.ErrNoRQ("rxe")
	errRecvInReset = fmt.Errorf("rxe: cannot post a receive to a QP in RESET (move it to INIT first): %w", unix.EINVAL)
)

// qp is an rxe queue pair: user space produces WQEs into the SQ and RQ rings.
type qp struct {
	ctx        *rxeContext
	cmd        driver.Commander
	sigAll     bool
	maxSendSGE int
	maxRecvSGE int

	state  atomic.Uint32 // driver.QPState last set through MODIFY_QP
	closed atomic.Bool

	sqMu      sync.Mutex
	sq        *ring
	pendingDB bool // WQEs produced before RTS: ring once the QP gets there
	db        driver.Doorbell

	rqMu sync.Mutex
	rq   *ring
}

// sendLength validates wr and returns its payload length.
func (q *qp) sendLength(wr *driver.SendWR) (uint32, error) {
	switch wr.Opcode {
	case driver.WRSend, driver.WRSendWithImm, driver.WRRDMAWrite, driver.WRRDMAWriteWithImm, driver.WRRDMARead:
	default:
		return 0, errBadOpcode
	}
	if wr.Flags&driver.SendInline != 0 {
		return 0, errInline
	}
	if len(wr.SGE) > q.maxSendSGE {
		return 0, errTooManySGE
	}
	return sgeLength(wr.SGE)
}

func sgeLength(sges []driver.SGE) (uint32, error) {
	var total uint64
	for i := range sges {
		total += uint64(sges[i].Length)
	}
	if total > 1<<32-1 {
		return 0, errTooLong
	}
	return uint32(total), nil
}

// PostSend writes one send WQE (rxe_send_wqe + SGEs) and rings the doorbell.
func (q *qp) PostSend(wr *driver.SendWR) error {
	length, err := q.sendLength(wr)
	if err != nil {
		return err
	}
	flags := uint32(wr.Flags)
	if q.sigAll {
		flags |= uint32(driver.SendSignaled)
	}
	var imm, rkey uint32
	var raddr uint64
	switch wr.Opcode {
	case driver.WRSendWithImm:
		imm = wr.Imm
	case driver.WRRDMAWriteWithImm:
		imm = wr.Imm
		raddr, rkey = wr.RemoteAddr, wr.RKey
	case driver.WRRDMAWrite, driver.WRRDMARead:
		raddr, rkey = wr.RemoteAddr, wr.RKey
	}
	q.sqMu.Lock()
	defer q.sqMu.Unlock()
	r := q.sq
	if r == nil {
		return driver.ErrClosed
	}
	if r.producerFull() {
		return driver.ErrQueueFull
	}
	p := r.produceSlot()
	// Assigning the whole header also clears the fields the kernel used as scratch space
	// the last time it owned this slot.
	*(*sendWQE)(p) = sendWQE{
		WR: sendWR{
			WRID:      wr.ID,
			Opcode:    uint32(wr.Opcode),
			SendFlags: flags,
			Ex:        imm,
			WR:        rdmaWR{RemoteAddr: raddr, Rkey: rkey},
		},
		// The kernel takes the RETH virtual address from iova, not from wr.rdma, and
		// advances it as it segments the message.
		Iova: raddr,
		Dma:  dmaInfo{Length: length, Resid: length, NumSGE: uint32(len(wr.SGE))},
	}
	putSGEs(unsafe.Add(p, sendWQESize), wr.SGE)
	r.publish()
	if driver.QPState(q.state.Load()) < driver.QPSRTS {
		// The kernel refuses the doorbell (EINVAL) before RTS but keeps the WQE queued.
		q.pendingDB = true
		return nil
	}
	return q.doorbellLocked()
}

// doorbellLocked tells the kernel new WQEs are in the SQ (POST_SEND with no WRs).
func (q *qp) doorbellLocked() error {
	q.pendingDB = false
	return q.db.Ring(q.cmd)
}

// PostRecv writes one receive WQE; the kernel picks it up without a system call.
func (q *qp) PostRecv(wr *driver.RecvWR) error {
	if len(wr.SGE) > q.maxRecvSGE {
		return errTooManySGE
	}
	length, err := sgeLength(wr.SGE)
	if err != nil {
		return err
	}
	q.rqMu.Lock()
	defer q.rqMu.Unlock()
	r := q.rq
	if r == nil {
		if q.closed.Load() {
			return driver.ErrClosed
		}
		return errNoRQ
	}
	if driver.QPState(q.state.Load()) == driver.QPSReset {
		return errRecvInReset
	}
	if r.producerFull() {
		return driver.ErrQueueFull
	}
	p := r.produceSlot()
	*(*recvWQE)(p) = recvWQE{
		WRID: wr.ID,
		Dma:  dmaInfo{Length: length, Resid: length, NumSGE: uint32(len(wr.SGE))},
	}
	putSGEs(unsafe.Add(p, recvWQESize), wr.SGE)
	r.publish()
	return nil
}

// putSGEs writes sges as struct rxe_sge after a WQE header at p (the slot has room: the
// count was checked against the slot size).
func putSGEs(p unsafe.Pointer, sges []driver.SGE) {
	if len(sges) == 0 {
		return
	}
	dst := unsafe.Slice((*sge)(p), len(sges))
	for i := range sges {
		dst[i] = sge{Addr: sges[i].Addr, Length: sges[i].Length, Lkey: sges[i].LKey}
	}
}

// SetState records the state MODIFY_QP set and rings a doorbell deferred until RTS.
func (q *qp) SetState(s driver.QPState) error {
	q.state.Store(uint32(s))
	if s < driver.QPSRTS {
		return nil
	}
	q.sqMu.Lock()
	defer q.sqMu.Unlock()
	if !q.pendingDB || q.sq == nil {
		return nil
	}
	if err := q.doorbellLocked(); err != nil {
		return fmt.Errorf("rxe: deferred send doorbell: %w", err)
	}
	return nil
}

// Close unmaps the rings; the core calls it after DESTROY_QP.
func (q *qp) Close() error {
	q.closed.Store(true)
	q.sqMu.Lock()
	q.rqMu.Lock()
	defer q.sqMu.Unlock()
	defer q.rqMu.Unlock()
	var errs []error
	if q.sq != nil {
		errs = append(errs, q.cmd.Munmap(q.sq.mem))
		q.sq = nil
	}
	if q.rq != nil {
		errs = append(errs, q.cmd.Munmap(q.rq.mem))
		q.rq = nil
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("rxe: munmap queue pair rings: %w", err)
	}
	return nil
}
