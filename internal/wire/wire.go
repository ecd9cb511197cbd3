// Package wire converts fixed-layout ABI structs to and from the bytes the kernel reads
// and writes. The structs mirror uapi structs field by field with fixed-width types (each
// package checks their sizes at compile time and their offsets with the abicheck tag), and
// the kernel uses the CPU's byte order, as Go does in memory, so the conversion is a view.
package wire

import "unsafe"

// Bytes views *p as its bytes. The slice aliases *p.
func Bytes[T any](p *T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(p)), unsafe.Sizeof(*p))
}

// Decode copies b into *p. A short b leaves the tail of *p zero, which matches the
// kernel's own zero-extension of shorter structs; a longer b is cut.
func Decode[T any](p *T, b []byte) {
	dst := Bytes(p)
	clear(dst)
	copy(dst, b)
}

// Size is the size of T in bytes.
func Size[T any]() int {
	var v T
	return int(unsafe.Sizeof(v))
}
