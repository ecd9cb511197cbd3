package mlx5

import (
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"
)

// Completion timestamps. A CQ created with driver.CQTimestamps
// (IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION) gets the device's clock in every CQE
// (mlx5_cqe64.timestamp, big-endian). Which clock: mlx5_ib gives a QP whose CQs carry that
// flag the free-running format (a cycle counter) and refuses to create the QP
// (EOPNOTSUPP) if the device cannot stamp free-running; the real-time format
// (seconds<<32 | nanoseconds) is used only for CQs created with the driver flag
// MLX5_IB_CREATE_CQ_FLAGS_REAL_TIME_TS, which gorping never sets. So a timestamp here is
// always cycles, converted to nanoseconds with the kernel's clock_info page, exactly as
// libmlx5's mlx5dv_ts_to_ns does (the oracle checks the arithmetic against that C
// function on a million vectors).

// clockPage is the mapped clock_info page (nil when the kernel offers none).
type clockPage struct {
	b  []byte
	ci *clockInfo
}

// snapshot reads the page under its sequence count: retried while the kernel is writing
// (odd sign) or wrote meanwhile. libmlx5 gives up (EBUSY) after 10 tries; a writer
// preempted mid-update on a busy host outlasts those, and the ping would lose its NIC
// time, so after them it yields the processor between tries, for a bounded time.
func (p *clockPage) snapshot() (clockInfo, bool) {
	sign := (*uint32)(unsafe.Pointer(&p.ci.Sign))
	var giveUp time.Time
	for try := 0; ; try++ {
		if try >= snapshotSpins {
			now := time.Now()
			if giveUp.IsZero() {
				giveUp = now.Add(snapshotPatience)
			} else if now.After(giveUp) {
				break
			}
			runtime.Gosched()
		}
		s := atomic.LoadUint32(sign)
		if s&clockInfoUpdating != 0 {
			continue
		}
		c := clockInfo{
			Nsec:   atomic.LoadUint64(&p.ci.Nsec),
			Cycles: atomic.LoadUint64(&p.ci.Cycles),
			Frac:   atomic.LoadUint64(&p.ci.Frac),
			Mult:   atomic.LoadUint32(&p.ci.Mult),
			Shift:  atomic.LoadUint32(&p.ci.Shift),
			Mask:   atomic.LoadUint64(&p.ci.Mask),
		}
		if atomic.LoadUint32(sign) == s {
			return c, true
		}
	}
	return clockInfo{}, false
}

// How snapshot waits for a page being written: 10 tries spinning, as libmlx5, then
// yielding for up to 10 ms (a few scheduler time slices of a loaded host).
const (
	snapshotSpins    = 10
	snapshotPatience = 10 * time.Millisecond
)

// tsToNS converts a device timestamp to nanoseconds with a clock_info snapshot: the cycles
// since (or, if the timestamp looks older, before) the snapshot's, scaled by mult and
// shift with the kept fraction. Unsigned 64-bit arithmetic wraps as in C.
func tsToNS(c *clockInfo, ts uint64) uint64 {
	delta := (ts - c.Cycles) & c.Mask
	nsec := c.Nsec
	if delta > c.Mask/2 {
		delta = (c.Cycles - ts) & c.Mask
		nsec -= (delta*uint64(c.Mult) - c.Frac) >> c.Shift
	} else {
		nsec += (delta*uint64(c.Mult) + c.Frac) >> c.Shift
	}
	return nsec
}
