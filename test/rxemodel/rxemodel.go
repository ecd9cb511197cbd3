// Package rxemodel is a test-only model of Soft-RoCE (the rdma_rxe kernel driver) in
// process: it answers the uverbs commands the rxe provider sends, shares the send,
// receive and completion queue rings with it through a memfd that the provider maps as
// it maps the uverbs fd (the backend's Mmap), and executes the send queue on the POST_SEND doorbell, inline as
// rxe does (SEND into the peer's receive queue, RDMA WRITE and READ against the peer's
// memory regions), writing CQEs (struct ib_uverbs_wc) into the CQ rings and completion
// events to the channels of armed CQs. Formats are written out here from rdma_user_rxe.h
// and ib_user_verbs.h, independently of the provider, so a provider bug is not mirrored.
//
// It checks what rxe would reject or fail (ring indices, keys, access rights, bounds,
// CQ overrun) and records it (Errors); the failing operation completes with an error.
package rxemodel

import (
	"encoding/binary"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gorping/gorping/test/internal/kcmd"
	"github.com/gorping/gorping/uverbs"
	_ "github.com/gorping/gorping/uverbs/rxe" // the provider the model answers
	"golang.org/x/sys/unix"
)

// Layouts of rdma_user_rxe.h and ib_user_verbs.h.
const (
	ringData     = 384 // struct rxe_queue_buf: log2_elem_size, index_mask, pad, producer (128), consumer (256), data
	ringProd     = 128
	ringCons     = 256
	sendWQEHdr   = 208 // struct rxe_send_wqe up to dma.sge[]
	recvWQEHdr   = 40  // struct rxe_recv_wqe up to dma.sge[]
	sgeLen       = 16  // struct rxe_sge: addr, length, lkey
	cqeLen       = 48  // struct ib_uverbs_wc
	sendNumSGE   = 196 // rxe_send_wqe.dma.num_sge
	sendLength   = 184 // rxe_send_wqe.dma.length
	recvNumSGE   = 28  // rxe_recv_wqe.dma.num_sge
	accessLocalW = 1   // IB_ACCESS_LOCAL_WRITE
	accessRemW   = 2   // IB_ACCESS_REMOTE_WRITE
	accessRemR   = 4   // IB_ACCESS_REMOTE_READ
)

// Work request and completion codes (ib_user_verbs.h).
const (
	wrRDMAWrite    = 0
	wrRDMAWriteImm = 1
	wrSend         = 2
	wrSendImm      = 3
	wrRDMARead     = 4

	wcSend      = 0
	wcRDMAWrite = 1
	wcRDMARead  = 2
	wcRecv      = 128
	wcRecvImm   = 129

	wcSuccess      = 0
	wcLocLenErr    = 1
	wcLocProtErr   = 4
	wcFlushErr     = 5
	wcRemAccessErr = 10
	wcRetryExcErr  = 12

	sendSignaled = 2 // IB_SEND_SIGNALED

	qpsRTR = 2 // enum ib_qp_state
	qpsRTS = 3
	qpsErr = 6
)

// NIC is one modelled rxe device. Contexts opened on it (Open) reach each other's QPs.
type NIC struct {
	mu      sync.Mutex
	memfd   *os.File // the rings, mapped by the provider (Fd) and by the model
	memSize int64
	qps     map[uint32]*qp // by QPN
	cqs     map[uint32]*cq // by handle
	mrs     map[uint32]*mr // by key (lkey == rkey)
	nextN   uint32
	errs    []string
	stats   Stats
	retry   *time.Timer // re-runs send queues waiting for a receive (RNR)
	closed  bool
}

// Stats counts what the model executed.
type Stats struct {
	Sends, Writes, Reads, Recvs, CQEs, ErrorCQEs, Events, Doorbells int
	SQLaps, RQLaps, CQLaps                                          int // times a ring index wrapped
}

type mr struct {
	handle, key  uint32
	addr, length uint64
	access       uint32
}

type ring struct {
	mem   []byte // the model's mapping of the memfd region
	off   int64  // its offset in the memfd (the provider's mmap offset)
	mask  uint32
	shift uint32
}

