package rping

// What tells a prober's connection apart on the wire: its QPs, rdma_cm's ports and the
// RoCEv2 UDP source port its packets are expected to carry. An agent with several
// connections to one target (gorping mesh --paths) labels each with these, so that a
// path that ECMP drops can be matched with the switches' hash. rdma_cm's flow label is
// rdmacm's (FlowLabel), the port the driver derives from it its provider's
// (uverbs/driver.UDPSourcePorter); docs/mesh.md ("Paths") gives the kernel code they follow.

import (
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/gorping/gorping/rdmacm"
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
		f.UDPSourcePort = c.dev.UDPSourcePort(kernel, rdmacm.FlowLabel(f.SrcPort, f.DstPort), f.LocalQPN, f.RemoteQPN)
	}
	return f
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
