//go:build guest

package guesttest

import (
	"fmt"
	"runtime"
	"sort"
	"strings"
)

// AllocSites records the stack of every heap allocation from now on and returns
// a function that names the sites that allocated since, most objects first
// ("" if none). Allocation tests measure paths that should allocate nothing,
// so recording every allocation costs them nothing, and a failure can say
// which code allocated instead of only how much. The returned function also
// restores the profiling rate.
func AllocSites() (since func(max int) string) {
	old := runtime.MemProfileRate
	// Rate 1 records every allocation at once, whatever the sampler's state.
	runtime.MemProfileRate = 1
	runtime.GC() // publishes the profile up to here
	base := map[[32]uintptr]int64{}
	for _, r := range memProfile() {
		base[r.Stack0] = r.AllocObjects
	}
	return func(max int) string {
		runtime.GC()
		runtime.MemProfileRate = old
		type site struct {
			n     int64
			stack []uintptr
		}
		var sites []site
		for _, r := range memProfile() {
			if d := r.AllocObjects - base[r.Stack0]; d > 0 && !own(r.Stack()) {
				sites = append(sites, site{d, r.Stack()})
			}
		}
		sort.Slice(sites, func(i, j int) bool { return sites[i].n > sites[j].n })
		var b strings.Builder
		for i, s := range sites {
			if i == max {
				fmt.Fprintf(&b, "(%d more sites)\n", len(sites)-max)
				break
			}
			fmt.Fprintf(&b, "%d objects at:\n", s.n)
			frames := runtime.CallersFrames(s.stack)
			for k := 0; k < 8; {
				f, more := frames.Next()
				// The allocator's own frames say nothing about who allocated.
				if !strings.HasPrefix(f.Function, "runtime.") && !strings.HasPrefix(f.Function, "internal/runtime/") {
					fmt.Fprintf(&b, "    %s %s:%d\n", f.Function, f.File, f.Line)
					k++
				}
				if !more {
					break
				}
			}
		}
		return b.String()
	}
}

// own says whether stack is this helper's bookkeeping.
func own(stack []uintptr) bool {
	frames := runtime.CallersFrames(stack)
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.Function, "guesttest.AllocSites") || strings.HasSuffix(f.Function, "guesttest.memProfile") {
			return true
		}
		if !more {
			return false
		}
	}
}

func memProfile() []runtime.MemProfileRecord {
	n, _ := runtime.MemProfile(nil, true)
	for {
		recs := make([]runtime.MemProfileRecord, n+64)
		k, ok := runtime.MemProfile(recs, true)
		if ok {
			return recs[:k]
		}
		n = k
	}
}