func (r *ring) prod() *uint32 { return (*uint32)(unsafe.Pointer(&r.mem[ringProd])) }
func (r *ring) cons() *uint32 { return (*uint32)(unsafe.Pointer(&r.mem[ringCons])) }
func (r *ring) slot(i uint32) []byte {
	o := ringData + int(i&r.mask)<<r.shift
	return r.mem[o : o+1<<r.shift]
}

type cq struct {
	handle  uint32
	cookie  uint64 // user_handle: the completion event's payload
	r       *ring
	channel *os.File
	armed   bool
	events  uint32
}

type qp struct {
	handle, qpn uint32
	sq, rq      *ring
	sendCQ, rcq *cq
	state       uint8
	dest        uint32
	access      uint32
	sigAll      bool
	waitRecv    bool // the SQ's head is a SEND the peer has no receive for yet
}

// New makes a model; Close releases it.
func New() (*NIC, error) {
	fd, err := unix.MemfdCreate("rxemodel", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("rxemodel: memfd: %w", err)
	}
	return &NIC{memfd: os.NewFile(uintptr(fd), "rxemodel"), qps: map[uint32]*qp{}, cqs: map[uint32]*cq{},
		mrs: map[uint32]*mr{}, nextN: 0x10}, nil
}

// Device is the uverbs device the model presents.
func (n *NIC) Device(name string) uverbs.Device {
	return uverbs.Device{Name: name, Index: 0, Uverbs: "uverbs0", Path: "/dev/infiniband/rxemodel-" + name,
		Driver: "rxe", DriverID: 14, ABI: 2, NodeGUID: 0x505400fffe000001}
}

// Open opens a context on the model through the rxe provider.
func (n *NIC) Open(name string, opts ...uverbs.Option) (*uverbs.Context, error) {
	return uverbs.OpenBackend(n.Device(name), &backend{nic: n}, opts...)
}

// Errors returns every violation the model saw.
func (n *NIC) Errors() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.errs...)
}

// Stats returns the counters.
func (n *NIC) Stats() Stats {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stats
}

// Live counts the QPs, CQs and memory regions not destroyed yet.
func (n *NIC) Live() (qps, cqs, mrs int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.qps), len(n.cqs), len(n.mrs)
}

// Close releases the memfd; the model's ring mappings go with their QPs and CQs.
func (n *NIC) Close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	n.closed = true
	if n.retry != nil {
		n.retry.Stop()
	}
	n.memfd.Close()
}

func (n *NIC) fail(format string, args ...any) {
	n.errs = append(n.errs, fmt.Sprintf(format, args...))
}

// newRing carves a ring of at least want usable slots of at least elem bytes out of the
// memfd: rxe's rxe_queue_init sizes (slots a power of two, one always empty; elements a
// power of two) and its header.
func (n *NIC) newRing(want int, elem int) (*ring, error) {
	slots := uint32(1)
	for int(slots) < want+1 {
		slots <<= 1
	}
	shift := uint32(0)
	for 1<<shift < elem {
		shift++
	}
	size := int64(ringData) + int64(slots)<<shift
	page := int64(os.Getpagesize())
	size = (size + page - 1) / page * page
	off := n.memSize
	if err := n.memfd.Truncate(off + size); err != nil {
		return nil, err
	}
	n.memSize += size
	mem, err := unix.Mmap(int(n.memfd.Fd()), off, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	r := &ring{mem: mem, off: off, mask: slots - 1, shift: shift}
	binary.LittleEndian.PutUint32(mem[0:], shift)
	binary.LittleEndian.PutUint32(mem[4:], slots-1)
	return r, nil
}

// mminfo is struct mminfo: where the provider maps a ring.
func (r *ring) mminfo() []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(r.off))
	return append(b, kcmd.PutLE(uint32(len(r.mem)), 0)...)
}

func (r *ring) unmap() {
	if r != nil {
		unix.Munmap(r.mem)
	}
}

