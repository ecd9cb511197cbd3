package rxe

import (
	"fmt"
	"math/bits"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/gorping/gorping/internal/wire"
	"github.com/gorping/gorping/test/providertest"
	"github.com/gorping/gorping/uverbs"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	providertest.RunKernel(t, uverbs.Device{Name: "rxe0", Driver: rxeDriver, DriverID: rxeDriverID, ABI: 2}, provider{}, kernelRxe{})
}

// kernelRxe is rdma_rxe's side of the queues in the fake kernel: rings of struct
// rxe_queue_buf, the kernel consuming send and receive WQEs and producing CQEs.
type kernelRxe struct{}

// kring is the kernel's view of one ring.
type kring struct {
	mem  []byte
	h    *queueBuf
	mask uint32
	elem int
}

func newKring(k *providertest.Kernel, slots int, elem int) (kring, mminfo) {
	shift := bits.Len(uint(elem - 1))
	off, mem := k.Export(ringDataOff + slots<<shift)
	h := (*queueBuf)(unsafe.Pointer(&mem[0]))
	h.Log2ElemSize, h.IndexMask = uint32(shift), uint32(slots-1)
	return kring{mem: mem, h: h, mask: uint32(slots - 1), elem: 1 << shift}, mminfo{Offset: uint64(off), Size: uint32(len(mem))}
}

func (r *kring) slot(i uint32) unsafe.Pointer {
	return unsafe.Pointer(&r.mem[ringDataOff+int(i&r.mask)*r.elem])
}

// take is the next slot the provider produced (the kernel consumes), or nil.
func (r *kring) take() (unsafe.Pointer, func()) {
	cons := atomic.LoadUint32(&r.h.ConsumerIndex)
	if cons == atomic.LoadUint32(&r.h.ProducerIndex) {
		return nil, nil
	}
	return r.slot(cons), func() { atomic.StoreUint32(&r.h.ConsumerIndex, (cons+1)&r.mask) }
}

func pow2(n int) int { return 1 << bits.Len(uint(n-1)) }

func (kernelRxe) GetContext(in, out []byte) error {
	if len(in) != 0 || len(out) != 0 {
		return fmt.Errorf("rxe GET_CONTEXT with %d/%d driver bytes", len(in), len(out))
	}
	return nil
}

func (kernelRxe) RegMR(mr *providertest.MR, in, out []byte) error { return nil }

func (kernelRxe) CreateCQ(k *providertest.Kernel, cq *providertest.CQ, in, out []byte) (int, error) {
	if len(in) != 0 || len(out) < createCQLen {
		return 0, fmt.Errorf("rxe CREATE_CQ with %d/%d driver bytes", len(in), len(out))
	}
	slots := pow2(cq.CQE + 1)
	r, mi := newKring(k, slots, 128)
	cq.Driver = &r
	copy(out, wire.Bytes(&createCQResp{Mi: mi}))
	return slots - 1, nil
}

// rxe's queue pair: send and receive rings.
type kqp struct{ sq, rq kring }

func (kernelRxe) CreateQP(k *providertest.Kernel, qp *providertest.QP, in, out []byte) error {
	if len(in) != 0 || len(out) < createQPLen {
		return fmt.Errorf("rxe CREATE_QP with %d/%d driver bytes", len(in), len(out))
	}
	q := &kqp{}
	var r createQPResp
	sqSlots, rqSlots := pow2(int(qp.Cap.MaxSendWR)+1), pow2(int(qp.Cap.MaxRecvWR)+1)
	q.sq, r.SQMi = newKring(k, sqSlots, sendWQESize+sgeSize*int(max(qp.Cap.MaxSendSGE, 1)))
	q.rq, r.RQMi = newKring(k, rqSlots, recvWQESize+sgeSize*int(max(qp.Cap.MaxRecvSGE, 1)))
	qp.Cap.MaxSendWR, qp.Cap.MaxRecvWR = uint32(sqSlots-1), uint32(rqSlots-1)
	qp.Driver = q
	copy(out, wire.Bytes(&r))
	return nil
}

func sges(p unsafe.Pointer, n uint32) []uverbs.SGE {
	out := make([]uverbs.SGE, n)
	for i, s := range unsafe.Slice((*sge)(p), n) {
		out[i] = uverbs.SGE{Addr: s.Addr, Length: s.Length, LKey: s.Lkey}
	}
	return out
}

func (kernelRxe) NextSend(qp *providertest.QP) (providertest.SendWR, bool) {
	p, done := qp.Driver.(*kqp).sq.take()
	if p == nil {
		return providertest.SendWR{}, false
	}
	defer done()
	w := (*sendWQE)(p)
	wr := providertest.SendWR{SendWR: uverbs.SendWR{ID: w.WR.WRID, Opcode: uverbs.WROpcode(w.WR.Opcode),
		Flags: uverbs.SendFlags(w.WR.SendFlags), Imm: w.WR.Ex, RemoteAddr: w.Iova, RKey: w.WR.WR.Rkey,
		SGE: sges(unsafe.Add(p, sendWQESize), w.Dma.NumSGE)}}
	wr.Signaled = wr.Flags&uverbs.SendSignaled != 0
	return wr, true
}

func (kernelRxe) NextRecv(qp *providertest.QP) (uverbs.RecvWR, bool) {
	p, done := qp.Driver.(*kqp).rq.take()
	if p == nil {
		return uverbs.RecvWR{}, false
	}
	defer done()
	w := (*recvWQE)(p)
	return uverbs.RecvWR{ID: w.WRID, SGE: sges(unsafe.Add(p, recvWQESize), w.Dma.NumSGE)}, true
}

func (kernelRxe) Complete(cq *providertest.CQ, wc uverbs.WC) bool {
	r := cq.Driver.(*kring)
	prod := atomic.LoadUint32(&r.h.ProducerIndex)
	if (prod+1)&r.mask == atomic.LoadUint32(&r.h.ConsumerIndex) {
		return false
	}
	*(*cqe)(r.slot(prod)) = cqe{WRID: wc.WRID, Status: uint32(wc.Status), Opcode: uint32(wc.Opcode), ByteLen: wc.ByteLen,
		Ex: wc.Imm, QPNum: wc.QPNum, SrcQP: wc.SrcQP, WcFlags: uint32(wc.Flags), PortNum: 1}
	atomic.StoreUint32(&r.h.ProducerIndex, (prod+1)&r.mask)
	return true
}

func (kernelRxe) Armed(*providertest.CQ) bool { return false }
