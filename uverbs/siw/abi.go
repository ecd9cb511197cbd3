package siw

// Go mirrors of rdma/siw-abi.h. Fixed-width fields only, so the Go layout equals the C
// layout (abi_layout_test.go, build tag abicheck, compares them with gcc's).

// mirrors struct siw_uresp_alloc_ctx (rdma/siw-abi.h): GET_CONTEXT's driver response
type allocCtxResp struct {
	DevID uint32 `abi:"dev_id"`
	Pad   uint32
}

// mirrors struct siw_uresp_create_cq (rdma/siw-abi.h)
type createCQResp struct {
	CqID   uint32 `abi:"cq_id"`
	NumCqe uint32 `abi:"num_cqe"`
	CqKey  uint64 `abi:"cq_key"` // mmap byte offset of the CQE array and siw_cq_ctrl
}

// mirrors struct siw_uresp_create_qp (rdma/siw-abi.h)
type createQPResp struct {
	QpID   uint32 `abi:"qp_id"`
	NumSqe uint32 `abi:"num_sqe"`
	NumRqe uint32 `abi:"num_rqe"`
	Pad    uint32
	SqKey  uint64 `abi:"sq_key"`
	RqKey  uint64 `abi:"rq_key"`
}

// mirrors struct siw_ureq_reg_mr (rdma/siw-abi.h)
type regMRReq struct {
	StagKey  uint8 `abi:"stag_key"`
	Reserved [3]uint8
	Pad      uint32
}

// mirrors struct siw_uresp_reg_mr (rdma/siw-abi.h)
type regMRResp struct {
	Stag uint32
	Pad  uint32
}

// mirrors struct siw_sge (rdma/siw-abi.h)
type sge struct {
	Laddr  uint64
	Length uint32
	Lkey   uint32
}

// mirrors struct siw_sqe (rdma/siw-abi.h). Flags, NumSge and Opcode share the 32-bit word
// at offset 8, which is published with one atomic store (sqeWordOff).
type sqe struct {
	ID     uint64
	Flags  uint16
	NumSge uint8 `abi:"num_sge"`
	Opcode uint8
	Rkey   uint32
	Raddr  uint64 // union with base_mr (kernel clients only)
	Sge    [maxSGE]sge
}

// mirrors struct siw_rqe (rdma/siw-abi.h)
type rqe struct {
	ID     uint64
	Flags  uint16
	NumSge uint8 `abi:"num_sge"`
	Opcode uint8
	Unused uint32
	Sge    [maxSGE]sge
}

// mirrors struct siw_cqe (rdma/siw-abi.h); Inval is the union of imm_data and inval_stag,
// QpID that of base_qp and qp_id.
type cqe struct {
	ID     uint64
	Flags  uint8
	Opcode uint8
	Status uint16
	Bytes  uint32
	Inval  uint64 `abi:"imm_data"`
	QpID   uint64 `abi:"qp_id"`
}

// mirrors struct siw_cq_ctrl (rdma/siw-abi.h): the arming word after the CQE array
type cqCtrl struct {
	Flags uint32
	Pad   uint32
}

const (
	siwDriverID = 18 // RDMA_DRIVER_SIW
	siwDriver   = "siw"
	siwABI      = 1 // SIW_ABI_VERSION
	maxSGE      = 6 // SIW_MAX_SGE
	maxInline   = 80
	sqeSize     = 120 // sizeof(struct siw_sqe)
	rqeSize     = 112 // sizeof(struct siw_rqe)
	cqeSize     = 32  // sizeof(struct siw_cqe)
	cqCtrlSize  = 8
	wordOff     = 8       // offsetof flags: flags, num_sge and opcode of SQE/RQE, flags..status of a CQE
	invalKey    = 0x90000 // SIW_INVAL_UOBJ_KEY: the kernel could not export the queue

	allocCtxLen = 8
	createCQLen = 16
	createQPLen = 32
	regMRLen    = 8
)

// enum siw_wqe_flags
const (
	wqeValid     = 1
	wqeInline    = 2
	wqeSignalled = 4
	wqeSolicited = 8
	wqeReadFence = 0x10
)

// enum siw_opcode
const (
	opWrite         = 0
	opRead          = 1
	opReadLocalInv  = 2
	opSend          = 3
	opSendWithImm   = 4
	opSendRemoteInv = 5
	opFetchAndAdd   = 6
	opCompAndSwap   = 7
	opReceive       = 8
)

// enum siw_notify_flags (the CQ's arming word)
const (
	notifySolicited      = 1
	notifyNextCompletion = 2
)
