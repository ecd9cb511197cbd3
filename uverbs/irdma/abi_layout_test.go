//go:build abicheck

package irdma

import (
	"testing"

	"github.com/gorping/gorping/test/abicheck"
)

// The driver data's layout and constants against rdma/irdma-abi.h, and the core commands
// the provider writes itself against rdma/ib_user_verbs.h. The device's WQE and CQE
// formats are in no uapi header; the oracle tests check them against libirdma.
func TestABILayout(t *testing.T) {
	t.Parallel()
	h := []string{"rdma/irdma-abi.h", "rdma/ib_user_verbs.h", "rdma/ib_user_ioctl_verbs.h"}
	abicheck.Check(t, h,
		abicheck.Struct{C: "struct irdma_alloc_ucontext_req", Go: uctxReq{}},
		abicheck.Struct{C: "struct irdma_alloc_ucontext_resp", Go: uctxResp{}},
		abicheck.Struct{C: "struct irdma_alloc_pd_resp", Go: pdResp{}},
		abicheck.Struct{C: "struct irdma_mem_reg_req", Go: memRegReq{}},
		abicheck.Struct{C: "struct irdma_create_cq_req", Go: cqReq{}},
		abicheck.Struct{C: "struct irdma_create_cq_resp", Go: cqResp{}},
		abicheck.Struct{C: "struct irdma_create_qp_req", Go: qpReq{}},
		abicheck.Struct{C: "struct irdma_create_qp_resp", Go: qpResp{}},
		abicheck.Struct{C: "struct ib_uverbs_alloc_pd", Go: allocPDCmd{}},
		abicheck.Struct{C: "struct ib_uverbs_alloc_pd_resp", Go: allocPDCoreResp{}},
		abicheck.Struct{C: "struct ib_uverbs_reg_mr", Go: regMRCmd{}},
		abicheck.Struct{C: "struct ib_uverbs_reg_mr_resp", Go: regMRCoreResp{}},
		abicheck.Struct{C: "struct ib_uverbs_dereg_mr", Go: deregMRCmd{}},
	)
	abicheck.CheckConsts(t, h,
		abicheck.Const{C: "RDMA_DRIVER_IRDMA", Go: irdmaDriverID},
		abicheck.Const{C: "IRDMA_ABI_VER", Go: irdmaABI},
		abicheck.Const{C: "offsetof(struct irdma_alloc_ucontext_req, comp_mask)", Go: int64(uctxReqLen)},
		abicheck.Const{C: "offsetof(struct irdma_alloc_ucontext_resp, comp_mask)", Go: int64(uctxRespLen)},
		abicheck.Const{C: "sizeof(struct irdma_alloc_pd_resp)", Go: pdRespLen},
		abicheck.Const{C: "sizeof(struct irdma_create_cq_resp)", Go: cqRespLen},
		abicheck.Const{C: "sizeof(struct irdma_create_qp_resp)", Go: qpRespLen},
		abicheck.Const{C: "IRDMA_MEMREG_TYPE_QP", Go: memregTypeQP},
		abicheck.Const{C: "IRDMA_MEMREG_TYPE_CQ", Go: memregTypeCQ},
		abicheck.Const{C: "IB_USER_VERBS_CMD_REG_MR", Go: cmdRegMR},
	)
}
