package uverbs

import (
	"unsafe"

	"github.com/gorping/gorping/uverbs/driver"
)

// Kernel ABI of /dev/infiniband/uverbsN. The request and response structs of the write()
// interface, their sizes, the command numbers and the driver-id table are generated from
// the uapi headers into abi_gen.go (abi.spec, make generate); abi_layout_test.go (build
// tag abicheck) checks every offset against the headers independently. Requests are
// encoded by copying the struct's bytes into the command arena; responses by copying
// arena bytes into a struct (see cmd.go). What is here is what the headers do not say in
// a form the generator reads: macros, and layouts gorping composes.

// Extended commands: the command number ORed with exCmdFlag, followed by
// ib_uverbs_ex_cmd_hdr (rdma/ib_user_verbs.h); header words count 8-byte units.
const (
	exCmdFlag = 0x80000000 // IB_USER_VERBS_CMD_FLAG_EXTENDED
)

// enum ib_uverbs_ex_create_cq_flags
const cqFlagTimestampCompletion = 1 << 0 // IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION

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
// the user address it copies the response to (set by cmdPath.exec).
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

// Sizes of the layouts gorping composes (the structs' own are in abi_gen.go).
const (
	sizeofQueryGIDTable        = sizeofIoctlHdr + gidTableAttrs*sizeofIoctlAttr + 8
	offsetofGIDTableNumEntries = sizeofIoctlHdr + gidTableAttrs*sizeofIoctlAttr
)

var (
	// driver's command numbers (Doorbell, CQArm) and CQ flag are the header's.
	_ = [1]struct{}{}[driver.CmdPostSend-cmdPostSend]
	_ = [1]struct{}{}[driver.CmdReqNotifyCQ-cmdReqNotifyCQ]
	_ = [1]struct{}{}[driver.CQTimestamps-cqFlagTimestampCompletion] // checked by abicheck
	_ = [1]struct{}{}[unsafe.Sizeof(queryGIDTable{})-sizeofQueryGIDTable]
	_ = [1]struct{}{}[unsafe.Offsetof(queryGIDTable{}.NumEntries)-offsetofGIDTableNumEntries]
)

// qpAttrWriteMaskSupported are the QPAttrMask bits MODIFY_QP's write form takes; it rejects
// higher ones.
const qpAttrWriteMaskSupported QPAttrMask = 1<<21 - 1
