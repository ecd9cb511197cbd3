package providertest

import (
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gorping/gorping/internal/umem"
	"github.com/gorping/gorping/uverbs"
)

// Kernel is a fake uverbs kernel for providers whose data path the kernel runs (rxe, siw):
// it answers the core commands of every context opened on it, keeps the objects, and
// executes posted work between its QPs when a provider rings the send doorbell (POST_SEND
// with no work requests). Everything driver-specific (the driver data of the create
// commands, the queues' memory format) is the Driver's. A Kernel is a Device: contexts
// opened on it share one fabric, QPs reach each other by number.
//
// The kernel runs in the test process: it reads and writes user memory by address, which
// it accepts only inside registered memory regions, as a device would.
type Kernel struct {
	t    testing.TB
	dev  uverbs.Device
	prov uverbs.Provider
	drv  Driver

	mu      sync.Mutex
	handle  uint32         // last handle, key and QPN handed out
	mrs     map[uint32]*MR // by lkey (= rkey = handle)
	cqs     map[uint32]*CQ // by handle
	qps     map[uint32]*QP // by QPN (= handle)
	regions map[int64][]byte
	nextOff int64
	mems    []*umem.Mem
	fds     []int // pipe write ends (async fds, completion channels)
	errs    []string
}

// Driver is the kernel half of a provider in the fake kernel. The kernel calls it under
// its lock.
type Driver interface {
	// GetContext fills the driver response of GET_CONTEXT (out has the length the provider
	// asked for) from the provider's request in.
	GetContext(in, out []byte) error
	// RegMR fills the driver response of REG_MR.
	RegMR(mr *MR, in, out []byte) error
	// CreateCQ sets cq up (its queue memory from Kernel.Export) and fills the driver
	// response; it returns the depth granted.
	CreateCQ(k *Kernel, cq *CQ, in, out []byte) (depth int, err error)
	// CreateQP sets qp up and fills the driver response; it may change qp.Cap to what the
	// queues hold.
	CreateQP(k *Kernel, qp *QP, in, out []byte) error
	// NextSend takes the next send work request the provider posted on qp.
	NextSend(qp *QP) (SendWR, bool)
	// NextRecv takes the next receive work request the provider posted on qp.
	NextRecv(qp *QP) (uverbs.RecvWR, bool)
	// Complete writes wc into cq's queue; false if the queue is full.
	Complete(cq *CQ, wc uverbs.WC) bool
	// Armed reports (and clears) an arm the provider made in memory (siw's control word);
	// a driver armed by REQ_NOTIFY_CQ returns false.
	Armed(cq *CQ) bool
}

// SendWR is a send work request as the kernel takes it from a send queue.
type SendWR struct {
	uverbs.SendWR
	Signaled bool // the WR asks for a completion (or the QP signals every WR)
}

// MR is a registered memory region. Its lkey and rkey are one key.
type MR struct {
	Handle uint32
	Key    uint32
	Addr   uint64
	Len    uint64
	Access uverbs.AccessFlags
	PD     uint32
}

// CQ is a completion queue; Driver keeps the driver's state (its queue).
type CQ struct {
	Handle  uint32
	Cookie  uint64 // user_handle: what a completion event carries
	CQE     int    // depth asked for
	Driver  any
	channel int // completion channel write end, -1: none
	armed   bool
	k       *Kernel
}

// QP is a queue pair; Driver keeps the driver's state (its queues).
type QP struct {
	Handle uint32
	QPN    uint32
	PD     uint32
	Type   uverbs.QPType
	Cap    uverbs.QPCap
	SigAll bool
	SendCQ *CQ
	RecvCQ *CQ
	State  uverbs.QPState
	Dest   uint32 // peer QPN (RTR)
	Driver any
}