// backend is the device file of one context: it plays rdma_rxe for the commands.
type backend struct {
	nic *NIC
	mu  sync.Mutex
	// async is the write end of the context's async event pipe; pipes those of its
	// completion channels (by the read fd handed out).
	async *os.File
	pipes map[int]*os.File
}

// Mmap maps the rings the provider asks for (by the offsets CREATE_CQ and CREATE_QP
// answered) from the model's memfd, shared with the model's own mapping.
func (b *backend) Mmap(off int64, length, prot int) ([]byte, error) {
	return unix.Mmap(int(b.nic.memfd.Fd()), off, length, prot, unix.MAP_SHARED)
}

func (b *backend) Munmap(m []byte) error { return unix.Munmap(m) }

func (b *backend) Write(p []byte) (int, error) {
	cmd, req, outLen, err := kcmd.Decode(p)
	if err != nil {
		return 0, err
	}
	n := b.nic
	n.mu.Lock()
	defer n.mu.Unlock()
	resp, err := b.exec(cmd, req)
	if err != nil {
		return 0, err
	}
	kcmd.Reply(req, resp, outLen)
	return len(p), nil
}

// pipe hands out the read end of a new pipe as a descriptor of its own and keeps the
// write end.
func pipe() (int, *os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return 0, nil, err
	}
	fd, err := unix.Dup(int(r.Fd()))
	r.Close()
	if err != nil {
		w.Close()
		return 0, nil, err
	}
	return fd, w, nil
}

