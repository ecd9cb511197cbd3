package siw

import (
	"fmt"
	"math/bits"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/gorping/gorping/internal/wire"
	"github.com/gorping/gorping/test/providertest"
	"github.com/gorping/gorping/uverbs"
	"github.com/gorping/gorping/uverbs/driver"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	providertest.RunKernel(t, uverbs.Device{Name: "siw0", Driver: siwDriver, DriverID: siwDriverID, ABI: siwABI}, provider{}, kernelSiw{})
}

// kernelSiw is siw's side of the queues in the fake kernel: element arrays owned by
// their flags word, and the CQ's arming word.
type kernelSiw struct{}

// kqueue is the kernel's view of one element array.
type kqueue struct {
	mem  []byte
	num  uint32
	size int
	next uint32 // the kernel's own position
}

func (q *kqueue) word(i uint32) *uint32 {
	return (*uint32)(unsafe.Pointer(&q.mem[int(i&(q.num-1))*q.size+wordOff]))
}

func (q *kqueue) at(i uint32) unsafe.Pointer { return unsafe.Pointer(&q.mem[int(i&(q.num-1))*q.size]) }

func pow2(n int) uint32 { return 1 << bits.Len(uint(n-1)) }

func (kernelSiw) GetContext(_ *providertest.Context, in, out []byte) error {
	if len(in) != 0 || len(out) != allocCtxLen {
		return fmt.Errorf("siw GET_CONTEXT with %d/%d driver bytes", len(in), len(out))
	}
	copy(out, wire.Bytes(&allocCtxResp{DevID: 1}))
	return nil
}

func (kernelSiw) RegMR(mr *providertest.MR, in, out []byte) error {
	if len(in) != regMRLen || len(out) != regMRLen {
		return fmt.Errorf("siw REG_MR with %d/%d driver bytes", len(in), len(out))
	}
	copy(out, wire.Bytes(&regMRResp{Stag: mr.Key}))
	return nil
}

func (kernelSiw) CreateCQ(k *providertest.Kernel, cq *providertest.CQ, in, out []byte) (int, error) {
	if len(in) != 0 || len(out) != createCQLen {
		return 0, fmt.Errorf("siw CREATE_CQ with %d/%d driver bytes", len(in), len(out))
	}
	num := pow2(cq.CQE)
	off, mem := k.Export(int(num)*cqeSize + cqCtrlSize)
	cq.Driver = &kqueue{mem: mem, num: num, size: cqeSize}
	copy(out, wire.Bytes(&createCQResp{CQID: cq.Handle, NumCQE: num, CQKey: uint64(off)}))
	return int(num), nil
}

type kqp struct{ sq, rq kqueue }

func (kernelSiw) CreateQP(k *providertest.Kernel, qp *providertest.QP, in, out []byte) error {
	if len(in) != 0 || len(out) != createQPLen {
		return fmt.Errorf("siw CREATE_QP with %d/%d driver bytes", len(in), len(out))
	}
	nsq, nrq := pow2(int(qp.Cap.MaxSendWR)), pow2(int(qp.Cap.MaxRecvWR))
	sqOff, sq := k.Export(int(nsq) * sqeSize)
	rqOff, rq := k.Export(int(nrq) * rqeSize)
	qp.Driver = &kqp{sq: kqueue{mem: sq, num: nsq, size: sqeSize}, rq: kqueue{mem: rq, num: nrq, size: rqeSize}}
	copy(out, wire.Bytes(&createQPResp{QPID: qp.QPN, NumSqe: nsq, NumRqe: nrq, SQKey: uint64(sqOff), RQKey: uint64(rqOff)}))
	return nil
}

func sges(s []sge) []driver.SGE {
	out := make([]driver.SGE, len(s))
	for i := range s {
		out[i] = driver.SGE{Addr: s[i].Laddr, Length: s[i].Length, LKey: s[i].Lkey}
	}
	return out
}

var wrOpcode = map[uint8]driver.WROpcode{opSend: driver.WRSend, opSendRemoteInv: driver.WRSendWithInv,
	opWrite: driver.WRRDMAWrite, opRead: driver.WRRDMARead}

func (kernelSiw) NextSend(qp *providertest.QP) (providertest.SendWR, bool) {
	q := &qp.Driver.(*kqp).sq
	w := atomic.LoadUint32(q.word(q.next))
	if w&wqeValid == 0 {
		return providertest.SendWR{}, false
	}
	e := (*sqe)(q.at(q.next))
	op, n := uint8(w>>24), min(uint8(w>>16), maxSGE)
	wr := providertest.SendWR{SendWR: driver.SendWR{ID: e.ID, Opcode: wrOpcode[op], RemoteAddr: e.Raddr, RKey: e.Rkey,
		SGE: sges(e.SGE[:n])}, Signaled: w&wqeSignalled != 0}
	if op == opSendRemoteInv {
		wr.Imm = e.Rkey
	}
	atomic.StoreUint32(q.word(q.next), 0) // taken: the element is the provider's again
	q.next++
	return wr, true
}

func (kernelSiw) NextRecv(qp *providertest.QP) (providertest.RecvWR, bool) {
	q := &qp.Driver.(*kqp).rq
	w := atomic.LoadUint32(q.word(q.next))
	if w&0xffff != wqeValid {
		return providertest.RecvWR{}, false
	}
	e := (*rqe)(q.at(q.next))
	wr := providertest.RecvWR{RecvWR: driver.RecvWR{ID: e.ID, SGE: sges(e.SGE[:min(uint8(w>>16), maxSGE)])}}
	atomic.StoreUint32(q.word(q.next), 0)
	q.next++
	return wr, true
}

// siwStatus is the siw status of a WC status (wcStatus reversed); others are GENERAL_ERR.
func siwStatus(s driver.WCStatus) uint16 {
	for i, v := range wcStatus {
		if v == s {
			return uint16(i)
		}
	}
	return 9
}

var cqeOpcode = map[driver.WCOpcode]uint8{driver.WCSend: opSend, driver.WCRDMAWrite: opWrite, driver.WCRDMARead: opRead,
	driver.WCRecv: opReceive}

func (kernelSiw) Complete(cq *providertest.CQ, wc providertest.Completion) bool {
	q := cq.Driver.(*kqueue)
	word := q.word(q.next)
	if atomic.LoadUint32(word)&wqeValid != 0 {
		return false // the provider has not handed the slot back
	}
	e := (*cqe)(q.at(q.next))
	e.ID, e.Bytes, e.QPID, e.ImmData = wc.WRID, wc.ByteLen, uint64(wc.QPNum), 0
	flags := uint32(wqeValid)
	if wc.Flags&driver.WCFlagWithInv != 0 {
		flags |= wqeRemInval
		e.ImmData = uint64(wc.Imm)
	}
	atomic.StoreUint32(word, flags|uint32(cqeOpcode[wc.Opcode])<<8|uint32(siwStatus(wc.Status))<<16)
	q.next++
	return true
}

// Armed reads and clears the CQ's arming word, as siw does on every CQE.
func (kernelSiw) Armed(cq *providertest.CQ) bool {
	q := cq.Driver.(*kqueue)
	ctrl := (*uint32)(unsafe.Pointer(&q.mem[int(q.num)*cqeSize]))
	if atomic.LoadUint32(ctrl)&notifyNextCompletion == 0 {
		return false
	}
	atomic.StoreUint32(ctrl, 0)
	return true
}
