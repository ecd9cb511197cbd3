package uverbs

import "github.com/gorping/gorping/uverbs/driver"

// The RoCEv2 UDP source port of a connection: the kernel's core computes it from the
// route's flow label or the QPNs (rdma_get_udp_sport), but whether a driver uses that
// and since which kernel is the driver's, so its provider says (driver.UDPSourcePorter).
// docs/mesh.md ("Paths") gives the kernel code this follows.

// UDPSourcePort is the RoCEv2 UDP source port d's driver gives an RC QP connected by
// rdma_cm (driver.UDPSourcePorter); 0 if its provider does not know or d has none.
func (d Device) UDPSourcePort(kernel [2]int, fl, lqpn, rqpn uint32) uint16 {
	if p, ok := providers.find(d).(driver.UDPSourcePorter); ok {
		return p.UDPSourcePort(kernel, fl, lqpn, rqpn)
	}
	return 0
}
