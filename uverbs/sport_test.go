package uverbs

import "testing"

// A device whose provider does not know its driver's RoCEv2 UDP source port gives 0.
func TestUDPSourcePortUnknown(t *testing.T) {
	if s := (Device{Driver: "bnxt_re"}).UDPSourcePort([2]int{6, 1}, 0x307C6, 17, 18); s != 0 {
		t.Errorf("bnxt_re (no driver.UDPSourcePorter): %#x, want 0", s)
	}
}
