package uverbs

import "unsafe"

// Kernel ABI of /dev/infiniband/uverbsN: command numbers and the request/response structs of
// the legacy write() interface. Every struct mirrors a uapi struct field by field with
// fixed-width types, so its Go layout equals the C layout (checked by abi_layout_test.go with
// the abicheck build tag). Requests are encoded by copying the struct's bytes into the
// command arena; responses by copying arena bytes into a struct (see cmd.go).

// Write command numbers (enum ib_uverbs_write_cmds, rdma/ib_user_verbs.h).
const (
	cmdGetContext        = 0
	cmdQueryDevice       = 1
	cmdQueryPort         = 2
	cmdAllocPD           = 3
	cmdDeallocPD         = 4
	cmdRegMR             = 9
	cmdDeregMR           = 13
	cmdCreateCompChannel = 17
	cmdCreateCQ          = 18
	cmdDestroyCQ         = 20
	cmdReqNotifyCQ       = 23
	cmdCreateQP          = 24
	cmdQueryQP           = 25
	cmdModifyQP          = 26
	cmdDestroyQP         = 27
	cmdPostSend          = 28
)

// Extended commands: the command number ORed with exCmdFlag, followed by
// ib_uverbs_ex_cmd_hdr (rdma/ib_user_verbs.h); header words count 8-byte units.
const (
	exCmdFlag = 0x80000000 // IB_USER_VERBS_CMD_FLAG_EXTENDED
)

// Exported command numbers a provider needs for its data path (doorbell, arm).
const (
	CmdPostSend    uint32 = cmdPostSend    // IB_USER_VERBS_CMD_POST_SEND
	CmdReqNotifyCQ uint32 = cmdReqNotifyCQ // IB_USER_VERBS_CMD_REQ_NOTIFY_CQ
)

// cmdNames names commands in error messages.
var cmdNames = map[uint32]string{
	cmdGetContext:        "GET_CONTEXT",
	cmdQueryDevice:       "QUERY_DEVICE",
	cmdQueryPort:         "QUERY_PORT",
	cmdAllocPD:           "ALLOC_PD",
	cmdDeallocPD:         "DEALLOC_PD",
	cmdRegMR:             "REG_MR",
	cmdDeregMR:           "DEREG_MR",
	cmdCreateCompChannel: "CREATE_COMP_CHANNEL",
	cmdCreateCQ:          "CREATE_CQ",
	cmdDestroyCQ:         "DESTROY_CQ",
	cmdReqNotifyCQ:       "REQ_NOTIFY_CQ",
	cmdCreateQP:          "CREATE_QP",
	cmdQueryQP:           "QUERY_QP",
	cmdModifyQP:          "MODIFY_QP",
	cmdDestroyQP:         "DESTROY_QP",
	cmdPostSend:          "POST_SEND",

	exCmdFlag | cmdQueryDevice: "QUERY_DEVICE_EX",
	exCmdFlag | cmdCreateCQ:    "CREATE_CQ_EX",
}

// mirrors struct ib_uverbs_ex_cmd_hdr (rdma/ib_user_verbs.h): after cmdHdr in an extended
// command, whose cmdHdr words then count the core request and response in 8-byte units.
type exCmdHdr struct {
	Response         uint64
	ProviderInWords  uint16
	ProviderOutWords uint16
	CmdHdrReserved   uint32
}

// mirrors struct ib_uverbs_ex_query_device (rdma/ib_user_verbs.h)
type exQueryDeviceReq struct {
	CompMask uint32
	Reserved uint32
}