// NewKernel is a fake kernel with driver drv for provider prov's devices; dev is the
// device its contexts are opened on.
func NewKernel(t testing.TB, dev uverbs.Device, prov uverbs.Provider, drv Driver) *Kernel {
	k := &Kernel{t: t, dev: dev, prov: prov, drv: drv, handle: 0x100,
		mrs: map[uint32]*MR{}, cqs: map[uint32]*CQ{}, qps: map[uint32]*QP{}, regions: map[int64][]byte{}, nextOff: 1 << 20}
	t.Cleanup(k.free)
	return k
}

func (k *Kernel) free() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, m := range k.mems {
		m.Free()
	}
	for _, fd := range k.fds {
		unix.Close(fd)
	}
	k.mems, k.fds = nil, nil
}

// Open opens a context on the kernel through the provider.
func (k *Kernel) Open(t *testing.T) *uverbs.Context {
	t.Helper()
	c, err := uverbs.OpenBackend(k.dev, &backend{k: k}, uverbs.WithProvider(k.prov))
	if err != nil {
		t.Fatalf("open %s on the fake kernel: %v", k.dev.Name, err)
	}
	return c
}

// Errors are the protocol violations the kernel saw (bad commands, memory outside any
// region).
func (k *Kernel) Errors() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.errs...)
}

func (k *Kernel) fail(format string, args ...any) {
	k.errs = append(k.errs, fmt.Sprintf(format, args...))
}

// Export allocates size bytes of zeroed queue memory the provider maps at the returned
// offset (Driver.CreateCQ/CreateQP hand the offset out in their responses).
func (k *Kernel) Export(size int) (off int64, mem []byte) {
	m, err := umem.Anon(size)
	if err != nil {
		k.t.Fatalf("queue memory: %v", err)
	}
	k.mems = append(k.mems, m)
	off = k.nextOff
	k.nextOff += int64(size+0xffff) &^ 0xffff
	k.regions[off] = m.Bytes()
	return off, m.Bytes()
}

func (k *Kernel) next() uint32 { k.handle++; return k.handle }

// backend is one context's device file.
type backend struct {
	k     *Kernel
	chans map[int]int // completion channel read fd (the context's) → write end
}

func (b *backend) Mmap(off int64, length, prot int) ([]byte, error) {
	b.k.mu.Lock()
	defer b.k.mu.Unlock()
	mem, ok := b.k.regions[off]
	if !ok || length > len(mem) {
		return nil, unix.EINVAL
	}
	return mem[:length:length], nil
}

// Munmap does nothing: the kernel frees queue memory when the test ends.
func (b *backend) Munmap([]byte) error { return nil }

var le = binary.LittleEndian

// ptrAt is address a as a pointer (user memory the kernel writes responses and data to).
func ptrAt(a uint64) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&a)) }

// user is n bytes of user memory at addr.
func user(addr uint64, n int) []byte {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(ptrAt(addr)), n)
}

// Core request and response sizes (struct ib_uverbs_*), the response field included.
var coreSizes = map[uint32][2]int{
	0: {8, 8}, 1: {8, 176}, 2: {16, 40}, 3: {8, 4}, 4: {4, 0}, 9: {40, 12}, 13: {4, 0},
	17: {8, 4}, 18: {32, 8}, 20: {16, 8}, 23: {8, 0}, 24: {56, 32}, 26: {112, 0}, 27: {16, 4},
	28: {24, 4},
}

// Write executes one command: header | core request | driver request, and writes the
// response where the request's first u64 points.
func (b *backend) Write(p []byte) (int, error) {
	k := b.k
	if len(p) < 8 {
		return 0, unix.EINVAL
	}
	cmd, inWords, outWords := le.Uint32(p), int(le.Uint16(p[4:])), int(le.Uint16(p[6:]))
	if cmd&0x80000000 != 0 {
		return 0, unix.EOPNOTSUPP // extended commands: none of the suite's
	}
	sz, ok := coreSizes[cmd]
	if !ok {
		return 0, unix.EOPNOTSUPP
	}
	body := p[8:]
	if inWords*4 != len(p) || len(body) < sz[0] || outWords*4 < sz[1] {
		k.mu.Lock()
		k.fail("command %d: %d bytes, %d response words", cmd, len(p), outWords)
		k.mu.Unlock()
		return 0, unix.EINVAL
	}
	req, drvIn := body[:sz[0]], body[sz[0]:]
	var out []byte
	if outWords > 0 {
		out = make([]byte, outWords*4)
	}
	k.mu.Lock()
	err := b.exec(cmd, req, drvIn, out, sz[1])
	k.mu.Unlock()
	if err != nil {
		return 0, err
	}
	if len(out) > 0 {
		copy(user(le.Uint64(req), len(out)), out)
	}
	return len(p), nil
}