func (b *backend) exec(cmd uint32, req []byte) ([]byte, error) {
	n := b.nic
	le32, le64 := kcmd.LE32, kcmd.LE64
	switch cmd {
	case 0: // GET_CONTEXT: async fd, one completion vector; rxe has no driver data
		if b.pipes != nil {
			return nil, unix.EINVAL
		}
		fd, w, err := pipe()
		if err != nil {
			return nil, err
		}
		b.async, b.pipes = w, map[int]*os.File{}
		return kcmd.PutLE(uint32(fd), 1), nil
	case 1: // QUERY_DEVICE
		out := make([]byte, 176)
		binary.LittleEndian.PutUint64(out[8:], n.Device("").NodeGUID)
		binary.LittleEndian.PutUint32(out[40:], 0xffffff) // vendor_id: rxe's
		binary.LittleEndian.PutUint32(out[52:], 1<<16)    // max_qp
		binary.LittleEndian.PutUint32(out[56:], 1<<14)    // max_qp_wr
		binary.LittleEndian.PutUint32(out[64:], 32)       // max_sge
		binary.LittleEndian.PutUint32(out[76:], 1<<15)    // max_cqe
		binary.LittleEndian.PutUint32(out[88:], 128)      // max_qp_rd_atom
		binary.LittleEndian.PutUint32(out[100:], 128)     // max_qp_init_rd_atom
		out[171] = 1                                      // phys_port_cnt
		return out, nil
	case 1 | kcmd.ExFlag: // QUERY_DEVICE_EX: rxe has no completion timestamps
		base, _ := b.exec(1, req)
		out := make([]byte, 304)
		copy(out, base)
		binary.LittleEndian.PutUint32(out[180:], 304) // response_length; timestamp mask 0
		return out, nil
	case 2: // QUERY_PORT: ACTIVE, max 4096, active 1024, LinkUp, Ethernet
		out := make([]byte, 40)
		binary.LittleEndian.PutUint32(out[4:], 1<<31) // max_msg_sz
		binary.LittleEndian.PutUint32(out[16:], 16)   // gid_tbl_len
		out[26], out[27], out[28], out[36], out[37] = 4, 5, 3, 5, 2
		return out, nil
	case 3: // ALLOC_PD
		n.nextN++
		return kcmd.PutLE(n.nextN), nil
	case 4: // DEALLOC_PD
		return nil, nil
	case 9: // REG_MR
		n.nextN++
		m := &mr{handle: n.nextN, key: n.nextN<<8 | 0x11, addr: le64(req[8:]), length: le64(req[16:]), access: le32(req[36:])}
		n.mrs[m.key] = m
		return kcmd.PutLE(m.handle, m.key, m.key), nil
	case 13: // DEREG_MR
		for key, m := range n.mrs {
			if m.handle == le32(req) {
				delete(n.mrs, key)
				return nil, nil
			}
		}
		return nil, unix.EINVAL
	case 17: // CREATE_COMP_CHANNEL
		fd, w, err := pipe()
		if err != nil {
			return nil, err
		}
		b.pipes[fd] = w
		return kcmd.PutLE(uint32(fd)), nil
	case 18: // CREATE_CQ
		return b.createCQ(req)
	case 20: // DESTROY_CQ: the events user space has read (those still in the pipe are not)
		c := n.cqs[le32(req[8:])]
		if c == nil {
			return nil, unix.EINVAL
		}
		delete(n.cqs, c.handle)
		c.r.unmap()
		read := c.events
		if c.channel != nil {
			if pending, err := unix.IoctlGetInt(int(c.channel.Fd()), unix.TIOCINQ); err == nil {
				read -= uint32(pending / 8)
			}
		}
		return kcmd.PutLE(read, 0), nil
	case 23: // REQ_NOTIFY_CQ: the next CQE raises an event
		c := n.cqs[le32(req)]
		if c == nil {
			return nil, unix.EINVAL
		}
		c.armed = true
		return nil, nil
	case 24: // CREATE_QP
		return b.createQP(req)
	case 26: // MODIFY_QP
		q := n.byHandle(le32(req[64:]))
		if q == nil {
			return nil, unix.EINVAL
		}
		mask := le32(req[68:])
		if mask&(1<<20) != 0 {
			q.dest = le32(req[84:])
		}
		if mask&(1<<3) != 0 {
			q.access = le32(req[88:])
		}
		if mask&1 != 0 {
			q.state = req[96]
			if q.state == qpsErr {
				n.flushRecv(q)
				n.execute(q)
			}
		}
		return nil, nil
	case 27: // DESTROY_QP
		q := n.byHandle(le32(req[8:]))
		if q == nil {
			return nil, unix.EINVAL
		}
		delete(n.qps, q.qpn)
		q.sq.unmap()
		q.rq.unmap()
		return kcmd.PutLE(0), nil
	case 28: // POST_SEND with no work requests: the doorbell
		q := n.byHandle(le32(req[8:]))
		if q == nil || le32(req[12:]) != 0 {
			return nil, unix.EINVAL
		}
		if q.state != qpsRTS && q.state != qpsErr {
			return nil, unix.EINVAL // rxe refuses it before RTS
		}
		n.stats.Doorbells++
		n.execute(q)
		return kcmd.PutLE(0), nil
	}
	return nil, unix.EOPNOTSUPP
}

func (n *NIC) byHandle(h uint32) *qp {
	for _, q := range n.qps {
		if q.handle == h {
			return q
		}
	}
	return nil
}

func (b *backend) createCQ(req []byte) ([]byte, error) {
	n := b.nic
	if len(req) < 32 {
		return nil, unix.EINVAL
	}
	want, ch := int(kcmd.LE32(req[16:])), int32(kcmd.LE32(req[24:]))
	r, err := n.newRing(want, cqeLen)
	if err != nil {
		return nil, err
	}
	n.nextN++
	c := &cq{handle: n.nextN, cookie: kcmd.LE64(req[8:]), r: r}
	if ch >= 0 {
		if c.channel = b.pipes[int(ch)]; c.channel == nil {
			r.unmap()
			return nil, unix.EINVAL
		}
	}
	n.cqs[c.handle] = c
	return append(kcmd.PutLE(c.handle, r.mask), r.mminfo()...), nil
}

