package mlx5

import (
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gorping/gorping/internal/mmio"
	"github.com/gorping/gorping/uverbs/driver"
)

// syndromeNames names the error CQE syndromes (MLX5_CQE_SYNDROME_*).
var syndromeNames = map[uint8]string{
	0x01: "LOCAL_LENGTH_ERR",
	0x02: "LOCAL_QP_OP_ERR",
	0x04: "LOCAL_PROT_ERR",
	0x05: "WR_FLUSH_ERR",
	0x06: "MW_BIND_ERR",
	0x10: "BAD_RESP_ERR",
	0x11: "LOCAL_ACCESS_ERR",
	0x12: "REMOTE_INVAL_REQ_ERR",
	0x13: "REMOTE_ACCESS_ERR",
	0x14: "REMOTE_OP_ERR",
	0x15: "TRANSPORT_RETRY_EXC_ERR",
	0x16: "RNR_RETRY_EXC_ERR",
	0x22: "REMOTE_ABORTED_ERR",
}

// SyndromeName names an error CQE syndrome ("REMOTE_ACCESS_ERR"), or gives its number.
func SyndromeName(s uint8) string {
	if n, ok := syndromeNames[s]; ok {
		return n
	}
	return fmt.Sprintf("syndrome %#02x", s)
}

// syndromeStatus maps an error CQE syndrome to a completion status, as libmlx5 does.
func syndromeStatus(s uint8) driver.WCStatus {
	switch s {
	case 0x01:
		return driver.WCLocLenErr
	case 0x02:
		return driver.WCLocQPOpErr
	case 0x04:
		return driver.WCLocProtErr
	case 0x05:
		return driver.WCWRFlushErr
	case 0x06:
		return driver.WCMWBindErr
	case 0x10:
		return driver.WCBadRespErr
	case 0x11:
		return driver.WCLocAccessErr
	case 0x12:
		return driver.WCRemInvReqErr
	case 0x13:
		return driver.WCRemAccessErr
	case 0x14:
		return driver.WCRemOpErr
	case 0x15:
		return driver.WCRetryExcErr
	case 0x16:
		return driver.WCRNRRetryExcErr
	case 0x22:
		return driver.WCRemAbortErr
	}
	return driver.WCGeneralErr
}

// armWord is the CQ arm doorbell word: sequence number, command and consumer index.
func armWord(sn uint32, solicited bool, ci uint32) uint32 {
	cmd := uint32(cqDBReqNot)
	if solicited {
		cmd = cqDBReqNotSol
	}
	return (sn&3)<<28 | cmd | ci&0xffffff
}

// qpTable maps the user index a QP was created with (reported in every CQE with
// cqe_version 1) to the QP's queues.
type qpTable struct {
	mu   sync.RWMutex
	qps  []*qp // index = uidx; nil while reserved
	used []bool
	free []uint32
}

// add reserves the lowest free user index for q (which may be nil until Commit).
func (t *qpTable) add(q *qp) uint32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, u := range t.free {
		if u == t.lowestFree() {
			t.free = append(t.free[:i], t.free[i+1:]...)
			t.qps[u] = q
			t.used[u] = true
			return u
		}
	}
	u := uint32(len(t.qps))
	t.qps = append(t.qps, q)
	t.used = append(t.used, true)
	return u
}

func (t *qpTable) lowestFree() uint32 {
	m := ^uint32(0)
	for _, u := range t.free {
		m = min(m, u)
	}
	return m
}

func (t *qpTable) set(u uint32, q *qp) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.qps[u] = q
}

func (t *qpTable) remove(u uint32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if int(u) < len(t.qps) && t.used[u] {
		t.qps[u], t.used[u] = nil, false
		t.free = append(t.free, u)
	}
}

func (t *qpTable) get(u uint32) *qp {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if int(u) < len(t.qps) {
		return t.qps[u]
	}
	return nil
}

// cqRing is the data path of one CQ: the CQE buffer the device writes, the consumer index
// and the doorbell record.
type cqRing struct {
	mu      sync.Mutex
	buf     []byte // ncqe * 64
	ncqe    uint32
	ci      uint32 // consumer index
	cqn     uint32
	dbrec   *[2]uint32
	armSN   atomic.Uint32
	armDB   uint64         // the 8 arm doorbell bytes, staged 8-byte aligned for Store64
	uarDB   unsafe.Pointer // UAR page 0 + 0x20
	table   *qpTable
	lastErr string // the last error CQE, described (for -d and error reports)
	onError func(string)
	ts      bool // completion timestamps: copy each CQE's into WC.Timestamp
}

// initCQEs marks every CQE invalid and owned by the device (op_own 0xf0) before creation.
func initCQEs(buf []byte) {
	for i := cqeSize - 1; i < len(buf); i += cqeSize {
		buf[i] = cqeInvalid << 4
	}
}

