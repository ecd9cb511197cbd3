// Package mmio holds the few instructions a hardware RDMA provider needs that Go has no
// intrinsic for: barriers between CPU stores, DMA by the NIC and write-combining MMIO, a
// single 64-bit store to device memory, and the 64-byte BlueFlame copy. They are written
// in per-architecture assembly (amd64, arm64) so the binary stays cgo-free. The 32-bit
// store is for devices whose doorbell registers take 32-bit writes.
//
// The barrier names follow what each one orders:
//
//	ToDevice    normal-memory stores (WQEs, doorbell records) before later stores the
//	            device observes (the doorbell record, the MMIO doorbell)
//	FromDevice  a load of device-written memory (a CQE's owner byte) before later loads
//	            (the rest of the CQE)
//	WCStart     system-memory stores before a write-combining MMIO store
//	Flush       push write-combining MMIO stores out of the CPU; also orders them
//
// On amd64 ToDevice is only a compiler barrier (stores are not reordered with stores);
// FromDevice is LFENCE, WCStart and Flush are SFENCE. On arm64 all stores use DSB ST and
// FromDevice uses DSB LD: the full-system forms libmlx5 44 (Debian bookworm) uses, stronger
// than the outer-shareable DMB later releases moved ToDevice/FromDevice to.
package mmio

import (
	"sync/atomic"
	"unsafe"
)

// Supported reports whether this architecture has real implementations. Elsewhere the
// functions panic, and providers that need them must not register.
const Supported = supported

// Every function below reports itself to the recorder (record.go) after it ran, in builds
// with the mmiorecord tag only; elsewhere `recording` is a false constant and the calls
// compile away.

// ToDevice orders earlier normal-memory stores before later stores the device observes.
func ToDevice() {
	toDevice()
	if recording {
		emit(OpToDevice, nil, nil, 0)
	}
}

// FromDevice orders an earlier load of device-written memory before later loads.
func FromDevice() {
	fromDevice()
	if recording {
		emit(OpFromDevice, nil, nil, 0)
	}
}

// WCStart orders earlier system-memory stores before a following write-combining store.
func WCStart() {
	wcStart()
	if recording {
		emit(OpWCStart, nil, nil, 0)
	}
}

// Flush flushes write-combining stores out of the CPU.
func Flush() {
	flush()
	if recording {
		emit(OpFlush, nil, nil, 0)
	}
}

// Store64 stores the 8 bytes at src to dst with one 64-bit store instruction (never a
// locked read-modify-write). Both must be 8-byte aligned. The bytes are copied as they lie
// in memory, so a big-endian doorbell built in memory reaches the device unchanged.
func Store64(dst, src unsafe.Pointer) {
	store64(dst, src)
	if recording {
		emit(OpStore64, dst, src, 8)
	}
}

// Store32 stores the 4 bytes at src to dst with one 32-bit store instruction: a doorbell
// register that takes 32-bit writes (irdma's). Both must be 4-byte aligned.
func Store32(dst, src unsafe.Pointer) {
	store32(dst, src)
	if recording {
		emit(OpStore32, dst, src, 4)
	}
}

// Copy64 copies 64 bytes from src to dst in ascending address order with 64-bit (amd64)
// or 128-bit vector (arm64) stores: one BlueFlame chunk. Both must be 8-byte aligned.
func Copy64(dst, src unsafe.Pointer) {
	copy64(dst, src)
	if recording {
		emit(OpCopy64, dst, src, 64)
	}
}

// StoreRecord publishes a doorbell-record word in system memory (a QP's receive or send
// counter, a CQ's consumer index or arm word) with one aligned 32-bit store; v is the
// value as it must lie in memory (already big-endian). The store is atomic so that an
// in-process device model reading the record is properly ordered with it; the device
// itself only needs the barriers around it.
func StoreRecord(p *uint32, v uint32) {
	atomic.StoreUint32(p, v)
	if recording {
		emit(OpRecord, unsafe.Pointer(p), unsafe.Pointer(&v), 4)
	}
}
