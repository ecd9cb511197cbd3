//go:build abicheck

package mlx5

import (
	"testing"

	"github.com/gorping/gorping/test/abicheck"
)

func TestABILayout(t *testing.T) {
	t.Parallel()
	abicheck.Check(t, []string{"rdma/mlx5-abi.h"},
		abicheck.Struct{C: "struct mlx5_ib_alloc_ucontext_req_v2", Go: allocUcontextReq{}},
		abicheck.Struct{C: "struct mlx5_ib_alloc_ucontext_resp", Go: allocUcontextResp{}},
		abicheck.Struct{C: "struct mlx5_ib_alloc_pd_resp", Go: allocPDResp{}},
		abicheck.Struct{C: "struct mlx5_ib_create_cq", Go: createCQReq{}},
		abicheck.Struct{C: "struct mlx5_ib_create_cq_resp", Go: createCQResp{}},
		abicheck.Struct{C: "struct mlx5_ib_create_qp", Go: createQPReq{}},
		abicheck.Struct{C: "struct mlx5_ib_create_qp_resp", Go: createQPResp{}},
		abicheck.Struct{C: "struct mlx5_ib_clock_info", Go: clockInfo{}},
	)
	abicheck.CheckConsts(t, []string{"rdma/mlx5-abi.h", "rdma/ib_user_ioctl_verbs.h"},
		abicheck.Const{C: "sizeof(struct mlx5_ib_alloc_ucontext_req_v2)", Go: allocUcontextReqLen},
		abicheck.Const{C: "sizeof(struct mlx5_ib_alloc_ucontext_resp)", Go: allocUcontextRespLen},
		abicheck.Const{C: "sizeof(struct mlx5_ib_alloc_pd_resp)", Go: allocPDRespLen},
		abicheck.Const{C: "sizeof(struct mlx5_ib_create_cq)", Go: createCQReqLen},
		abicheck.Const{C: "sizeof(struct mlx5_ib_create_cq_resp)", Go: createCQRespLen},
		abicheck.Const{C: "sizeof(struct mlx5_ib_create_qp)", Go: createQPReqLen},
		abicheck.Const{C: "sizeof(struct mlx5_ib_create_qp_resp)", Go: createQPRespLen},
		abicheck.Const{C: "RDMA_DRIVER_MLX5", Go: mlx5DriverID},
		abicheck.Const{C: "MLX5_LIB_CAP_4K_UAR", Go: libCap4KUAR},
		abicheck.Const{C: "MLX5_LIB_CAP_DYN_UAR", Go: libCapDynUAR},
		abicheck.Const{C: "MLX5_IB_MMAP_REGULAR_PAGE", Go: mmapRegularPage},
		abicheck.Const{C: "MLX5_IB_MMAP_CLOCK_INFO", Go: mmapClockInfo},
		abicheck.Const{C: "MLX5_IB_CLOCK_INFO_V1", Go: clockInfoV1},
		abicheck.Const{C: "MLX5_IB_CLOCK_INFO_KERNEL_UPDATING", Go: clockInfoUpdating},
		abicheck.Const{C: "MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_REAL_TIME_TS", Go: respMaskRealTimeTS},
		abicheck.Const{C: "MLX5_IB_CREATE_CQ_FLAGS_REAL_TIME_TS", Go: createCQFlagRealTimeTS},
	)
	// The device formats: infiniband/mlx5dv.h (libibverbs-dev) describes them.
	dv := []string{"infiniband/mlx5dv.h"}
	abicheck.CheckConsts(t, dv,
		abicheck.Const{C: "offsetof(struct mlx5_cqe64, timestamp)", Go: cqeTimestamp},
		abicheck.Const{C: "MLX5_SEND_WQE_BB", Go: sendWQEBB},
		abicheck.Const{C: "sizeof(struct mlx5_wqe_ctrl_seg)", Go: ctrlSegSize},
		abicheck.Const{C: "sizeof(struct mlx5_wqe_raddr_seg)", Go: raddrSegSize},
		abicheck.Const{C: "sizeof(struct mlx5_wqe_data_seg)", Go: dataSegSize},
		abicheck.Const{C: "sizeof(struct mlx5_wqe_inl_data_seg)", Go: inlineHdrLen},
		abicheck.Const{C: "MLX5_INLINE_SEG", Go: inlineSeg},
		abicheck.Const{C: "MLX5_INVALID_LKEY", Go: invalidLKey},
		abicheck.Const{C: "offsetof(struct mlx5_wqe_ctrl_seg, opmod_idx_opcode)", Go: ctrlOpmodIdxOpcode},
		abicheck.Const{C: "offsetof(struct mlx5_wqe_ctrl_seg, qpn_ds)", Go: ctrlQpnDs},
		abicheck.Const{C: "offsetof(struct mlx5_wqe_ctrl_seg, signature)", Go: ctrlSignature},
		abicheck.Const{C: "offsetof(struct mlx5_wqe_ctrl_seg, fm_ce_se)", Go: ctrlFmCeSe},
		abicheck.Const{C: "offsetof(struct mlx5_wqe_ctrl_seg, imm)", Go: ctrlImm},
		abicheck.Const{C: "offsetof(struct mlx5_wqe_raddr_seg, raddr)", Go: raddrRaddr},
		abicheck.Const{C: "offsetof(struct mlx5_wqe_raddr_seg, rkey)", Go: raddrRkey},
		abicheck.Const{C: "offsetof(struct mlx5_wqe_data_seg, byte_count)", Go: dataByteCount},
		abicheck.Const{C: "offsetof(struct mlx5_wqe_data_seg, lkey)", Go: dataLKey},
		abicheck.Const{C: "offsetof(struct mlx5_wqe_data_seg, addr)", Go: dataAddr},
		abicheck.Const{C: "MLX5_WQE_CTRL_CQ_UPDATE", Go: ctrlCQUpdate},
		abicheck.Const{C: "MLX5_WQE_CTRL_SOLICITED", Go: ctrlSolicited},
		abicheck.Const{C: "MLX5_WQE_CTRL_FENCE", Go: ctrlFence},
		abicheck.Const{C: "MLX5_OPCODE_NOP", Go: opNOP},
		abicheck.Const{C: "MLX5_OPCODE_RDMA_WRITE", Go: opRDMAWrite},
		abicheck.Const{C: "MLX5_OPCODE_RDMA_WRITE_IMM", Go: opRDMAWriteImm},
		abicheck.Const{C: "MLX5_OPCODE_SEND", Go: opSend},
		abicheck.Const{C: "MLX5_OPCODE_SEND_IMM", Go: opSendImm},
		abicheck.Const{C: "MLX5_OPCODE_SEND_INVAL", Go: opSendInval},
		abicheck.Const{C: "MLX5_OPCODE_RDMA_READ", Go: opRDMARead},
		abicheck.Const{C: "MLX5_OPCODE_ATOMIC_CS", Go: opAtomicCS},
		abicheck.Const{C: "MLX5_OPCODE_ATOMIC_FA", Go: opAtomicFA},
		abicheck.Const{C: "sizeof(struct mlx5_cqe64)", Go: cqeSize},
		abicheck.Const{C: "offsetof(struct mlx5_cqe64, srqn_uidx)", Go: cqeSrqnUidx},
		abicheck.Const{C: "offsetof(struct mlx5_cqe64, imm_inval_pkey)", Go: cqeImmInvalPkey},
		abicheck.Const{C: "offsetof(struct mlx5_cqe64, byte_cnt)", Go: cqeByteCnt},
		abicheck.Const{C: "offsetof(struct mlx5_cqe64, sop_drop_qpn)", Go: cqeSopDropQpn},
		abicheck.Const{C: "offsetof(struct mlx5_cqe64, wqe_counter)", Go: cqeWqeCounter},
		abicheck.Const{C: "offsetof(struct mlx5_cqe64, signature)", Go: cqeSignature},
		abicheck.Const{C: "offsetof(struct mlx5_cqe64, op_own)", Go: cqeOpOwn},
		abicheck.Const{C: "offsetof(struct mlx5_cqe64, flags_rqpn)", Go: cqeFlagsRqpn},
		abicheck.Const{C: "offsetof(struct mlx5_cqe64, slid)", Go: cqeSlid},
		abicheck.Const{C: "offsetof(struct mlx5_cqe64, ml_path)", Go: cqeMlPath},
		abicheck.Const{C: "offsetof(struct mlx5_err_cqe, vendor_err_synd)", Go: cqeVendorErrSynd},
		abicheck.Const{C: "offsetof(struct mlx5_err_cqe, syndrome)", Go: cqeSyndrome},
		abicheck.Const{C: "MLX5_CQE_OWNER_MASK", Go: cqeOwnerMask},
		abicheck.Const{C: "MLX5_CQE_REQ", Go: cqeReq},
		abicheck.Const{C: "MLX5_CQE_RESP_WR_IMM", Go: cqeRespWrImm},
		abicheck.Const{C: "MLX5_CQE_RESP_SEND", Go: cqeRespSend},
		abicheck.Const{C: "MLX5_CQE_RESP_SEND_IMM", Go: cqeRespSendImm},
		abicheck.Const{C: "MLX5_CQE_RESP_SEND_INV", Go: cqeRespSendInv},
		abicheck.Const{C: "MLX5_CQE_REQ_ERR", Go: cqeReqErr},
		abicheck.Const{C: "MLX5_CQE_RESP_ERR", Go: cqeRespErr},
		abicheck.Const{C: "MLX5_CQE_INVALID", Go: cqeInvalid},
		abicheck.Const{C: "MLX5_CQ_DOORBELL", Go: cqDoorbellOffset},
		abicheck.Const{C: "MLX5_CQ_DB_REQ_NOT_SOL", Go: cqDBReqNotSol},
		abicheck.Const{C: "MLX5_RCV_DBR", Go: dbrRecv},
		abicheck.Const{C: "MLX5_SND_DBR", Go: dbrSend},
	)
	var synd []abicheck.Const
	for s, name := range syndromeNames {
		synd = append(synd, abicheck.Const{C: "MLX5_CQE_SYNDROME_" + name, Go: int64(s)})
	}
	abicheck.CheckConsts(t, dv, synd...)
}