// opOwn loads a CQE's last byte with an atomic 32-bit load of its last word: the device
// writes the owner byte last, and the load orders the reads of the body that follow
// (FromDevice makes that hold against DMA, the atomic against an in-process model).
func opOwn(cqe []byte) byte {
	w := atomic.LoadUint32((*uint32)(unsafe.Pointer(&cqe[60])))
	return byte(w >> 24) // little-endian host: byte 63 is the top byte of the word at 60
}

// poll fills wc with up to len(wc) completions. It does not allocate unless an error CQE
// is found.
func (c *cqRing) poll(wc []driver.WC) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.buf == nil {
		return 0, driver.ErrClosed
	}
	n := 0
	for n < len(wc) {
		slot := c.ci & (c.ncqe - 1)
		cqe := c.buf[int(slot)*cqeSize : int(slot+1)*cqeSize]
		op := opOwn(cqe)
		sw := byte(0)
		if c.ci&c.ncqe != 0 {
			sw = 1
		}
		if op>>4 == cqeInvalid || op&cqeOwnerMask != sw {
			break
		}
		c.ci++
		mmio.FromDevice()
		ok, err := c.parse(cqe, op>>4, &wc[n])
		if err != nil {
			storeBE32(&c.dbrec[dbrSetCI], c.ci&0xffffff)
			return n, err
		}
		if ok {
			n++
		}
	}
	// Every poll publishes the consumer index, also an empty one, as libmlx5 does.
	storeBE32(&c.dbrec[dbrSetCI], c.ci&0xffffff)
	return n, nil
}

// parse turns one CQE into *wc. It reports false for a CQE of a QP destroyed meanwhile
// (libmlx5 removes those from the CQ when destroying the QP; skipping them is the same).
func (c *cqRing) parse(cqe []byte, opcode byte, wc *driver.WC) (bool, error) {
	uidx := binary.BigEndian.Uint32(cqe[cqeSrqnUidx:]) & 0xffffff
	q := c.table.get(uidx)
	if q == nil {
		return false, nil
	}
	*wc = driver.WC{QPNum: q.qpn}
	if c.ts && opcode <= cqeRespSendInv {
		wc.Timestamp = binary.BigEndian.Uint64(cqe[cqeTimestamp:])
	}
	switch opcode {
	case cqeReq:
		s := q.sq
		if s == nil {
			return false, fmt.Errorf("mlx5: CQ %#x: send completion for QP %#x without a send queue", c.cqn, q.qpn)
		}
		idx := uint32(binary.BigEndian.Uint16(cqe[cqeWqeCounter:])) & (s.wqeCnt - 1)
		wc.WRID = s.wrid[idx]
		s.tail.Store(s.wqeHead[idx] + 1)
		switch cqe[cqeSopDropQpn] { // WQE opcode in the top byte
		case opRDMAWrite:
			wc.Opcode = driver.WCRDMAWrite
		case opRDMAWriteImm:
			wc.Opcode, wc.Flags = driver.WCRDMAWrite, driver.WCFlagWithImm // as libmlx5 reports it
		case opSend, opSendInval:
			wc.Opcode = driver.WCSend
		case opSendImm:
			wc.Opcode, wc.Flags = driver.WCSend, driver.WCFlagWithImm
		case opRDMARead:
			wc.Opcode = driver.WCRDMARead
			wc.ByteLen = binary.BigEndian.Uint32(cqe[cqeByteCnt:])
		case opAtomicCS:
			wc.Opcode, wc.ByteLen = driver.WCCompSwap, 8
		case opAtomicFA:
			wc.Opcode, wc.ByteLen = driver.WCFetchAdd, 8
		}
	case cqeRespWrImm, cqeRespSend, cqeRespSendImm, cqeRespSendInv:
		r := q.rq
		if r == nil {
			return false, fmt.Errorf("mlx5: CQ %#x: receive completion for QP %#x without a receive queue", c.cqn, q.qpn)
		}
		t := r.tailPub.Load()
		wc.WRID = r.wrid[t&(r.wqeCnt-1)]
		r.tailPub.Store(t + 1)
		wc.ByteLen = binary.BigEndian.Uint32(cqe[cqeByteCnt:])
		immRaw := binary.LittleEndian.Uint32(cqe[cqeImmInvalPkey:]) // network order as in memory
		switch opcode {
		case cqeRespWrImm:
			wc.Opcode, wc.Flags, wc.Imm = driver.WCRecvRDMAWithImm, driver.WCFlagWithImm, immRaw
		case cqeRespSend:
			wc.Opcode = driver.WCRecv
		case cqeRespSendImm:
			wc.Opcode, wc.Flags, wc.Imm = driver.WCRecv, driver.WCFlagWithImm, immRaw
		case cqeRespSendInv:
			wc.Opcode, wc.Flags = driver.WCRecv, driver.WCFlagWithInv
			wc.Imm = binary.BigEndian.Uint32(cqe[cqeImmInvalPkey:])
		}
		fr := binary.BigEndian.Uint32(cqe[cqeFlagsRqpn:])
		wc.SrcQP = fr & 0xffffff
		wc.SL = uint8(fr>>24) & 0xf
		if (fr>>28)&3 != 0 {
			wc.Flags |= driver.WCFlagGRH
		}
		wc.SLID = binary.BigEndian.Uint16(cqe[cqeSlid:])
		wc.DLIDPathBits = cqe[cqeMlPath] & 0x7f
		wc.PKeyIndex = uint16(binary.BigEndian.Uint32(cqe[cqeImmInvalPkey:]))
	case cqeReqErr, cqeRespErr:
		synd, vendor := cqe[cqeSyndrome], cqe[cqeVendorErrSynd]
		wc.Status = syndromeStatus(synd)
		wc.VendorErr = uint32(vendor)
		side := "receive"
		if opcode == cqeReqErr {
			side = "send"
			s := q.sq
			if s != nil {
				idx := uint32(binary.BigEndian.Uint16(cqe[cqeWqeCounter:])) & (s.wqeCnt - 1)
				wc.WRID = s.wrid[idx]
				s.tail.Store(s.wqeHead[idx] + 1)
			}
		} else if r := q.rq; r != nil {
			t := r.tailPub.Load()
			wc.WRID = r.wrid[t&(r.wqeCnt-1)]
			r.tailPub.Store(t + 1)
		}
		if synd != 0x05 { // flushes follow every real error; describe the cause only
			c.lastErr = fmt.Sprintf("mlx5: QP %#x %s completion error: %s (syndrome %#02x, vendor syndrome %#02x, status %v, wqe_counter %d)",
				q.qpn, side, SyndromeName(synd), synd, vendor, wc.Status, binary.BigEndian.Uint16(cqe[cqeWqeCounter:]))
			if c.onError != nil {
				c.onError(c.lastErr)
			}
		}
	default:
		return false, fmt.Errorf("mlx5: CQ %#x: unexpected CQE opcode %d", c.cqn, opcode)
	}
	return true, nil
}

