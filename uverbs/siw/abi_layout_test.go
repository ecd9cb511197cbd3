//go:build abicheck

package siw

import (
	"testing"

	"github.com/gorping/gorping/test/abicheck"
)

func TestABILayout(t *testing.T) {
	t.Parallel()
	abicheck.Check(t, []string{"rdma/siw-abi.h"},
		abicheck.Struct{C: "struct siw_uresp_alloc_ctx", Go: allocCtxResp{}},
		abicheck.Struct{C: "struct siw_uresp_create_cq", Go: createCQResp{}},
		abicheck.Struct{C: "struct siw_uresp_create_qp", Go: createQPResp{}},
		abicheck.Struct{C: "struct siw_ureq_reg_mr", Go: regMRReq{}},
		abicheck.Struct{C: "struct siw_uresp_reg_mr", Go: regMRResp{}},
		abicheck.Struct{C: "struct siw_sge", Go: sge{}},
		abicheck.Struct{C: "struct siw_sqe", Go: sqe{}},
		abicheck.Struct{C: "struct siw_rqe", Go: rqe{}},
		abicheck.Struct{C: "struct siw_cqe", Go: cqe{}},
		abicheck.Struct{C: "struct siw_cq_ctrl", Go: cqCtrl{}},
	)
	abicheck.CheckConsts(t, []string{"rdma/siw-abi.h", "rdma/ib_user_ioctl_verbs.h"},
		abicheck.Const{C: "RDMA_DRIVER_SIW", Go: siwDriverID},
		abicheck.Const{C: "SIW_ABI_VERSION", Go: siwABI},
		abicheck.Const{C: "SIW_MAX_SGE", Go: maxSGE},
		abicheck.Const{C: "SIW_INVAL_UOBJ_KEY", Go: invalKey},
		abicheck.Const{C: "sizeof(struct siw_sqe)", Go: sqeSize},
		abicheck.Const{C: "sizeof(struct siw_rqe)", Go: rqeSize},
		abicheck.Const{C: "sizeof(struct siw_cqe)", Go: cqeSize},
		abicheck.Const{C: "offsetof(struct siw_sqe, flags)", Go: wordOff},
		abicheck.Const{C: "offsetof(struct siw_rqe, flags)", Go: wordOff},
		abicheck.Const{C: "offsetof(struct siw_cqe, flags)", Go: wordOff},
		abicheck.Const{C: "SIW_WQE_VALID", Go: wqeValid},
		abicheck.Const{C: "SIW_WQE_INLINE", Go: wqeInline},
		abicheck.Const{C: "SIW_WQE_SIGNALLED", Go: wqeSignalled},
		abicheck.Const{C: "SIW_WQE_SOLICITED", Go: wqeSolicited},
		abicheck.Const{C: "SIW_WQE_READ_FENCE", Go: wqeReadFence},
		abicheck.Const{C: "SIW_OP_WRITE", Go: opWrite},
		abicheck.Const{C: "SIW_OP_READ", Go: opRead},
		abicheck.Const{C: "SIW_OP_SEND", Go: opSend},
		abicheck.Const{C: "SIW_OP_SEND_REMOTE_INV", Go: opSendRemoteInv},
		abicheck.Const{C: "SIW_OP_RECEIVE", Go: opReceive},
		abicheck.Const{C: "SIW_NOTIFY_SOLICITED", Go: notifySolicited},
		abicheck.Const{C: "SIW_NOTIFY_NEXT_COMPLETION", Go: notifyNextCompletion},
	)
}