// mirrors struct ib_uverbs_ex_query_device_resp (rdma/ib_user_verbs.h)
type exQueryDeviceResp struct {
	Base                  queryDeviceResp `abi:"base"`
	CompMask              uint32
	ResponseLength        uint32
	ODPGeneralCaps        uint64 `abi:"odp_caps.general_caps"`
	ODPRCCaps             uint32 `abi:"odp_caps.per_transport_caps.rc_odp_caps"`
	ODPUCCaps             uint32 `abi:"odp_caps.per_transport_caps.uc_odp_caps"`
	ODPUDCaps             uint32 `abi:"odp_caps.per_transport_caps.ud_odp_caps"`
	ODPReserved           uint32 `abi:"odp_caps.reserved"`
	TimestampMask         uint64
	HcaCoreClock          uint64 // kHz
	DeviceCapFlagsEx      uint64
	RSSSupportedQPTs      uint32 `abi:"rss_caps.supported_qpts"`
	RSSMaxIndTables       uint32 `abi:"rss_caps.max_rwq_indirection_tables"`
	RSSMaxIndTableSize    uint32 `abi:"rss_caps.max_rwq_indirection_table_size"`
	RSSReserved           uint32 `abi:"rss_caps.reserved"`
	MaxWqTypeRq           uint32
	RawPacketCaps         uint32
	TMMaxRndvHdrSize      uint32 `abi:"tm_caps.max_rndv_hdr_size"`
	TMMaxNumTags          uint32 `abi:"tm_caps.max_num_tags"`
	TMFlags               uint32 `abi:"tm_caps.flags"`
	TMMaxOps              uint32 `abi:"tm_caps.max_ops"`
	TMMaxSGE              uint32 `abi:"tm_caps.max_sge"`
	TMReserved            uint32 `abi:"tm_caps.reserved"`
	CQModerationMaxCount  uint16 `abi:"cq_moderation_caps.max_cq_moderation_count"`
	CQModerationMaxPeriod uint16 `abi:"cq_moderation_caps.max_cq_moderation_period"`
	CQModerationReserved  uint32 `abi:"cq_moderation_caps.reserved"`
	MaxDmSize             uint64
	XrcOdpCaps            uint32
	Reserved              uint32
}

// mirrors struct ib_uverbs_ex_create_cq (rdma/ib_user_verbs.h); driver data follows
type exCreateCQReq struct {
	UserHandle  uint64
	Cqe         uint32
	CompVector  uint32
	CompChannel int32
	CompMask    uint32
	Flags       uint32 // IB_UVERBS_CQ_FLAGS_*
	Reserved    uint32
}

// mirrors struct ib_uverbs_ex_create_cq_resp (rdma/ib_user_verbs.h); driver data follows
type exCreateCQResp struct {
	CqHandle       uint32 `abi:"base.cq_handle"`
	Cqe            uint32 `abi:"base.cqe"`
	CompMask       uint32
	ResponseLength uint32
}

// enum ib_uverbs_ex_create_cq_flags
const cqFlagTimestampCompletion = 1 << 0 // IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION

// mirrors struct ib_uverbs_cmd_hdr (rdma/ib_user_verbs.h)
type cmdHdr struct {
	Command  uint32
	InWords  uint16 // whole write length including this header, in 4-byte words
	OutWords uint16 // response buffer length, in 4-byte words
}

// mirrors struct ib_uverbs_get_context (rdma/ib_user_verbs.h); driver data follows
type getContextReq struct {
	Response uint64
}

// mirrors struct ib_uverbs_get_context_resp (rdma/ib_user_verbs.h); driver data follows
type getContextResp struct {
	AsyncFD        uint32 `abi:"async_fd"`
	NumCompVectors uint32
}

// mirrors struct ib_uverbs_query_device (rdma/ib_user_verbs.h)
type queryDeviceReq struct {
	Response uint64
}

