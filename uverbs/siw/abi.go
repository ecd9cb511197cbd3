package siw

// The siw ABI (rdma/siw-abi.h): the structs, their sizes, the opcodes and the WQE and
// notify flags are generated into abi_gen.go (abi.spec, make generate);
// abi_layout_test.go (tag abicheck) checks them against the header. Here: its macros.

const (
	siwDriverID = 18 // RDMA_DRIVER_SIW
	siwDriver   = "siw"
	siwABI      = 1 // SIW_ABI_VERSION
	maxSGE      = 6 // SIW_MAX_SGE
	maxInline   = 80
	sqeSize     = sizeofSqe
	rqeSize     = sizeofRqe
	cqeSize     = sizeofCqe
	cqCtrlSize  = sizeofCqCtrl
	wordOff     = 8       // offsetof flags: flags, num_sge and opcode of SQE/RQE, flags..status of a CQE
	invalKey    = 0x90000 // SIW_INVAL_UOBJ_KEY: the kernel could not export the queue

	allocCtxLen = 8
	createCQLen = 16
	createQPLen = 32
	regMRLen    = 8
)
