package mlx5

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gorping/gorping/internal/mmio"
	"github.com/gorping/gorping/uverbs/driver"
	"github.com/gorping/gorping/uverbs/providerkit"
	"golang.org/x/sys/unix"
)

// Errors of the posting path are preallocated: posting must not allocate.
var (
	errTooManySGE = providerkit.ErrTooManySGE("mlx5", unix.ENOMEM)
	// A receive with too many SGEs is EINVAL in libmlx5, a send ENOMEM.
	errTooManyRecvSGE = fmt.Errorf("mlx5: more receive SGEs than the QP allows: %w", unix.EINVAL)
	errBadOpcode      = providerkit.ErrBadOpcode("mlx5")
	errInlineLen      = providerkit.ErrInlineLen("mlx5", unix.ENOMEM)
	errNoSQ           = fmt.Errorf("mlx5: QP has no send queue: %w", unix.EINVAL)
	errNoRQ           = providerkit.ErrNoRQ("mlx5")
)

// be32 stores v big-endian at b[0:4].
func be32(b []byte, v uint32) { binary.BigEndian.PutUint32(b, v) }

// storeBE32 publishes a big-endian doorbell-record word (mmio.StoreRecord: one aligned
// 32-bit store, seen by the recorder of the oracle and the device model).
func storeBE32(p *uint32, v uint32) { mmio.StoreRecord(p, hostToBE32(v)) }

// hostToBE32 returns the value whose in-memory bytes are v big-endian (amd64 and arm64 are
// little-endian; the provider only registers there).
func hostToBE32(v uint32) uint32 { return bits.ReverseBytes32(v) }

// bfreg is one BlueFlame register of a UAR: the doorbell address of the QPs the kernel put
// on it. bfreg 0 has no BlueFlame buffer (bufSize 0); shared bfregs need lock.
type bfreg struct {
	index   int            // gross index as the kernel returns it
	reg     unsafe.Pointer // UAR mapping + 0x800 + k*bf_reg_size
	bufSize int            // half of bf_reg_size, 0 = never BlueFlame
	offset  int            // alternates between 0 and bufSize
	lock    *sync.Mutex    // nil when the QP owns the bfreg
	users   int            // QPs of this context on it (for -d)
}

// sendQueue is the SQ part of a QP buffer.
type sendQueue struct {
	mu       sync.Mutex
	buf      []byte // sqBytes, 64-byte blocks
	wqeCnt   uint32 // blocks, power of two
	curPost  uint32 // next block (16-bit wqe_index in the ctrl segment)
	head     uint32 // WQEs posted
	tail     atomic.Uint32
	maxPost  uint32
	maxSGE   int
	maxInl   int
	wrid     []uint64 // per block index: wr_id of the WQE starting there
	wqeHead  []uint32 // per block index: head value after that WQE
	qpn      uint32
	sigAll   bool
	dbrec    *[2]uint32
	bf       *bfreg
	inlineOK bool // inline supported (max_inline > 0)
	// preferBF: use BlueFlame for every single-WQE doorbell that fits, as libmlx5 does by
	// default (MLX5_POST_SEND_PREFER_BF unset).
	preferBF bool
}

// recvQueue is the RQ part of a QP buffer.
type recvQueue struct {
	mu      sync.Mutex
	buf     []byte
	wqeCnt  uint32
	shift   uint32
	head    uint32
	tailPub atomic.Uint32 // completed WQEs, advanced by the CQ poller
	maxPost uint32
	maxSGE  int
	wrid    []uint64
	dbrec   *[2]uint32
}

func newSendQueue(buf []byte, g qpGeometry, qpn uint32, sigAll bool, dbrec *[2]uint32, bf *bfreg) *sendQueue {
	return &sendQueue{
		buf: buf, wqeCnt: uint32(g.sqWQECnt), maxPost: uint32(g.sqMaxPost),
		maxSGE: g.maxSendSGE, maxInl: g.maxInline,
		wrid: make([]uint64, g.sqWQECnt), wqeHead: make([]uint32, g.sqWQECnt),
		qpn: qpn, sigAll: sigAll, dbrec: dbrec, bf: bf, inlineOK: g.maxInline > 0, preferBF: true,
	}
}

