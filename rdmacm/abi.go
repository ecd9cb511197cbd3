package rdmacm

import (
	"github.com/gorping/gorping/internal/wire"
	"github.com/gorping/gorping/uverbs"
)

// The rdma_cm write() ABI (rdma/rdma_user_cm.h, RDMA_USER_CM_ABI_VERSION 4): the structs,
// their sizes and the command numbers are generated into abi_gen.go (abi.spec, make
// generate); abi_layout_test.go (tag abicheck) checks them against the header. Here: the
// port space, query options and sizes the structs use.
const (
	abiVersion = 4

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

// QP attribute mask bits and states used by the hidden transitions.
// INIT_QP_ATTR answers with struct ib_uverbs_qp_attr, whose mirror lives with
// the rest of ib_user_verbs.h in uverbs (QPAttr.UnmarshalBinary).
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

// INIT_QP_ATTR answers with struct ib_uverbs_qp_attr (QPAttr.UnmarshalBinary), 144 bytes
// (make abicheck compares it with the header).
const sizeofQPAttr = 144

// bytesOf views an ABI struct as the bytes the kernel reads or writes (the
// layouts are checked by abi_layout_test.go).
func bytesOf[T any](p *T) []byte { return wire.Bytes(p) }
