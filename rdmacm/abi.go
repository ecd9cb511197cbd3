package rdmacm

import (
	"unsafe"

	"github.com/gorping/gorping/internal/wire"
	"github.com/gorping/gorping/uverbs"
)

// Command numbers, port spaces and query options of the rdma_cm write() ABI
// (enum in rdma/rdma_user_cm.h, RDMA_USER_CM_ABI_VERSION 4).
const (
	abiVersion = 4

	cmdCreateID     = 0
	cmdDestroyID    = 1
	cmdResolveRoute = 4
	cmdConnect      = 6
	cmdListen       = 7
	cmdAccept       = 8
	cmdReject       = 9
	cmdDisconnect   = 10
	cmdInitQPAttr   = 11
	cmdGetEvent     = 12
	cmdQuery        = 19
	cmdBind         = 20
	cmdResolveAddr  = 21

	psTCP = 0x0106 // RDMA_PS_TCP
	qptRC = 2      // IBV_QPT_RC; the kernel derives RC from PS_TCP anyway

	queryAddr = 0 // RDMA_USER_CM_QUERY_ADDR
	queryPath = 1 // RDMA_USER_CM_QUERY_PATH
	queryGID  = 2 // RDMA_USER_CM_QUERY_GID

	maxPrivateData = 256 // RDMA_MAX_PRIVATE_DATA
	sockaddrSize   = 128 // struct __kernel_sockaddr_storage
	sizeofSockIn   = 16  // struct sockaddr_in
	sizeofSockIn6  = 28  // struct sockaddr_in6

	// maxPathRecs is how many path records QUERY(PATH) makes room for (librdmacm: 6).
	maxPathRecs = 6
)

// mirrors struct rdma_ucm_cmd_hdr (rdma/rdma_user_cm.h)
type cmdHdr struct {
	Cmd uint32
	In  uint16
	Out uint16
}

// mirrors struct rdma_ucm_create_id (rdma/rdma_user_cm.h)
type createID struct {
	UID      uint64
	Response uint64
	Ps       uint16
	QPType   uint8
	Reserved [5]uint8
}

// mirrors struct rdma_ucm_create_id_resp (rdma/rdma_user_cm.h)
type createIDResp struct {
	ID uint32
}

// mirrors struct rdma_ucm_destroy_id (rdma/rdma_user_cm.h)
type destroyID struct {
	Response uint64
	ID       uint32
	Reserved uint32
}

// mirrors struct rdma_ucm_destroy_id_resp (rdma/rdma_user_cm.h)
type destroyIDResp struct {
	EventsReported uint32
}

// mirrors struct rdma_ucm_bind (rdma/rdma_user_cm.h)
type bindCmd struct {
	ID       uint32
	AddrSize uint16
	Reserved uint16
	Addr     [sockaddrSize]byte
}

// mirrors struct rdma_ucm_resolve_addr (rdma/rdma_user_cm.h)
type resolveAddr struct {
	ID        uint32
	TimeoutMs uint32
	SrcSize   uint16
	DstSize   uint16
	Reserved  uint32
	SrcAddr   [sockaddrSize]byte
	DstAddr   [sockaddrSize]byte
}

// mirrors struct rdma_ucm_resolve_route (rdma/rdma_user_cm.h)
type resolveRoute struct {
	ID        uint32
	TimeoutMs uint32
}

// mirrors struct rdma_ucm_query (rdma/rdma_user_cm.h)
type query struct {
	Response uint64
	ID       uint32
	Option   uint32
}

// mirrors struct rdma_ucm_query_addr_resp (rdma/rdma_user_cm.h).
// node_guid is kept as raw bytes: the kernel stores it big-endian.
type queryAddrResp struct {
	NodeGUID   [8]byte `abi:"node_guid"`
	PortNum    uint8
	Reserved   uint8
	Pkey       uint16 // big-endian on the wire
	SrcSize    uint16
	DstSize    uint16
	SrcAddr    [sockaddrSize]byte
	DstAddr    [sockaddrSize]byte
	IbdevIndex uint32
	Reserved1  uint32
}

// mirrors struct rdma_ucm_query_path_resp (rdma/rdma_user_cm.h), without the
// flexible path_data array that follows it.
type queryPathResp struct {
	NumPaths uint32
	Reserved uint32
}

// mirrors struct ib_path_rec_data (rdma/ib_user_sa.h)
type pathRecData struct {
	Flags    uint32
	Reserved uint32
	PathRec  [16]uint32
}

// mirrors struct rdma_ucm_conn_param (rdma/rdma_user_cm.h)
type connParam struct {
	QPNum              uint32
	Qkey               uint32
	PrivateData        [maxPrivateData]uint8
	PrivateDataLen     uint8
	Srq                uint8
	ResponderResources uint8
	InitiatorDepth     uint8
	FlowControl        uint8
	RetryCount         uint8
	RnrRetryCount      uint8
	Valid              uint8
}

// mirrors struct rdma_ucm_ece (rdma/rdma_user_cm.h)
type ece struct {
	VendorID uint32
	AttrMod  uint32
}

// mirrors struct rdma_ucm_connect (rdma/rdma_user_cm.h)
type connectCmd struct {
	ConnParam connParam
	ID        uint32
	Reserved  uint32
	Ece       ece
}