// exec runs cmd under k.mu; out is core response (coreOut bytes) | driver response.
func (b *backend) exec(cmd uint32, req, drvIn, out []byte, coreOut int) error {
	k := b.k
	drvOut := out[min(coreOut, len(out)):]
	switch cmd {
	case 0: // GET_CONTEXT
		fd, err := k.pipe()
		if err != nil {
			return err
		}
		le.PutUint32(out[0:], uint32(fd))
		le.PutUint32(out[4:], 1)
		return k.drv.GetContext(drvIn, drvOut)
	case 1: // QUERY_DEVICE
		le.PutUint64(out[0:], 1) // fw_ver
		binary.BigEndian.PutUint64(out[8:], 0x0200_00ff_fe00_0001)
		le.PutUint32(out[56:], 1<<14) // max_qp_wr
		le.PutUint32(out[64:], 6)     // max_sge
		le.PutUint32(out[76:], 1<<16) // max_cqe
		le.PutUint32(out[88:], 16)    // max_qp_rd_atom
		le.PutUint32(out[100:], 16)   // max_qp_init_rd_atom
		out[171] = 1                  // phys_port_cnt
		return nil
	case 2: // QUERY_PORT
		le.PutUint32(out[16:], 1)           // gid_tbl_len
		out[26], out[27], out[28] = 4, 3, 3 // ACTIVE, MTU 1024
		out[37] = 2                         // link layer Ethernet
		return nil
	case 3: // ALLOC_PD
		le.PutUint32(out, k.next())
		return nil
	case 4: // DEALLOC_PD
		return nil
	case 13: // DEREG_MR
		delete(k.mrs, le.Uint32(req)) // handle = key
		return nil
	case 9: // REG_MR
		mr := &MR{Addr: le.Uint64(req[8:]), Len: le.Uint64(req[16:]), PD: le.Uint32(req[32:]),
			Access: uverbs.AccessFlags(le.Uint32(req[36:]))}
		mr.Handle = k.next()
		mr.Key = mr.Handle
		if err := k.drv.RegMR(mr, drvIn, drvOut); err != nil {
			return err
		}
		k.mrs[mr.Key] = mr
		le.PutUint32(out[0:], mr.Handle)
		le.PutUint32(out[4:], mr.Key)
		le.PutUint32(out[8:], mr.Key)
		return nil
	case 17: // CREATE_COMP_CHANNEL
		r, w, err := k.pipe2()
		if err != nil {
			return err
		}
		if b.chans == nil {
			b.chans = map[int]int{}
		}
		b.chans[r] = w
		le.PutUint32(out, uint32(r))
		return nil
	case 18: // CREATE_CQ
		cq := &CQ{Handle: k.next(), Cookie: le.Uint64(req[8:]), CQE: int(le.Uint32(req[16:])), channel: -1, k: k}
		if ch := int32(le.Uint32(req[24:])); ch >= 0 {
			w, ok := b.chans[int(ch)]
			if !ok {
				return unix.EINVAL
			}
			cq.channel = w
		}
		depth, err := k.drv.CreateCQ(k, cq, drvIn, drvOut)
		if err != nil {
			return err
		}
		k.cqs[cq.Handle] = cq
		le.PutUint32(out[0:], cq.Handle)
		le.PutUint32(out[4:], uint32(depth))
		return nil
	case 20: // DESTROY_CQ
		delete(k.cqs, le.Uint32(req[8:]))
		return nil // no events reported: those written to the channel are the reader's
	case 23: // REQ_NOTIFY_CQ
		cq := k.cqs[le.Uint32(req)]
		if cq == nil {
			return unix.EINVAL
		}
		cq.armed = true
		return nil
	case 24: // CREATE_QP
		send, recv := k.cqs[le.Uint32(req[20:])], k.cqs[le.Uint32(req[24:])]
		if send == nil || recv == nil {
			return unix.EINVAL
		}
		qp := &QP{Handle: k.next(), PD: le.Uint32(req[16:]), SendCQ: send, RecvCQ: recv,
			Type: uverbs.QPType(req[53]), SigAll: req[52] != 0,
			Cap: uverbs.QPCap{MaxSendWR: le.Uint32(req[32:]), MaxRecvWR: le.Uint32(req[36:]),
				MaxSendSGE: le.Uint32(req[40:]), MaxRecvSGE: le.Uint32(req[44:]), MaxInlineData: le.Uint32(req[48:])}}
		qp.QPN = qp.Handle
		if err := k.drv.CreateQP(k, qp, drvIn, drvOut); err != nil {
			return err
		}
		k.qps[qp.QPN] = qp
		for i, v := range []uint32{qp.Handle, qp.QPN, qp.Cap.MaxSendWR, qp.Cap.MaxRecvWR, qp.Cap.MaxSendSGE, qp.Cap.MaxRecvSGE, qp.Cap.MaxInlineData} {
			le.PutUint32(out[4*i:], v)
		}
		return nil
	case 26: // MODIFY_QP
		qp := k.qps[le.Uint32(req[64:])]
		if qp == nil {
			return unix.EINVAL
		}
		mask := uverbs.QPAttrMask(le.Uint32(req[68:]))
		if mask&uverbs.QPAttrDestQPN != 0 {
			qp.Dest = le.Uint32(req[84:])
		}
		if mask&uverbs.QPAttrState != 0 {
			qp.State = uverbs.QPState(req[96])
			if qp.State == uverbs.QPSErr {
				k.flush(qp)
			}
		}
		return nil
	case 27: // DESTROY_QP
		delete(k.qps, le.Uint32(req[8:]))
		return nil
	case 28: // POST_SEND
		qp := k.qps[le.Uint32(req[8:])]
		if qp == nil || le.Uint32(req[12:]) != 0 {
			return unix.EINVAL // the fake takes the doorbell form only
		}
		if qp.State != uverbs.QPSRTS && qp.State != uverbs.QPSErr {
			return unix.EINVAL
		}
		k.run(qp)
		return nil
	}
	return unix.EOPNOTSUPP
}

