//go:build abicheck

package bnxtre

import (
	"testing"

	"github.com/gorping/gorping/test/abicheck"
)

// The driver data's layout and constants against rdma/bnxt_re-abi.h. The device's WQE and
// CQE formats are in no uapi header; the oracle tests check them against libbnxt_re.
func TestABILayout(t *testing.T) {
	t.Parallel()
	h := []string{"rdma/bnxt_re-abi.h", "rdma/ib_user_ioctl_verbs.h"}
	abicheck.Check(t, h,
		abicheck.Struct{C: "struct bnxt_re_uctx_resp", Go: uctxResp{}},
		abicheck.Struct{C: "struct bnxt_re_pd_resp", Go: pdResp{}},
		abicheck.Struct{C: "struct bnxt_re_cq_req", Go: cqReq{}},
		abicheck.Struct{C: "struct bnxt_re_cq_resp", Go: cqResp{}},
		abicheck.Struct{C: "struct bnxt_re_qp_req", Go: qpReq{}},
		abicheck.Struct{C: "struct bnxt_re_qp_resp", Go: qpResp{}},
	)
	abicheck.CheckConsts(t, h,
		abicheck.Const{C: "RDMA_DRIVER_BNXT_RE", Go: bnxtDriverID},
		abicheck.Const{C: "BNXT_RE_ABI_VERSION", Go: bnxtABI},
		abicheck.Const{C: "sizeof(struct bnxt_re_uctx_resp)", Go: uctxRespLen},
		abicheck.Const{C: "sizeof(struct bnxt_re_pd_resp)", Go: pdRespLen},
		abicheck.Const{C: "sizeof(struct bnxt_re_cq_resp)", Go: cqRespLen},
		abicheck.Const{C: "sizeof(struct bnxt_re_qp_resp)", Go: qpRespLen},
		abicheck.Const{C: "BNXT_RE_UCNTX_CMASK_HAVE_CCTX", Go: ucntxCmaskHaveCctx},
		abicheck.Const{C: "BNXT_RE_UCNTX_CMASK_HAVE_MODE", Go: ucntxCmaskHaveMode},
		abicheck.Const{C: "BNXT_QPLIB_WQE_MODE_VARIABLE", Go: wqeModeVariable},
		abicheck.Const{C: "offsetof(struct bnxt_re_pd_resp, dbr)", Go: 8},
	)
}
