package uverbs

import (
	"errors"

	"github.com/gorping/gorping/uverbs/driver"
)

// The verbs types a consumer and a provider exchange (work requests, completions, QP
// capabilities and states, device attributes) are defined in package driver, which
// providers build on and uverbs imports. uverbs names them and their constants as its
// own, as package os names io/fs's FileMode and its mode bits, so a consumer needs no
// other import; go doc uverbs/driver.WC shows the fields.

type (
	// QPState is a queue pair state (enum ib_qp_state; same values in libibverbs).
	QPState = driver.QPState

	// QPAttrMask selects the QPAttr fields MODIFY_QP/QUERY_QP act on (enum ib_qp_attr_mask).
	QPAttrMask = driver.QPAttrMask

	// AccessFlags are memory region / QP access rights (enum ib_access_flags).
	AccessFlags = driver.AccessFlags

	// MTU is an IB path MTU enum (IB_MTU_256 = 1 … IB_MTU_4096 = 5).
	MTU = driver.MTU

	// QPType is a queue pair transport type (enum ib_qp_type).
	QPType = driver.QPType

	// WROpcode is a send work request opcode (enum ib_uverbs_wr_opcode).
	WROpcode = driver.WROpcode

	// SendFlags modify a send work request (enum ib_send_flags).
	SendFlags = driver.SendFlags

	// WCStatus is a work completion status (enum ib_wc_status).
	WCStatus = driver.WCStatus

	// WCOpcode is a work completion opcode (enum ib_uverbs_wc_opcode / ib_wc_opcode).
	WCOpcode = driver.WCOpcode

	// WCFlags describe a work completion (enum ib_wc_flags).
	WCFlags = driver.WCFlags

	// WC is one work completion, as a provider decodes it from its driver's CQE.
	WC = driver.WC

	// SGE is one scatter/gather element: Length bytes at Addr of a region registered with LKey.
	SGE = driver.SGE

	// SendWR is a send work request. Reuse WRs across posts: PostSend does not allocate.
	SendWR = driver.SendWR

	// RecvWR is a receive work request.
	RecvWR = driver.RecvWR

	// QPCap are queue pair capacities (struct ib_qp_cap).
	QPCap = driver.QPCap

	// CQFlags are creation flags of a CQ (CreateCQEx).
	CQFlags = driver.CQFlags

	// DeviceAttr are a device's attributes (from struct ib_uverbs_query_device_resp).
	DeviceAttr = driver.DeviceAttr

	// Transport is how a device carries RDMA (enum ibv_transport_type).
	Transport = driver.Transport

	// GlobalRoute is the global routing header part of an address vector.
	GlobalRoute = driver.GlobalRoute

	// AHAttr is an address vector (struct ib_uverbs_ah_attr).
	AHAttr = driver.AHAttr

	// QPAttr are the attributes MODIFY_QP sets and QUERY_QP reads.
	QPAttr = driver.QPAttr
)

