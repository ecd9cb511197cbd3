package rxe

import "github.com/gorping/gorping/uverbs/providerkit"

// UDPSourcePort is rxe's RoCEv2 UDP source port (driver.UDPSourcePorter): since Linux 5.17
// (sw/rxe/rxe_verbs.c, rxe_modify_qp) the core's, from rdma_cm's flow label (5.8 on) or
// the QPNs; before, a hash of the local QPN (sw/rxe/rxe_qp.c, rxe_qp_init_req).
func (provider) UDPSourcePort(kernel [2]int, fl, lqpn, rqpn uint32) uint16 {
	switch {
	case kernel[0] == 0:
		return 0
	case !providerkit.KernelAtLeast(kernel, 5, 17):
		return qpnSport(lqpn)
	}
	return providerkit.FlowLabelSport(fl, lqpn, rqpn)
}

// qpnSport is old rxe's port: 0xC000 plus hash_32(qpn, 14) (the generic hash; no
// architecture gorping runs on has its own).
func qpnSport(qpn uint32) uint16 {
	const goldenRatio32 = 0x61C88647
	return 0xC000 + uint16((qpn*goldenRatio32)>>(32-14))&0x3FFF
}