// mirrors struct ib_uverbs_query_device_resp (rdma/ib_user_verbs.h); DeviceAttr is its
// public form
type queryDeviceResp struct {
	FWVer                 uint64  `abi:"fw_ver"`
	NodeGUID              [8]byte `abi:"node_guid"`      // __be64
	SysImageGUID          [8]byte `abi:"sys_image_guid"` // __be64
	MaxMRSize             uint64  `abi:"max_mr_size"`
	PageSizeCap           uint64  `abi:"page_size_cap"`
	VendorID              uint32  `abi:"vendor_id"`
	VendorPartID          uint32  `abi:"vendor_part_id"`
	HWVer                 uint32  `abi:"hw_ver"`
	MaxQP                 uint32  `abi:"max_qp"`
	MaxQPWR               uint32  `abi:"max_qp_wr"`
	DeviceCapFlags        uint32  `abi:"device_cap_flags"`
	MaxSGE                uint32  `abi:"max_sge"`
	MaxSGERd              uint32  `abi:"max_sge_rd"`
	MaxCQ                 uint32  `abi:"max_cq"`
	MaxCQE                uint32  `abi:"max_cqe"`
	MaxMR                 uint32  `abi:"max_mr"`
	MaxPD                 uint32  `abi:"max_pd"`
	MaxQPRdAtom           uint32  `abi:"max_qp_rd_atom"`
	MaxEERdAtom           uint32  `abi:"max_ee_rd_atom"`
	MaxResRdAtom          uint32  `abi:"max_res_rd_atom"`
	MaxQPInitRdAtom       uint32  `abi:"max_qp_init_rd_atom"`
	MaxEEInitRdAtom       uint32  `abi:"max_ee_init_rd_atom"`
	AtomicCap             uint32  `abi:"atomic_cap"`
	MaxEE                 uint32  `abi:"max_ee"`
	MaxRDD                uint32  `abi:"max_rdd"`
	MaxMW                 uint32  `abi:"max_mw"`
	MaxRawIPv6QP          uint32  `abi:"max_raw_ipv6_qp"`
	MaxRawEthyQP          uint32  `abi:"max_raw_ethy_qp"`
	MaxMcastGrp           uint32  `abi:"max_mcast_grp"`
	MaxMcastQPAttach      uint32  `abi:"max_mcast_qp_attach"`
	MaxTotalMcastQPAttach uint32  `abi:"max_total_mcast_qp_attach"`
	MaxAH                 uint32  `abi:"max_ah"`
	MaxFMR                uint32  `abi:"max_fmr"`
	MaxMapPerFMR          uint32  `abi:"max_map_per_fmr"`
	MaxSRQ                uint32  `abi:"max_srq"`
	MaxSRQWR              uint32  `abi:"max_srq_wr"`
	MaxSRQSGE             uint32  `abi:"max_srq_sge"`
	MaxPKeys              uint16  `abi:"max_pkeys"`
	LocalCAAckDelay       uint8   `abi:"local_ca_ack_delay"`
	PhysPortCnt           uint8   `abi:"phys_port_cnt"`
	_                     [4]uint8
}

// mirrors struct ib_uverbs_query_port (rdma/ib_user_verbs.h)
type queryPortReq struct {
	Response uint64
	PortNum  uint8
	Reserved [7]uint8
}

// mirrors struct ib_uverbs_query_port_resp (rdma/ib_user_verbs.h)
type queryPortResp struct {
	PortCapFlags  uint32
	MaxMsgSz      uint32
	BadPkeyCntr   uint32
	QkeyViolCntr  uint32
	GidTblLen     uint32
	PkeyTblLen    uint16
	Lid           uint16
	SmLid         uint16
	State         uint8
	MaxMtu        uint8
	ActiveMtu     uint8
	Lmc           uint8
	MaxVlNum      uint8
	SmSl          uint8
	SubnetTimeout uint8
	InitTypeReply uint8
	ActiveWidth   uint8
	ActiveSpeed   uint8
	PhysState     uint8
	LinkLayer     uint8
	Flags         uint8
	Reserved      uint8
}

// mirrors struct ib_uverbs_alloc_pd (rdma/ib_user_verbs.h); driver data follows
type allocPDReq struct {
	Response uint64
}

// mirrors struct ib_uverbs_alloc_pd_resp (rdma/ib_user_verbs.h); driver data follows
type allocPDResp struct {
	PdHandle uint32
}

// mirrors struct ib_uverbs_dealloc_pd (rdma/ib_user_verbs.h)
type deallocPDReq struct {
	PdHandle uint32
}

