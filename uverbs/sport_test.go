package uverbs

import "testing"

// FlowLabelSport against values worked by hand from the kernel's formulas (docs/mesh.md,
// "Paths"); a device whose provider does not know its driver's port gives 0.
func TestFlowLabelSport(t *testing.T) {
	for _, c := range []struct {
		lqpn, rqpn uint32
		fl         uint32
		sport      uint16
	}{
		// rdma_cm's label of ports 40000 -> 7174 (rdmacm.FlowLabel): 0x07C6 ^ 0xC = 0x07CA.
		{17, 18, 0x307C6, 0xC7CA},
		// 0x3FE0 ^ 0x3F = 0x3FDF.
		{17, 18, 0xFFFE0, 0xFFDF},
		// A zero label: the QPNs' (0x11*0x22 = 0x242).
		{0x11, 0x22, 0, 0xC242},
	} {
		if s := FlowLabelSport(c.fl, c.lqpn, c.rqpn); s != c.sport {
			t.Errorf("FlowLabelSport(%#x, %d, %d) = %#x, want %#x", c.fl, c.lqpn, c.rqpn, s, c.sport)
		}
	}
	if s := (Device{Driver: "bnxt_re"}).UDPSourcePort([2]int{6, 1}, 0x307C6, 17, 18); s != 0 {
		t.Errorf("bnxt_re (no UDPSourcePorter): %#x, want 0", s)
	}
	for _, c := range []struct {
		kernel [2]int
		major  int
		minor  int
		want   bool
	}{{[2]int{6, 1}, 5, 17, true}, {[2]int{5, 17}, 5, 17, true}, {[2]int{5, 16}, 5, 17, false}, {[2]int{}, 5, 8, false}} {
		if got := KernelAtLeast(c.kernel, c.major, c.minor); got != c.want {
			t.Errorf("KernelAtLeast(%v, %d, %d) = %v, want %v", c.kernel, c.major, c.minor, got, c.want)
		}
	}
}