// mirrors struct rdma_ucm_listen (rdma/rdma_user_cm.h)
type listenCmd struct {
	ID      uint32
	Backlog uint32
}

// mirrors struct rdma_ucm_accept (rdma/rdma_user_cm.h)
type acceptCmd struct {
	UID       uint64
	ConnParam connParam
	ID        uint32
	Reserved  uint32
	Ece       ece
}

// mirrors struct rdma_ucm_reject (rdma/rdma_user_cm.h)
type rejectCmd struct {
	ID             uint32
	PrivateDataLen uint8
	Reason         uint8
	Reserved       [2]uint8
	PrivateData    [maxPrivateData]uint8
}

// mirrors struct rdma_ucm_disconnect (rdma/rdma_user_cm.h)
type disconnectCmd struct {
	ID uint32
}

// mirrors struct rdma_ucm_init_qp_attr (rdma/rdma_user_cm.h)
type initQPAttr struct {
	Response uint64
	ID       uint32
	QPState  uint32
}

// mirrors struct rdma_ucm_get_event (rdma/rdma_user_cm.h)
type getEvent struct {
	Response uint64
}

// mirrors struct rdma_ucm_event_resp (rdma/rdma_user_cm.h). The param union is
// only 4-byte aligned; rdma_cm over IP (PS_TCP) only ever fills its conn member,
// the rest of the union (the larger ud member) is kept as padding.
type eventResp struct {
	UID      uint64
	ID       uint32
	Event    uint32
	Status   int32
	Conn     connParam `abi:"param.conn"`
	_        [32]byte  // rest of param.ud
	Reserved uint32
	Ece      ece
}

// QP attribute mask bits and states used by the hidden transitions.
// INIT_QP_ATTR answers with struct ib_uverbs_qp_attr, whose mirror lives with
// the rest of ib_user_verbs.h in uverbs (uverbs.DecodeQPAttr).
const (
	qpMaskState = uverbs.QPAttrState
	// qpMaskRoCEObsolete are bits 21-24 (old SMAC/VID bits); librdmacm clears
	// them from the kernel's RTR mask on InfiniBand link-layer ports.
	qpMaskRoCEObsolete uverbs.QPAttrMask = 0xE00000

	qpsInit = uverbs.QPSInit
	qpsRTR  = uverbs.QPSRTR
	qpsRTS  = uverbs.QPSRTS
	qpsErr  = uverbs.QPSErr

	// noOverride (RDMA_MAX_RESP_RES / RDMA_MAX_INIT_DEPTH) keeps the kernel's
	// max_dest_rd_atomic / max_rd_atomic.
	noOverride = 0xFF
)

// Sizes the kernel checks; compile-time guards against a field edit that
// changes them (the abicheck test compares every offset).
const (
	sizeofCreateID      = 24
	sizeofDestroyID     = 16
	sizeofBind          = 136
	sizeofResolveAddr   = 272
	sizeofResolveRoute  = 8
	sizeofQuery         = 16
	sizeofQueryAddrResp = 280
	sizeofConnect       = 288
	sizeofListen        = 8
	sizeofAccept        = 296
	sizeofReject        = 264
	sizeofDisconnect    = 4
	sizeofInitQPAttr    = 16
	sizeofGetEvent      = 8
	sizeofEventResp     = 336
	sizeofQPAttr        = 144
	sizeofPathRecData   = 72
)

var _ = [1]struct{}{}[unsafe.Sizeof(createID{})-sizeofCreateID]
var _ = [1]struct{}{}[unsafe.Sizeof(destroyID{})-sizeofDestroyID]
var _ = [1]struct{}{}[unsafe.Sizeof(bindCmd{})-sizeofBind]
var _ = [1]struct{}{}[unsafe.Sizeof(resolveAddr{})-sizeofResolveAddr]
var _ = [1]struct{}{}[unsafe.Sizeof(resolveRoute{})-sizeofResolveRoute]
var _ = [1]struct{}{}[unsafe.Sizeof(query{})-sizeofQuery]
var _ = [1]struct{}{}[unsafe.Sizeof(queryAddrResp{})-sizeofQueryAddrResp]
var _ = [1]struct{}{}[unsafe.Sizeof(connectCmd{})-sizeofConnect]
var _ = [1]struct{}{}[unsafe.Sizeof(listenCmd{})-sizeofListen]
var _ = [1]struct{}{}[unsafe.Sizeof(acceptCmd{})-sizeofAccept]
var _ = [1]struct{}{}[unsafe.Sizeof(rejectCmd{})-sizeofReject]
var _ = [1]struct{}{}[unsafe.Sizeof(disconnectCmd{})-sizeofDisconnect]
var _ = [1]struct{}{}[unsafe.Sizeof(initQPAttr{})-sizeofInitQPAttr]
var _ = [1]struct{}{}[unsafe.Sizeof(getEvent{})-sizeofGetEvent]
var _ = [1]struct{}{}[unsafe.Sizeof(eventResp{})-sizeofEventResp]
var _ = [1]struct{}{}[uverbs.QPAttrWireSize-sizeofQPAttr]
var _ = [1]struct{}{}[unsafe.Sizeof(pathRecData{})-sizeofPathRecData]

// bytesOf views an ABI struct as the bytes the kernel reads or writes (the
// layouts are checked by abi_layout_test.go).
func bytesOf[T any](p *T) []byte { return wire.Bytes(p) }
