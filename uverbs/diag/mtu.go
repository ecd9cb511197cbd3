package diag

import (
	"fmt"
	"strings"

	"github.com/gorping/gorping/uverbs"
)

// Whether the MTUs along a RoCE path fit each other.

// roceHeaderBytes is what a RoCE packet carries inside the netdev MTU besides its IB
// payload: an IPv6 header (40; IPv4's is 20, RoCE v1's GRH is 40: take the larger since one
// port carries both), UDP (8), BTH (12), RETH (16, the largest extended header an RC data
// packet carries: the first packet of an RDMA WRITE, or a READ request) and the ICRC (4).
// The Ethernet header, VLAN tag and FCS are outside the netdev MTU and not counted. Soft-RoCE
// budgets the same 80 bytes when it derives the active MTU from the netdev MTU.
const roceHeaderBytes = 40 + 8 + 12 + 16 + 4

// MTUFacts are the MTUs along one path.
type MTUFacts struct {
	PathMTU   uverbs.MTU // the QP's path MTU (0 if not known)
	ActiveMTU uverbs.MTU // the port's active MTU (0 if not known)
	LinkLayer uverbs.LinkLayer
	Netdev    string // the port's netdev ("" on InfiniBand)
	NetdevMTU int    // its MTU in bytes (0 if not known)
}

// CheckMTU returns a warning when the MTUs do not fit each other so that large transfers
// break (packets of a full IB MTU dropped; small messages still pass), or "" when they fit
// or too little is known to tell.
func CheckMTU(f MTUFacts) string {
	var w []string
	if f.PathMTU.Bytes() > 0 && f.ActiveMTU.Bytes() > 0 && f.PathMTU > f.ActiveMTU {
		w = append(w, fmt.Sprintf("path MTU %d exceeds the port's active MTU %d", f.PathMTU.Bytes(), f.ActiveMTU.Bytes()))
	}
	if f.LinkLayer == uverbs.LinkLayerEthernet && f.NetdevMTU > 0 {
		nd := f.Netdev
		if nd == "" {
			nd = "the netdev"
		}
		// The path MTU is what packets are cut to; without one the active MTU is what the
		// next connection gets.
		m, what := f.PathMTU, "path"
		if m.Bytes() == 0 {
			m, what = f.ActiveMTU, "active"
		}
		if m.Bytes() > 0 && m.Bytes()+roceHeaderBytes > f.NetdevMTU {
			fix := " (no IB MTU fits it now)"
			if fit := fittingMTU(f.NetdevMTU); fit > 0 {
				fix = fmt.Sprintf(" or use an IB MTU of at most %d", fit)
			}
			w = append(w, fmt.Sprintf("%s MTU %d plus %d bytes of RoCE headers exceeds %s's MTU %d: messages larger than %d bytes will not get through (the sender retries until its retry budget runs out; rxe retries for ever); raise %s's MTU to at least %d%s",
				what, m.Bytes(), roceHeaderBytes, nd, f.NetdevMTU, max(f.NetdevMTU-roceHeaderBytes, 0), nd, m.Bytes()+roceHeaderBytes, fix))
		}
	}
	return strings.Join(w, "; ")
}

// fittingMTU is the largest IB MTU whose packets fit a netdev MTU (0 if none does).
func fittingMTU(netdevMTU int) int {
	best := 0
	for m := uverbs.MTU256; m <= uverbs.MTU4096; m++ {
		if m.Bytes()+roceHeaderBytes <= netdevMTU {
			best = m.Bytes()
		}
	}
	return best
}
