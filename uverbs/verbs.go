package uverbs

import "github.com/gorping/gorping/uverbs/driver"

// The verbs types a consumer and a provider share are defined in package driver, which
// providers build on and uverbs imports; uverbs names them as its own (as package os names
// io/fs's FileMode), so a consumer needs no other import.

type (
	QPState     = driver.QPState
	QPAttrMask  = driver.QPAttrMask
	AccessFlags = driver.AccessFlags
	MTU         = driver.MTU
	QPType      = driver.QPType
	WROpcode    = driver.WROpcode
	SendFlags   = driver.SendFlags
	WCStatus    = driver.WCStatus
	WCOpcode    = driver.WCOpcode
	WCFlags     = driver.WCFlags
	WC          = driver.WC
	SGE         = driver.SGE
	SendWR      = driver.SendWR
	RecvWR      = driver.RecvWR
	QPCap       = driver.QPCap
	CQFlags     = driver.CQFlags
	DeviceAttr  = driver.DeviceAttr
	Transport   = driver.Transport
)

const (
	QPSReset QPState = driver.QPSReset
	QPSInit  QPState = driver.QPSInit
	QPSRTR   QPState = driver.QPSRTR
	QPSRTS   QPState = driver.QPSRTS
	QPSSQD   QPState = driver.QPSSQD
	QPSSQE   QPState = driver.QPSSQE
	QPSErr   QPState = driver.QPSErr
)

const (
	QPAttrState            QPAttrMask = driver.QPAttrState
	QPAttrCurState         QPAttrMask = driver.QPAttrCurState
	QPAttrEnSQDAsyncNotify QPAttrMask = driver.QPAttrEnSQDAsyncNotify
	QPAttrAccessFlags      QPAttrMask = driver.QPAttrAccessFlags
	QPAttrPKeyIndex        QPAttrMask = driver.QPAttrPKeyIndex
	QPAttrPort             QPAttrMask = driver.QPAttrPort
	QPAttrQKey             QPAttrMask = driver.QPAttrQKey
	QPAttrAV               QPAttrMask = driver.QPAttrAV
	QPAttrPathMTU          QPAttrMask = driver.QPAttrPathMTU
	QPAttrTimeout          QPAttrMask = driver.QPAttrTimeout
	QPAttrRetryCnt         QPAttrMask = driver.QPAttrRetryCnt
	QPAttrRNRRetry         QPAttrMask = driver.QPAttrRNRRetry
	QPAttrRQPSN            QPAttrMask = driver.QPAttrRQPSN
	QPAttrMaxQPRdAtomic    QPAttrMask = driver.QPAttrMaxQPRdAtomic
	QPAttrAltPath          QPAttrMask = driver.QPAttrAltPath
	QPAttrMinRNRTimer      QPAttrMask = driver.QPAttrMinRNRTimer
	QPAttrSQPSN            QPAttrMask = driver.QPAttrSQPSN
	QPAttrMaxDestRdAtomic  QPAttrMask = driver.QPAttrMaxDestRdAtomic
	QPAttrPathMigState     QPAttrMask = driver.QPAttrPathMigState
	QPAttrCap              QPAttrMask = driver.QPAttrCap
	QPAttrDestQPN          QPAttrMask = driver.QPAttrDestQPN
)

const (
	AccessLocalWrite   AccessFlags = driver.AccessLocalWrite
	AccessRemoteWrite  AccessFlags = driver.AccessRemoteWrite
	AccessRemoteRead   AccessFlags = driver.AccessRemoteRead
	AccessRemoteAtomic AccessFlags = driver.AccessRemoteAtomic
	AccessMWBind       AccessFlags = driver.AccessMWBind
	AccessZeroBased    AccessFlags = driver.AccessZeroBased
	AccessOnDemand     AccessFlags = driver.AccessOnDemand
)

const (
	MTU256  MTU = driver.MTU256
	MTU512  MTU = driver.MTU512
	MTU1024 MTU = driver.MTU1024
	MTU2048 MTU = driver.MTU2048
	MTU4096 MTU = driver.MTU4096
)

