//go:build mmiorecord

package mmio

import (
	"testing"
	"unsafe"
)

// TestRecorderSeesEveryOperation: with the mmiorecord tag every operation reaches a
// subscriber in program order, with the destination and the bytes stored.
func TestRecorderSeesEveryOperation(t *testing.T) {
	var got []Event
	cancel := Subscribe(func(e Event) { got = append(got, e) })
	var src [8]uint64
	var dst [8]uint64
	var rec uint32
	for i := range src {
		src[i] = uint64(i+1) * 0x0101010101010101
	}
	ToDevice()
	StoreRecord(&rec, 0x01020304)
	WCStart()
	Store64(unsafe.Pointer(&dst[0]), unsafe.Pointer(&src[1]))
	Copy64(unsafe.Pointer(&dst[0]), unsafe.Pointer(&src[0]))
	Flush()
	FromDevice()
	cancel()
	ToDevice() // after cancel: not seen
	want := []Op{OpToDevice, OpRecord, OpWCStart, OpStore64, OpCopy64, OpFlush, OpFromDevice}
	if len(got) != len(want) {
		t.Fatalf("recorded %d operations %v, want %v", len(got), got, want)
	}
	for i, op := range want {
		if got[i].Op != op {
			t.Errorf("operation %d is %v, want %v", i, got[i].Op, op)
		}
	}
	if got[1].Addr != uintptr(unsafe.Pointer(&rec)) || got[1].Len != 4 || *(*uint32)(unsafe.Pointer(&got[1].Data[0])) != 0x01020304 {
		t.Errorf("record event %+v", got[1])
	}
	if got[3].Addr != uintptr(unsafe.Pointer(&dst[0])) || got[3].Len != 8 || got[3].Data[0] != 2 {
		t.Errorf("store64 event %+v", got[3])
	}
	if got[4].Len != 64 || got[4].Data[63] != 8 {
		t.Errorf("copy64 event %+v", got[4])
	}
	if rec != 0x01020304 || dst != src {
		t.Errorf("the operations did not store: rec %#x dst %#x", rec, dst)
	}
}
