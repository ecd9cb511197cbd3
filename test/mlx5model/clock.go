package mlx5model

import (
	"encoding/binary"
	"math/bits"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The modelled device clock: a 63-bit free-running counter at 156.25 MHz (6.4 ns a
// cycle, as a ConnectX-5's hca_core_clock), counted from the monotonic clock, stamped
// into every CQE of a CQ created with the timestamp flag. The kernel's clock_info page
// (struct mlx5_ib_clock_info, written out here from the uapi header's layout) converts
// cycles to nanoseconds: ns = nsec + ((cycles - last_cycles)·mult + frac) >> shift with
// mult/2^shift = 6.4; the engine refreshes it under the sequence count (odd while it
// writes), as the kernel does on its overflow period.
const (
	clockKHz     = 156250
	clockMask    = 1<<63 - 1
	clockShift   = 29
	clockMult    = 3435973837 // round(6.4 · 2^29)
	clockEpochNS = 1_700_000_000_000_000_000
	clockRefresh = 10 * time.Millisecond
)

type devClock struct {
	t0      time.Time
	page    []byte // PageSize bytes, mapped read-only by the provider
	updated time.Time
}

func newDevClock(pageSize int) (*devClock, error) {
	p, err := unix.Mmap(-1, 0, pageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, err
	}
	k := &devClock{t0: time.Now(), page: p}
	k.refresh(k.t0)
	return k, nil
}

// cycles is the counter at t.
func (k *devClock) cycles(t time.Time) uint64 {
	return uint64(t.Sub(k.t0).Nanoseconds()) * 5 / 32 & clockMask // 156.25 MHz = 5/32 per ns
}

// refresh rewrites the clock_info page for time t, under the sequence count.
func (k *devClock) refresh(t time.Time) {
	sign := (*uint32)(unsafe.Pointer(&k.page[0]))
	s := atomic.LoadUint32(sign)
	atomic.StoreUint32(sign, s|1) // updating
	c := k.cycles(t)
	// The time of that cycle count, exactly as the conversion sees it (frac 0).
	ns := cyclesNS(c)
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&k.page[8])), ns)
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&k.page[16])), c)
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&k.page[24])), 0) // frac
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&k.page[32])), clockMult)
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&k.page[36])), clockShift)
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&k.page[40])), clockMask)
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&k.page[48])), uint64(clockRefresh))
	atomic.StoreUint32(sign, (s|1)+1) // even again, and different
	k.updated = t
}

// cyclesNS is the clock's time at cycle count c: c·mult >> shift in 128 bits (the
// product outgrows 64 bits after half a minute), from the epoch.
func cyclesNS(c uint64) uint64 {
	hi, lo := bits.Mul64(c, clockMult)
	return clockEpochNS + (hi<<(64-clockShift) | lo>>clockShift)
}

// stamp writes the counter now into a CQE (big-endian, byte 48).
func (k *devClock) stamp(cqe []byte) {
	binary.BigEndian.PutUint64(cqe[48:], k.cycles(time.Now()))
}
