package driver

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/gorping/gorping/internal/wire"
)

//go:generate go run golang.org/x/tools/cmd/stringer@v0.52.0 -type=QPState,WCStatus,WCOpcode,Transport -linecomment -output=names_string.go

// The verbs both faces speak: a consumer posts these work requests and reads these
// completions through package uverbs (which names them too), a provider encodes and
// decodes them in its driver's formats.

// ErrClosed is returned by operations on a closed context or object (uverbs.ErrClosed).
var ErrClosed = errors.New("uverbs: use of closed object")

// ErrQueueFull is returned by PostSend/PostRecv when the work queue has no free slot. It
// wraps ENOMEM, as libibverbs reports a full queue.
var ErrQueueFull = fmt.Errorf("uverbs: work queue full: %w", unix.ENOMEM)

// QPState is a queue pair state (enum ib_qp_state; same values in libibverbs).
type QPState uint32

const (
	QPSReset QPState = 0 // RESET
	QPSInit  QPState = 1 // INIT
	QPSRTR   QPState = 2 // RTR
	QPSRTS   QPState = 3 // RTS
	QPSSQD   QPState = 4 // SQD
	QPSSQE   QPState = 5 // SQE
	QPSErr   QPState = 6 // ERR
)

// QPAttrMask selects the QPAttr fields MODIFY_QP/QUERY_QP act on (enum ib_qp_attr_mask).
type QPAttrMask uint32

const (
	QPAttrState            QPAttrMask = 1 << 0
	QPAttrCurState         QPAttrMask = 1 << 1
	QPAttrEnSQDAsyncNotify QPAttrMask = 1 << 2
	QPAttrAccessFlags      QPAttrMask = 1 << 3
	QPAttrPKeyIndex        QPAttrMask = 1 << 4
	QPAttrPort             QPAttrMask = 1 << 5
	QPAttrQKey             QPAttrMask = 1 << 6
	QPAttrAV               QPAttrMask = 1 << 7
	QPAttrPathMTU          QPAttrMask = 1 << 8
	QPAttrTimeout          QPAttrMask = 1 << 9
	QPAttrRetryCnt         QPAttrMask = 1 << 10
	QPAttrRNRRetry         QPAttrMask = 1 << 11
	QPAttrRQPSN            QPAttrMask = 1 << 12
	QPAttrMaxQPRdAtomic    QPAttrMask = 1 << 13
	QPAttrAltPath          QPAttrMask = 1 << 14
	QPAttrMinRNRTimer      QPAttrMask = 1 << 15
	QPAttrSQPSN            QPAttrMask = 1 << 16
	QPAttrMaxDestRdAtomic  QPAttrMask = 1 << 17
	QPAttrPathMigState     QPAttrMask = 1 << 18
	QPAttrCap              QPAttrMask = 1 << 19
	QPAttrDestQPN          QPAttrMask = 1 << 20
)

// AccessFlags are memory region / QP access rights (enum ib_access_flags).
type AccessFlags uint32

const (
	AccessLocalWrite   AccessFlags = 1 << 0
	AccessRemoteWrite  AccessFlags = 1 << 1
	AccessRemoteRead   AccessFlags = 1 << 2
	AccessRemoteAtomic AccessFlags = 1 << 3
	AccessMWBind       AccessFlags = 1 << 4
	AccessZeroBased    AccessFlags = 1 << 5
	AccessOnDemand     AccessFlags = 1 << 6
)

// MTU is an IB path MTU enum (IB_MTU_256 = 1 … IB_MTU_4096 = 5).
type MTU uint32

const (
	MTU256  MTU = 1
	MTU512  MTU = 2
	MTU1024 MTU = 3
	MTU2048 MTU = 4
	MTU4096 MTU = 5
)

// Bytes returns the MTU in bytes, 0 for an invalid value.
func (m MTU) Bytes() int {
	if m < MTU256 || m > MTU4096 {
		return 0
	}
	return 128 << m
}

// QPType is a queue pair transport type (enum ib_qp_type).
type QPType uint8

const (
	QPTypeRC QPType = 2
	QPTypeUC QPType = 3
	QPTypeUD QPType = 4
)

// WROpcode is a send work request opcode (enum ib_uverbs_wr_opcode).
type WROpcode uint32

const (
	WRRDMAWrite        WROpcode = 0
	WRRDMAWriteWithImm WROpcode = 1
	WRSend             WROpcode = 2
	WRSendWithImm      WROpcode = 3
	WRRDMARead         WROpcode = 4
	WRAtomicCmpAndSwp  WROpcode = 5
	WRAtomicFetchAdd   WROpcode = 6
	WRLocalInv         WROpcode = 7
	WRBindMW           WROpcode = 8
	WRSendWithInv      WROpcode = 9
)

// SendFlags modify a send work request (enum ib_send_flags).
type SendFlags uint32