const (
	QPTypeRC QPType = driver.QPTypeRC
	QPTypeUC QPType = driver.QPTypeUC
	QPTypeUD QPType = driver.QPTypeUD
)

const (
	WRRDMAWrite        WROpcode = driver.WRRDMAWrite
	WRRDMAWriteWithImm WROpcode = driver.WRRDMAWriteWithImm
	WRSend             WROpcode = driver.WRSend
	WRSendWithImm      WROpcode = driver.WRSendWithImm
	WRRDMARead         WROpcode = driver.WRRDMARead
	WRAtomicCmpAndSwp  WROpcode = driver.WRAtomicCmpAndSwp
	WRAtomicFetchAdd   WROpcode = driver.WRAtomicFetchAdd
	WRLocalInv         WROpcode = driver.WRLocalInv
	WRBindMW           WROpcode = driver.WRBindMW
	WRSendWithInv      WROpcode = driver.WRSendWithInv
)

const (
	SendFence     SendFlags = driver.SendFence
	SendSignaled  SendFlags = driver.SendSignaled
	SendSolicited SendFlags = driver.SendSolicited
	SendInline    SendFlags = driver.SendInline
)

const (
	WCSuccess        WCStatus = driver.WCSuccess
	WCLocLenErr      WCStatus = driver.WCLocLenErr
	WCLocQPOpErr     WCStatus = driver.WCLocQPOpErr
	WCLocEECOpErr    WCStatus = driver.WCLocEECOpErr
	WCLocProtErr     WCStatus = driver.WCLocProtErr
	WCWRFlushErr     WCStatus = driver.WCWRFlushErr
	WCMWBindErr      WCStatus = driver.WCMWBindErr
	WCBadRespErr     WCStatus = driver.WCBadRespErr
	WCLocAccessErr   WCStatus = driver.WCLocAccessErr
	WCRemInvReqErr   WCStatus = driver.WCRemInvReqErr
	WCRemAccessErr   WCStatus = driver.WCRemAccessErr
	WCRemOpErr       WCStatus = driver.WCRemOpErr
	WCRetryExcErr    WCStatus = driver.WCRetryExcErr
	WCRNRRetryExcErr WCStatus = driver.WCRNRRetryExcErr
	WCLocRDDViolErr  WCStatus = driver.WCLocRDDViolErr
	WCRemInvRDReqErr WCStatus = driver.WCRemInvRDReqErr
	WCRemAbortErr    WCStatus = driver.WCRemAbortErr
	WCInvEECNErr     WCStatus = driver.WCInvEECNErr
	WCInvEECStateErr WCStatus = driver.WCInvEECStateErr
	WCFatalErr       WCStatus = driver.WCFatalErr
	WCRespTimeoutErr WCStatus = driver.WCRespTimeoutErr
	WCGeneralErr     WCStatus = driver.WCGeneralErr
)

const (
	WCSend            WCOpcode = driver.WCSend
	WCRDMAWrite       WCOpcode = driver.WCRDMAWrite
	WCRDMARead        WCOpcode = driver.WCRDMARead
	WCCompSwap        WCOpcode = driver.WCCompSwap
	WCFetchAdd        WCOpcode = driver.WCFetchAdd
	WCBindMW          WCOpcode = driver.WCBindMW
	WCLocalInv        WCOpcode = driver.WCLocalInv
	WCRecv            WCOpcode = driver.WCRecv
	WCRecvRDMAWithImm WCOpcode = driver.WCRecvRDMAWithImm
)

const (
	WCFlagGRH     WCFlags = driver.WCFlagGRH
	WCFlagWithImm WCFlags = driver.WCFlagWithImm
	WCFlagWithInv WCFlags = driver.WCFlagWithInv
)

const (
	CQTimestamps CQFlags = driver.CQTimestamps
)

const (
	TransportUnknown Transport = driver.TransportUnknown
	TransportIB      Transport = driver.TransportIB
	TransportIWARP   Transport = driver.TransportIWARP
)

var (
	ErrClosed    = driver.ErrClosed    // use of a closed context or object
	ErrQueueFull = driver.ErrQueueFull // PostSend/PostRecv on a full work queue (wraps ENOMEM)
)