// mirrors struct ib_uverbs_reg_mr (rdma/ib_user_verbs.h); driver data follows
type regMRReq struct {
	Response    uint64
	Start       uint64
	Length      uint64
	HcaVa       uint64
	PdHandle    uint32
	AccessFlags uint32
}

// mirrors struct ib_uverbs_reg_mr_resp (rdma/ib_user_verbs.h); driver data follows
type regMRResp struct {
	MrHandle uint32
	Lkey     uint32
	Rkey     uint32
}

// mirrors struct ib_uverbs_dereg_mr (rdma/ib_user_verbs.h)
type deregMRReq struct {
	MrHandle uint32
}

// mirrors struct ib_uverbs_create_comp_channel (rdma/ib_user_verbs.h)
type createCompChannelReq struct {
	Response uint64
}

// mirrors struct ib_uverbs_create_comp_channel_resp (rdma/ib_user_verbs.h)
type createCompChannelResp struct {
	Fd uint32
}

// mirrors struct ib_uverbs_create_cq (rdma/ib_user_verbs.h); driver data follows
type createCQReq struct {
	Response    uint64
	UserHandle  uint64
	Cqe         uint32
	CompVector  uint32
	CompChannel int32
	Reserved    uint32
}

// mirrors struct ib_uverbs_create_cq_resp (rdma/ib_user_verbs.h); driver data follows
type createCQResp struct {
	CqHandle uint32
	Cqe      uint32
}

// mirrors struct ib_uverbs_destroy_cq (rdma/ib_user_verbs.h)
type destroyCQReq struct {
	Response uint64
	CqHandle uint32
	Reserved uint32
}

// mirrors struct ib_uverbs_destroy_cq_resp (rdma/ib_user_verbs.h)
type destroyCQResp struct {
	CompEventsReported  uint32
	AsyncEventsReported uint32
}

// ReqNotifyCQ mirrors struct ib_uverbs_req_notify_cq (rdma/ib_user_verbs.h): the body of the
// REQ_NOTIFY_CQ write a provider sends to arm a CQ in the kernel (rxe).
type ReqNotifyCQ struct {
	CqHandle      uint32
	SolicitedOnly uint32
}

// mirrors struct ib_uverbs_create_qp (rdma/ib_user_verbs.h); driver data follows
type createQPReq struct {
	Response      uint64
	UserHandle    uint64
	PdHandle      uint32
	SendCqHandle  uint32
	RecvCqHandle  uint32
	SrqHandle     uint32
	MaxSendWr     uint32
	MaxRecvWr     uint32
	MaxSendSge    uint32
	MaxRecvSge    uint32
	MaxInlineData uint32
	SqSigAll      uint8
	QpType        uint8
	IsSrq         uint8
	Reserved      uint8
}

// mirrors struct ib_uverbs_create_qp_resp (rdma/ib_user_verbs.h); driver data follows
type createQPResp struct {
	QpHandle      uint32
	Qpn           uint32
	MaxSendWr     uint32
	MaxRecvWr     uint32
	MaxSendSge    uint32
	MaxRecvSge    uint32
	MaxInlineData uint32
	Reserved      uint32
}

// mirrors struct ib_uverbs_qp_dest (rdma/ib_user_verbs.h)
type qpDest struct {
	Dgid         [16]uint8
	FlowLabel    uint32
	Dlid         uint16
	Reserved     uint16
	SgidIndex    uint8
	HopLimit     uint8
	TrafficClass uint8
	Sl           uint8
	SrcPathBits  uint8
	StaticRate   uint8
	IsGlobal     uint8
	PortNum      uint8
}

