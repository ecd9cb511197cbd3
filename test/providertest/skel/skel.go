// Package skel is the worked example of docs/adding-a-provider.md: the smallest provider
// that passes the conformance suite, for a made-up kernel driver "skel" whose queues are
// plain rings of fixed-size slots in memory the kernel exports (the shape of rxe's, with
// none of its history). It is test-only and not registered with the providers gorping
// ships; a real provider is the same files in uverbs/<driver> plus one import line in
// uverbs/providers.
package skel

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gorping/gorping/internal/wire"
	"github.com/gorping/gorping/uverbs/driver"
	"github.com/gorping/gorping/uverbs/providerkit"
)

// Provider is the skel provider. A real one registers itself from init:
//
//	func init() { uverbs.Register(Provider{}) }
type Provider struct{}

// Info describes the driver to the core.
func (Provider) Info() driver.Info {
	return driver.Info{
		Driver: Driver, DriverID: DriverID, ABIMin: 1, ABIMax: 1,
		Transport: driver.TransportIB,
		Sysfs:     driver.SysfsMatch{BusDrivers: []string{"skel_core"}},
		// The doorbell and the arm never sleep in the (made-up) driver.
		RawCommands: []uint32{driver.CmdPostSend, driver.CmdReqNotifyCQ},
	}
}

// NewContext runs GET_CONTEXT, with no driver data either way.
func (Provider) NewContext(dev driver.Device, cc driver.ContextCommander) (driver.Context, error) {
	if _, err := cc.GetContext(nil, 0); err != nil {
		return nil, err
	}
	return context{}, nil
}

type context struct{}

func (context) Close() error { return nil }

// --- completion queue

func (context) PrepareCQ(*driver.CQRequest) (driver.PendingCQ, error) { return pendingCQ{}, nil }

type pendingCQ struct{}

func (pendingCQ) Udata() ([]byte, int) { return nil, QueueRespLen }
func (pendingCQ) Abort()               {}

func (pendingCQ) Commit(cmd driver.Commander, core driver.CQCore, resp []byte) (driver.CQ, error) {
	if err := providerkit.ShortResp("skel", "CREATE_CQ", len(resp), QueueRespLen); err != nil {
		return nil, err
	}
	var r QueueResp
	wire.Decode(&r, resp)
	ring, err := mapRing(cmd, "skel completion queue", r, CQESize)
	if err != nil {
		return nil, err
	}
	q := &cq{cmd: cmd, ring: ring}
	q.arm = driver.NewCQArm(core.Handle)
	return q, nil
}

type cq struct {
	cmd  driver.Commander
	mu   sync.Mutex
	ring *ring
	arm  driver.CQArm
}

func (q *cq) Poll(wc []driver.WC) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ring == nil {
		return 0, driver.ErrClosed
	}
	n := 0
	for ; n < len(wc); n++ {
		p := q.ring.consume()
		if p == nil {
			break
		}
		e := (*CQE)(p)
		wc[n] = driver.WC{WRID: e.WRID, Status: driver.WCStatus(e.Status), Opcode: driver.WCOpcode(e.Opcode),
			ByteLen: e.ByteLen, QPNum: e.QPN, SrcQP: e.SrcQP, Flags: driver.WCFlags(e.Flags), Imm: e.Imm}
		q.ring.release()
	}
	return n, nil
}

func (q *cq) Arm(solicitedOnly bool) error {
	return q.arm.Arm(q.cmd, solicitedOnly)
}

func (q *cq) Close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ring == nil {
		return nil
	}
	err := q.cmd.Munmap(q.ring.mem)
	q.ring = nil
	return err
}

// --- queue pair

func (context) PrepareQP(*driver.QPRequest) (driver.PendingQP, error) { return pendingQP{}, nil }

type pendingQP struct{}

func (pendingQP) Udata() ([]byte, int) { return nil, 2 * QueueRespLen }
func (pendingQP) Abort()               {}

func (pendingQP) Commit(cmd driver.Commander, core *driver.QPCore, resp []byte) (driver.QP, error) {
	if err := providerkit.ShortResp("skel", "CREATE_QP", len(resp), 2*QueueRespLen); err != nil {
		return nil, err
	}
	var sr, rr QueueResp
	wire.Decode(&sr, resp[:QueueRespLen])
	wire.Decode(&rr, resp[QueueRespLen:])
	sq, err := mapRing(cmd, "skel send queue", sr, WQESize)
	if err != nil {
		return nil, err
	}
	rq, err := mapRing(cmd, "skel receive queue", rr, WQESize)
	if err != nil {
		cmd.Munmap(sq.mem)
		return nil, err
	}
	core.Cap.MaxSendSGE, core.Cap.MaxRecvSGE = min(core.Cap.MaxSendSGE, MaxSGE), min(core.Cap.MaxRecvSGE, MaxSGE)
	return &qp{cmd: cmd, sq: sq, rq: rq, sigAll: core.SigAll, db: driver.NewDoorbell(core.Handle, 56)}, nil
}

