package rping

// What tells a prober's connection apart on the wire: its QPs, rdma_cm's ports and the
// RoCEv2 UDP source port its packets are expected to carry. An agent with several
// connections to one target (gorping mesh --paths) labels each with these, so that a
// path that ECMP drops can be matched with the switches' hash. docs/mesh.md ("Paths")
// gives the kernel code the prediction follows.

import (
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/gorping/gorping/uverbs"
)

// Flow identifies a prober's connection.
type Flow struct {
	LocalQPN  uint32 // the prober's QP number
	RemoteQPN uint32 // the responder's, from the connection's CM event; 0: not known (iWARP's CM carries none)
	SrcPort   uint16 // rdma_cm's port of the prober's cm_id (the kernel picks it at address resolution)
	DstPort   uint16 // the target's rdma_cm port
	// UDPSourcePort is the RoCEv2 UDP source port the prober's packets should carry,
	// predicted from the kernel's code; 0 where it cannot be: no UDP (InfiniBand,
	// iWARP), a driver or kernel whose choice is not known.
	UDPSourcePort uint16
}

// Flow is the connection's flow. Safe for concurrent use.
func (p *Prober) Flow() Flow { return p.flow }

// flowOf reads c's flow once it is connected. kernel is the running kernel's version.
func flowOf(c *verbsConn, kernel [2]int) Flow {
	f := Flow{LocalQPN: c.qp.Num(), RemoteQPN: c.peerQPN}
	if ai, err := c.id.Query(); err == nil {
		f.SrcPort, f.DstPort = ai.Src.Port(), ai.Dst.Port()
	}
	if !c.ib && c.qp.Transport() != uverbs.TransportIWARP && f.RemoteQPN != 0 {
		f.UDPSourcePort = predictSport(c.dev.Driver, kernel, f.SrcPort, f.DstPort, f.LocalQPN, f.RemoteQPN)
	}
	return f
}

// predictSport is the UDP source port driver gives a RoCEv2 RC QP connected by rdma_cm
// with ports src -> dst between QPs lqpn and rqpn on kernel; 0 if not known.
//
//   - rdma_cm (drivers/infiniband/core/cma.c, cma_resolve_iboe_route calling
//     cma_get_roce_udp_flow_label, Linux 5.8) sets the route's flow label from the ports
//     unless the IPv6 source has flowinfo (gorping sets none).
//   - mlx5 (hw/mlx5/qp.c, mlx5_set_path_udp_sport, 5.8) and rxe since 5.17
//     (sw/rxe/rxe_verbs.c, rxe_modify_qp) derive the port from that label, or from the
//     QPNs when it is 0 (include/rdma/ib_verbs.h, rdma_get_udp_sport).
//   - rxe before 5.17 hashes the local QPN (sw/rxe/rxe_qp.c, rxe_qp_init_req).
func predictSport(driver string, kernel [2]int, src, dst uint16, lqpn, rqpn uint32) uint16 {
	atLeast := func(major, minor int) bool {
		return kernel[0] > major || kernel[0] == major && kernel[1] >= minor
	}
	switch {
	case driver == "rxe" && kernel[0] > 0 && !atLeast(5, 17):
		return rxeQPNSport(lqpn)
	case (driver == "rxe" || driver == "mlx5") && atLeast(5, 8):
		return udpSport(cmFlowLabel(src, dst), lqpn, rqpn)
	}
	return 0
}

// cmFlowLabel is rdma_cm's RoCEv2 flow label of a connection from port src to dst
// (cma_get_roce_udp_flow_label).
func cmFlowLabel(src, dst uint16) uint32 { return (uint32(src)*31 + uint32(dst)) & 0xFFFFF }

// udpSport is rdma_get_udp_sport: the port from the flow label fl, or from the QPNs'
// label (rdma_calc_flow_label) when fl is 0.
func udpSport(fl, lqpn, rqpn uint32) uint16 {
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

// rxeQPNSport is old rxe's port: 0xC000 plus hash_32(qpn, 14) (the generic hash; no
// architecture gorping runs on has its own).
func rxeQPNSport(qpn uint32) uint16 {
	const goldenRatio32 = 0x61C88647
	return 0xC000 + uint16((qpn*goldenRatio32)>>(32-14))&0x3FFF
}

// kernelVersion is the running kernel's major and minor version; zero if unknown.
var kernelVersion = sync.OnceValue(func() [2]int {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return [2]int{}
	}
	return parseKernelVersion(unix.ByteSliceToString(u.Release[:]))
})

// parseKernelVersion reads "6.1.0-27-amd64" (or "6.8-rc3") as {6, 1}; zero if it cannot.
func parseKernelVersion(release string) [2]int {
	major, rest, _ := strings.Cut(release, ".")
	minor := rest[:len(rest)-len(strings.TrimLeft(rest, "0123456789"))]
	a, err1 := strconv.Atoi(major)
	b, err2 := strconv.Atoi(minor)
	if err1 != nil || err2 != nil {
		return [2]int{}
	}
	return [2]int{a, b}
}