// mirrors struct ib_uverbs_modify_qp (rdma/ib_user_verbs.h)
type modifyQPReq struct {
	Dest             qpDest
	AltDest          qpDest
	QpHandle         uint32
	AttrMask         uint32
	Qkey             uint32
	RqPsn            uint32
	SqPsn            uint32
	DestQpNum        uint32
	QpAccessFlags    uint32
	PkeyIndex        uint16
	AltPkeyIndex     uint16
	QpState          uint8
	CurQpState       uint8
	PathMtu          uint8
	PathMigState     uint8
	EnSqdAsyncNotify uint8
	MaxRdAtomic      uint8
	MaxDestRdAtomic  uint8
	MinRnrTimer      uint8
	PortNum          uint8
	Timeout          uint8
	RetryCnt         uint8
	RnrRetry         uint8
	AltPortNum       uint8
	AltTimeout       uint8
	Reserved         [2]uint8
}

// mirrors struct ib_uverbs_query_qp (rdma/ib_user_verbs.h)
type queryQPReq struct {
	Response uint64
	QpHandle uint32
	AttrMask uint32
}

// mirrors struct ib_uverbs_query_qp_resp (rdma/ib_user_verbs.h)
type queryQPResp struct {
	Dest            qpDest
	AltDest         qpDest
	MaxSendWr       uint32
	MaxRecvWr       uint32
	MaxSendSge      uint32
	MaxRecvSge      uint32
	MaxInlineData   uint32
	Qkey            uint32
	RqPsn           uint32
	SqPsn           uint32
	DestQpNum       uint32
	QpAccessFlags   uint32
	PkeyIndex       uint16
	AltPkeyIndex    uint16
	QpState         uint8
	CurQpState      uint8
	PathMtu         uint8
	PathMigState    uint8
	SqDraining      uint8
	MaxRdAtomic     uint8
	MaxDestRdAtomic uint8
	MinRnrTimer     uint8
	PortNum         uint8
	Timeout         uint8
	RetryCnt        uint8
	RnrRetry        uint8
	AltPortNum      uint8
	AltTimeout      uint8
	SqSigAll        uint8
	Reserved        [5]uint8
}

// mirrors struct ib_uverbs_destroy_qp (rdma/ib_user_verbs.h)
type destroyQPReq struct {
	Response uint64
	QpHandle uint32
	Reserved uint32
}

// mirrors struct ib_uverbs_destroy_qp_resp (rdma/ib_user_verbs.h)
type destroyQPResp struct {
	EventsReported uint32
}

// PostSendReq mirrors struct ib_uverbs_post_send (rdma/ib_user_verbs.h). rxe and siw use it
// with WrCount 0 as the send doorbell; the kernel answers with a PostSendResp.
type PostSendReq struct {
	Response uint64 // filled by Commander.Write
	QpHandle uint32
	WrCount  uint32
	SgeCount uint32
	WqeSize  uint32
}

// PostSendResp mirrors struct ib_uverbs_post_send_resp (rdma/ib_user_verbs.h).
type PostSendResp struct {
	BadWr uint32
}

// mirrors struct ib_uverbs_async_event_desc (rdma/ib_user_verbs.h): one read() of the async fd
type asyncEventDesc struct {
	Element   uint64
	EventType uint32
	Reserved  uint32
}

// mirrors struct ib_uverbs_comp_event_desc (rdma/ib_user_verbs.h): one read() of a channel
type compEventDesc struct {
	CqHandle uint64
}

// RDMA_VERBS_IOCTL = _IOWR(RDMA_IOCTL_MAGIC 0x1b, 1, struct ib_uverbs_ioctl_hdr) (rdma/rdma_user_ioctl_cmds.h)
const rdmaVerbsIoctl = 0xC0181B01

// ioctl object/method/attribute ids (rdma/ib_user_ioctl_cmds.h)
const (
	uverbsObjectDevice         = 0
	uverbsMethodQueryGIDTable  = 5
	attrGIDTableEntrySize      = 0
	attrGIDTableFlags          = 1
	attrGIDTableRespEntries    = 2
	attrGIDTableRespNumEntries = 3
	uverbsAttrFMandatory       = 1
	uverbsAttrFValidOutput     = 2
)

