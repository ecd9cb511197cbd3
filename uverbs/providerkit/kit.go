// Package providerkit is what the vendor providers (uverbs/bnxtre, irdma, hns, mlx5)
// share beside their formats and doorbells: the table that finds a QP by the handle or
// number its CQEs carry, ring sizing, whole-word access to memory the device shares,
// views of an SGE's buffer and the preallocated errors of the posting path. A new
// provider takes these and writes its WQE, CQE and doorbell formats
// (docs/adding-a-provider.md).
package providerkit

import (
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Table finds a QP (V) by the key its CQEs carry: a handle the provider reserved before
// CREATE_QP (Reserve) or the QP number. Get takes a read lock and allocates nothing.
type Table[K comparable, V any] struct {
	mu   sync.RWMutex
	next uint64
	m    map[K]*V
}

// Reserve returns a new handle: 1, 2, ... (0 is never one).
func (t *Table[K, V]) Reserve() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.next++
	return t.next
}

// Set maps k to v; a nil v removes k.
func (t *Table[K, V]) Set(k K, v *V) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if v == nil {
		delete(t.m, k)
		return
	}
	if t.m == nil {
		t.m = make(map[K]*V)
	}
	t.m[k] = v
}

// Get is the QP of k, nil if none.
func (t *Table[K, V]) Get(k K) *V {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.m[k]
}

// Align rounds n up to a multiple of a.
func Align(n, a int) int { return (n + a - 1) / a * a }

// RoundupPow2 is the smallest power of two >= n (1 for 0 and 1).
func RoundupPow2(n uint32) uint32 {
	if n <= 1 {
		return 1
	}
	return 1 << bits.Len32(n-1)
}

// Log2 is the base-2 logarithm of a power of two n (of n rounded up to one otherwise).
func Log2(n uint32) uint32 {
	if n <= 1 {
		return 0
	}
	return uint32(bits.Len32(n - 1))
}

// Load32, Store32, Load64 and Store64 access the word at b[off] whole: a word the device
// writes last or reads first (a CQE's or WQE's valid or owner word, a shadow area). One
// atomic load or store also orders the plain accesses around it for the race detector as
// the barriers do for the device.
func Load32(b []byte, off int) uint32 { return atomic.LoadUint32((*uint32)(unsafe.Pointer(&b[off]))) }

// Store32: see Load32.
func Store32(b []byte, off int, v uint32) {
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&b[off])), v)
}

// Load64: see Load32.
func Load64(b []byte, off int) uint64 { return atomic.LoadUint64((*uint64)(unsafe.Pointer(&b[off]))) }

// Store64: see Load32.
func Store64(b []byte, off int, v uint64) {
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&b[off])), v)
}

// UserBytes views n bytes of process memory at addr (an SGE's buffer, for inline data).
// The address comes from the caller's SGE, which registered memory backs.
func UserBytes(addr uint64, n uint32) []byte {
	if n == 0 {
		return nil
	}
	p := *(*unsafe.Pointer)(unsafe.Pointer(&addr))
	return unsafe.Slice((*byte)(p), n)
}

// ShortResp is the error for a driver response of got bytes to cmd ("CREATE_CQ") where
// the provider needs want; nil if got is enough.
func ShortResp(driver, cmd string, got, want int) error {
	if got >= want {
		return nil
	}
	return fmt.Errorf("%s: %s driver response is %d bytes, want %d", driver, cmd, got, want)
}

// CloseOnce marks a QP closed under its work queues' locks (held in the order given, as
// the posting paths take them) and reports whether this call did: a second Close, or
// one racing a post, finds it done.
func CloseOnce(closed *bool, sq, rq *sync.Mutex) bool {
	sq.Lock()
	rq.Lock()
	defer sq.Unlock()
	defer rq.Unlock()
	if *closed {
		return false
	}
	*closed = true
	return true
}

// FlowLabelSport is the kernel's rdma_get_udp_sport (include/rdma/ib_verbs.h): the port
// from the flow label fl, or from the QPNs' label (rdma_calc_flow_label) when fl is 0.
func FlowLabelSport(fl, lqpn, rqpn uint32) uint16 {
	if fl == 0 {
		v := uint64(lqpn) * uint64(rqpn)
		v ^= v >> 20
		v ^= v >> 40
		fl = uint32(v & 0xFFFFF)
	}
	// rdma_flow_label_to_udp_sport: the label's low 14 bits folded with its high 6, in
	// the dynamic port range.
	return uint16((fl&0x3FFF)^((fl&0xFC000)>>14)) | 0xC000
}

// KernelAtLeast reports whether kernel (major, minor) is major.minor or later.
func KernelAtLeast(kernel [2]int, major, minor int) bool {
	return kernel[0] > major || kernel[0] == major && kernel[1] >= minor
}
