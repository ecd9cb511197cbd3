//go:build mmiorecord

package mmio

import (
	"sync"
	"sync/atomic"
	"unsafe"
)

const recording = true

type subscriber struct{ f func(Event) }

var (
	subsMu sync.Mutex
	subs   atomic.Pointer[[]*subscriber] // copy-on-write: emit reads without a lock
)

// Subscribe has f called with every operation from now on, from the goroutine that
// performed it, until cancel is called. f must be quick and must not call back into this
// package's stores.
func Subscribe(f func(Event)) (cancel func()) {
	s := &subscriber{f}
	subsMu.Lock()
	defer subsMu.Unlock()
	var list []*subscriber
	if p := subs.Load(); p != nil {
		list = append(list, *p...)
	}
	list = append(list, s)
	subs.Store(&list)
	return func() {
		subsMu.Lock()
		defer subsMu.Unlock()
		var keep []*subscriber
		if p := subs.Load(); p != nil {
			for _, x := range *p {
				if x != s {
					keep = append(keep, x)
				}
			}
		}
		subs.Store(&keep)
	}
}

func emit(op Op, dst, src unsafe.Pointer, n int) {
	p := subs.Load()
	if p == nil || len(*p) == 0 {
		return
	}
	ev := Event{Op: op, Addr: uintptr(dst), Len: n}
	if n > 0 {
		copy(ev.Data[:n], unsafe.Slice((*byte)(src), n))
	}
	for _, s := range *p {
		s.f(ev)
	}
}
