//go:build !amd64 && !arm64

package mmio

import "unsafe"

const supported = false

func unsupported() { panic("mmio: no barrier implementation for this architecture") }

func store64(dst, src unsafe.Pointer) { unsupported() }
func store32(dst, src unsafe.Pointer) { unsupported() }
func copy64(dst, src unsafe.Pointer)  { unsupported() }
func toDevice()                       { unsupported() }
func fromDevice()                     { unsupported() }
func wcStart()                        { unsupported() }
func flush()                          { unsupported() }