func (b *backend) createQP(req []byte) ([]byte, error) {
	n := b.nic
	if len(req) < 56 {
		return nil, unix.EINVAL
	}
	le32 := kcmd.LE32
	scq, rcq := n.cqs[le32(req[20:])], n.cqs[le32(req[24:])]
	if scq == nil || rcq == nil || req[53] != 2 { // RC only
		return nil, unix.EINVAL
	}
	maxSend, maxRecv, sendSGE, recvSGE, inline := le32(req[32:]), le32(req[36:]), le32(req[40:]), le32(req[44:]), le32(req[48:])
	sq, err := n.newRing(int(maxSend), max(sendWQEHdr+int(sendSGE)*sgeLen, sendWQEHdr+int(inline)))
	if err != nil {
		return nil, err
	}
	rq, err := n.newRing(int(maxRecv), recvWQEHdr+int(recvSGE)*sgeLen)
	if err != nil {
		sq.unmap()
		return nil, err
	}
	n.nextN++
	q := &qp{handle: n.nextN, qpn: n.nextN | 0x100, sq: sq, rq: rq, sendCQ: scq, rcq: rcq, sigAll: req[52] != 0}
	n.qps[q.qpn] = q
	out := kcmd.PutLE(q.handle, q.qpn, sq.mask, rq.mask, sendSGE, recvSGE, inline, 0)
	return append(append(out, rq.mminfo()...), sq.mminfo()...), nil
}

// sges reads count SGEs at b (nil if they do not fit the slot).
func sges(b []byte, count uint32) [][3]uint64 {
	if uint64(count)*sgeLen > uint64(len(b)) {
		return nil
	}
	out := make([][3]uint64, count)
	for i := range out {
		s := b[i*sgeLen:]
		out[i] = [3]uint64{kcmd.LE64(s), uint64(kcmd.LE32(s[8:])), uint64(kcmd.LE32(s[12:]))}
	}
	return out
}

// local resolves an SGE list against this side's memory regions (lkey, bounds, access).
func (n *NIC) local(list [][3]uint64, need uint32) ([][]byte, bool) {
	var out [][]byte
	for _, s := range list {
		if s[1] == 0 {
			continue
		}
		m := n.mrs[uint32(s[2])]
		if m == nil || s[0] < m.addr || s[0]+s[1] > m.addr+m.length || m.access&need != need {
			n.fail("SGE %#x+%d lkey %#x: not within a region with access %#x", s[0], s[1], s[2], need)
			return nil, false
		}
		out = append(out, kcmd.Mem(s[0], int(s[1])))
	}
	return out, true
}

// remote resolves a remote address against the peer's memory regions.
func (n *NIC) remote(addr uint64, key uint32, length int, need uint32) ([]byte, bool) {
	if length == 0 {
		return nil, true // rxe checks no key for an empty RDMA WRITE (a keepalive)
	}
	m := n.mrs[key]
	if m == nil || addr < m.addr || addr+uint64(length) > m.addr+m.length || m.access&need != need {
		n.fail("remote %#x+%d rkey %#x: not within a region with access %#x", addr, length, key, need)
		return nil, false
	}
	return kcmd.Mem(addr, length), true
}

func gather(bufs [][]byte) []byte {
	var b []byte
	for _, x := range bufs {
		b = append(b, x...)
	}
	return b
}

func scatter(bufs [][]byte, data []byte) {
	for _, x := range bufs {
		data = data[copy(x, data):]
	}
}

// execute runs the QP's send queue up to the provider's producer index, as rxe's
// requester and the peer's responder do for a loopback connection.
func (n *NIC) execute(q *qp) {
	q.waitRecv = false
	for {
		cons, prod := atomic.LoadUint32(q.sq.cons()), atomic.LoadUint32(q.sq.prod())
		if prod > q.sq.mask || cons == prod {
			if prod > q.sq.mask {
				n.fail("QP %#x: SQ producer index %d beyond mask %#x", q.qpn, prod, q.sq.mask)
			}
			return
		}
		w := q.sq.slot(cons)
		if q.state == qpsErr {
			n.complete(q.sendCQ, q, kcmd.LE64(w), wcFlushErr, sendWC(kcmd.LE32(w[12:])), 0)
		} else if !n.send(q, w) {
			q.waitRecv = true
			n.retryLater()
			return
		}
		next := (cons + 1) & q.sq.mask
		if next == 0 {
			n.stats.SQLaps++
		}
		atomic.StoreUint32(q.sq.cons(), next)
		if q.state == qpsErr {
			n.flushRecv(q) // a failed WQE moved the QP to ERR: the rest flushes
		}
	}
}

