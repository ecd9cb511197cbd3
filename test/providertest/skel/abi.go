package skel

import "unsafe"

// The made-up driver's ABI: what a real provider mirrors from its uapi header
// (rdma/<driver>-abi.h) and checks with abicheck.

const (
	Driver   = "skel"
	DriverID = 0xfff0 // not an enum rdma_driver_id value: no kernel driver has it
	MaxSGE   = 2
)

// QueueResp is the driver response that describes one queue (CREATE_CQ: one, CREATE_QP:
// the send queue's, then the receive queue's).
type QueueResp struct {
	Offset uint64 // mmap offset on the uverbs fd
	Slots  uint32
	Pad    uint32
}

// RingHeader starts every queue.
type RingHeader struct {
	Prod uint32
	_    [15]uint32
	Cons uint32
	_    [15]uint32
}

// SGE is one scatter/gather element of a WQE.
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// WQE is one send or receive work queue element.
type WQE struct {
	ID         uint64
	Opcode     uint32 // enum ib_uverbs_wr_opcode
	Flags      uint32 // IB_SEND_* bits
	RemoteAddr uint64
	RKey       uint32
	NumSGE     uint32
	Imm        uint32
	_          uint32
	SGE        [MaxSGE]SGE
}

// CQE is one completion.
type CQE struct {
	WRID    uint64
	Status  uint32 // enum ib_wc_status
	Opcode  uint32 // enum ib_wc_opcode
	ByteLen uint32
	QPN     uint32
	SrcQP   uint32
	Flags   uint32
	Imm     uint32
	_       uint32
}

const (
	QueueRespLen  = 16
	RingHeaderLen = 128
	WQESize       = 72
	CQESize       = 40
)

// Sizes the driver checks, asserted at compile time.
var (
	_ = [1]struct{}{}[unsafe.Sizeof(QueueResp{})-QueueRespLen]
	_ = [1]struct{}{}[unsafe.Sizeof(RingHeader{})-RingHeaderLen]
	_ = [1]struct{}{}[unsafe.Sizeof(WQE{})-WQESize]
	_ = [1]struct{}{}[unsafe.Sizeof(CQE{})-CQESize]
)
