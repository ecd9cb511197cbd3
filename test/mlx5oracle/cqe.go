package mlx5oracle

import "encoding/binary"

var be = binary.BigEndian

// CQE opcodes (op_own >> 4) of a 64-byte mlx5 CQE.
const (
	CQEReq        = 0
	CQERespWRImm  = 1
	CQERespSend   = 2
	CQERespSendIm = 3
	CQERespSendIv = 4
	CQEReqErr     = 13
	CQERespErr    = 14
	CQEInvalid    = 15
)

// CQE describes one 64-byte mlx5 CQE (fields as in struct mlx5_cqe64 /
// mlx5_err_cqe of the mlx5 user ABI).
type CQE struct {
	Opcode    uint8  // op_own >> 4
	Owner     uint8  // op_own bit 0 (the lap's parity)
	Inline    uint8  // op_own bits 2-3 (scatter-to-CQE: 1 = 32 bytes, 2 = 64 bytes)
	FlagsRQPN uint32 // @24: src QP (low 24), SL (24-27), GRH (28-29)
	SLID      uint16 // @22
	MLPath    uint8  // @17
	UIdx      uint32 // @32 srqn_uidx: the QP's user index (cqe_version 1)
	Imm       uint32 // @36 imm_inval_pkey (written big-endian)
	ByteCnt   uint32 // @44
	SOpQPN    uint32 // @56 sop_drop_qpn: WQE opcode << 24 | qpn (requester), qpn (responder)
	WQECount  uint16 // @60 wqe_counter
	VendorErr uint8  // @54 error CQEs: vendor_err_synd
	Syndrome  uint8  // @55 error CQEs: syndrome
	Timestamp uint64 // @48 completion timestamp (device cycles)
	Data      []byte // @0.. scatter-to-CQE payload (up to 32 bytes at offset 0)
}

// Bytes encodes c.
func (c CQE) Bytes() [64]byte {
	var b [64]byte
	b[17] = c.MLPath
	be.PutUint16(b[22:], c.SLID)
	be.PutUint32(b[24:], c.FlagsRQPN)
	be.PutUint32(b[32:], c.UIdx)
	be.PutUint32(b[36:], c.Imm)
	be.PutUint32(b[44:], c.ByteCnt)
	be.PutUint64(b[48:], c.Timestamp)
	if c.Opcode == CQEReqErr || c.Opcode == CQERespErr {
		b[54] = c.VendorErr
		b[55] = c.Syndrome
	}
	be.PutUint32(b[56:], c.SOpQPN)
	be.PutUint16(b[60:], c.WQECount)
	b[63] = c.Opcode<<4 | (c.Inline&3)<<2 | c.Owner&1
	copy(b[:32], c.Data) // scatter-to-CQE payload overlays the first 32 bytes
	return b
}