func sendWC(op uint32) uint32 {
	switch op {
	case wrRDMAWrite, wrRDMAWriteImm:
		return wcRDMAWrite
	case wrRDMARead:
		return wcRDMARead
	}
	return wcSend
}

// send executes one send WQE; false: a SEND whose peer has no receive posted yet (rxe
// would retry after an RNR NAK).
func (n *NIC) send(q *qp, w []byte) bool {
	le32 := kcmd.LE32
	wrid, op, flags, imm := kcmd.LE64(w), le32(w[12:]), le32(w[16:]), le32(w[20:])
	raddr, rkey := kcmd.LE64(w[24:]), le32(w[32:])
	length := le32(w[sendLength:])
	list := sges(w[sendWQEHdr:], le32(w[sendNumSGE:]))
	peer := n.qps[q.dest]
	status := uint32(wcSuccess)
	switch {
	case list == nil:
		n.fail("QP %#x: send WQE with %d SGEs, beyond its slot", q.qpn, le32(w[sendNumSGE:]))
		status = wcLocProtErr
	case peer == nil || peer.state == qpsErr:
		// Gone or in ERR (the peer's teardown): rxe's requester retransmits in vain.
		status = wcRetryExcErr
	case peer.state != qpsRTR && peer.state != qpsRTS:
		n.fail("QP %#x sends to QP %#x in state %d", q.qpn, q.dest, peer.state)
		status = wcRemAccessErr
	case op == wrSend || op == wrSendImm:
		if !n.deliver(q, peer, list, op == wrSendImm, imm, &status) {
			return false
		}
		n.stats.Sends++
	case op == wrRDMAWrite || op == wrRDMAWriteImm:
		src, ok := n.local(list, 0)
		dst, rok := n.remote(raddr, rkey, int(length), accessRemW)
		if !ok || !rok || peer.access&accessRemW == 0 {
			status = wcRemAccessErr
			break
		}
		copy(dst, gather(src))
		n.stats.Writes++
	case op == wrRDMARead:
		dst, ok := n.local(list, accessLocalW)
		src, rok := n.remote(raddr, rkey, int(length), accessRemR)
		if !ok || !rok || peer.access&accessRemR == 0 {
			status = wcRemAccessErr
			break
		}
		scatter(dst, src)
		n.stats.Reads++
	default:
		n.fail("QP %#x: send WQE opcode %d", q.qpn, op)
		status = wcLocProtErr
	}
	if status != wcSuccess || q.sigAll || flags&sendSignaled != 0 {
		n.complete(q.sendCQ, q, wrid, status, sendWC(op), length)
	}
	if status != wcSuccess {
		q.state = qpsErr
	}
	return true
}

// deliver lands a SEND in the peer's next receive WQE; false if it has none.
func (n *NIC) deliver(q, peer *qp, list [][3]uint64, withImm bool, imm uint32, status *uint32) bool {
	r := peer.rq
	cons, prod := atomic.LoadUint32(r.cons()), atomic.LoadUint32(r.prod())
	if prod > r.mask {
		n.fail("QP %#x: RQ producer index %d beyond mask %#x", peer.qpn, prod, r.mask)
		*status = wcRemAccessErr
		return true
	}
	if cons == prod {
		return false
	}
	rw := r.slot(cons)
	src, ok := n.local(list, 0)
	data := gather(src)
	rl := sges(rw[recvWQEHdr:], kcmd.LE32(rw[recvNumSGE:]))
	if rl == nil {
		n.fail("QP %#x: receive WQE with %d SGEs, beyond its slot", peer.qpn, kcmd.LE32(rw[recvNumSGE:]))
	}
	dst, dok := n.local(rl, accessLocalW)
	dok = dok && rl != nil
	total := 0
	for _, d := range dst {
		total += len(d)
	}
	rstatus, opcode := uint32(wcSuccess), uint32(wcRecv)
	if withImm {
		opcode = wcRecvImm
	}
	switch {
	case !ok:
		*status = wcLocProtErr
	case !dok:
		rstatus, *status = wcLocProtErr, wcRemAccessErr
	case len(data) > total:
		n.fail("QP %#x: a SEND of %d bytes into a receive of %d", peer.qpn, len(data), total)
		rstatus, *status = wcLocLenErr, wcRemAccessErr
	default:
		scatter(dst, data)
		n.stats.Recvs++
	}
	if *status == wcLocProtErr && rstatus == wcSuccess {
		return true // nothing left this side: the receive stays posted
	}
	n.completeRecv(peer, kcmd.LE64(rw), rstatus, opcode, uint32(len(data)), imm, q.qpn)
	next := (cons + 1) & r.mask
	if next == 0 {
		n.stats.RQLaps++
	}
	atomic.StoreUint32(r.cons(), next)
	return true
}

