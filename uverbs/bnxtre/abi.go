package bnxtre

// The driver data of the bnxt_re commands (rdma/bnxt_re-abi.h) is generated into
// abi_gen.go (abi.spec, make generate). The device's formats are in no uapi header: here
// they are as rdma-core's libbnxt_re 44 writes and reads them (providers/bnxt_re), as
// offsets into the 16-byte slots of the queues, all little-endian; the oracle
// (uverbs/bnxtre's oracle tests against Debian's libbnxt_re) checks every byte.

const (
	bnxtDriver   = "bnxt_re"
	bnxtDriverID = 6 // RDMA_DRIVER_BNXT_RE
	bnxtABI      = 1 // BNXT_RE_ABI_VERSION: the only one libbnxt_re accepts
)

// Chips (chip_id0's chip number): the Thor family (BCM5750x, "gen P5") keeps an extended
// PSN search entry.
const (
	chip57508 = 0x1750
	chip57504 = 0x1751
	chip57502 = 0x1752
)

// The queues are arrays of 16-byte slots (struct bnxt_re_sge is one).
const (
	slotSize   = 16
	sqeHdrSize = 32 // struct bnxt_re_bsqe + struct bnxt_re_send (or _rdma): the header slots of a send WQE
	rqeHdrSize = 32 // struct bnxt_re_brqe + struct bnxt_re_rqe
	maxInline  = 0x60
	staticSGE  = 6   // a static-mode WQE has room for 6 SGEs: 128 bytes
	fullDelta  = 128 // BNXT_RE_FULL_FLAG_DELTA: WQEs a static-mode SQ keeps free
	cqeSize    = 32  // struct bnxt_re_req_cqe / rc_cqe (24) + struct bnxt_re_bcqe (8)
	psnSize    = 8   // struct bnxt_re_psns
	psnExtSize = 16  // struct bnxt_re_psns_ext (gen P5)
)

// struct bnxt_re_bsqe (the first slot of a send WQE) and struct bnxt_re_brqe.
const (
	hdrWord    = 0 // rsv_ws_fl_wt: opcode (bits 0-7), flags (8-15), WQE size in slots (16-23)
	hdrKeyImmd = 4 // key_immd: the immediate (host order)
	hdrLen     = 8 // lhdr.qkey_len: the data length
	rqeWRID    = 8 // brqe.wrid: the software queue index of a receive
	rdmaVA     = 0 // struct bnxt_re_rdma, the second slot: rva
	rdmaRKey   = 8 //   rkey
)

// Work request opcodes (enum bnxt_re_wr_opcode) and flags (enum bnxt_re_wr_flags).
const (
	opSend         = 0x00
	opSendImm      = 0x01
	opRDMAWrite    = 0x04
	opRDMAWriteImm = 0x05
	opRDMARead     = 0x06
	opRecv         = 0x80

	wrSignaled = 0x01
	wrUCFence  = 0x04
	wrSE       = 0x08
	wrInline   = 0x10
)

// The CQE: the 24-byte body and struct bnxt_re_bcqe at 24.
const (
	cqeQPHandleReq  = 0  // struct bnxt_re_req_cqe: qp_handle
	cqeConIndx      = 8  //   con_indx: the software queue index after the last WQE it completes
	cqeLength       = 0  // struct bnxt_re_rc_cqe: length
	cqeImmKey       = 4  //   imm_key
	cqeQPHandleResp = 8  //   qp_handle
	cqeFlgStTypPh   = 24 // bcqe.flg_st_typ_ph: phase (bit 0), type (1-4), status (8-15), flags (16-31)

	cqeTypeSend   = 0x00
	cqeTypeRecvRC = 0x01
	cqeTypeRecvUD = 0x02
	cqeTypeTerm   = 0x0e

	rcFlagImm  = 0x02
	rcFlagRDMA = 0x08
)

// Completion statuses (enum bnxt_re_req_wc_status, bnxt_re_rsp_wc_status).
const (
	reqOK         = 0x00
	reqBadResp    = 0x01
	reqLocLen     = 0x02
	reqLocQPOp    = 0x03
	reqProt       = 0x04
	reqMemOp      = 0x05
	reqRemInval   = 0x06
	reqRemAcc     = 0x07
	reqRemOp      = 0x08
	reqRNRNakXced = 0x09
	reqTrnspXced  = 0x0a
	reqWRFlush    = 0x0b

	rspOK       = 0x00
	rspLocAcc   = 0x01
	rspLocLen   = 0x02
	rspLocProt  = 0x03
	rspLocQPOp  = 0x04
	rspMemOp    = 0x05
	rspRemInval = 0x06
	rspWRFlush  = 0x07
	rspHWFlush  = 0x08
)

// Doorbells (struct bnxt_re_db_hdr: the index, then queue id and type), one 64-bit
// store to offset 0 of the context's doorbell page.
const (
	dbIndexMask = 0xfffff
	dbQIDMask   = 0xfffff
	dbTypeShift = 28

	dbTypeSQ       = 0x0
	dbTypeRQ       = 0x1
	dbTypeCQ       = 0x4
	dbTypeCQArmSE  = 0x5
	dbTypeCQArmAll = 0x6
)

// Sizes of the udata, checked against the C structs.
const (
	uctxRespLen = sizeofUctxResp
	pdRespLen   = sizeofPdResp
	cqReqLen    = sizeofCqReq
	cqRespLen   = sizeofCqResp
	qpReqLen    = sizeofQpReq
	qpRespLen   = sizeofQpResp
)