// mirrors struct ib_uverbs_ioctl_hdr (rdma/rdma_user_ioctl_cmds.h); attributes follow
type ioctlHdr struct {
	Length    uint16
	ObjectId  uint16 `abi:"object_id"`
	MethodId  uint16 `abi:"method_id"`
	NumAttrs  uint16
	Reserved1 uint64 `abi:"reserved1"`
	DriverId  uint32 `abi:"driver_id"`
	Reserved2 uint32 `abi:"reserved2"`
}

// mirrors struct ib_uverbs_attr (rdma/rdma_user_ioctl_cmds.h)
type ioctlAttr struct {
	AttrId   uint16 `abi:"attr_id"`
	Len      uint16
	Flags    uint16
	AttrData uint16
	Data     uint64
}

// mirrors struct ib_uverbs_gid_entry (rdma/ib_user_ioctl_verbs.h)
type gidEntry struct {
	Gid           [16]uint8
	GidIndex      uint32
	PortNum       uint32
	GidType       uint32
	NetdevIfindex uint32
}

// mirrors struct ib_uverbs_global_route (rdma/ib_user_verbs.h)
type globalRoute struct {
	DGID         [16]byte `abi:"dgid"`
	FlowLabel    uint32   `abi:"flow_label"`
	SGIDIndex    uint8    `abi:"sgid_index"`
	HopLimit     uint8    `abi:"hop_limit"`
	TrafficClass uint8    `abi:"traffic_class"`
	_            uint8
}

// mirrors struct ib_uverbs_ah_attr (rdma/ib_user_verbs.h)
type ahAttr struct {
	GRH         globalRoute `abi:"grh"`
	DLID        uint16      `abi:"dlid"`
	SL          uint8       `abi:"sl"`
	SrcPathBits uint8       `abi:"src_path_bits"`
	StaticRate  uint8       `abi:"static_rate"`
	IsGlobal    uint8       `abi:"is_global"`
	PortNum     uint8       `abi:"port_num"`
	_           uint8
}

// mirrors struct ib_uverbs_qp_attr (rdma/ib_user_verbs.h): rdma_cm's INIT_QP_ATTR answer
type qpAttr struct {
	AttrMask         uint32 `abi:"qp_attr_mask"`
	State            uint32 `abi:"qp_state"`
	CurState         uint32 `abi:"cur_qp_state"`
	PathMTU          uint32 `abi:"path_mtu"`
	PathMigState     uint32 `abi:"path_mig_state"`
	QKey             uint32 `abi:"qkey"`
	RQPSN            uint32 `abi:"rq_psn"`
	SQPSN            uint32 `abi:"sq_psn"`
	DestQPNum        uint32 `abi:"dest_qp_num"`
	AccessFlags      uint32 `abi:"qp_access_flags"`
	AH               ahAttr `abi:"ah_attr"`
	AltAH            ahAttr `abi:"alt_ah_attr"`
	MaxSendWR        uint32 `abi:"max_send_wr"`
	MaxRecvWR        uint32 `abi:"max_recv_wr"`
	MaxSendSGE       uint32 `abi:"max_send_sge"`
	MaxRecvSGE       uint32 `abi:"max_recv_sge"`
	MaxInlineData    uint32 `abi:"max_inline_data"`
	PKeyIndex        uint16 `abi:"pkey_index"`
	AltPKeyIndex     uint16 `abi:"alt_pkey_index"`
	EnSQDAsyncNotify uint8  `abi:"en_sqd_async_notify"`
	SQDraining       uint8  `abi:"sq_draining"`
	MaxRdAtomic      uint8  `abi:"max_rd_atomic"`
	MaxDestRdAtomic  uint8  `abi:"max_dest_rd_atomic"`
	MinRNRTimer      uint8  `abi:"min_rnr_timer"`
	PortNum          uint8  `abi:"port_num"`
	Timeout          uint8  `abi:"timeout"`
	RetryCnt         uint8  `abi:"retry_cnt"`
	RNRRetry         uint8  `abi:"rnr_retry"`
	AltPortNum       uint8  `abi:"alt_port_num"`
	AltTimeout       uint8  `abi:"alt_timeout"`
	_                [5]uint8
}

