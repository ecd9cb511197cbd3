//go:build abicheck

package rxe

import (
	"testing"

	"github.com/gorping/gorping/test/abicheck"
)

func TestABILayout(t *testing.T) {
	t.Parallel()
	abicheck.Check(t, []string{"rdma/rdma_user_rxe.h", "rdma/ib_user_verbs.h"},
		abicheck.Struct{C: "struct mminfo", Go: mminfo{}},
		abicheck.Struct{C: "struct rxe_create_cq_resp", Go: createCQResp{}},
		abicheck.Struct{C: "struct rxe_create_qp_resp", Go: createQPResp{}},
		abicheck.Struct{C: "struct rxe_queue_buf", Go: queueBuf{}},
		abicheck.Struct{C: "struct rxe_send_wr", Go: sendWR{}},
		abicheck.Struct{C: "struct rxe_dma_info", Go: dmaInfo{}},
		abicheck.Struct{C: "struct rxe_send_wqe", Go: sendWQE{}},
		abicheck.Struct{C: "struct rxe_recv_wqe", Go: recvWQE{}},
		abicheck.Struct{C: "struct rxe_sge", Go: sge{}},
		// An rxe CQE slot starts with struct ib_uverbs_wc (rxe_cqe.uibwc).
		abicheck.Struct{C: "struct ib_uverbs_wc", Go: cqe{}},
	)
	abicheck.CheckConsts(t, []string{"rdma/rdma_user_rxe.h", "rdma/ib_user_ioctl_verbs.h", "rdma/ib_user_verbs.h"},
		abicheck.Const{C: "offsetof(struct rxe_queue_buf, data)", Go: ringDataOff},
		abicheck.Const{C: "offsetof(struct rxe_queue_buf, producer_index)", Go: ringProdOff},
		abicheck.Const{C: "offsetof(struct rxe_queue_buf, consumer_index)", Go: ringConsOff},
		abicheck.Const{C: "offsetof(struct rxe_send_wqe, dma.sge)", Go: sendWQESize},
		abicheck.Const{C: "offsetof(struct rxe_recv_wqe, dma.sge)", Go: recvWQESize},
		abicheck.Const{C: "sizeof(struct rxe_sge)", Go: sgeSize},
		abicheck.Const{C: "sizeof(struct ib_uverbs_wc)", Go: cqeMinSize},
		abicheck.Const{C: "sizeof(struct ib_uverbs_send_wr)", Go: doorbellWQE},
		abicheck.Const{C: "sizeof(struct rxe_create_cq_resp)", Go: createCQLen},
		abicheck.Const{C: "sizeof(struct rxe_create_qp_resp)", Go: createQPLen},
		abicheck.Const{C: "RDMA_DRIVER_RXE", Go: rxeDriverID},
	)
}
