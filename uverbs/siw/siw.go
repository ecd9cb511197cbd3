// Package siw is gorping's provider for Soft-iWARP (the siw kernel driver). The kernel
// exports each send queue, receive queue and completion queue as an array of fixed-size
// elements the user maps through the uverbs fd; ownership of an element is its flags word
// (VALID set: the consumer's). Receives and polling need no system call, a send needs a
// POST_SEND doorbell write, and a CQ is armed by a store into the control word after its
// CQE array. It registers itself with uverbs on import.
//
// siw is iWARP: the QP reaches RTS only through the kernel's connection manager (iw_cm),
// never through a user MODIFY_QP, so nothing here waits for a state the user sets; the
// kernel answers a doorbell before RTS with ENOTCONN.
package siw

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
		Driver: siwDriver, DriverID: siwDriverID, ABIMin: siwABI, ABIMax: siwABI,
		Transport: driver.TransportIWARP,
		Sysfs:     driver.SysfsMatch{SoftNode: true},
		// None: siw's send doorbell pushes the queued work into the TCP socket inline,
		// which takes the socket lock and may wait for it; the scheduler must see that.
		// The CQ is armed in memory.
	}
}

// NewContext runs GET_CONTEXT; siw answers with its device id and fails without room
// for it.
func (provider) NewContext(dev driver.Device, cc driver.ContextCommander) (driver.Context, error) {
	if _, err := cc.GetContext(nil, allocCtxLen); err != nil {
		return nil, err
	}
	return &context{}, nil
}

type context struct{}

func (c *context) Close() error { return nil }

// MRUdata: siw requires its REG_MR request (a stag key, 0 as in libsiw) and room for the
// response carrying the STag.
func (c *context) MRUdata(driver.AccessFlags) ([]byte, int) {
	var req regMRReq
	return wire.Bytes(&req), regMRLen
}

// MRRegistered checks the response is there; the STag also comes back as lkey/rkey.
func (c *context) MRRegistered(handle uint32, resp []byte) error {
	if len(resp) < regMRLen {
		return fmt.Errorf("siw: REG_MR driver response is %d bytes, want %d", len(resp), regMRLen)
	}
	return nil
}

// mapQueue maps the queue the kernel exported under key, size bytes.
func mapQueue(cmd driver.Commander, key uint64, size int, what string) ([]byte, error) {
	if key == invalKey {
		return nil, fmt.Errorf("siw: the kernel could not export the %s: %w", what, unix.ENOMEM)
	}
	if size <= 0 || size > 1<<30 || key > 1<<62 {
		return nil, fmt.Errorf("siw: %s mapping of %d bytes at %#x out of range", what, size, key)
	}
	b, err := cmd.Mmap("siw "+what, int64(key), size, unix.PROT_READ|unix.PROT_WRITE)
	if err != nil {
		return nil, fmt.Errorf("siw: %w", err)
	}
	return b, nil
}

// --- completion queue

type pendingCQ struct{}

func (c *context) PrepareCQ(*driver.CQRequest) (driver.PendingCQ, error) { return pendingCQ{}, nil }

func (pendingCQ) Udata() ([]byte, int) { return nil, createCQLen }
func (pendingCQ) Abort()               {}

func (pendingCQ) Commit(cmd driver.Commander, core driver.CQCore, resp []byte) (driver.CQ, error) {
	if len(resp) < createCQLen {
		return nil, fmt.Errorf("siw: CREATE_CQ driver response is %d bytes, want %d", len(resp), createCQLen)
	}
	var r createCQResp
	wire.Decode(&r, resp)
	if r.NumCQE == 0 || r.NumCQE&(r.NumCQE-1) != 0 || r.NumCQE > 1<<22 {
		return nil, fmt.Errorf("siw: CREATE_CQ granted %d CQEs, not a power of two", r.NumCQE)
	}
	mem, err := mapQueue(cmd, r.CQKey, int(r.NumCQE)*cqeSize+cqCtrlSize, "completion queue")
	if err != nil {
		return nil, err
	}
	return newCQ(cmd, mem, r.NumCQE), nil
}