// RDMA netlink (NETLINK_RDMA, rdma/rdma_netlink.h). nldev messages carry attributes right
// after the nlmsghdr (no generic-netlink header).
const (
	rdmaNLNldev          = 5
	nldevCmdGet          = 1
	nldevCmdGetChardev   = 15
	nldevAttrDevIndex    = 1  // u32
	nldevAttrDevName     = 2  // string
	nldevAttrNodeGUID    = 6  // u64, host order
	nldevAttrChardevType = 69 // string
	nldevAttrChardevName = 70 // string
	nldevAttrChardevABI  = 71 // u64
	nldevAttrChardev     = 72 // u64 dev_t
	nldevAttrDriverID    = 73 // u32 (u64 per the header comment; accept both)
)

// respField is the leading `__aligned_u64 response` of every request the kernel answers:
// the user address it copies the response to (set by cmdPath.execLocked).
type respField struct {
	Response uint64
}

// queryGIDTable is the buffer of one UVERBS_METHOD_QUERY_GID_TABLE ioctl as gorping lays it
// out in a single mapping: the ioctl header, its four attributes and the u64 the kernel
// writes the entry count to (RESP_NUM_ENTRIES points there); the entries, struct
// ib_uverbs_gid_entry each, follow at sizeofQueryGIDTable (RESP_ENTRIES points there).
// Not a uapi struct: only its parts are, and those are checked by abicheck.
type queryGIDTable struct {
	Hdr        ioctlHdr
	Attrs      [gidTableAttrs]ioctlAttr
	NumEntries uint64
}

const gidTableAttrs = 4 // ENTRY_SIZE, FLAGS, RESP_ENTRIES, RESP_NUM_ENTRIES

// Sizes the kernel checks; compile-time guards against a field edit that changes them (the
// abicheck test compares every offset with the uapi headers).
const (
	sizeofCmdHdr                = 8
	sizeofGetContextResp        = 8
	sizeofQueryDeviceResp       = 176
	sizeofQueryPort             = 16
	sizeofQueryPortResp         = 40
	sizeofAllocPDResp           = 4
	sizeofRegMR                 = 40
	sizeofRegMRResp             = 12
	sizeofCreateCompChannelResp = 4
	sizeofCreateCQ              = 32
	sizeofCreateCQResp          = 8
	sizeofDestroyCQ             = 16
	sizeofDestroyCQResp         = 8
	sizeofReqNotifyCQ           = 8
	sizeofCreateQP              = 56
	sizeofCreateQPResp          = 32
	sizeofQPDest                = 32
	sizeofModifyQP              = 112
	sizeofQueryQP               = 16
	sizeofQueryQPResp           = 128
	sizeofDestroyQP             = 16
	sizeofDestroyQPResp         = 4
	sizeofPostSend              = 24
	sizeofPostSendResp          = 4
	sizeofAsyncEventDesc        = 16
	sizeofCompEventDesc         = 8
	sizeofQPAttr                = 144
	sizeofIoctlHdr              = 24
	sizeofIoctlAttr             = 16
	sizeofGIDEntry              = 32
	sizeofQueryGIDTable         = sizeofIoctlHdr + gidTableAttrs*sizeofIoctlAttr + 8
	sizeofExCmdHdr              = 16
	sizeofExQueryDevice         = 8
	sizeofExQueryDeviceResp     = 304
	sizeofExCreateCQ            = 32
	sizeofExCreateCQResp        = 16
	offsetofGIDTableNumEntries  = sizeofIoctlHdr + gidTableAttrs*sizeofIoctlAttr
)

