package rping

import "testing"

func TestPayloadMatchesRping(t *testing.T) {
	// The first three client lines of `rping -c -v` at the default size (as stock rping prints them).
	want := []string{
		"rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqr",
		"rdma-ping-1: BCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrs",
		"rdma-ping-2: CDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrst",
	}
	for i, w := range want {
		if got := PayloadString(i, DefaultSize); got != w {
			t.Errorf("ping %d: got %q, want %q", i, got, w)
		}
	}
}

func TestPayloadWraps(t *testing.T) {
	// Ping 57 starts at 'z' and wraps to 'A'; ping 58 starts again at 'A'.
	if got := PayloadString(57, 20+3); got[len("rdma-ping-57: "):] != "zABCDEFG" {
		t.Errorf("ping 57 fill = %q", got)
	}
	if got := PayloadString(58, 23); got[len("rdma-ping-58: "):] != "ABCDEFGH" {
		t.Errorf("ping 58 fill = %q", got)
	}
	// The largest int prefix still fits in the minimum size.
	if got := PayloadString(2147483647, MinSize); got != "rdma-ping-2147483647: " {
		t.Errorf("max prefix at MinSize = %q", got)
	}
}

func TestFillPayloadAllocatesNothing(t *testing.T) {
	buf := make([]byte, 1024)
	if n := testing.AllocsPerRun(100, func() { fillPayload(buf, 123456) }); n != 0 {
		t.Fatalf("fillPayload allocates %v times per call", n)
	}
}
