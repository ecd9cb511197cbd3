// Package rxemodel is the test-only model of Soft-RoCE (the rdma_rxe kernel driver), in
// process: rdma_rxe's half of the rings (rdma/rdma_user_rxe.h) plugged into the fake
// uverbs kernel of test/providertest. The kernel answers the core commands and executes
// the send queue on the POST_SEND doorbell, inline as rxe does (SEND into the peer's
// receive queue, RDMA WRITE and READ against the peer's memory regions); this package
// exports the rings (shared memory the provider maps from the device file), reads the
// WQEs the provider produced, and writes CQEs (struct ib_uverbs_wc). The layouts are the
// generated mirrors of the uapi header (abi_gen.go), independent of the provider's code,
// so a provider bug is not mirrored.
//
// It checks what rxe would reject (driver data where rxe takes none, ring indices beyond
// the ring, SGE lists beyond their slot, keys, access rights and bounds, CQ overrun) and
// records it (Errors); the failing operation completes with an error.
//
// It is the one in-process rxe: uverbs/rxe's conformance test and rping's glue tests run
// over it. It does not import the provider; a test binary that uses it links uverbs/rxe
// (or uverbs/providers).
package rxemodel

import (
	"fmt"
	"math/bits"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/gorping/gorping/test/internal/kcmd"
	"github.com/gorping/gorping/test/providertest"
	"github.com/gorping/gorping/uverbs"
	"golang.org/x/sys/unix"
)

// Identification of rdma_rxe (RDMA_DRIVER_RXE, its uverbs ABI, IB_DEVICE_NAME's vendor).
const (
	driverID = 14
	abi      = 2
	vendorID = 0xffffff
	cqElem   = 128 // struct rxe_cqe (ib_wc / ib_uverbs_wc) rounded up as rxe_queue_init does
	qptRC    = 2
)

// NIC is one modelled rxe device. Contexts opened on it reach each other's QPs.
type NIC struct {
	k *providertest.Kernel
}

// Stats counts what the model executed (the kernel's counters and the rings' laps).
type Stats = providertest.Stats

// New makes a model; Close releases it.
func New() (*NIC, error) {
	k, err := providertest.StartKernel(device("rxe0"), nil, Driver{}, providertest.Options{})
	if err != nil {
		return nil, fmt.Errorf("rxemodel: %w", err)
	}
	return &NIC{k: k}, nil
}

// NewForTest is a model released when t ends.
func NewForTest(t testing.TB) *NIC {
	t.Helper()
	n, err := New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	return n
}

func device(name string) uverbs.Device {
	return uverbs.Device{Name: name, Index: 0, Uverbs: "uverbs0", Path: "/dev/infiniband/rxemodel-" + name,
		Driver: "rxe", DriverID: driverID, ABI: abi, NodeGUID: 0x505400fffe000001}
}

// Device is the uverbs device the model presents, named name.
func (n *NIC) Device(name string) uverbs.Device { return device(name) }

// Open opens a context on the model through the registered rxe provider.
func (n *NIC) Open(name string, opts ...uverbs.Option) (*uverbs.Context, error) {
	return n.k.OpenAs(device(name), opts...)
}

// Errors returns every violation the model saw.
func (n *NIC) Errors() []string { return n.k.Errors() }

// Stats returns the counters.
func (n *NIC) Stats() Stats { return n.k.Stats() }

// Live counts the QPs, CQs and memory regions not destroyed yet.
func (n *NIC) Live() (qps, cqs, mrs int) { return n.k.Live() }

// Close releases the model.
func (n *NIC) Close() { n.k.Close() }

// Kernel is the fake kernel the model runs on (the conformance suite's Device).
func (n *NIC) Kernel() *providertest.Kernel { return n.k }

// Driver is rdma_rxe's half of the rings for the fake kernel.
type Driver struct{}

// ring is the kernel's view of one rxe_queue_buf.
type ring struct {
	mem   []byte
	h     *queueBuf
	mask  uint32
	shift uint32
	off   int64
	what  string
}

// newRing carves a ring of at least want usable slots of at least elem bytes, as
// rxe_queue_init sizes it: slots a power of two with one always empty, elements a power
// of two.
func newRing(k *providertest.Kernel, what string, want, elem int) (*ring, mminfo) {
	slots := 1 << bits.Len(uint(want))
	shift := uint32(bits.Len(uint(elem - 1)))
	off, mem := k.Export(sizeofQueueBuf + slots<<shift)
	r := &ring{mem: mem, h: (*queueBuf)(unsafe.Pointer(&mem[0])), mask: uint32(slots - 1), shift: shift, off: off, what: what}
	r.h.Log2ElemSize, r.h.IndexMask = shift, r.mask
	return r, mminfo{Offset: uint64(off), Size: uint32(len(mem))}
}