func newRecvQueue(buf []byte, g qpGeometry, dbrec *[2]uint32) *recvQueue {
	return &recvQueue{
		buf: buf, wqeCnt: uint32(g.rqWQECnt), shift: uint32(g.rqWQEShift), maxPost: uint32(g.rqMaxPost),
		maxSGE: g.maxRecvSGE, wrid: make([]uint64, g.rqWQECnt), dbrec: dbrec,
	}
}

// userBytes views n bytes of process memory at addr (an SGE's buffer). The address comes
// from the caller's registered memory, which is never Go heap.
func userBytes(addr uint64, n uint32) []byte {
	if n == 0 {
		return nil
	}
	p := *(*unsafe.Pointer)(unsafe.Pointer(&addr))
	return unsafe.Slice((*byte)(p), n)
}

// post writes one send WQE and rings the doorbell. It does not allocate.
func (s *sendQueue) post(wr *driver.SendWR) error {
	opcode, raddr, err := sendOpcode(wr.Opcode)
	if err != nil {
		return err
	}
	inline, err := s.check(wr)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.buf == nil {
		return driver.ErrClosed
	}
	if s.head-s.tail.Load() >= s.maxPost {
		return driver.ErrQueueFull
	}
	idx := s.curPost & (s.wqeCnt - 1)
	base := int(idx) * sendWQEBB
	ctrl := s.buf[base : base+ctrlSegSize]
	putCtrlFlags(ctrl, wr, s.sigAll)
	off, ds := base+ctrlSegSize, 1
	if raddr {
		putRaddr(s.buf[off:off+raddrSegSize], wr)
		off += raddrSegSize
		ds++
	}
	if inline {
		ds += s.putInline(off, wr.SGE)
	} else {
		ds += s.putData(off, wr.SGE)
	}
	be32(ctrl[ctrlOpmodIdxOpcode:], (s.curPost&0xffff)<<8|opcode)
	be32(ctrl[ctrlQpnDs:], s.qpn<<8|uint32(ds))
	s.wrid[idx] = wr.ID
	s.wqeHead[idx] = s.head
	s.curPost += uint32((ds*16 + sendWQEBB - 1) / sendWQEBB)
	s.head++
	s.ring(base, ds, inline)
	return nil
}

// sendOpcode is the WQE opcode of a work request, and whether it carries a remote
// address segment.
func sendOpcode(op driver.WROpcode) (opcode uint32, raddr bool, err error) {
	switch op {
	case driver.WRSend:
		return opSend, false, nil
	case driver.WRSendWithImm:
		return opSendImm, false, nil
	case driver.WRRDMAWrite:
		return opRDMAWrite, true, nil
	case driver.WRRDMAWriteWithImm:
		return opRDMAWriteImm, true, nil
	case driver.WRRDMARead:
		return opRDMARead, true, nil
	}
	return 0, false, errBadOpcode
}

// check holds a work request against the QP's limits and says whether its data goes
// inline.
func (s *sendQueue) check(wr *driver.SendWR) (inline bool, err error) {
	if len(wr.SGE) > s.maxSGE {
		return false, errTooManySGE
	}
	inline = wr.Flags&driver.SendInline != 0 && len(wr.SGE) > 0
	if inline {
		var total uint64
		for i := range wr.SGE {
			total += uint64(wr.SGE[i].Length)
		}
		if total > uint64(s.maxInl) {
			return false, errInlineLen
		}
	}
	return inline, nil
}

// putCtrlFlags fills the control segment's signature, completion/solicited/fence flags
// and immediate; the opcode, index, QPN and size follow once the WQE is written.
func putCtrlFlags(ctrl []byte, wr *driver.SendWR, sigAll bool) {
	var fm byte
	if sigAll || wr.Flags&driver.SendSignaled != 0 {
		fm |= ctrlCQUpdate
	}
	if wr.Flags&driver.SendSolicited != 0 {
		fm |= ctrlSolicited
	}
	if wr.Flags&driver.SendFence != 0 {
		fm |= ctrlFence
	}
	ctrl[ctrlSignature], ctrl[9], ctrl[10], ctrl[ctrlFmCeSe] = 0, 0, 0, fm
	// imm is stored as given: the caller's value is already in network order in memory.
	var imm uint32
	if wr.Opcode == driver.WRSendWithImm || wr.Opcode == driver.WRRDMAWriteWithImm {
		imm = wr.Imm
	}
	binary.LittleEndian.PutUint32(ctrl[ctrlImm:], imm)
}

