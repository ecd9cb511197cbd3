//go:build !mmiorecord

package mmio

import "unsafe"

const recording = false

// Subscribe does nothing in a build without the mmiorecord tag (Recording is false): f is
// never called.
func Subscribe(f func(Event)) (cancel func()) { return func() {} }

func emit(op Op, dst, src unsafe.Pointer, n int) {}
