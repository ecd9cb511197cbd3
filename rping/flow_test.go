//go:build !guest

package rping

import "testing"

// TestUDPSport checks the predicted RoCEv2 source port against values worked by hand
// from the kernel's formulas (docs/mesh.md, "Paths").
func TestUDPSport(t *testing.T) {
	for _, c := range []struct {
		src, dst   uint16
		lqpn, rqpn uint32
		fl         uint32
		sport      uint16
	}{
		// 40000*31+7174 = 1247174, & 0xFFFFF = 0x307C6; 0x07C6 ^ 0xC = 0x07CA.
		{40000, 7174, 17, 18, 0x307C6, 0xC7CA},
		// 65535*32 & 0xFFFFF = 0xFFFE0; 0x3FE0 ^ 0x3F = 0x3FDF.
		{65535, 65535, 17, 18, 0xFFFE0, 0xFFDF},
		// A zero label: the QPNs' (0x11*0x22 = 0x242).
		{0, 0, 0x11, 0x22, 0, 0xC242},
	} {
		if fl := cmFlowLabel(c.src, c.dst); fl != c.fl {
			t.Errorf("cmFlowLabel(%d, %d) = %#x, want %#x", c.src, c.dst, fl, c.fl)
		}
		if s := udpSport(c.fl, c.lqpn, c.rqpn); s != c.sport {
			t.Errorf("udpSport(%#x, %d, %d) = %#x, want %#x", c.fl, c.lqpn, c.rqpn, s, c.sport)
		}
	}
	// Old rxe: 0xC000 + hash_32(17, 14); 17*0x61C88647 mod 2^32 = 2119232183, >> 18 = 8084.
	if s := rxeQPNSport(17); s != 0xC000+8084 {
		t.Errorf("rxeQPNSport(17) = %d, want %d", s, 0xC000+8084)
	}
	for _, c := range []struct {
		driver string
		kernel [2]int
		want   uint16
	}{
		{"rxe", [2]int{6, 1}, 0xC7CA},
		{"rxe", [2]int{5, 17}, 0xC7CA},
		{"rxe", [2]int{5, 16}, 0xC000 + 8084}, // the QPN hash, before rxe used the label
		{"mlx5", [2]int{5, 8}, 0xC7CA},
		{"mlx5", [2]int{5, 7}, 0}, // before rdma_cm set the label: the firmware's choice
		{"rxe", [2]int{}, 0},      // kernel unknown
		{"bnxt_re", [2]int{6, 1}, 0},
	} {
		if s := predictSport(c.driver, c.kernel, 40000, 7174, 17, 18); s != c.want {
			t.Errorf("predictSport(%s, %v) = %#x, want %#x", c.driver, c.kernel, s, c.want)
		}
	}
	for in, want := range map[string][2]int{"6.1.0-27-amd64": {6, 1}, "5.17.0": {5, 17}, "6.8-rc3": {6, 8}, "x": {}, "6": {}} {
		if got := parseKernelVersion(in); got != want {
			t.Errorf("parseKernelVersion(%q) = %v, want %v", in, got, want)
		}
	}
}