// arm requests an event for the next (solicited) completion: arm word into the doorbell
// record, then the word and the CQ number as one 64-bit store to the UAR.
func (c *cqRing) arm(solicited bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.buf == nil {
		return driver.ErrClosed
	}
	w := armWord(c.armSN.Load(), solicited, c.ci)
	storeBE32(&c.dbrec[dbrArm], w)
	c.armDB = uint64(hostToBE32(w)) | uint64(hostToBE32(c.cqn))<<32
	mmio.WCStart()
	mmio.Store64(c.uarDB, unsafe.Pointer(&c.armDB))
	mmio.Flush()
	return nil
}

// event notes one completion event read for the CQ (the next arm uses the next sequence
// number).
func (c *cqRing) event() { c.armSN.Add(1) }

// cleanCQs removes the CQEs of the QP with user index uidx from its receive CQ and, if
// another, its send CQ, holding both CQs' locks (in a fixed order, so two QPs destroyed
// at once on the same pair of CQs cannot deadlock), as libmlx5's QP destroy does.
func cleanCQs(recv, send *cq, uidx uint32) {
	first, second := &recv.ring, &send.ring
	if recv == nil || send == nil {
		return
	}
	if first == second {
		first.mu.Lock()
		first.clean(uidx)
		first.mu.Unlock()
		return
	}
	if first.cqn > second.cqn {
		first, second = second, first
	}
	first.mu.Lock()
	second.mu.Lock()
	recv.ring.clean(uidx)
	send.ring.clean(uidx)
	second.mu.Unlock()
	first.mu.Unlock()
}

// clean removes the software-owned CQEs of user index uidx (c.mu held), libmlx5's
// __mlx5_cq_clean: find the producer end of what the device has written, then sweep back
// to the consumer index, moving every other QP's CQE up over the removed ones (each keeps
// the owner bit of the slot it lands in), advance the consumer index by the number
// removed and publish it after a barrier. CQEs the device writes meanwhile belong to
// other QPs: this one is already destroyed.
func (c *cqRing) clean(uidx uint32) {
	if c.buf == nil {
		return
	}
	mask := c.ncqe - 1
	slot := func(n uint32) []byte { return c.buf[int(n&mask)*cqeSize : int(n&mask+1)*cqeSize] }
	prod := c.ci
	for ; ; prod++ {
		op := opOwn(slot(prod))
		sw := byte(0)
		if prod&c.ncqe != 0 {
			sw = 1
		}
		if op>>4 == cqeInvalid || op&cqeOwnerMask != sw || prod == c.ci+mask {
			break
		}
	}
	mmio.FromDevice()
	freed := uint32(0)
	for prod != c.ci {
		prod--
		cqe := slot(prod)
		if binary.BigEndian.Uint32(cqe[cqeSrqnUidx:])&0xffffff == uidx {
			freed++
		} else if freed > 0 {
			dst := slot(prod + freed)
			owner := dst[cqeOpOwn] & cqeOwnerMask
			copy(dst, cqe)
			dst[cqeOpOwn] = cqe[cqeOpOwn]&^cqeOwnerMask | owner
		}
	}
	if freed > 0 {
		c.ci += freed
		mmio.ToDevice()
		storeBE32(&c.dbrec[dbrSetCI], c.ci&0xffffff)
	}
}
