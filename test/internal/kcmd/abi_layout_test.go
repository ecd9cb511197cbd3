//go:build abicheck

package kcmd

import (
	"testing"

	"github.com/gorping/gorping/test/abicheck"
)

func TestABILayout(t *testing.T) {
	t.Parallel()
	abicheck.Check(t, []string{"rdma/ib_user_verbs.h"},
		abicheck.Struct{C: "struct ib_uverbs_cmd_hdr", Go: CmdHdr{}},
		abicheck.Struct{C: "struct ib_uverbs_ex_cmd_hdr", Go: ExCmdHdr{}},
		abicheck.Struct{C: "struct ib_uverbs_get_context_resp", Go: GetContextResp{}},
		abicheck.Struct{C: "struct ib_uverbs_query_device_resp", Go: QueryDeviceResp{}},
		abicheck.Struct{C: "struct ib_uverbs_ex_query_device_resp", Go: ExQueryDeviceResp{}},
		abicheck.Struct{C: "struct ib_uverbs_query_port", Go: QueryPort{}},
		abicheck.Struct{C: "struct ib_uverbs_query_port_resp", Go: QueryPortResp{}},
		abicheck.Struct{C: "struct ib_uverbs_reg_mr", Go: RegMR{}},
		abicheck.Struct{C: "struct ib_uverbs_create_cq", Go: CreateCQ{}},
		abicheck.Struct{C: "struct ib_uverbs_ex_create_cq", Go: ExCreateCQ{}},
		abicheck.Struct{C: "struct ib_uverbs_destroy_cq", Go: DestroyCQ{}},
		abicheck.Struct{C: "struct ib_uverbs_req_notify_cq", Go: ReqNotifyCQ{}},
		abicheck.Struct{C: "struct ib_uverbs_create_qp", Go: CreateQP{}},
		abicheck.Struct{C: "struct ib_uverbs_create_qp_resp", Go: CreateQPResp{}},
		abicheck.Struct{C: "struct ib_uverbs_modify_qp", Go: ModifyQP{}},
		abicheck.Struct{C: "struct ib_uverbs_ex_modify_qp", Go: ExModifyQP{}},
		abicheck.Struct{C: "struct ib_uverbs_ex_create_qp", Go: ExCreateQP{}},
		abicheck.Struct{C: "struct ib_uverbs_ex_create_qp_resp", Go: ExCreateQPResp{}},
		abicheck.Struct{C: "struct ib_uverbs_ex_modify_qp_resp", Go: ExModifyQPResp{}},
		abicheck.Struct{C: "struct ib_uverbs_destroy_qp", Go: DestroyQP{}},
		abicheck.Struct{C: "struct ib_uverbs_post_send", Go: PostSend{}},
	)
	abicheck.CheckConsts(t, []string{"rdma/ib_user_verbs.h"},
		abicheck.Const{C: "IB_USER_VERBS_CMD_FLAG_EXTENDED", Go: ExFlag},
	)
}