// pipe makes a pipe whose read end goes to the context (which owns and closes it); the
// kernel keeps the write end until the test ends.
func (k *Kernel) pipe() (int, error) {
	r, _, err := k.pipe2()
	return r, err
}

func (k *Kernel) pipe2() (r, w int, err error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return 0, 0, err
	}
	k.fds = append(k.fds, p[1])
	return p[0], p[1], nil
}

// run executes what qp's send queue holds, as a device would after the doorbell: each WR
// against the peer QP, completions to the CQs. A WR that fails completes in error and
// moves qp to ERR, which flushes the rest.
func (k *Kernel) run(qp *QP) {
	// A queue holds at most MaxSendWR WRs: more in one go is a provider gone wrong (an
	// index that does not wrap), which must fail the test rather than spin here.
	for n := 0; qp.State == uverbs.QPSRTS; n++ {
		if n > int(qp.Cap.MaxSendWR) {
			k.fail("QP %d: more than %d send WRs queued at one doorbell", qp.QPN, qp.Cap.MaxSendWR)
			qp.State = uverbs.QPSErr
			return
		}
		wr, ok := k.drv.NextSend(qp)
		if !ok {
			return
		}
		status, byteLen := k.execute(qp, &wr)
		if status != uverbs.WCSuccess {
			k.complete(qp.SendCQ, uverbs.WC{WRID: wr.ID, Status: status, Opcode: sendOpcode(wr.Opcode), QPNum: qp.QPN})
			qp.State = uverbs.QPSErr
			k.flush(qp)
			return
		}
		if wr.Signaled {
			k.complete(qp.SendCQ, uverbs.WC{WRID: wr.ID, Opcode: sendOpcode(wr.Opcode), ByteLen: byteLen, QPNum: qp.QPN})
		}
	}
	if qp.State == uverbs.QPSErr {
		k.flush(qp)
	}
}

