//go:build abicheck

package rdmacm

import (
	"testing"

	"github.com/gorping/gorping/test/abicheck"
)

// TestABILayout compares every Go mirror in abi.go with rdma/rdma_user_cm.h
// (and the ib_user_verbs.h / ib_user_sa.h structs it uses) through gcc.
func TestABILayout(t *testing.T) {
	t.Parallel()
	abicheck.Check(t, []string{"rdma/rdma_user_cm.h"},
		abicheck.Struct{C: "struct rdma_ucm_cmd_hdr", Go: cmdHdr{}},
		abicheck.Struct{C: "struct rdma_ucm_create_id", Go: createID{}},
		abicheck.Struct{C: "struct rdma_ucm_create_id_resp", Go: createIDResp{}},
		abicheck.Struct{C: "struct rdma_ucm_destroy_id", Go: destroyID{}},
		abicheck.Struct{C: "struct rdma_ucm_destroy_id_resp", Go: destroyIDResp{}},
		abicheck.Struct{C: "struct rdma_ucm_bind", Go: bindCmd{}},
		abicheck.Struct{C: "struct rdma_ucm_resolve_addr", Go: resolveAddr{}},
		abicheck.Struct{C: "struct rdma_ucm_resolve_route", Go: resolveRoute{}},
		abicheck.Struct{C: "struct rdma_ucm_query", Go: query{}},
		abicheck.Struct{C: "struct rdma_ucm_query_addr_resp", Go: queryAddrResp{}},
		abicheck.Struct{C: "struct rdma_ucm_query_path_resp", Go: queryPathResp{}},
		abicheck.Struct{C: "struct ib_path_rec_data", Go: pathRecData{}},
		abicheck.Struct{C: "struct rdma_ucm_conn_param", Go: connParam{}},
		abicheck.Struct{C: "struct rdma_ucm_ece", Go: ece{}},
		abicheck.Struct{C: "struct rdma_ucm_connect", Go: connectCmd{}},
		abicheck.Struct{C: "struct rdma_ucm_listen", Go: listenCmd{}},
		abicheck.Struct{C: "struct rdma_ucm_accept", Go: acceptCmd{}},
		abicheck.Struct{C: "struct rdma_ucm_reject", Go: rejectCmd{}},
		abicheck.Struct{C: "struct rdma_ucm_disconnect", Go: disconnectCmd{}},
		abicheck.Struct{C: "struct rdma_ucm_init_qp_attr", Go: initQPAttr{}},
		abicheck.Struct{C: "struct rdma_ucm_get_event", Go: getEvent{}},
		abicheck.Struct{C: "struct rdma_ucm_event_resp", Go: eventResp{}},
		// INIT_QP_ATTR's response, struct ib_uverbs_qp_attr, is uverbs' (QPAttr.UnmarshalBinary);
		// its size is checked with the constants.
	)
}

func TestABIConstants(t *testing.T) {
	t.Parallel()
	abicheck.CheckConsts(t, []string{"rdma/rdma_user_cm.h", "rdma/ib_user_verbs.h", "linux/socket.h", "linux/in.h", "linux/in6.h"},
		abicheck.Const{C: "RDMA_USER_CM_ABI_VERSION", Go: abiVersion},
		abicheck.Const{C: "sizeof(struct ib_uverbs_qp_attr)", Go: sizeofQPAttr},
		abicheck.Const{C: "RDMA_MAX_PRIVATE_DATA", Go: maxPrivateData},
		abicheck.Const{C: "RDMA_USER_CM_CMD_CREATE_ID", Go: cmdCreateID},
		abicheck.Const{C: "RDMA_USER_CM_CMD_DESTROY_ID", Go: cmdDestroyID},
		abicheck.Const{C: "RDMA_USER_CM_CMD_RESOLVE_ROUTE", Go: cmdResolveRoute},
		abicheck.Const{C: "RDMA_USER_CM_CMD_CONNECT", Go: cmdConnect},
		abicheck.Const{C: "RDMA_USER_CM_CMD_LISTEN", Go: cmdListen},
		abicheck.Const{C: "RDMA_USER_CM_CMD_ACCEPT", Go: cmdAccept},
		abicheck.Const{C: "RDMA_USER_CM_CMD_REJECT", Go: cmdReject},
		abicheck.Const{C: "RDMA_USER_CM_CMD_DISCONNECT", Go: cmdDisconnect},
		abicheck.Const{C: "RDMA_USER_CM_CMD_INIT_QP_ATTR", Go: cmdInitQPAttr},
		abicheck.Const{C: "RDMA_USER_CM_CMD_GET_EVENT", Go: cmdGetEvent},
		abicheck.Const{C: "RDMA_USER_CM_CMD_QUERY", Go: cmdQuery},
		abicheck.Const{C: "RDMA_USER_CM_CMD_BIND", Go: cmdBind},
		abicheck.Const{C: "RDMA_USER_CM_CMD_RESOLVE_ADDR", Go: cmdResolveAddr},
		abicheck.Const{C: "RDMA_PS_TCP", Go: psTCP},
		abicheck.Const{C: "RDMA_USER_CM_QUERY_ADDR", Go: queryAddr},
		abicheck.Const{C: "RDMA_USER_CM_QUERY_PATH", Go: queryPath},
		abicheck.Const{C: "RDMA_USER_CM_QUERY_GID", Go: queryGID},
		abicheck.Const{C: "sizeof(struct __kernel_sockaddr_storage)", Go: sockaddrSize},
		abicheck.Const{C: "sizeof(struct sockaddr_in)", Go: sizeofSockIn},
		abicheck.Const{C: "sizeof(struct sockaddr_in6)", Go: sizeofSockIn6},
		abicheck.Const{C: "offsetof(struct sockaddr_in6, sin6_scope_id)", Go: 24},
		abicheck.Const{C: "offsetof(struct sockaddr_in6, sin6_addr)", Go: 8},
		abicheck.Const{C: "offsetof(struct sockaddr_in, sin_addr)", Go: 4},
	)
}
