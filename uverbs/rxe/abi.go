package rxe

// Go mirrors of rdma/rdma_user_rxe.h. Fixed-width fields only, so the Go layout equals the
// C layout (abi_layout_test.go, build tag abicheck, compares them with gcc's).

// mirrors struct ib_uverbs_wc (rdma/ib_user_verbs.h), the uibwc member that starts every
// struct rxe_cqe slot of an rxe completion queue
type cqe struct {
	WrID         uint64 `abi:"wr_id"`
	Status       uint32
	Opcode       uint32
	VendorErr    uint32
	ByteLen      uint32
	ImmData      uint32 `abi:"ex.imm_data"`
	QpNum        uint32
	SrcQp        uint32
	WcFlags      uint32
	PkeyIndex    uint16
	Slid         uint16
	Sl           uint8
	DlidPathBits uint8
	PortNum      uint8
	Reserved     uint8
}

// mirrors struct rxe_sge (rdma/rdma_user_rxe.h): the SGEs after a send or receive WQE
type sge struct {
	Addr   uint64
	Length uint32
	Lkey   uint32
}

// mirrors struct mminfo (rdma/rdma_user_rxe.h)
type mminfo struct {
	Offset uint64 // byte offset for mmap on the uverbs fd
	Size   uint32
	Pad    uint32
}

// mirrors struct rxe_create_cq_resp (rdma/rdma_user_rxe.h)
type createCQResp struct {
	Mi mminfo
}

// mirrors struct rxe_create_qp_resp (rdma/rdma_user_rxe.h)
type createQPResp struct {
	RqMi mminfo
	SqMi mminfo
}

// mirrors struct rxe_queue_buf (rdma/rdma_user_rxe.h) without its flexible data[]: the ring
// header, with producer and consumer indices on separate cache lines.
type queueBuf struct {
	Log2ElemSize  uint32     // slot stride = 1 << Log2ElemSize
	IndexMask     uint32     // slots - 1
	Pad1          [30]uint32 `abi:"pad_1"`
	ProducerIndex uint32
	Pad2          [31]uint32 `abi:"pad_2"`
	ConsumerIndex uint32
	Pad3          [31]uint32 `abi:"pad_3"`
}

const (
	ringDataOff  = 384 // offsetof(struct rxe_queue_buf, data)
	ringProdOff  = 128
	ringConsOff  = 256
	sendWQESize  = 208 // sizeof(struct rxe_send_wqe) without dma.sge[]
	recvWQESize  = 40  // sizeof(struct rxe_recv_wqe) without dma.sge[]
	sgeSize      = 16  // sizeof(struct rxe_sge)
	cqeMinSize   = 48  // sizeof(struct ib_uverbs_wc)
	createCQLen  = 16
	createQPLen  = 32
	doorbellWQE  = 56 // sizeof(struct ib_uverbs_send_wr): the kernel wants wqe_size ≥ this
	rxeDriverID  = 14
	rxeABIMin    = 1
	rxeABIMax    = 2
	rxeDriver    = "rxe"
	sendWRUnion  = 120 // sizeof(rxe_send_wr.wr), the largest member being ud with its rxe_av
	rdmaWRFields = 16  // remote_addr, rkey, reserved
)

// mirrors struct rxe_send_wr (rdma/rdma_user_rxe.h). Only the wr.rdma member of the union
// is spelled out; the rest of the union is padding.
type sendWR struct {
	WrID       uint64 `abi:"wr_id"`
	Reserved   uint32 `abi:"reserved"` // num_sge before 6.1; 0 now
	Opcode     uint32 `abi:"opcode"`
	SendFlags  uint32 `abi:"send_flags"`
	Ex         uint32 `abi:"ex.imm_data"`
	RemoteAddr uint64 `abi:"wr.rdma.remote_addr"`
	Rkey       uint32 `abi:"wr.rdma.rkey"`
	RdmaRsvd   uint32 `abi:"wr.rdma.reserved"`
	_          [sendWRUnion - rdmaWRFields]byte
}

// mirrors struct rxe_dma_info (rdma/rdma_user_rxe.h) without its flexible sge[]/inline_data[]
type dmaInfo struct {
	Length    uint32
	Resid     uint32
	CurSge    uint32
	NumSge    uint32
	SgeOffset uint32
	Reserved  uint32
}

// mirrors struct rxe_send_wqe (rdma/rdma_user_rxe.h); SGEs follow at sendWQESize
type sendWQE struct {
	Wr          sendWR
	Status      uint32
	State       uint32
	Iova        uint64
	Mask        uint32
	FirstPsn    uint32
	LastPsn     uint32
	AckLength   uint32
	Ssn         uint32
	HasRdAtomic uint32
	Dma         dmaInfo
}

// mirrors struct rxe_recv_wqe (rdma/rdma_user_rxe.h); SGEs follow at recvWQESize
type recvWQE struct {
	WrID     uint64 `abi:"wr_id"`
	Reserved uint32
	Padding  uint32
	Dma      dmaInfo
}

// SGEs in the WQEs are struct rxe_sge, which uverbs.SGE mirrors (same layout as
// ib_uverbs_sge); CQ slots start with struct ib_uverbs_wc, which uverbs.WC mirrors.
