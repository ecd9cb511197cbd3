package mlx5

import "github.com/gorping/gorping/uverbs/providerkit"

// UDPSourcePort is mlx5's RoCEv2 UDP source port (driver.UDPSourcePorter): the core's,
// from rdma_cm's flow label or the QPNs (hw/mlx5/qp.c, mlx5_set_path_udp_sport), since
// Linux 5.8, when rdma_cm began setting the label; before, the firmware's choice.
func (provider) UDPSourcePort(kernel [2]int, fl, lqpn, rqpn uint32) uint16 {
	if !providerkit.KernelAtLeast(kernel, 5, 8) {
		return 0
	}
	return providerkit.FlowLabelSport(fl, lqpn, rqpn)
}
