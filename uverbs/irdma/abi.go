package irdma

import "unsafe"

// The irdma driver's uverbs ABI (abi_gen.go has the structs of rdma/irdma-abi.h) and
// the device's formats, which no uapi header has: written out here from libirdma 44's
// layout (rdma-core providers/irdma: defs.h, user.h, uk.c), which the oracle tests check
// gorping against.
const (
	irdmaDriver   = "irdma"
	irdmaDriverID = 9 // RDMA_DRIVER_IRDMA (the i40iw id it took over)
	irdmaABI      = 5 // IRDMA_ABI_VER: the driver ABI version sysfs shows, and the userspace_ver asked
	irdmaABIOld   = 4 // the version libirdma asks for when the kernel refuses 5

	// GET_CONTEXT's request and response as libirdma 44 sends them: the structs without
	// the comp_mask later kernels added (a kernel reads what was sent and writes what
	// there is room for).
	uctxReqLen  = int(unsafe.Offsetof(uctxReq{}.CompMask))
	uctxRespLen = int(unsafe.Offsetof(uctxResp{}.CompMask))

	pdRespLen = sizeofPdResp
	cqRespLen = sizeofCqResp
	qpRespLen = sizeofQpResp

	// hw_rev: GEN_1 is the X722 (i40iw), GEN_2 the E800 series.
	gen1 = 1
	gen2 = 2

	featureRTSAE    = 1 << 0 // IRDMA_FEATURE_RTS_AE
	featureCQResize = 1 << 1 // IRDMA_FEATURE_CQ_RESIZE: the CQ's shadow area is memory of its own

	hwPage         = 4096 // IRDMA_HW_PAGE_SIZE: queue memory is counted in these
	dbCQOffset     = 64   // IRDMA_DB_CQ_OFFSET: the CQ arm doorbell's offset in the doorbell page
	shadowAreaSize = 64   // IRDMA_DB_SHADOW_AREA_SIZE

	minCQSize = 4 // IRDMA_U_MINCQ_SIZE

	// qp_caps of CREATE_QP.
	capWriteWithImm = 1
	capSendWithImm  = 2
	capRoCE         = 4
	capPushMode     = 8

	quantum      = 32  // IRDMA_QP_WQE_MIN_SIZE: a WQE is 1 to 8 quanta
	sqReserved   = 258 // IRDMA_SQ_RSVD: quanta the send queue keeps free
	sqSlack      = 257 // what IRDMA_SQ_RING_FREE_QUANTA keeps besides
	rqReserved   = 1   // IRDMA_RQ_RSVD
	minWQSize    = 8   // IRDMA_QP_SW_MIN_WQSIZE, in WRs
	maxInlineLen = 101 // IRDMA_MAX_INLINE_DATA_SIZE: 4 quanta
	clrChunk     = 128 // irdma_clr_wqes: quanta cleared ahead of the next 128-quanta chunk
	maxFragCnt   = 13  // IRDMA_MAX_WQ_FRAGMENT_COUNT

	cqeSize = 32 // struct irdma_cqe: four 64-bit words

	// The shadow area of a CQ: the consumer index (word 0, the provider writes it after
	// each CQE read) and the arm word (byte 32), which the arm doorbell makes the device
	// read.
	shadowHead = 0
	shadowArm  = 32
)

// WQE words (a quantum is four little-endian 64-bit words; the header, word 3 at byte
// 24, is written last, after a barrier, and carries the valid bit).
const (
	wqeHdr = 24

	hdrOpcodeShift  = 32 // IRDMAQPSQ_OPCODE 37:32
	hdrAddFragShift = 38 // IRDMAQPSQ_ADDFRAGCNT 41:38
	hdrReportRTT    = 1 << 46
	hdrImmDataFlag  = 1 << 47
	hdrInlineLenSh  = 48 // IRDMAQPSQ_INLINEDATALEN 55:48
	hdrPushWQE      = 1 << 56
	hdrInlineFlag   = 1 << 57
	hdrReadFence    = 1 << 60
	hdrLocalFence   = 1 << 61
	hdrSignaled     = 1 << 62
	hdrValid        = 1 << 63

	fragValid    = 1 << 63 // in a fragment's second word
	fragLenShift = 32      // IRDMAQPSQ_FRAG_LEN 62:32; the STag is 31:0

	inlineValidShift = 7 // the valid bit of an inline quantum's last byte

	opRDMAWrite = 0x00
	opRDMARead  = 0x01
	opSend      = 0x03
	opSendSol   = 0x05
	opWriteSol  = 0x0d // IRDMA_OP_TYPE_RDMA_WRITE_SOL
	opNOP       = 0x0c
)

// CQE word 3 (byte 24).
const (
	cqeWord3 = 24

	cqeMinErrMask  = 0xffff  // IRDMA_CQ_MINERR 15:0
	cqeMajErrShift = 16      // IRDMA_CQ_MAJERR 31:16
	cqeWQEIdxShift = 32      // IRDMA_CQ_WQEIDX 46:32
	cqeWQEIdxMask  = 0x7fff  // 15 bits
	cqeExtCQE      = 1 << 50 // the next CQE slot holds this one's extension (immediate)
	cqePushDrop    = 1 << 51
	cqeStag        = 1 << 53 // an invalidated STag in word 2
	cqeError       = 1 << 55
	cqeOpShift     = 56      // IRDMACQ_OP 61:56
	cqeSQ          = 1 << 62 // a send queue's completion (else the receive queue's)
	cqeValid       = 1 << 63

	extImmValid = 1 << 62 // in the extension's word 3: word 0 holds the immediate

	cqeQPIDShift = 32 // word 2: IRDMACQ_QPID 55:32
	cqeQPIDMask  = 0xffffff

	majErrFlush = 1 // IRDMA_FLUSH_MAJOR_ERR: a flushed WQE; the minor code says why

	// The IB opcodes the device reports in a receive CQE for an RDMA WRITE with
	// immediate (IB_OPCODE_RC_RDMA_WRITE_ONLY/LAST_WITH_IMMEDIATE).
	ibOpWriteLastImm = 0x09
	ibOpWriteOnlyImm = 0x0b
)

// The shadow area's arm word (IRDMA_CQ_DBSA_*).
const (
	armSelMask     = 0x3fff  // SW_CQ_SELECT 13:0
	armNext        = 1 << 14 // ARM_NEXT: an event for the next completion
	armNextSE      = 1 << 15 // ARM_NEXT_SE: for the next solicited one
	armSeqShift    = 16      // ARM_SEQ_NUM 17:16
	armSeqMask     = 3
	flushGeneralEr = 1 // FLUSH_GENERAL_ERR: the minor code of a plain flush
)
