package hns

// The hns driver's uverbs ABI (abi_gen.go has the structs of rdma/hns-abi.h) and the
// device's formats, which no uapi header has: written out here from libhns 44's layout
// (rdma-core providers/hns: hns_roce_u_hw_v2.h), which the oracle tests check gorping
// against.
const (
	hnsDriver   = "hns"
	hnsDriverID = 12 // RDMA_DRIVER_HNS

	uctxRespLen = sizeofUctxResp
	pdRespLen   = sizeofPdResp
	cqRespLen   = sizeofCqResp
	qpRespLen   = sizeofQpResp

	// QUERY_DEVICE's hw_ver: HIP08 (Kunpeng 920) and HIP09.
	hwVer2 = 0x100
	hwVer3 = 0x130

	hwPage     = 4096 // HNS_HW_PAGE_SIZE: queue buffers are whole 4 KiB pages
	cqeSizeV2  = 32   // HNS_ROCE_CQE_SIZE
	cqeSizeV3  = 64   // HNS_ROCE_V3_CQE_SIZE
	minCQE     = 0x40 // HNS_ROCE_MIN_CQE_NUM
	minWQE     = 0x40 // HNS_ROCE_V2_MIN_WQE_NUM
	sqWQEShift = 6    // a send WQE is 64 bytes
	sgeSize    = 16   // a data segment: length, lkey, address
	sgeInWQE   = 2    // data segments in the send WQE; more go to the extended SGE area
	inlineInWQ = 32   // HNS_ROCE_MAX_RC_INL_INN_SZ: inline data in the WQE; more in the extended SGEs
	dbOffset   = 0x230
	recordSize = 4 // a doorbell record (QP send/receive head, CQ consumer index)

	invalidSGELen = 0x80000000 // the reserved SGE that ends a HIP08 receive WQE
)

// Send WQE (struct hns_roce_rc_sq_wqe, then two data segments).
const (
	wqeByte4  = 0  // opcode 4:0, owner 7, cqe 8, fence 9, so 10, se 11, inline 12
	wqeMsgLen = 4  // total length
	wqeImm    = 8  // immediate data (or the invalidate key)
	wqeByte16 = 12 // SGE count 31:24 (xrc srqn below)
	wqeByte20 = 16 // the first extended SGE's index 23:0, inline type 31
	wqeRKey   = 20
	wqeVA     = 24
	wqeSeg    = 32 // the data segments (or the inline data)

	wqeOwner    = 1 << 7
	wqeCQE      = 1 << 8
	wqeFence    = 1 << 9
	wqeSO       = 1 << 10
	wqeSE       = 1 << 11
	wqeInline   = 1 << 12
	wqeOpMask   = 0x1f
	wqeSGEShift = 24
	wqeInlType  = 1 << 31
	startSGEMsk = 0xffffff

	opSend     = 0x0
	opSendImm  = 0x2
	opWrite    = 0x3
	opWriteImm = 0x4
	opRead     = 0x5
)

// CQE (struct hns_roce_v2_cqe; HIP09's are 64 bytes, the rest reserved).
const (
	cqeByte4   = 0 // opcode 4:0, rq inline 5, s_r 6 (1: a receive's), owner 7, status 15:8, wqe index 31:16
	cqeImmKey  = 4
	cqeByte16  = 12 // local QPN 23:0, sub-status 31:24
	cqeByteCnt = 16

	cqeRQInline = 1 << 5
	cqeSR       = 1 << 6
	cqeOwner    = 1 << 7

	// receive opcodes
	rcvWriteImm = 0x0
	rcvSend     = 0x1
	rcvSendImm  = 0x2
	rcvSendInv  = 0x3

	statusSuccess  = 0x00
	statusWRFlush  = 0x05
	statusGeneral  = 0x23
	qpnMask        = 0xffffff
	cqRecordCIMask = 0xffffff
)

// Doorbells: 64 bits to the UAR page's doorbell register: queue (tag) 23:0, command
// 27:24; then a send or receive queue's producer index 15:0 (and SL 18:16), or a CQ's
// consumer index 23:0, notify 24 (solicited) and the arm's sequence number 26:25.
const (
	dbSQ    = 0
	dbRQ    = 1
	dbCQPtr = 3 // the consumer index
	dbCQNtr = 4 // the arm

	dbCmdShift    = 24
	dbSLShift     = 16
	dbNotifyShift = 24
	dbSNShift     = 25
)
