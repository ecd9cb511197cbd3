//go:build abicheck

package rxemodel

import (
	"testing"

	"github.com/gorping/gorping/test/abicheck"
)

func TestABILayout(t *testing.T) {
	t.Parallel()
	h := []string{"rdma/rdma_user_rxe.h", "rdma/ib_user_verbs.h", "rdma/ib_user_ioctl_verbs.h"}
	abicheck.Check(t, h,
		abicheck.Struct{C: "struct mminfo", Go: mminfo{}},
		abicheck.Struct{C: "struct rxe_create_cq_resp", Go: createCQResp{}},
		abicheck.Struct{C: "struct rxe_create_qp_resp", Go: createQPResp{}},
		abicheck.Struct{C: "struct rxe_queue_buf", Go: queueBuf{}},
		abicheck.Struct{C: "struct rxe_send_wqe", Go: sendWQE{}},
		abicheck.Struct{C: "struct rxe_recv_wqe", Go: recvWQE{}},
		abicheck.Struct{C: "struct rxe_sge", Go: sge{}},
		abicheck.Struct{C: "struct ib_uverbs_wc", Go: wc{}},
	)
	// The model takes the flexible arrays to start where the structs end.
	abicheck.CheckConsts(t, h,
		abicheck.Const{C: "offsetof(struct rxe_queue_buf, data)", Go: sizeofQueueBuf},
		abicheck.Const{C: "offsetof(struct rxe_send_wqe, dma.sge)", Go: sizeofSendWQE},
		abicheck.Const{C: "offsetof(struct rxe_recv_wqe, dma.sge)", Go: sizeofRecvWQE},
		abicheck.Const{C: "RDMA_DRIVER_RXE", Go: driverID},
		abicheck.Const{C: "IB_UVERBS_QPT_RC", Go: qptRC},
	)
}