// putRaddr fills a remote address segment.
func putRaddr(seg []byte, wr *driver.SendWR) {
	binary.BigEndian.PutUint64(seg[raddrRaddr:], wr.RemoteAddr)
	be32(seg[raddrRkey:], wr.RKey)
	be32(seg[12:], 0)
}

// putInline copies the SGEs' bytes into the WQE at off behind an inline header and
// returns the 16-byte units it took (0 for no data).
func (s *sendQueue) putInline(off int, sges []driver.SGE) int {
	q := s.buf
	hdr := off
	off += inlineHdrLen
	total := 0
	for i := range sges {
		src := userBytes(sges[i].Addr, sges[i].Length)
		for len(src) > 0 {
			if off == len(q) {
				off = 0 // inline data wraps at the SQ end byte by byte
			}
			n := copy(q[off:], src)
			src, off, total = src[n:], off+n, total+n
		}
	}
	if total == 0 {
		return 0
	}
	be32(q[hdr:], uint32(total)|inlineSeg)
	return align(total+inlineHdrLen, 16) / 16
}

// putData writes a data segment per SGE at off (wrapping at the SQ end) and returns
// how many it wrote: zero-length SGEs are skipped, as the device expects.
func (s *sendQueue) putData(off int, sges []driver.SGE) int {
	n := 0
	for i := range sges {
		if sges[i].Length == 0 {
			continue
		}
		if off == len(s.buf) {
			off = 0
		}
		putDataSeg(s.buf[off:off+dataSegSize], &sges[i])
		off += dataSegSize
		n++
	}
	return n
}

// putDataSeg fills one data segment (byte count, lkey, address; big-endian).
func putDataSeg(seg []byte, sge *driver.SGE) {
	be32(seg[dataByteCount:], sge.Length)
	be32(seg[dataLKey:], sge.LKey)
	binary.BigEndian.PutUint64(seg[dataAddr:], sge.Addr)
}

// ring publishes the doorbell record and writes the doorbell (or the whole WQE, BlueFlame)
// to the UAR: record, barrier, one 64-bit store or 64-byte chunks, flush.
func (s *sendQueue) ring(base, ds int, inline bool) {
	mmio.ToDevice()
	storeBE32(&s.dbrec[dbrSend], s.curPost&0xffff)
	bf := s.bf
	if bf.lock != nil {
		bf.lock.Lock()
	}
	mmio.WCStart()
	dst := unsafe.Add(bf.reg, bf.offset)
	if bf.bufSize > 0 && bf.index != 0 && (inline || s.preferBF) && ds > 1 && ds*16 <= bf.bufSize {
		n := align(ds*16, sendWQEBB) / sendWQEBB
		src := base
		for i := 0; i < n; i++ {
			mmio.Copy64(unsafe.Add(dst, i*sendWQEBB), unsafe.Pointer(&s.buf[src]))
			src += sendWQEBB
			if src == len(s.buf) {
				src = 0
			}
		}
	} else {
		mmio.Store64(dst, unsafe.Pointer(&s.buf[base]))
	}
	mmio.Flush()
	bf.offset ^= bf.bufSize
	if bf.lock != nil {
		bf.lock.Unlock()
	}
}

// post writes one receive WQE and publishes it in the doorbell record (no MMIO).
func (r *recvQueue) post(wr *driver.RecvWR) error {
	if len(wr.SGE) > r.maxSGE {
		return errTooManyRecvSGE
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.buf == nil {
		return driver.ErrClosed
	}
	if r.head-r.tailPub.Load() >= r.maxPost {
		return driver.ErrQueueFull
	}
	slot := r.head & (r.wqeCnt - 1)
	base := int(slot) << r.shift
	j := 0
	for i := range wr.SGE {
		sge := &wr.SGE[i]
		if sge.Length == 0 {
			continue
		}
		putDataSeg(r.buf[base+j*dataSegSize:base+(j+1)*dataSegSize], sge)
		j++
	}
	if j < r.maxSGE { // the list's end: a segment with the invalid lkey
		putDataSeg(r.buf[base+j*dataSegSize:base+(j+1)*dataSegSize], &driver.SGE{LKey: invalidLKey})
	}
	r.wrid[slot] = wr.ID
	r.head++
	mmio.ToDevice()
	storeBE32(&r.dbrec[dbrRecv], r.head&0xffff)
	return nil
}