func (r *ring) slot(i uint32) unsafe.Pointer {
	return unsafe.Pointer(&r.mem[sizeofQueueBuf+int(i&r.mask)<<r.shift])
}

// take is the next slot the provider produced, and done consumes it; nil if the ring is
// empty or its producer index is out of range (a violation).
func (r *ring) take(k *providertest.Kernel, qpn uint32, laps *int) (p unsafe.Pointer, done func()) {
	cons, prod := atomic.LoadUint32(&r.h.ConsumerIndex), atomic.LoadUint32(&r.h.ProducerIndex)
	if prod > r.mask {
		k.Fail("QP %#x: %s producer index %d beyond mask %#x", qpn, r.what, prod, r.mask)
		return nil, nil
	}
	if cons == prod {
		return nil, nil
	}
	return r.slot(cons), func() {
		next := (cons + 1) & r.mask
		if next == 0 {
			*laps++
		}
		atomic.StoreUint32(&r.h.ConsumerIndex, next)
	}
}

// qp is rxe's queue pair: its send and receive rings.
type qp struct {
	k      *providertest.Kernel
	sq, rq *ring
}

// cq is rxe's completion queue ring.
type cq struct {
	k *providertest.Kernel
	r *ring
}

func (Driver) GetContext(c *providertest.Context, in, out []byte) error {
	if len(in) != 0 || len(out) != 0 {
		c.Kernel().Fail("GET_CONTEXT with %d/%d bytes of driver data; rxe has none", len(in), len(out))
		return unix.EINVAL
	}
	return nil
}

func (Driver) RegMR(mr *providertest.MR, in, out []byte) error {
	mr.Key = mr.Handle<<8 | 0x11
	return nil
}

func (Driver) QueryDevice(r *kcmd.QueryDeviceResp) {
	r.VendorID, r.MaxQP, r.MaxQPWR, r.MaxSGE, r.MaxSGERd, r.MaxCQE = vendorID, 1<<16, 1<<14, 32, 32, 1<<15
	r.MaxQPRdAtom, r.MaxQPInitRdAtom, r.MaxResRdAtom = 128, 128, 128
}

// QueryDeviceEx: rxe has no completion timestamps.
func (Driver) QueryDeviceEx(r *kcmd.ExQueryDeviceResp) {}

// QueryPort: ACTIVE, MTU 4096 at most, 1024 active, RoCE (Ethernet).
func (Driver) QueryPort(_ uint8, r *kcmd.QueryPortResp) {
	r.MaxMTU, r.ActiveMTU, r.GIDTblLen, r.LinkLayer = 5, 3, 16, 2
}

func (Driver) CreateCQ(k *providertest.Kernel, c *providertest.CQ, in, out []byte) (int, error) {
	if len(in) != 0 || len(out) < sizeofCreateCQResp {
		k.Fail("CREATE_CQ with %d/%d bytes of driver data, rxe takes 0/%d", len(in), len(out), sizeofCreateCQResp)
		return 0, unix.EINVAL
	}
	r, mi := newRing(k, "CQ", c.CQE, cqElem)
	c.Driver = &cq{k: k, r: r}
	resp := createCQResp{Mi: mi}
	copy(out, kcmd.Bytes(&resp))
	return int(r.mask), nil
}

func (Driver) CreateQP(k *providertest.Kernel, q *providertest.QP, in, out []byte) error {
	if len(in) != 0 || len(out) < sizeofCreateQPResp {
		k.Fail("CREATE_QP with %d/%d bytes of driver data, rxe takes 0/%d", len(in), len(out), sizeofCreateQPResp)
		return unix.EINVAL
	}
	if q.Type != qptRC {
		return unix.EINVAL // the model runs RC only
	}
	// rxe's sizing: the send WQE holds max(16·SGEs, inline) behind its header, and the
	// kernel reports what that room allows.
	room := max(int(q.Cap.MaxSendSGE)*sizeofSge, int(q.Cap.MaxInlineData))
	sq, sqmi := newRing(k, "SQ", int(q.Cap.MaxSendWR), sizeofSendWQE+room)
	rq, rqmi := newRing(k, "RQ", int(q.Cap.MaxRecvWR), sizeofRecvWQE+int(q.Cap.MaxRecvSGE)*sizeofSge)
	q.Driver = &qp{k: k, sq: sq, rq: rq}
	q.QPN = q.Handle | 0x100
	q.Cap.MaxSendWR, q.Cap.MaxRecvWR = sq.mask, rq.mask
	q.Cap.MaxSendSGE, q.Cap.MaxInlineData = uint32(room/sizeofSge), uint32(room)
	resp := createQPResp{RQMi: rqmi, SQMi: sqmi}
	copy(out, kcmd.Bytes(&resp))
	return nil
}