// flushRecv completes every posted receive of a QP in ERR with WR_FLUSH_ERR (its sends
// are flushed as execute runs them).
func (n *NIC) flushRecv(q *qp) {
	r := q.rq
	for {
		cons, prod := atomic.LoadUint32(r.cons()), atomic.LoadUint32(r.prod())
		if cons == prod || prod > r.mask {
			break
		}
		n.completeRecv(q, kcmd.LE64(r.slot(cons)), wcFlushErr, wcRecv, 0, 0, 0)
		atomic.StoreUint32(r.cons(), (cons+1)&r.mask)
	}
}

func (n *NIC) completeRecv(q *qp, wrid uint64, status, opcode, byteLen, imm, src uint32) {
	n.writeCQE(q.rcq, q, wrid, status, opcode, byteLen, imm, src)
}

func (n *NIC) complete(c *cq, q *qp, wrid uint64, status, opcode, byteLen uint32) {
	n.writeCQE(c, q, wrid, status, opcode, byteLen, 0, 0)
}

// writeCQE produces one struct ib_uverbs_wc into the CQ ring and raises the completion
// event of an armed CQ.
func (n *NIC) writeCQE(c *cq, q *qp, wrid uint64, status, opcode, byteLen, imm, src uint32) {
	r := c.r
	prod, cons := atomic.LoadUint32(r.prod()), atomic.LoadUint32(r.cons())
	if cons > r.mask || (prod+1)&r.mask == cons {
		n.fail("CQ %#x overrun (producer %d, consumer %d, mask %#x)", c.handle, prod, cons, r.mask)
		return
	}
	e := r.slot(prod)
	clear(e[:cqeLen])
	binary.LittleEndian.PutUint64(e, wrid)
	copy(e[8:], kcmd.PutLE(status, opcode, 0, byteLen, imm, q.qpn, src))
	e[46] = 1 // port_num
	next := (prod + 1) & r.mask
	if next == 0 {
		n.stats.CQLaps++
	}
	atomic.StoreUint32(r.prod(), next)
	n.stats.CQEs++
	if status != wcSuccess {
		n.stats.ErrorCQEs++
	}
	if c.armed && c.channel != nil {
		c.armed = false
		var ev [8]byte
		binary.LittleEndian.PutUint64(ev[:], c.cookie)
		c.channel.SetWriteDeadline(time.Now().Add(time.Second))
		if _, err := c.channel.Write(ev[:]); err != nil {
			n.fail("CQ %#x: completion event: %v (is the channel read?)", c.handle, err)
		}
		c.events++
		n.stats.Events++
	}
}

// retryLater runs the send queues that wait for a receive again shortly (rxe's RNR
// retry; the peer posts receives without a system call the model would see).
func (n *NIC) retryLater() {
	if n.retry != nil || n.closed {
		return
	}
	n.retry = time.AfterFunc(20*time.Microsecond, func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		n.retry = nil
		if n.closed {
			return
		}
		for _, q := range n.qps {
			if q.waitRecv {
				n.execute(q)
			}
		}
	})
}