// cq is a siw completion queue: the kernel writes a CQE into a slot whose flags are 0
// and sets VALID; we read it and clear the flags, handing the slot back.
type cq struct {
	cmd  driver.Commander
	mu   sync.Mutex // one consumer; also guards mem against Close
	mem  []byte
	num  uint32
	get  uint32 // our private consumer position (never read back from shared memory)
	ctrl *uint32
}

func newCQ(cmd driver.Commander, mem []byte, num uint32) *cq {
	return &cq{cmd: cmd, mem: mem, num: num, ctrl: (*uint32)(unsafe.Pointer(&mem[int(num)*cqeSize]))}
}

// siw status → ib_wc_status
var wcStatus = [...]driver.WCStatus{
	0: driver.WCSuccess, 1: driver.WCLocLenErr, 2: driver.WCLocProtErr, 3: driver.WCLocQPOpErr,
	4: driver.WCWRFlushErr, 5: driver.WCBadRespErr, 6: driver.WCLocAccessErr, 7: driver.WCRemAccessErr,
	8: driver.WCRemInvReqErr, 9: driver.WCGeneralErr,
}

// siw opcode → ib_wc_opcode
var wcOpcode = [...]driver.WCOpcode{
	opWrite: driver.WCRDMAWrite, opRead: driver.WCRDMARead, opReadLocalInv: driver.WCRDMARead,
	opSend: driver.WCSend, opSendWithImm: driver.WCSend, opSendRemoteInv: driver.WCSend,
	opFetchAndAdd: driver.WCFetchAdd, opCompAndSwap: driver.WCCompSwap, opReceive: driver.WCRecv,
}

// Poll copies up to len(wc) completions.
func (q *cq) Poll(wc []driver.WC) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.mem == nil {
		return 0, driver.ErrClosed
	}
	n := 0
	for n < len(wc) {
		off := int(q.get&(q.num-1)) * cqeSize
		word := (*uint32)(unsafe.Pointer(&q.mem[off+wordOff]))
		w := atomic.LoadUint32(word) // acquire: the CQE's fields are visible after VALID
		if w&wqeValid == 0 {
			break
		}
		e := (*cqe)(unsafe.Pointer(&q.mem[off]))
		status := driver.WCGeneralErr
		if int(e.Status) < len(wcStatus) {
			status = wcStatus[e.Status]
		}
		op := driver.WCOpcode(0xff)
		if int(e.Opcode) < len(wcOpcode) {
			op = wcOpcode[e.Opcode]
		}
		wc[n] = driver.WC{WRID: e.ID, Status: status, Opcode: op, ByteLen: e.Bytes, QPNum: uint32(e.QPID)}
		if e.Flags&wqeRemInval != 0 {
			wc[n].Flags = driver.WCFlagWithInv
			wc[n].Imm = uint32(e.ImmData)
		}
		// Release: the slot is the kernel's again only after we read it.
		atomic.StoreUint32(word, 0)
		q.get++
		n++
	}
	return n, nil
}

// Arm asks for one completion event: a store into the control word, which the kernel
// reads (and clears when it notifies) on every CQE. No system call.
func (q *cq) Arm(solicitedOnly bool) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.mem == nil {
		return driver.ErrClosed
	}
	f := uint32(notifySolicited | notifyNextCompletion)
	if solicitedOnly {
		f = notifySolicited
	}
	atomic.StoreUint32(q.ctrl, f)
	return nil
}

// Close unmaps the queue; the core calls it after DESTROY_CQ.
func (q *cq) Close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.mem == nil {
		return nil
	}
	err := q.cmd.Munmap(q.mem)
	q.mem, q.ctrl = nil, nil
	if err != nil {
		return fmt.Errorf("siw: munmap completion queue: %w", err)
	}
	return nil
}

func (q *cq) Describe() string { return fmt.Sprintf("siw cq: %d CQEs", q.num) }

// --- queue pair

type pendingQP struct{ req *driver.QPRequest }

// PrepareQP checks what siw supports: RC only, at most 6 SGEs, inline data ≤ 80 bytes.
func (c *context) PrepareQP(req *driver.QPRequest) (driver.PendingQP, error) {
	if req.Type != driver.QPTypeRC {
		return nil, fmt.Errorf("siw: QP type %d not supported (iWARP has RC only): %w", req.Type, unix.EOPNOTSUPP)
	}
	if req.Cap.MaxSendSGE > maxSGE || req.Cap.MaxRecvSGE > maxSGE {
		return nil, fmt.Errorf("siw: at most %d SGEs per work request: %w", maxSGE, unix.EINVAL)
	}
	if req.Cap.MaxInlineData > maxInline {
		return nil, fmt.Errorf("siw: at most %d bytes of inline data: %w", maxInline, unix.EINVAL)
	}
	return pendingQP{req}, nil
}

