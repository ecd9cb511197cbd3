package skel

import (
	"fmt"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/gorping/gorping/internal/wire"
	"github.com/gorping/gorping/test/providertest"
	"github.com/gorping/gorping/uverbs"
	"github.com/gorping/gorping/uverbs/driver"
)

// The one line that gives a provider the conformance suite (with the kernel half below).
func TestConformance(t *testing.T) {
	t.Parallel()
	providertest.RunKernel(t, uverbs.Device{Name: "skel0", Driver: Driver, DriverID: DriverID, ABI: 1}, Provider{}, kernel{})
}

// kernel is the made-up driver's side of the queues in the fake kernel.
type kernel struct{}

// kring is the kernel's view of a ring: it consumes work queues and produces CQEs.
type kring struct {
	mem   []byte
	h     *RingHeader
	slots uint32
	size  int
}

func export(k *providertest.Kernel, slots, size int) (*kring, QueueResp) {
	off, mem := k.Export(RingHeaderLen + slots*size)
	return &kring{mem: mem, h: (*RingHeader)(unsafe.Pointer(&mem[0])), slots: uint32(slots), size: size},
		QueueResp{Offset: uint64(off), Slots: uint32(slots)}
}

func (r *kring) slot(i uint32) unsafe.Pointer {
	return unsafe.Pointer(&r.mem[RingHeaderLen+int(i%r.slots)*r.size])
}

func (kernel) GetContext(_ *providertest.Context, in, out []byte) error {
	if len(in) != 0 || len(out) != 0 {
		return fmt.Errorf("skel GET_CONTEXT with %d/%d driver bytes", len(in), len(out))
	}
	return nil
}

func (kernel) RegMR(*providertest.MR, []byte, []byte) error { return nil }

func (kernel) CreateCQ(k *providertest.Kernel, cq *providertest.CQ, in, out []byte) (int, error) {
	r, resp := export(k, cq.CQE, CQESize)
	cq.Driver = r
	copy(out, wire.Bytes(&resp))
	return cq.CQE, nil
}

type kqp struct{ sq, rq *kring }

func (kernel) CreateQP(k *providertest.Kernel, qp *providertest.QP, in, out []byte) error {
	sq, sr := export(k, int(qp.Cap.MaxSendWR), WQESize)
	rq, rr := export(k, int(qp.Cap.MaxRecvWR), WQESize)
	qp.Driver = &kqp{sq, rq}
	copy(out, wire.Bytes(&sr))
	copy(out[QueueRespLen:], wire.Bytes(&rr))
	return nil
}

// take consumes the next WQE of r.
func take(r *kring) (*WQE, bool) {
	cons := atomic.LoadUint32(&r.h.Cons)
	if cons == atomic.LoadUint32(&r.h.Prod) {
		return nil, false
	}
	w := *(*WQE)(r.slot(cons))
	atomic.StoreUint32(&r.h.Cons, cons+1)
	return &w, true
}

func sges(w *WQE) []driver.SGE {
	out := make([]driver.SGE, min(w.NumSGE, MaxSGE))
	for i := range out {
		out[i] = driver.SGE{Addr: w.SGE[i].Addr, Length: w.SGE[i].Length, LKey: w.SGE[i].LKey}
	}
	return out
}

func (kernel) NextSend(qp *providertest.QP) (providertest.SendWR, bool) {
	w, ok := take(qp.Driver.(*kqp).sq)
	if !ok {
		return providertest.SendWR{}, false
	}
	return providertest.SendWR{SendWR: driver.SendWR{ID: w.ID, Opcode: driver.WROpcode(w.Opcode), Flags: driver.SendFlags(w.Flags),
		RemoteAddr: w.RemoteAddr, RKey: w.RKey, Imm: w.Imm, SGE: sges(w)}, Signaled: w.Flags&uint32(driver.SendSignaled) != 0}, true
}

func (kernel) NextRecv(qp *providertest.QP) (providertest.RecvWR, bool) {
	w, ok := take(qp.Driver.(*kqp).rq)
	if !ok {
		return providertest.RecvWR{}, false
	}
	return providertest.RecvWR{RecvWR: driver.RecvWR{ID: w.ID, SGE: sges(w)}}, true
}

func (kernel) Complete(cq *providertest.CQ, wc providertest.Completion) bool {
	r := cq.Driver.(*kring)
	prod := atomic.LoadUint32(&r.h.Prod)
	if prod-atomic.LoadUint32(&r.h.Cons) == r.slots {
		return false
	}
	*(*CQE)(r.slot(prod)) = CQE{WRID: wc.WRID, Status: uint32(wc.Status), Opcode: uint32(wc.Opcode), ByteLen: wc.ByteLen,
		QPN: wc.QPNum, SrcQP: wc.SrcQP, Flags: uint32(wc.Flags), Imm: wc.Imm}
	atomic.StoreUint32(&r.h.Prod, prod+1)
	return true
}

func (kernel) Armed(*providertest.CQ) bool { return false }