// The constants of those types (go doc uverbs/driver shows them under their types).
const (
	QPSReset = driver.QPSReset
	QPSInit  = driver.QPSInit
	QPSRTR   = driver.QPSRTR
	QPSRTS   = driver.QPSRTS
	QPSSQD   = driver.QPSSQD
	QPSSQE   = driver.QPSSQE
	QPSErr   = driver.QPSErr

	QPAttrState            = driver.QPAttrState
	QPAttrCurState         = driver.QPAttrCurState
	QPAttrEnSQDAsyncNotify = driver.QPAttrEnSQDAsyncNotify
	QPAttrAccessFlags      = driver.QPAttrAccessFlags
	QPAttrPKeyIndex        = driver.QPAttrPKeyIndex
	QPAttrPort             = driver.QPAttrPort
	QPAttrQKey             = driver.QPAttrQKey
	QPAttrAV               = driver.QPAttrAV
	QPAttrPathMTU          = driver.QPAttrPathMTU
	QPAttrTimeout          = driver.QPAttrTimeout
	QPAttrRetryCnt         = driver.QPAttrRetryCnt
	QPAttrRNRRetry         = driver.QPAttrRNRRetry
	QPAttrRQPSN            = driver.QPAttrRQPSN
	QPAttrMaxQPRdAtomic    = driver.QPAttrMaxQPRdAtomic
	QPAttrAltPath          = driver.QPAttrAltPath
	QPAttrMinRNRTimer      = driver.QPAttrMinRNRTimer
	QPAttrSQPSN            = driver.QPAttrSQPSN
	QPAttrMaxDestRdAtomic  = driver.QPAttrMaxDestRdAtomic
	QPAttrPathMigState     = driver.QPAttrPathMigState
	QPAttrCap              = driver.QPAttrCap
	QPAttrDestQPN          = driver.QPAttrDestQPN

	AccessLocalWrite   = driver.AccessLocalWrite
	AccessRemoteWrite  = driver.AccessRemoteWrite
	AccessRemoteRead   = driver.AccessRemoteRead
	AccessRemoteAtomic = driver.AccessRemoteAtomic
	AccessMWBind       = driver.AccessMWBind
	AccessZeroBased    = driver.AccessZeroBased
	AccessOnDemand     = driver.AccessOnDemand

	MTU256  = driver.MTU256
	MTU512  = driver.MTU512
	MTU1024 = driver.MTU1024
	MTU2048 = driver.MTU2048
	MTU4096 = driver.MTU4096

	QPTypeRC = driver.QPTypeRC
	QPTypeUC = driver.QPTypeUC
	QPTypeUD = driver.QPTypeUD

	WRRDMAWrite        = driver.WRRDMAWrite
	WRRDMAWriteWithImm = driver.WRRDMAWriteWithImm
	WRSend             = driver.WRSend
	WRSendWithImm      = driver.WRSendWithImm
	WRRDMARead         = driver.WRRDMARead
	WRAtomicCmpAndSwp  = driver.WRAtomicCmpAndSwp
	WRAtomicFetchAdd   = driver.WRAtomicFetchAdd
	WRLocalInv         = driver.WRLocalInv
	WRBindMW           = driver.WRBindMW
	WRSendWithInv      = driver.WRSendWithInv

	SendFence     = driver.SendFence
	SendSignaled  = driver.SendSignaled
	SendSolicited = driver.SendSolicited
	SendInline    = driver.SendInline

	WCSuccess        = driver.WCSuccess
	WCLocLenErr      = driver.WCLocLenErr
	WCLocQPOpErr     = driver.WCLocQPOpErr
	WCLocEECOpErr    = driver.WCLocEECOpErr
	WCLocProtErr     = driver.WCLocProtErr
	WCWRFlushErr     = driver.WCWRFlushErr
	WCMWBindErr      = driver.WCMWBindErr
	WCBadRespErr     = driver.WCBadRespErr
	WCLocAccessErr   = driver.WCLocAccessErr
	WCRemInvReqErr   = driver.WCRemInvReqErr
	WCRemAccessErr   = driver.WCRemAccessErr
	WCRemOpErr       = driver.WCRemOpErr
	WCRetryExcErr    = driver.WCRetryExcErr
	WCRNRRetryExcErr = driver.WCRNRRetryExcErr
	WCLocRDDViolErr  = driver.WCLocRDDViolErr
	WCRemInvRDReqErr = driver.WCRemInvRDReqErr
	WCRemAbortErr    = driver.WCRemAbortErr
	WCInvEECNErr     = driver.WCInvEECNErr
	WCInvEECStateErr = driver.WCInvEECStateErr
	WCFatalErr       = driver.WCFatalErr
	WCRespTimeoutErr = driver.WCRespTimeoutErr
	WCGeneralErr     = driver.WCGeneralErr

	WCSend            = driver.WCSend
	WCRDMAWrite       = driver.WCRDMAWrite
	WCRDMARead        = driver.WCRDMARead
	WCCompSwap        = driver.WCCompSwap
	WCFetchAdd        = driver.WCFetchAdd
	WCBindMW          = driver.WCBindMW
	WCLocalInv        = driver.WCLocalInv
	WCRecv            = driver.WCRecv
	WCRecvRDMAWithImm = driver.WCRecvRDMAWithImm

	WCFlagGRH     = driver.WCFlagGRH
	WCFlagWithImm = driver.WCFlagWithImm
	WCFlagWithInv = driver.WCFlagWithInv

	CQTimestamps = driver.CQTimestamps

	TransportUnknown = driver.TransportUnknown
	TransportIB      = driver.TransportIB
	TransportIWARP   = driver.TransportIWARP
)

// The errors a consumer tests for with errors.Is.
var (
	// ErrClosed is returned by operations on a closed context or object.
	ErrClosed = driver.ErrClosed
	// ErrQueueFull is returned by PostSend/PostRecv when the work queue has no free slot.
	// It wraps ENOMEM, as libibverbs reports a full queue.
	ErrQueueFull = driver.ErrQueueFull
	// ErrUnackedEvents is returned by CQ.Destroy while completion events read for the CQ
	// have not been acknowledged with Ack.
	ErrUnackedEvents = errors.New("uverbs: completion events not acknowledged")
)