const (
	SendFence     SendFlags = 1 << 0
	SendSignaled  SendFlags = 1 << 1
	SendSolicited SendFlags = 1 << 2
	SendInline    SendFlags = 1 << 3
)

// WCStatus is a work completion status (enum ib_wc_status). Convert to int for the numeric
// value rping prints ("cq completion failed status %d"). Its String is the libibverbs name
// without the IBV_WC_ prefix, e.g. "WR_FLUSH_ERR".
type WCStatus uint32

const (
	WCSuccess        WCStatus = 0  // SUCCESS
	WCLocLenErr      WCStatus = 1  // LOC_LEN_ERR
	WCLocQPOpErr     WCStatus = 2  // LOC_QP_OP_ERR
	WCLocEECOpErr    WCStatus = 3  // LOC_EEC_OP_ERR
	WCLocProtErr     WCStatus = 4  // LOC_PROT_ERR
	WCWRFlushErr     WCStatus = 5  // WR_FLUSH_ERR
	WCMWBindErr      WCStatus = 6  // MW_BIND_ERR
	WCBadRespErr     WCStatus = 7  // BAD_RESP_ERR
	WCLocAccessErr   WCStatus = 8  // LOC_ACCESS_ERR
	WCRemInvReqErr   WCStatus = 9  // REM_INV_REQ_ERR
	WCRemAccessErr   WCStatus = 10 // REM_ACCESS_ERR
	WCRemOpErr       WCStatus = 11 // REM_OP_ERR
	WCRetryExcErr    WCStatus = 12 // RETRY_EXC_ERR
	WCRNRRetryExcErr WCStatus = 13 // RNR_RETRY_EXC_ERR
	WCLocRDDViolErr  WCStatus = 14 // LOC_RDD_VIOL_ERR
	WCRemInvRDReqErr WCStatus = 15 // REM_INV_RD_REQ_ERR
	WCRemAbortErr    WCStatus = 16 // REM_ABORT_ERR
	WCInvEECNErr     WCStatus = 17 // INV_EECN_ERR
	WCInvEECStateErr WCStatus = 18 // INV_EEC_STATE_ERR
	WCFatalErr       WCStatus = 19 // FATAL_ERR
	WCRespTimeoutErr WCStatus = 20 // RESP_TIMEOUT_ERR
	WCGeneralErr     WCStatus = 21 // GENERAL_ERR
)

// WCOpcode is a work completion opcode (enum ib_uverbs_wc_opcode / ib_wc_opcode).
type WCOpcode uint32

const (
	WCSend            WCOpcode = 0   // SEND
	WCRDMAWrite       WCOpcode = 1   // RDMA_WRITE
	WCRDMARead        WCOpcode = 2   // RDMA_READ
	WCCompSwap        WCOpcode = 3   // COMP_SWAP
	WCFetchAdd        WCOpcode = 4   // FETCH_ADD
	WCBindMW          WCOpcode = 5   // BIND_MW
	WCLocalInv        WCOpcode = 6   // LOCAL_INV
	WCRecv            WCOpcode = 128 // RECV
	WCRecvRDMAWithImm WCOpcode = 129 // RECV_RDMA_WITH_IMM
)

// WCFlags describe a work completion (enum ib_wc_flags).
type WCFlags uint32

const (
	WCFlagGRH     WCFlags = 1 << 0
	WCFlagWithImm WCFlags = 1 << 1
	WCFlagWithInv WCFlags = 1 << 2
)

// WC is one work completion, as a provider decodes it from its driver's CQE (fields as in
// struct ib_uverbs_wc, whose Go mirror a provider keeps with its own ABI).
type WC struct {
	WRID         uint64
	Status       WCStatus
	Opcode       WCOpcode
	VendorErr    uint32
	ByteLen      uint32
	Imm          uint32 // immediate data (network order) or invalidated rkey
	QPNum        uint32
	SrcQP        uint32
	Flags        WCFlags
	PKeyIndex    uint16
	SLID         uint16
	SL           uint8
	DLIDPathBits uint8
	PortNum      uint8
	// Timestamp is the device's completion timestamp in its own clock ticks, on a CQ
	// created with CQTimestamps by a provider that has them (mlx5); 0 otherwise.
	// CQ.TimestampNS converts it.
	Timestamp uint64
}

// SGE is one scatter/gather element: Length bytes at Addr of a region registered with LKey.
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// SendWR is a send work request. Reuse WRs across posts: PostSend does not allocate.
type SendWR struct {
	ID         uint64
	Opcode     WROpcode
	Flags      SendFlags
	SGE        []SGE
	RemoteAddr uint64 // RDMA READ/WRITE
	RKey       uint32 // RDMA READ/WRITE
	Imm        uint32 // *_WITH_IMM: immediate data, network byte order
}

// RecvWR is a receive work request.
type RecvWR struct {
	ID  uint64
	SGE []SGE
}

// QPCap are queue pair capacities (struct ib_qp_cap).
type QPCap struct {
	MaxSendWR     uint32
	MaxRecvWR     uint32
	MaxSendSGE    uint32
	MaxRecvSGE    uint32
	MaxInlineData uint32
}