func sendOpcode(op uverbs.WROpcode) uverbs.WCOpcode {
	switch op {
	case uverbs.WRRDMAWrite, uverbs.WRRDMAWriteWithImm:
		return uverbs.WCRDMAWrite
	case uverbs.WRRDMARead:
		return uverbs.WCRDMARead
	}
	return uverbs.WCSend
}

// execute carries out one send WR of qp and returns its status (and the bytes an RDMA
// READ brought).
func (k *Kernel) execute(qp *QP, wr *SendWR) (uverbs.WCStatus, uint32) {
	peer := k.qps[qp.Dest]
	if peer == nil || (peer.State != uverbs.QPSRTR && peer.State != uverbs.QPSRTS) {
		return uverbs.WCRetryExcErr, 0 // nobody answers
	}
	switch wr.Opcode {
	case uverbs.WRSend, uverbs.WRSendWithImm, uverbs.WRSendWithInv:
		data, ok := k.gather(qp, wr.SGE)
		if !ok {
			return uverbs.WCLocProtErr, 0
		}
		return k.deliver(qp, peer, wr, data), 0
	case uverbs.WRRDMAWrite, uverbs.WRRDMAWriteWithImm:
		data, ok := k.gather(qp, wr.SGE)
		if !ok {
			return uverbs.WCLocProtErr, 0
		}
		dst, ok := k.remote(peer, wr.RemoteAddr, wr.RKey, len(data), uverbs.AccessRemoteWrite)
		if !ok {
			return uverbs.WCRemAccessErr, 0
		}
		copy(dst, data)
		if wr.Opcode == uverbs.WRRDMAWriteWithImm {
			return k.deliver(qp, peer, wr, nil), 0
		}
		return uverbs.WCSuccess, 0
	case uverbs.WRRDMARead:
		n := 0
		for _, g := range wr.SGE {
			n += int(g.Length)
		}
		src, ok := k.remote(peer, wr.RemoteAddr, wr.RKey, n, uverbs.AccessRemoteRead)
		if !ok {
			return uverbs.WCRemAccessErr, 0
		}
		if !k.scatter(qp, wr.SGE, src) {
			return uverbs.WCLocProtErr, 0
		}
		return uverbs.WCSuccess, uint32(n)
	}
	return uverbs.WCLocQPOpErr, 0
}

// deliver consumes peer's next receive for a SEND (data) or an RDMA WRITE with immediate
// (data nil) from qp, and completes it. The sender's status is returned: no receive posted
// is RNR_RETRY_EXC_ERR (a device that gave up at once); a receive too short fails both.
func (k *Kernel) deliver(qp, peer *QP, wr *SendWR, data []byte) uverbs.WCStatus {
	rwr, ok := k.drv.NextRecv(peer)
	if !ok {
		return uverbs.WCRNRRetryExcErr
	}
	wc := uverbs.WC{WRID: rwr.ID, Opcode: uverbs.WCRecv, ByteLen: uint32(len(data)), QPNum: peer.QPN, SrcQP: qp.QPN}
	switch wr.Opcode {
	case uverbs.WRSendWithImm:
		wc.Flags, wc.Imm = uverbs.WCFlagWithImm, wr.Imm
	case uverbs.WRRDMAWriteWithImm:
		wc.Opcode, wc.Flags, wc.Imm = uverbs.WCRecvRDMAWithImm, uverbs.WCFlagWithImm, wr.Imm
	case uverbs.WRSendWithInv:
		wc.Flags, wc.Imm = uverbs.WCFlagWithInv, wr.Imm
	}
	if !k.scatter(peer, rwr.SGE, data) {
		wc.Status = uverbs.WCLocLenErr
		k.complete(peer.RecvCQ, wc)
		peer.State = uverbs.QPSErr
		k.flush(peer)
		return uverbs.WCRemInvReqErr
	}
	k.complete(peer.RecvCQ, wc)
	return uverbs.WCSuccess
}

