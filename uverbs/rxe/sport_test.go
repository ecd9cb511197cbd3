package rxe

import "testing"

// rxe's RoCEv2 UDP source port by kernel, for ports 40000 -> 7174 (rdma_cm's flow label
// 0x307C6) between QPs 17 and 18.
func TestUDPSourcePort(t *testing.T) {
	// Old rxe: 0xC000 + hash_32(17, 14); 17*0x61C88647 mod 2^32 = 2119232183, >> 18 = 8084.
	if s := qpnSport(17); s != 0xC000+8084 {
		t.Errorf("qpnSport(17) = %d, want %d", s, 0xC000+8084)
	}
	for _, c := range []struct {
		kernel [2]int
		want   uint16
	}{
		{[2]int{6, 1}, 0xC7CA},
		{[2]int{5, 17}, 0xC7CA},
		{[2]int{5, 16}, 0xC000 + 8084}, // the QPN hash, before rxe used the label
		{[2]int{}, 0},                  // kernel unknown
	} {
		if s := (provider{}).UDPSourcePort(c.kernel, 0x307C6, 17, 18); s != c.want {
			t.Errorf("UDPSourcePort(%v) = %#x, want %#x", c.kernel, s, c.want)
		}
	}
}
