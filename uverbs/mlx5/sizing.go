package mlx5

import (
	"errors"
	"fmt"
	"math/bits"
)

// Queue sizing follows libmlx5's rules, so a QP gets the same geometry (and reports the same
// capabilities) as under rdma-core on the same device.

// roundupPow2 returns the smallest power of two >= n (n >= 1).
func roundupPow2(n uint64) uint64 {
	if n <= 1 {
		return 1
	}
	return 1 << bits.Len64(n-1)
}

func align(n, a int) int { return (n + a - 1) / a * a }

// cqGeometry is a CQ's size: ncqe entries (a power of two) of cqeSize bytes. The kernel is
// told ncqe-1, and reports ncqe-1 back as the depth.
func cqEntries(want int) (int, error) {
	if want < 1 || want > 1<<24-1 {
		return 0, fmt.Errorf("mlx5: CQ depth %d out of range (1..%d)", want, 1<<24-1)
	}
	return int(roundupPow2(uint64(want) + 1)), nil
}

// devLimits are the context's queue limits from GET_CONTEXT.
type devLimits struct {
	maxSQDescSz  int // bytes of one send WQE
	maxRQDescSz  int // bytes of one receive WQE
	maxSendWQEBB int // send queue basic blocks
	maxRecvWR    int
}

// qpGeometry is the buffer layout and the capabilities of one RC/UC QP.
type qpGeometry struct {
	sqWQESize  int // bytes reserved per send WQE (multiple of 64)
	sqWQECnt   int // 64-byte blocks in the SQ (power of two), 0 without an SQ
	sqMaxPost  int // send WQEs that may be outstanding
	maxInline  int
	maxSendSGE int

	rqWQECnt   int // receive slots (power of two), 0 without an RQ
	rqWQEShift int // log2 of the receive slot size
	rqMaxPost  int
	maxRecvSGE int // data segments per receive slot

	rqBytes, sqBytes int // RQ at offset 0, SQ at rqBytes
}

// sqOverheadRC is libmlx5's default send WQE overhead for RC and UC: it reserves room for
// the largest operation it allows on such a QP, a memory-window bind (control segment, UMR
// control 48, mkey context 64, 64), even though gorping never posts one. Matching it keeps
// the queue geometry and the reported caps identical to rdma-core's.
const sqOverheadRC = ctrlSegSize + 48 + 64 + 64

var errQPCaps = errors.New("mlx5: requested QP capabilities exceed the device's")

// sizeQP computes the geometry for the requested capabilities (rdma-core's
// mlx5_calc_sq_size/mlx5_calc_rq_size for RC/UC without SRQ or signatures).
func sizeQP(lim devLimits, maxSendWR, maxRecvWR, maxSendSGE, maxRecvSGE, maxInline int) (qpGeometry, error) {
	var g qpGeometry
	if maxSendWR > 0 {
		size := sqOverheadRC
		inl := 0
		if maxInline > 0 {
			inl = size + align(inlineHdrLen+maxInline, 16)
		}
		if maxSendSGE > (lim.maxSQDescSz-size)/dataSegSize {
			return g, fmt.Errorf("%w: %d send SGEs", errQPCaps, maxSendSGE)
		}
		size += maxSendSGE * dataSegSize
		tot := max(size, inl)
		if tot > lim.maxSQDescSz {
			return g, fmt.Errorf("%w: send WQE of %d bytes (device max %d)", errQPCaps, tot, lim.maxSQDescSz)
		}
		wqe := align(tot, sendWQEBB)
		if maxSendWR > 0x7fffffff/lim.maxSQDescSz {
			return g, fmt.Errorf("%w: %d send WRs", errQPCaps, maxSendWR)
		}
		wq := int(roundupPow2(uint64(maxSendWR * wqe)))
		if wq/sendWQEBB > lim.maxSendWQEBB {
			return g, fmt.Errorf("%w: %d send WRs need %d WQE blocks (device max %d)", errQPCaps, maxSendWR, wq/sendWQEBB, lim.maxSendWQEBB)
		}
		g.sqWQESize = wqe
		g.sqWQECnt = wq / sendWQEBB
		g.sqMaxPost = wq / wqe
		g.maxInline = wqe - sqOverheadRC - inlineHdrLen
		g.maxSendSGE = maxSendSGE
		g.sqBytes = wq
	}
	if maxRecvWR > 0 {
		if maxRecvWR > lim.maxRecvWR {
			return g, fmt.Errorf("%w: %d receive WRs (device max %d)", errQPCaps, maxRecvWR, lim.maxRecvWR)
		}
		size := dataSegSize * max(maxRecvSGE, 1)
		if size > lim.maxRQDescSz {
			return g, fmt.Errorf("%w: %d receive SGEs", errQPCaps, maxRecvSGE)
		}
		rwqe := int(roundupPow2(uint64(size)))
		if rwqe > lim.maxRQDescSz {
			return g, fmt.Errorf("%w: receive WQE of %d bytes (device max %d)", errQPCaps, rwqe, lim.maxRQDescSz)
		}
		wq := max(int(roundupPow2(uint64(maxRecvWR)))*rwqe, sendWQEBB)
		g.rqWQECnt = wq / rwqe
		g.rqWQEShift = bits.Len(uint(rwqe)) - 1
		g.rqMaxPost = g.rqWQECnt
		g.maxRecvSGE = rwqe / dataSegSize
		g.rqBytes = wq
	}
	return g, nil
}

// uarMmapOffset is the mmap offset of static UAR system page idx: the command goes in bits
// 8..15 of the page offset, the index in bits 0..7 (and 16..23 for indices above 255).
func uarMmapOffset(cmd, idx, pageSize int) int64 {
	pgoff := (idx>>8)<<16 | cmd<<8 | idx&0xff
	return int64(pgoff) * int64(pageSize)
}
