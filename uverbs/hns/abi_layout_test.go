//go:build abicheck

package hns

import (
	"testing"

	"github.com/gorping/gorping/test/abicheck"
)

// The driver data's layout and constants against rdma/hns-abi.h, and the core MODIFY_QP
// the provider writes itself against rdma/ib_user_verbs.h. The device's WQE and CQE
// formats are in no uapi header; the oracle tests check them against libhns.
func TestABILayout(t *testing.T) {
	t.Parallel()
	h := []string{"rdma/hns-abi.h", "rdma/ib_user_verbs.h", "rdma/ib_user_ioctl_verbs.h"}
	abicheck.Check(t, h,
		abicheck.Struct{C: "struct hns_roce_ib_alloc_ucontext_resp", Go: uctxResp{}},
		abicheck.Struct{C: "struct hns_roce_ib_alloc_pd_resp", Go: pdResp{}},
		abicheck.Struct{C: "struct hns_roce_ib_create_cq", Go: cqReq{}},
		abicheck.Struct{C: "struct hns_roce_ib_create_cq_resp", Go: cqResp{}},
		abicheck.Struct{C: "struct hns_roce_ib_create_qp", Go: qpReq{}},
		abicheck.Struct{C: "struct hns_roce_ib_create_qp_resp", Go: qpResp{}},
		abicheck.Struct{C: "struct ib_uverbs_modify_qp", Go: modifyQPCmd{}},
	)
	abicheck.CheckConsts(t, h,
		abicheck.Const{C: "RDMA_DRIVER_HNS", Go: hnsDriverID},
		abicheck.Const{C: "sizeof(struct hns_roce_ib_alloc_ucontext_resp)", Go: uctxRespLen},
		abicheck.Const{C: "sizeof(struct hns_roce_ib_create_cq_resp)", Go: cqRespLen},
		abicheck.Const{C: "sizeof(struct hns_roce_ib_create_qp_resp)", Go: qpRespLen},
		abicheck.Const{C: "HNS_ROCE_CQ_FLAG_RECORD_DB", Go: cqCapRecordDb},
		abicheck.Const{C: "HNS_ROCE_QP_CAP_SQ_RECORD_DB", Go: qpCapSQRecordDb},
		abicheck.Const{C: "HNS_ROCE_QP_CAP_OWNER_DB", Go: qpCapOwnerDb},
		abicheck.Const{C: "IB_USER_VERBS_CMD_MODIFY_QP", Go: cmdModifyQP},
	)
}
