package mlx5

// The mlx5 driver parts of the uverbs commands (rdma/mlx5-abi.h) are generated into
// abi_gen.go (abi.spec, make generate). Here: the offsets of the hardware formats user space
// reads and writes (infiniband/mlx5dv.h, which describes the device's WQE and CQE layout),
// which are big-endian and handled as bytes at these offsets, and the driver's macros.
// abi_layout_test.go (build tag abicheck) compares all of it with gcc's view of the
// headers.

const (
	mlx5DriverID = 1 // RDMA_DRIVER_MLX5
	mlx5Driver   = "mlx5"
	mlx5ABI      = 1 // the only driver ABI version libmlx5 accepts (sysfs abi_version)
)

// Sizes of the udata, checked against the C structs.
const (
	allocUcontextReqLen  = sizeofAllocUcontextReq
	allocUcontextRespLen = sizeofAllocUcontextResp
	allocPDRespLen       = sizeofAllocPDResp
	createCQReqLen       = sizeofCreateCQReq
	createCQRespLen      = sizeofCreateCQResp
	createQPReqLen       = sizeofCreateQPReq
	createQPRespLen      = sizeofCreateQPResp
)

// GET_CONTEXT request values (enum mlx5_lib_caps).
const (
	libCap4KUAR   = 1 << 0 // we understand 4 KiB UARs inside larger system pages
	libCapDynUAR  = 1 << 1 // never asked: it would make every UAR an ioctl object
	cqeVersionMax = 1      // CQEs carry the QP's user index
)

// UAR mmap commands (enum mlx5_ib_mmap_cmd); the offset is (cmd<<8 | index) pages.
const (
	mmapRegularPage = 0 // the kernel maps it write-combining when it can
	mmapClockInfo   = 7 // the clock_info page (read-only), index clockInfoV1
)

// Completion timestamps: the clock_info page the kernel keeps current, and what the
// context response says about it.
const (
	clockInfoV1            = 0      // MLX5_IB_CLOCK_INFO_V1: mmap index, and bit of clock_info_versions
	clockInfoUpdating      = 1      // MLX5_IB_CLOCK_INFO_KERNEL_UPDATING: in sign while the kernel writes
	respMaskRealTimeTS     = 1 << 4 // MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_REAL_TIME_TS: the device can stamp real time
	createCQFlagRealTimeTS = 1 << 2 // MLX5_IB_CREATE_CQ_FLAGS_REAL_TIME_TS: never set (see clock.go)
	cqeTimestamp           = 48     // struct mlx5_cqe64: __be64 timestamp
)

// UAR layout: each 4 KiB UAR has its BlueFlame registers from 0x800, two per UAR usable by
// user space; the CQ arm doorbell is at 0x20 of the context's first UAR.
const (
	uarSize          = 4096
	bfOffset         = 0x800 // MLX5_BF_OFFSET
	bfregsPerUAR     = 4     // MLX5_NUM_DRIVER_UARS * ... : gross numbering step per UAR
	usableBfregsUAR  = 2     // the first two of each UAR belong to user space
	cqDoorbellOffset = 0x20  // MLX5_CQ_DOORBELL
)

// Doorbell record slots (big-endian u32 each).
const (
	dbrRecv  = 0 // MLX5_RCV_DBR: QP receive counter
	dbrSend  = 1 // MLX5_SND_DBR: QP send counter
	dbrSetCI = 0 // MLX5_CQ_SET_CI: CQ consumer index
	dbrArm   = 1 // MLX5_CQ_ARM_DB: CQ arm word
)

// Work queue element formats (infiniband/mlx5dv.h).
const (
	sendWQEBB    = 64 // MLX5_SEND_WQE_BB: send queue basic block
	ctrlSegSize  = 16 // struct mlx5_wqe_ctrl_seg
	raddrSegSize = 16 // struct mlx5_wqe_raddr_seg
	dataSegSize  = 16 // struct mlx5_wqe_data_seg
	inlineHdrLen = 4  // struct mlx5_wqe_inl_data_seg
	inlineSeg    = 0x80000000
	invalidLKey  = 0x100 // MLX5_INVALID_LKEY: ends a short receive scatter list

	// struct mlx5_wqe_ctrl_seg
	ctrlOpmodIdxOpcode = 0
	ctrlQpnDs          = 4
	ctrlSignature      = 8
	ctrlFmCeSe         = 11
	ctrlImm            = 12

	// struct mlx5_wqe_raddr_seg
	raddrRaddr = 0
	raddrRkey  = 8

	// struct mlx5_wqe_data_seg
	dataByteCount = 0
	dataLKey      = 4
	dataAddr      = 8
)

// fm_ce_se bits of the control segment.
const (
	ctrlCQUpdate  = 2 << 2 // MLX5_WQE_CTRL_CQ_UPDATE: generate a CQE
	ctrlSolicited = 1 << 1 // MLX5_WQE_CTRL_SOLICITED
	ctrlFence     = 4 << 5 // MLX5_WQE_CTRL_FENCE
)

// Send WQE opcodes (MLX5_OPCODE_*).
const (
	opNOP          = 0x00
	opRDMAWrite    = 0x08
	opRDMAWriteImm = 0x09
	opSend         = 0x0a
	opSendImm      = 0x0b
	opRDMARead     = 0x10
	opAtomicCS     = 0x11
	opAtomicFA     = 0x12
	opSendInval    = 0x01
)

// CQE format (struct mlx5_cqe64 / struct mlx5_err_cqe) and opcodes (MLX5_CQE_*).
const (
	cqeSize = 64

	cqeSrqnUidx      = 32
	cqeImmInvalPkey  = 36
	cqeByteCnt       = 44
	cqeSopDropQpn    = 56
	cqeWqeCounter    = 60
	cqeSignature     = 62
	cqeOpOwn         = 63
	cqeFlagsRqpn     = 24
	cqeSlid          = 22
	cqeMlPath        = 17
	cqeVendorErrSynd = 54
	cqeSyndrome      = 55

	cqeOwnerMask   = 1
	cqeReq         = 0
	cqeRespWrImm   = 1
	cqeRespSend    = 2
	cqeRespSendImm = 3
	cqeRespSendInv = 4
	cqeReqErr      = 13
	cqeRespErr     = 14
	cqeInvalid     = 15
)

// CQ arm doorbell command bits (MLX5_CQ_DB_REQ_NOT*).
const (
	cqDBReqNot    = 0
	cqDBReqNotSol = 1 << 24
)