// The posting path's errors are made once, from the kit (posting must not allocate).
var errTooManySGE = providerkit.ErrTooManySGE("skel", unix.EINVAL)

type qp struct {
	cmd    driver.Commander
	sigAll bool
	mu     sync.Mutex
	sq, rq *ring
	db     driver.Doorbell
}

func putWQE(p unsafe.Pointer, w WQE, sges []driver.SGE) {
	for i, s := range sges {
		w.SGE[i] = SGE{Addr: s.Addr, Length: s.Length, LKey: s.LKey}
	}
	w.NumSGE = uint32(len(sges))
	*(*WQE)(p) = w
}

func (q *qp) PostSend(wr *driver.SendWR) error {
	if len(wr.SGE) > MaxSGE {
		return errTooManySGE
	}
	flags := uint32(wr.Flags)
	if q.sigAll {
		flags |= uint32(driver.SendSignaled)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.sq == nil {
		return driver.ErrClosed
	}
	p := q.sq.produce()
	if p == nil {
		return driver.ErrQueueFull
	}
	putWQE(p, WQE{ID: wr.ID, Opcode: uint32(wr.Opcode), Flags: flags, RemoteAddr: wr.RemoteAddr, RKey: wr.RKey, Imm: wr.Imm}, wr.SGE)
	q.sq.publish()
	return q.db.Ring(q.cmd)
}

func (q *qp) PostRecv(wr *driver.RecvWR) error {
	if len(wr.SGE) > MaxSGE {
		return errTooManySGE
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.rq == nil {
		return driver.ErrClosed
	}
	p := q.rq.produce()
	if p == nil {
		return driver.ErrQueueFull
	}
	putWQE(p, WQE{ID: wr.ID}, wr.SGE)
	q.rq.publish()
	return nil
}

func (q *qp) Close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.sq == nil {
		return nil
	}
	err := q.cmd.Munmap(q.sq.mem)
	if e := q.cmd.Munmap(q.rq.mem); err == nil {
		err = e
	}
	q.sq, q.rq = nil, nil
	return err
}

// --- rings

// ring is one queue: a RingHeader, then Slots slots of a fixed size. The producer and
// consumer indices count without wrapping; the slot is the index modulo Slots.
type ring struct {
	mem   []byte
	h     *RingHeader
	slots uint32
	size  int
	own   uint32 // our index (producer of a work queue, consumer of a CQ)
}

func mapRing(cmd driver.Commander, what string, r QueueResp, size int) (*ring, error) {
	if r.Slots == 0 || r.Slots > 1<<16 {
		return nil, fmt.Errorf("skel: %s of %d slots", what, r.Slots)
	}
	n := RingHeaderLen + int(r.Slots)*size
	mem, err := cmd.Mmap(what, int64(r.Offset), n, unix.PROT_READ|unix.PROT_WRITE)
	if err != nil {
		return nil, fmt.Errorf("skel: %w", err)
	}
	return &ring{mem: mem, h: (*RingHeader)(unsafe.Pointer(&mem[0])), slots: r.Slots, size: size}, nil
}

func (r *ring) slot(i uint32) unsafe.Pointer {
	return unsafe.Pointer(&r.mem[RingHeaderLen+int(i%r.slots)*r.size])
}

// produce is the slot to fill next, nil if the ring is full.
func (r *ring) produce() unsafe.Pointer {
	if r.own-atomic.LoadUint32(&r.h.Cons) == r.slots {
		return nil
	}
	return r.slot(r.own)
}

func (r *ring) publish() { r.own++; atomic.StoreUint32(&r.h.Prod, r.own) }

// consume is the next filled slot, nil if none.
func (r *ring) consume() unsafe.Pointer {
	if atomic.LoadUint32(&r.h.Prod) == r.own {
		return nil
	}
	return r.slot(r.own)
}

func (r *ring) release() { r.own++; atomic.StoreUint32(&r.h.Cons, r.own) }
