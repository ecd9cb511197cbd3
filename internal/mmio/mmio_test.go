package mmio

import (
	"testing"
	"unsafe"
)

func TestStoreAndCopy(t *testing.T) {
	var src, dst [8]uint64
	for i := range src {
		src[i] = 0x0102030405060708 * uint64(i+1)
	}
	Store64(unsafe.Pointer(&dst[3]), unsafe.Pointer(&src[5]))
	if dst[3] != src[5] || dst[2] != 0 || dst[4] != 0 {
		t.Fatalf("Store64 wrote %#x around %#x", dst, src[5])
	}
	var w [4]uint32
	Store32(unsafe.Pointer(&w[1]), unsafe.Pointer(&src[0]))
	if w[1] != uint32(src[0]) || w[0] != 0 || w[2] != 0 {
		t.Fatalf("Store32 wrote %#x from %#x", w, src[0])
	}
	dst = [8]uint64{}
	Copy64(unsafe.Pointer(&dst), unsafe.Pointer(&src))
	if dst != src {
		t.Fatalf("Copy64: got %#x, want %#x", dst, src)
	}
	ToDevice()
	FromDevice()
	WCStart()
	Flush()
}
