package mlx5

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// newTestClockPage is a clock_info page in ordinary memory, sign even.
func newTestClockPage() *clockPage {
	b := make([]byte, unsafe.Sizeof(clockInfo{}))
	return &clockPage{b: b, ci: (*clockInfo)(unsafe.Pointer(&b[0]))}
}

// A writer that stays in the middle of an update for longer than libmlx5's 10 tries
// (a preempted one) delays the snapshot instead of failing it; one that never finishes
// fails it within the bound. On one P the writer goroutine runs only when the reader
// yields, so the first case does not depend on the machine's load.
func TestClockSnapshotWaitsForWriter(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	p := newTestClockPage()
	sign := (*uint32)(unsafe.Pointer(&p.ci.Sign))
	atomic.StoreUint32(sign, clockInfoUpdating) // the writer is in the middle
	done := make(chan struct{})
	go func() {
		defer close(done)
		atomic.StoreUint64(&p.ci.Nsec, 12345)
		atomic.StoreUint32(sign, 2)
	}()
	c, ok := p.snapshot()
	<-done
	if !ok || c.Nsec != 12345 {
		t.Errorf("snapshot across an update that needs the processor: %+v, ok %v; want the new page (Nsec 12345)", c, ok)
	}

	atomic.StoreUint32(sign, 3) // stuck
	start := time.Now()
	if _, ok := p.snapshot(); ok {
		t.Error("snapshot of a page that is being written for ever succeeded")
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("snapshot of a stuck page took %v, want about %v", took, snapshotPatience)
	}
}