func (pendingQP) Udata() ([]byte, int) { return nil, createQPLen }
func (pendingQP) Abort()               {}

func (p pendingQP) Commit(cmd driver.Commander, core *driver.QPCore, resp []byte) (driver.QP, error) {
	if len(resp) < createQPLen {
		return nil, fmt.Errorf("siw: CREATE_QP driver response is %d bytes, want %d", len(resp), createQPLen)
	}
	var r createQPResp
	wire.Decode(&r, resp)
	for _, n := range []uint32{r.NumSqe, r.NumRqe} {
		if n > 1<<16 || n&(n-1) != 0 {
			return nil, fmt.Errorf("siw: CREATE_QP granted %d/%d queue elements, not powers of two", r.NumSqe, r.NumRqe)
		}
	}
	if r.NumSqe == 0 {
		return nil, fmt.Errorf("siw: CREATE_QP granted no send queue")
	}
	sq, err := mapQueue(cmd, r.SQKey, int(r.NumSqe)*sqeSize, "send queue")
	if err != nil {
		return nil, err
	}
	var rq []byte
	if r.NumRqe != 0 { // none with an SRQ
		if rq, err = mapQueue(cmd, r.RQKey, int(r.NumRqe)*rqeSize, "receive queue"); err != nil {
			cmd.Munmap(sq)
			return nil, err
		}
	}
	q := &qp{
		cmd:        cmd,
		sq:         sq,
		rq:         rq,
		numSQE:     r.NumSqe,
		numRQE:     r.NumRqe,
		sigAll:     core.SigAll,
		maxSendSGE: min(int(core.Cap.MaxSendSGE), maxSGE),
		maxRecvSGE: min(int(core.Cap.MaxRecvSGE), maxSGE),
		db:         driver.NewDoorbell(core.Handle, doorbellWQE),
	}
	// What the queues really hold: the element counts are rounded up to powers of two.
	core.Cap.MaxSendWR, core.Cap.MaxRecvWR = r.NumSqe, r.NumRqe
	return q, nil
}

// doorbellWQE is sizeof(struct ib_uverbs_send_wr): the core checks wqe_size against it
// even when no work request follows.
const doorbellWQE = 56

// Errors of the posting path are preallocated: posting must not allocate.
var (
	errTooManySGE = providerkit.ErrTooManySGE("siw", unix.EINVAL)
	errBadOpcode  = fmt.Errorf("siw: work request opcode not supported by iWARP (SEND, SEND with invalidate, RDMA WRITE and RDMA READ only): %w", unix.EINVAL)
	errInline     = fmt.Errorf("siw: inline sends are not supported by gorping: %w", unix.EOPNOTSUPP)
	errReadSGE    = fmt.Errorf("siw: an RDMA READ takes exactly one SGE: %w", unix.EINVAL)
	errNoRQ       = providerkit.ErrNoRQ("siw")
)

// qp is a siw queue pair: user space fills SQ and RQ elements and hands them over by
// setting VALID; the kernel copies an element and clears its flags when it takes it.
type qp struct {
	cmd        driver.Commander
	sigAll     bool
	maxSendSGE int
	maxRecvSGE int
	numSQE     uint32
	numRQE     uint32

	sqMu  sync.Mutex
	sq    []byte
	sqPut uint32
	db    driver.Doorbell

	rqMu  sync.Mutex
	rq    []byte
	rqPut uint32

	closed atomic.Bool
}

func (q *qp) Describe() string {
	return fmt.Sprintf("siw qp: %d SQEs, %d RQEs", q.numSQE, q.numRQE)
}

func siwOpcode(op driver.WROpcode) (uint8, bool) {
	switch op {
	case driver.WRSend:
		return opSend, true
	case driver.WRSendWithInv:
		return opSendRemoteInv, true
	case driver.WRRDMAWrite:
		return opWrite, true
	case driver.WRRDMARead:
		return opRead, true
	}
	return 0, false
}