// flush completes every WR still queued on qp (in ERR) with WR_FLUSH_ERR.
func (k *Kernel) flush(qp *QP) {
	for range qp.Cap.MaxSendWR + 1 {
		wr, ok := k.drv.NextSend(qp)
		if !ok {
			break
		}
		k.complete(qp.SendCQ, uverbs.WC{WRID: wr.ID, Status: uverbs.WCWRFlushErr, Opcode: sendOpcode(wr.Opcode), QPNum: qp.QPN})
	}
	for range qp.Cap.MaxRecvWR + 1 {
		wr, ok := k.drv.NextRecv(qp)
		if !ok {
			break
		}
		k.complete(qp.RecvCQ, uverbs.WC{WRID: wr.ID, Status: uverbs.WCWRFlushErr, Opcode: uverbs.WCRecv, QPNum: qp.QPN})
	}
}

// complete writes wc to cq and raises the completion event of an armed CQ.
func (k *Kernel) complete(cq *CQ, wc uverbs.WC) {
	if cq == nil || k.cqs[cq.Handle] != cq {
		return // destroyed
	}
	if !k.drv.Complete(cq, wc) {
		k.fail("CQ %d overrun (depth %d)", cq.Handle, cq.CQE)
		return
	}
	armed := k.drv.Armed(cq) || cq.armed
	if !armed || cq.channel < 0 {
		return
	}
	cq.armed = false
	var ev [8]byte
	le.PutUint64(ev[:], cq.Cookie)
	if _, err := unix.Write(cq.channel, ev[:]); err != nil {
		k.fail("CQ %d: completion event: %v", cq.Handle, err)
	}
}

// region is the MR of key if it covers [addr, addr+n) with access (0: local use).
func (k *Kernel) region(key uint32, addr uint64, n int, access uverbs.AccessFlags) *MR {
	mr := k.mrs[key]
	if mr == nil || addr < mr.Addr || addr+uint64(n) > mr.Addr+mr.Len || mr.Access&access != access {
		return nil
	}
	return mr
}

func (k *Kernel) gather(qp *QP, sges []uverbs.SGE) ([]byte, bool) {
	var data []byte
	for _, g := range sges {
		if mr := k.region(g.LKey, g.Addr, int(g.Length), 0); mr == nil || mr.PD != qp.PD {
			return nil, false
		}
		data = append(data, user(g.Addr, int(g.Length))...)
	}
	return data, true
}

// scatter writes data over sges; false if they are not writable or too short.
func (k *Kernel) scatter(qp *QP, sges []uverbs.SGE, data []byte) bool {
	for _, g := range sges {
		if len(data) == 0 {
			break
		}
		if mr := k.region(g.LKey, g.Addr, int(g.Length), uverbs.AccessLocalWrite); mr == nil || mr.PD != qp.PD {
			return false
		}
		n := copy(user(g.Addr, int(g.Length)), data)
		data = data[n:]
	}
	return len(data) == 0
}

func (k *Kernel) remote(peer *QP, addr uint64, key uint32, n int, access uverbs.AccessFlags) ([]byte, bool) {
	mr := k.region(key, addr, n, access)
	if mr == nil || mr.PD != peer.PD {
		return nil, false
	}
	return user(addr, n), true
}