// sges reads n SGEs at p, which must fit the slot's room of avail bytes.
func (d *qp) sges(qpn uint32, what string, p unsafe.Pointer, n uint32, avail int) ([]uverbs.SGE, bool) {
	if int(n)*sizeofSge > avail {
		d.k.Fail("QP %#x: %s WQE with %d SGEs, beyond its slot", qpn, what, n)
		return nil, false
	}
	out := make([]uverbs.SGE, n)
	for i, s := range unsafe.Slice((*sge)(p), n) {
		out[i] = uverbs.SGE{Addr: s.Addr, Length: s.Length, LKey: s.Lkey}
	}
	return out, true
}

func (Driver) NextSend(q *providertest.QP) (providertest.SendWR, bool) {
	d := q.Driver.(*qp)
	p, done := d.sq.take(d.k, q.QPN, &d.k.Count().SQLaps)
	if p == nil {
		return providertest.SendWR{}, false
	}
	defer done()
	w := (*sendWQE)(p)
	list, ok := d.sges(q.QPN, "send", unsafe.Add(p, sizeofSendWQE), w.Dma.NumSGE, 1<<d.sq.shift-sizeofSendWQE)
	if !ok {
		list = []uverbs.SGE{{LKey: 0}} // no region has key 0: the WR fails LOC_PROT
	}
	// The kernel takes the RETH address from iova, the key from wr.rdma.
	wr := providertest.SendWR{SendWR: uverbs.SendWR{ID: w.WR.WRID, Opcode: uverbs.WROpcode(w.WR.Opcode),
		Flags: uverbs.SendFlags(w.WR.SendFlags), Imm: w.WR.Ex, RemoteAddr: w.Iova, RKey: w.WR.WR.Rkey, SGE: list}}
	wr.Signaled = q.SigAll || wr.Flags&uverbs.SendSignaled != 0
	if !ok {
		wr.SGE[0].Length = 1
	}
	if total := sum(wr.SGE); ok && wr.Opcode != uverbs.WRRDMARead && w.Dma.Length != total {
		d.k.Fail("QP %#x: send WQE dma.length %d, its SGEs hold %d", q.QPN, w.Dma.Length, total)
	}
	return wr, true
}

func sum(s []uverbs.SGE) uint32 {
	var n uint32
	for _, g := range s {
		n += g.Length
	}
	return n
}

func (Driver) NextRecv(q *providertest.QP) (providertest.RecvWR, bool) {
	d := q.Driver.(*qp)
	p, done := d.rq.take(d.k, q.QPN, &d.k.Count().RQLaps)
	if p == nil {
		return providertest.RecvWR{}, false
	}
	defer done()
	w := (*recvWQE)(p)
	list, ok := d.sges(q.QPN, "receive", unsafe.Add(p, sizeofRecvWQE), w.Dma.NumSGE, 1<<d.rq.shift-sizeofRecvWQE)
	if !ok {
		list = []uverbs.SGE{{Length: 1}}
	}
	return providertest.RecvWR{RecvWR: uverbs.RecvWR{ID: w.WRID, SGE: list}}, true
}

// Complete writes one struct ib_uverbs_wc into the CQ ring.
func (Driver) Complete(c *providertest.CQ, e providertest.Completion) bool {
	d := c.Driver.(*cq)
	r := d.r
	prod, cons := atomic.LoadUint32(&r.h.ProducerIndex), atomic.LoadUint32(&r.h.ConsumerIndex)
	if cons > r.mask {
		d.k.Fail("CQ %#x: consumer index %d beyond mask %#x", c.Handle, cons, r.mask)
		return false
	}
	if (prod+1)&r.mask == cons {
		return false
	}
	*(*wc)(r.slot(prod)) = wc{WRID: e.WRID, Status: uint32(e.Status), Opcode: uint32(e.Opcode), ByteLen: e.ByteLen,
		Ex: e.Imm, QPNum: e.QPNum, SrcQP: e.SrcQP, WcFlags: uint32(e.Flags), PortNum: 1}
	next := (prod + 1) & r.mask
	if next == 0 {
		d.k.Count().CQLaps++
	}
	atomic.StoreUint32(&r.h.ProducerIndex, next)
	return true
}

// Armed: rxe arms with REQ_NOTIFY_CQ, which the kernel handles.
func (Driver) Armed(*providertest.CQ) bool { return false }
