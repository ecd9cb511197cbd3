//go:build !guest

package rping

import "testing"

// The running kernel's version, which the providers' UDP source port follows
// (uverbs/driver.UDPSourcePorter).
func TestParseKernelVersion(t *testing.T) {
	for in, want := range map[string][2]int{"6.1.0-27-amd64": {6, 1}, "5.17.0": {5, 17}, "6.8-rc3": {6, 8}, "x": {}, "6": {}} {
		if got := parseKernelVersion(in); got != want {
			t.Errorf("parseKernelVersion(%q) = %v, want %v", in, got, want)
		}
	}
}
