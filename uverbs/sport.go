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
	// the driver's choice is not known there.
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

// FlowLabelSport is the kernel's rdma_get_udp_sport (include/rdma/ib_verbs.h): the port
// from the flow label fl, or from the QPNs' label (rdma_calc_flow_label) when fl is 0.
func FlowLabelSport(fl, lqpn, rqpn uint32) uint16 {
	if fl == 0 {
		v := uint64(lqpn) * uint64(rqpn)
		v ^= v >> 20
		v ^= v >> 40
		fl = uint32(v & 0xFFFFF)
	}
	// rdma_flow_label_to_udp_sport: the label's low 14 bits folded with its high 6, in
	// the dynamic port range.
	return uint16((fl&0x3FFF)^((fl&0xFC000)>>14)) | 0xC000
}

// KernelAtLeast reports whether kernel (major, minor) is major.minor or later.
func KernelAtLeast(kernel [2]int, major, minor int) bool {
	return kernel[0] > major || kernel[0] == major && kernel[1] >= minor
}