// CQFlags are creation flags of a CQ (CreateCQEx).
type CQFlags uint32

// CQTimestamps asks the device to stamp every completion with its clock
// (IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION); see WC.Timestamp.
const CQTimestamps CQFlags = 1 << 0

// DeviceAttr are a device's attributes (from struct ib_uverbs_query_device_resp). NodeGUID
// and SysImageGUID are numbers ("5054:00ff:fe96:b707" = 0x505400fffe96b707).
type DeviceAttr struct {
	FWVer                 uint64
	NodeGUID              uint64
	SysImageGUID          uint64
	MaxMRSize             uint64
	PageSizeCap           uint64
	VendorID              uint32
	VendorPartID          uint32
	HWVer                 uint32
	MaxQP                 uint32
	MaxQPWR               uint32
	DeviceCapFlags        uint32
	MaxSGE                uint32
	MaxSGERd              uint32
	MaxCQ                 uint32
	MaxCQE                uint32
	MaxMR                 uint32
	MaxPD                 uint32
	MaxQPRdAtom           uint32
	MaxEERdAtom           uint32
	MaxResRdAtom          uint32
	MaxQPInitRdAtom       uint32
	MaxEEInitRdAtom       uint32
	AtomicCap             uint32
	MaxEE                 uint32
	MaxRDD                uint32
	MaxMW                 uint32
	MaxRawIPv6QP          uint32
	MaxRawEthyQP          uint32
	MaxMcastGrp           uint32
	MaxMcastQPAttach      uint32
	MaxTotalMcastQPAttach uint32
	MaxAH                 uint32
	MaxFMR                uint32
	MaxMapPerFMR          uint32
	MaxSRQ                uint32
	MaxSRQWR              uint32
	MaxSRQSGE             uint32
	MaxPKeys              uint16
	LocalCAAckDelay       uint8
	PhysPortCnt           uint8
}

// Transport is how a device carries RDMA (enum ibv_transport_type). It decides the
// connection rules: InfiniBand transport (IB and RoCE) moves a QP through RTR/RTS from
// user space after the CM exchange; iWARP moves it to RTS inside the kernel's iw_cm, never
// sends CONNECT_RESPONSE and shuts a connection down through SQD.
type Transport int

const (
	TransportUnknown Transport = -1 // unknown
	TransportIB      Transport = 0  // InfiniBand
	TransportIWARP   Transport = 1  // iWARP
)

// GlobalRoute is the global routing header part of an address vector.
type GlobalRoute struct {
	DGID         [16]byte
	FlowLabel    uint32
	SGIDIndex    uint8
	HopLimit     uint8
	TrafficClass uint8
}

// AHAttr is an address vector.
type AHAttr struct {
	GRH         GlobalRoute
	DLID        uint16
	SL          uint8
	SrcPathBits uint8
	StaticRate  uint8
	IsGlobal    uint8
	PortNum     uint8
}

// QPAttr are queue pair attributes for QP.Modify and from QP.Query (the fields of struct
// ib_uverbs_qp_attr, which rdma_cm's INIT_QP_ATTR answers with: see UnmarshalBinary). Modify
// uses its mask argument, not AttrMask.
type QPAttr struct {
	AttrMask         QPAttrMask
	State            QPState
	CurState         QPState
	PathMTU          MTU
	PathMigState     uint32
	QKey             uint32
	RQPSN            uint32
	SQPSN            uint32
	DestQPNum        uint32
	AccessFlags      AccessFlags
	AH               AHAttr
	AltAH            AHAttr
	MaxSendWR        uint32
	MaxRecvWR        uint32
	MaxSendSGE       uint32
	MaxRecvSGE       uint32
	MaxInlineData    uint32
	PKeyIndex        uint16
	AltPKeyIndex     uint16
	EnSQDAsyncNotify uint8
	SQDraining       uint8
	MaxRdAtomic      uint8
	MaxDestRdAtomic  uint8
	MinRNRTimer      uint8
	PortNum          uint8
	Timeout          uint8
	RetryCnt         uint8
	RNRRetry         uint8
	AltPortNum       uint8
	AltTimeout       uint8
}

// UnmarshalBinary decodes b as struct ib_uverbs_qp_attr (rdma_cm's INIT_QP_ATTR answer).
// A short b reads as zero-extended, as the kernel extends shorter structs.
func (a *QPAttr) UnmarshalBinary(b []byte) error {
	var w qpAttr
	wire.Decode(&w, b)
	*a = qpAttrFromWire(&w)
	return nil
}

// MarshalBinary is a as struct ib_uverbs_qp_attr (what a fake rdma_cm answers
// INIT_QP_ATTR with).
func (a QPAttr) MarshalBinary() ([]byte, error) {
	w := qpAttrToWire(&a)
	return append([]byte(nil), wire.Bytes(&w)...), nil
}