// PostSend fills the next SQE, publishes it and rings the doorbell.
func (q *qp) PostSend(wr *driver.SendWR) error {
	op, ok := siwOpcode(wr.Opcode)
	if !ok {
		return errBadOpcode
	}
	if wr.Flags&driver.SendInline != 0 {
		return errInline
	}
	if len(wr.SGE) > q.maxSendSGE {
		return errTooManySGE
	}
	if op == opRead && len(wr.SGE) != 1 {
		return errReadSGE
	}
	flags := uint32(wqeValid)
	if wr.Flags&driver.SendSignaled != 0 || q.sigAll {
		flags |= wqeSignalled
	}
	if wr.Flags&driver.SendSolicited != 0 {
		flags |= wqeSolicited
	}
	if wr.Flags&driver.SendFence != 0 {
		flags |= wqeReadFence
	}
	rkey, raddr := wr.RKey, wr.RemoteAddr
	switch op {
	case opSend:
		rkey, raddr = 0, 0
	case opSendRemoteInv:
		rkey, raddr = wr.Imm, 0 // the STag to invalidate (ibv_send_wr.invalidate_rkey)
	}
	q.sqMu.Lock()
	defer q.sqMu.Unlock()
	if q.sq == nil {
		return driver.ErrClosed
	}
	off := int(q.sqPut&(q.numSQE-1)) * sqeSize
	word := (*uint32)(unsafe.Pointer(&q.sq[off+wordOff]))
	if atomic.LoadUint32(word)&wqeValid != 0 {
		return driver.ErrQueueFull // the kernel has not taken this element yet
	}
	e := (*sqe)(unsafe.Pointer(&q.sq[off]))
	e.ID, e.Rkey, e.Raddr = wr.ID, rkey, raddr
	for i := range wr.SGE {
		e.SGE[i] = sge{Laddr: wr.SGE[i].Addr, Length: wr.SGE[i].Length, Lkey: wr.SGE[i].LKey}
	}
	// Release: flags (with num_sge and opcode, one 32-bit word) last, after the fields.
	atomic.StoreUint32(word, flags|uint32(len(wr.SGE))<<16|uint32(op)<<24)
	q.sqPut++
	// Always ring: libsiw skips the doorbell while the kernel's TX engine is busy, which
	// needs a store-load handshake; the write is cheap for the kernel to ignore.
	return q.db.Ring(q.cmd)
}

// PostRecv fills the next RQE and publishes it; the kernel picks it up without a system
// call.
func (q *qp) PostRecv(wr *driver.RecvWR) error {
	if len(wr.SGE) > q.maxRecvSGE {
		return errTooManySGE
	}
	q.rqMu.Lock()
	defer q.rqMu.Unlock()
	if q.rq == nil {
		if q.closed.Load() {
			return driver.ErrClosed
		}
		return errNoRQ
	}
	off := int(q.rqPut&(q.numRQE-1)) * rqeSize
	word := (*uint32)(unsafe.Pointer(&q.rq[off+wordOff]))
	if atomic.LoadUint32(word)&0xffff != 0 {
		return driver.ErrQueueFull
	}
	e := (*rqe)(unsafe.Pointer(&q.rq[off]))
	e.ID = wr.ID
	for i := range wr.SGE {
		e.SGE[i] = sge{Laddr: wr.SGE[i].Addr, Length: wr.SGE[i].Length, Lkey: wr.SGE[i].LKey}
	}
	// The kernel takes an RQE only if its flags are exactly VALID.
	atomic.StoreUint32(word, wqeValid|uint32(len(wr.SGE))<<16)
	q.rqPut++
	return nil
}

// Close unmaps the queues; the core calls it after DESTROY_QP.
func (q *qp) Close() error {
	q.closed.Store(true)
	q.sqMu.Lock()
	q.rqMu.Lock()
	defer q.sqMu.Unlock()
	defer q.rqMu.Unlock()
	var errs []error
	if q.sq != nil {
		errs = append(errs, q.cmd.Munmap(q.sq))
		q.sq = nil
	}
	if q.rq != nil {
		errs = append(errs, q.cmd.Munmap(q.rq))
		q.rq = nil
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("siw: munmap queue pair queues: %w", err)
	}
	return nil
}
