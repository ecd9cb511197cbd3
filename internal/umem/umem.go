// Package umem is the only source of memory whose address gorping hands to the kernel or a
// device: command arenas with response pointers, ioctl attribute buffers, registered
// buffers, and the queues a driver shares through mmap. A Mem is always an mmap'd mapping,
// never Go heap, so the garbage collector can neither move nor free it while the kernel
// holds its address. Taking the address of anything else is not expressible with this API.
package umem

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Mem is one mapping; get one from Anon or MapShared. A nil or freed Mem has no bytes and
// address 0.
type Mem struct {
	b     []byte // the whole mapping; nil after Free
	fixed bool   // mapped by AnonAt (unmapped with MunmapPtr)
}

// Anon maps size bytes of zeroed, page-aligned, private anonymous memory.
func Anon(size int) (*Mem, error) {
	if size <= 0 {
		return nil, fmt.Errorf("umem: mapping size %d", size)
	}
	b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("umem: mmap %d bytes: %w", size, err)
	}
	return &Mem{b: b}, nil
}

// MapShared maps size bytes of fd at offset off, read-write and shared: a queue a kernel
// driver exports through its character device.
func MapShared(fd int, off uint64, size int) (*Mem, error) {
	if size <= 0 || off > 1<<62 {
		return nil, fmt.Errorf("umem: mapping of %d bytes at offset %#x", size, off)
	}
	b, err := unix.Mmap(fd, int64(off), size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	return &Mem{b: b}, nil
}

// Bytes returns the mapping. It is invalid after Free.
func (m *Mem) Bytes() []byte {
	if m == nil {
		return nil
	}
	return m.b[:len(m.b):len(m.b)]
}

// Len is the mapping's size in bytes (0 after Free).
func (m *Mem) Len() int {
	if m == nil {
		return 0
	}
	return len(m.b)
}

// Addr is the user virtual address of the mapping's first byte (0 after Free).
func (m *Mem) Addr() uint64 { return m.AddrAt(0) }

// AddrAt is the address of byte off of the mapping; it panics if off is out of range, and
// returns 0 after Free. This is the one place gorping turns memory into an integer address.
func (m *Mem) AddrAt(off int) uint64 {
	if m.Len() == 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(&m.b[off])))
}

// Free unmaps the memory. A second Free does nothing.
func (m *Mem) Free() error {
	if m == nil || m.b == nil {
		return nil
	}
	var err error
	if m.fixed {
		err = unix.MunmapPtr(unsafe.Pointer(&m.b[0]), uintptr(len(m.b)))
	} else {
		err = unix.Munmap(m.b)
	}
	m.b = nil
	if err != nil {
		return fmt.Errorf("umem: munmap: %w", err)
	}
	return nil
}
