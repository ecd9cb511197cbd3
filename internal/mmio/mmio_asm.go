//go:build amd64 || arm64

package mmio

import "unsafe"

const supported = true

// Implemented in mmio_$GOARCH.s. noescape: they keep no pointer.

//go:noescape
func store64(dst, src unsafe.Pointer)

//go:noescape
func store32(dst, src unsafe.Pointer)

//go:noescape
func copy64(dst, src unsafe.Pointer)

func toDevice()
func fromDevice()
func wcStart()
func flush()
