package rping

import (
	"encoding/binary"
	"fmt"
)

// advertLen is the size of every control message, both the client's buffer
// adverts and the server's (all-zero) go-aheads.
const advertLen = 16

// advert is rping's struct rping_rdma_info: where the peer may RDMA READ from or
// WRITE to. On the wire: be64 buf, be32 rkey, be32 size (16 bytes, no padding).
type advert struct {
	addr uint64 // virtual address of the buffer (the MR is registered with iova == addr)
	rkey uint32
	size uint32 // the sender's -S
}

// encode writes a into b[:16]; b must be at least advertLen long.
func (a advert) encode(b []byte) {
	_ = b[advertLen-1]
	binary.BigEndian.PutUint64(b[0:8], a.addr)
	binary.BigEndian.PutUint32(b[8:12], a.rkey)
	binary.BigEndian.PutUint32(b[12:16], a.size)
}

// decodeAdvert reads an advert from b[:16]; b must be at least advertLen long.
// It does not judge the values; see check.
func decodeAdvert(b []byte) advert {
	_ = b[advertLen-1]
	return advert{
		addr: binary.BigEndian.Uint64(b[0:8]),
		rkey: binary.BigEndian.Uint32(b[8:12]),
		size: binary.BigEndian.Uint32(b[12:16]),
	}
}

// check rejects adverts no rping client can send. rping itself trusts them and
// lets the NIC fail (or not) the RDMA operation; gorping refuses up front so a
// broken or hostile peer gets a clear error instead of an obscure CQ status.
func (a advert) check() error {
	if a.size < MinSize || a.size > MaxSize {
		return fmt.Errorf("size %d (valid range is %d to %d)", int32(a.size), MinSize, MaxSize)
	}
	if a.addr == 0 || a.addr+uint64(a.size)-1 < a.addr { // zero, or wraps past 2^64
		return fmt.Errorf("buffer address %#x with size %d", a.addr, a.size)
	}
	return nil
}
