//go:build guest

package guesttest

import (
	"strings"
	"testing"
)

var sink []*[64]byte

//go:noinline
func allocateFor(n int) {
	for range n {
		sink = append(sink, new([64]byte))
	}
}

// TestAllocSites: the sites of allocations made in the window are named with
// their counts; none made, none named.
func TestAllocSites(t *testing.T) {
	since := AllocSites()
	if s := since(5); strings.Contains(s, "allocateFor") {
		t.Fatalf("a site before any allocation:\n%s", s)
	}
	since = AllocSites()
	allocateFor(37)
	s := since(5)
	sink = nil
	if !strings.Contains(s, "37 objects at:\n    github.com/gorping/gorping/test/guesttest.allocateFor ") {
		t.Fatalf("want allocateFor's 37 objects named, got:\n%s", s)
	}
}
