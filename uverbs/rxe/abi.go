package rxe

// The rxe ABI (rdma/rdma_user_rxe.h): the structs and their sizes are generated into
// abi_gen.go (abi.spec, make generate); abi_layout_test.go (tag abicheck) checks them
// against the header. SGEs in the WQEs are struct rxe_sge; CQ slots start with struct
// ib_uverbs_wc (cqe).

const (
	ringDataOff = sizeofQueueBuf // offsetof(struct rxe_queue_buf, data)
	ringProdOff = 128
	ringConsOff = 256
	sendWQESize = sizeofSendWQE // without dma.sge[]
	recvWQESize = sizeofRecvWQE // without dma.sge[]
	sgeSize     = sizeofSge
	cqeMinSize  = sizeofCqe // struct ib_uverbs_wc
	createCQLen = 16
	createQPLen = 32
	doorbellWQE = 56 // sizeof(struct ib_uverbs_send_wr): the kernel wants wqe_size ≥ this
	rxeDriverID = 14
	rxeABIMin   = 1
	rxeABIMax   = 2
	rxeDriver   = "rxe"
)
