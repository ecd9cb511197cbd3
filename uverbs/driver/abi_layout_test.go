//go:build abicheck

package driver

import (
	"testing"

	"github.com/gorping/gorping/test/abicheck"
)

func TestABILayout(t *testing.T) {
	t.Parallel()
	abicheck.Check(t, []string{"rdma/ib_user_verbs.h"},
		abicheck.Struct{C: "struct ib_uverbs_post_send", Go: postSendReq{}},
		abicheck.Struct{C: "struct ib_uverbs_post_send_resp", Go: postSendResp{}},
		abicheck.Struct{C: "struct ib_uverbs_req_notify_cq", Go: reqNotifyCQ{}},
		abicheck.Struct{C: "struct ib_uverbs_global_route", Go: globalRoute{}},
		abicheck.Struct{C: "struct ib_uverbs_ah_attr", Go: ahAttr{}},
		abicheck.Struct{C: "struct ib_uverbs_qp_attr", Go: qpAttr{}},
	)
	abicheck.CheckConsts(t, []string{"rdma/ib_user_verbs.h"},
		abicheck.Const{C: "IB_USER_VERBS_CMD_POST_SEND", Go: int64(CmdPostSend)},
		abicheck.Const{C: "IB_USER_VERBS_CMD_REQ_NOTIFY_CQ", Go: int64(CmdReqNotifyCQ)},
	)
}
