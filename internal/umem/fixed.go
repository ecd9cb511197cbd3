package umem

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// AnonAt maps size bytes of zeroed private anonymous memory at exactly addr (page-aligned),
// failing if anything is mapped there already. It exists for tests that must reproduce
// the addresses of another run (the mlx5 oracle's registered buffers).
func AnonAt(addr uint64, size int) (*Mem, error) {
	if size <= 0 || addr%uint64(unix.Getpagesize()) != 0 {
		return nil, fmt.Errorf("umem: mapping of %d bytes at %#x", size, addr)
	}
	want := *(*unsafe.Pointer)(unsafe.Pointer(&addr))
	p, err := unix.MmapPtr(-1, 0, want, uintptr(size), unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_FIXED_NOREPLACE)
	if err != nil {
		return nil, fmt.Errorf("umem: mmap %d bytes at %#x: %w", size, addr, err)
	}
	if p != want { // kernels before 4.17 treat the flag as a hint
		unix.MunmapPtr(p, uintptr(size))
		return nil, fmt.Errorf("umem: mmap at %#x landed at %p", addr, p)
	}
	return &Mem{b: unsafe.Slice((*byte)(p), size), fixed: true}, nil
}
