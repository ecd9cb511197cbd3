package mlx5_test

import (
	"testing"

	"github.com/gorping/gorping/uverbs"
)

// mlx5's RoCEv2 UDP source port by kernel, for ports 40000 -> 7174 (rdma_cm's flow label
// 0x307C6) between QPs 17 and 18, asked as rping asks: through the device's provider.
func TestUDPSourcePort(t *testing.T) {
	for _, c := range []struct {
		kernel [2]int
		want   uint16
	}{
		{[2]int{5, 8}, 0xC7CA},
		{[2]int{5, 7}, 0}, // before rdma_cm set the label: the firmware's choice
	} {
		if s := (uverbs.Device{Driver: "mlx5"}).UDPSourcePort(c.kernel, 0x307C6, 17, 18); s != c.want {
			t.Errorf("UDPSourcePort(%v) = %#x, want %#x", c.kernel, s, c.want)
		}
	}
}