var _ = [1]struct{}{}[unsafe.Sizeof(cmdHdr{})-sizeofCmdHdr]
var _ = [1]struct{}{}[unsafe.Sizeof(getContextResp{})-sizeofGetContextResp]
var _ = [1]struct{}{}[unsafe.Sizeof(queryDeviceResp{})-sizeofQueryDeviceResp]
var _ = [1]struct{}{}[unsafe.Sizeof(queryPortReq{})-sizeofQueryPort]
var _ = [1]struct{}{}[unsafe.Sizeof(queryPortResp{})-sizeofQueryPortResp]
var _ = [1]struct{}{}[unsafe.Sizeof(allocPDResp{})-sizeofAllocPDResp]
var _ = [1]struct{}{}[unsafe.Sizeof(regMRReq{})-sizeofRegMR]
var _ = [1]struct{}{}[unsafe.Sizeof(regMRResp{})-sizeofRegMRResp]
var _ = [1]struct{}{}[unsafe.Sizeof(createCompChannelResp{})-sizeofCreateCompChannelResp]
var _ = [1]struct{}{}[unsafe.Sizeof(createCQReq{})-sizeofCreateCQ]
var _ = [1]struct{}{}[unsafe.Sizeof(createCQResp{})-sizeofCreateCQResp]
var _ = [1]struct{}{}[unsafe.Sizeof(destroyCQReq{})-sizeofDestroyCQ]
var _ = [1]struct{}{}[unsafe.Sizeof(destroyCQResp{})-sizeofDestroyCQResp]
var _ = [1]struct{}{}[unsafe.Sizeof(ReqNotifyCQ{})-sizeofReqNotifyCQ]
var _ = [1]struct{}{}[unsafe.Sizeof(createQPReq{})-sizeofCreateQP]
var _ = [1]struct{}{}[unsafe.Sizeof(createQPResp{})-sizeofCreateQPResp]
var _ = [1]struct{}{}[unsafe.Sizeof(qpDest{})-sizeofQPDest]
var _ = [1]struct{}{}[unsafe.Sizeof(modifyQPReq{})-sizeofModifyQP]
var _ = [1]struct{}{}[unsafe.Sizeof(queryQPReq{})-sizeofQueryQP]
var _ = [1]struct{}{}[unsafe.Sizeof(queryQPResp{})-sizeofQueryQPResp]
var _ = [1]struct{}{}[unsafe.Sizeof(destroyQPReq{})-sizeofDestroyQP]
var _ = [1]struct{}{}[unsafe.Sizeof(destroyQPResp{})-sizeofDestroyQPResp]
var _ = [1]struct{}{}[unsafe.Sizeof(PostSendReq{})-sizeofPostSend]
var _ = [1]struct{}{}[unsafe.Sizeof(PostSendResp{})-sizeofPostSendResp]
var _ = [1]struct{}{}[unsafe.Sizeof(asyncEventDesc{})-sizeofAsyncEventDesc]
var _ = [1]struct{}{}[unsafe.Sizeof(compEventDesc{})-sizeofCompEventDesc]
var _ = [1]struct{}{}[unsafe.Sizeof(qpAttr{})-sizeofQPAttr]
var _ = [1]struct{}{}[unsafe.Sizeof(ioctlHdr{})-sizeofIoctlHdr]
var _ = [1]struct{}{}[unsafe.Sizeof(ioctlAttr{})-sizeofIoctlAttr]
var _ = [1]struct{}{}[unsafe.Sizeof(gidEntry{})-sizeofGIDEntry]
var _ = [1]struct{}{}[unsafe.Sizeof(queryGIDTable{})-sizeofQueryGIDTable]
var _ = [1]struct{}{}[unsafe.Offsetof(queryGIDTable{}.NumEntries)-offsetofGIDTableNumEntries]
var _ = [1]struct{}{}[unsafe.Sizeof(exCmdHdr{})-sizeofExCmdHdr]
var _ = [1]struct{}{}[unsafe.Sizeof(exQueryDeviceReq{})-sizeofExQueryDevice]
var _ = [1]struct{}{}[unsafe.Sizeof(exQueryDeviceResp{})-sizeofExQueryDeviceResp]
var _ = [1]struct{}{}[unsafe.Sizeof(exCreateCQReq{})-sizeofExCreateCQ]
var _ = [1]struct{}{}[unsafe.Sizeof(exCreateCQResp{})-sizeofExCreateCQResp]
