package uverbs

// The RoCEv2 UDP source port of a connection: the kernel's core computes it from the
// route's flow label or the QPNs (rdma_get_udp_sport), but whether a driver uses that
// and since which kernel is the driver's, so its provider says (UDPSourcePorter).
// docs/mesh.md ("Paths") gives the kernel code this follows.

// UDPSourcePorter is a Provider that knows the RoCEv2 UDP source port its driver gives an
// RC QP connected by rdma_cm (mlx5, rxe).
type UDPSourcePorter interface {
	// UDPSourcePort is the port for a QP lqpn connected to rqpn over a route with RoCEv2
	// flow label fl (rdmacm.FlowLabel) on kernel (major, minor; zero if unknown); 0 if
	// the driver's choice is not known there. providerkit.FlowLabelSport is the core's
	// formula.
	UDPSourcePort(kernel [2]int, fl, lqpn, rqpn uint32) uint16
}

// UDPSourcePort is the RoCEv2 UDP source port d's driver gives an RC QP connected by
// rdma_cm (UDPSourcePorter); 0 if its provider does not know or d has none.
func (d Device) UDPSourcePort(kernel [2]int, fl, lqpn, rqpn uint32) uint16 {
	if p, ok := providers.find(d).(UDPSourcePorter); ok {
		return p.UDPSourcePort(kernel, fl, lqpn, rqpn)
	}
	return 0
}
