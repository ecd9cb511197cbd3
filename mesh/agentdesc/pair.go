package agentdesc

import (
	"fmt"
	"net/netip"
	"strings"
)

// Mode says which of a peer's rails each local rail probes.
type Mode int

const (
	// SameSubnet: a local rail probes the peer's rails that have an address in one of
	// its subnets (rail-optimized clusters: each rail its own subnet and switch plane).
	SameSubnet Mode = iota
	// AllRails: every local rail probes every peer rail (fabrics where every rail
	// reaches every other, routed between subnets).
	AllRails
)

// Target is one probe of the fabric: from a local rail to a peer's rail. Its series
// are labelled device, port, target and peer.
type Target struct {
	Device     string         // the local RDMA device: the device label
	Port       int            // the local port: the port label
	Source     netip.Addr     // the local address on that port to probe from
	Addr       netip.AddrPort // the peer rail's address and the peer's responder port: the target label (Addr.String())
	Peer       string         // the peer agent's name: the peer label
	PeerDevice string         // the peer's device and port on that rail (for logs)
	PeerPort   int
}

func (t Target) String() string {
	return fmt.Sprintf("%s port %d -> %s %s (%s port %d)", t.Device, t.Port, t.Peer, t.Addr, t.PeerDevice, t.PeerPort)
}

// Problem is why a rail probes nothing, or nothing of a peer: one line to log once and a
// reason to count, instead of a probe that fails for ever.
type Problem struct {
	Peer   string // the peer; "" for a local rail's own problem (RailProblems)
	Device string // the local rail; "" for the peer as a whole
	Port   int
	Reason string // one of the Reason constants
	Detail string // one readable line
}

func (p Problem) Error() string { return p.Detail }

// Problem reasons.
const (
	ReasonSelf      = "self"              // the peer is this agent: its rails are this host's own NICs
	ReasonNoSubnet  = "no_rail_in_subnet" // SameSubnet: the peer has no rail in this rail's subnets
	ReasonGIDFamily = "gid_family"        // the only shared address family is one a GID table cannot carry
	ReasonLinkLayer = "link_layer"        // RoCE against InfiniBand, or a link layer this gorping does not know
	ReasonNoAddress = "no_address"        // a rail with no routable address
	ReasonNoGID     = "no_gid"            // an address of a RoCE rail without its GID
)

// Pair is what this agent (local, its own description) probes of peer: one target per
// pair of a local rail and a peer rail that mode pairs, in an address family both ports'
// GID tables carry (IPv4 before IPv6), and a Problem for each local rail or pair of rails
// that cannot be probed. A peer that is this agent (SameAgent, or any address of a local
// rail) gets no target: never this host's own sibling NICs. Local rails that cannot
// probe at all are RailProblems', not reported here.
func Pair(local, peer Description, mode Mode) ([]Target, []Problem) {
	if peer.SameAgent(local) {
		return nil, []Problem{{Peer: peer.Name, Reason: ReasonSelf, Detail: fmt.Sprintf("peer %q is this agent: not probed", peer.Name)}}
	}
	// Routable addresses only: two hosts may both use one link-local address.
	mine := map[netip.Addr]Rail{}
	for _, l := range local.Rails {
		for _, p := range routable(l) {
			mine[p.Addr()] = l
		}
	}
	for _, r := range peer.Rails {
		for _, p := range routable(r) {
			if l, ok := mine[p.Addr()]; ok {
				return nil, []Problem{{Peer: peer.Name, Reason: ReasonSelf, Detail: fmt.Sprintf(
					"peer %q describes %s, an address of this host's %s port %d: its rails are this host's own NICs, not the fabric; not probed",
					peer.Name, p.Addr(), l.Device, l.Port)}}
			}
		}
	}
	var ts []Target
	var ps []Problem
	for _, l := range local.Rails {
		if !knownLink(l) || len(routable(l)) == 0 {
			continue // RailProblems
		}
		matched := false
		for _, r := range peer.Rails {
			cands := candidates(l, r, mode)
			if len(cands) == 0 {
				if mode == AllRails && knownLink(r) && len(routable(r)) > 0 {
					ps = append(ps, pairProblem(l, peer.Name, r, ReasonGIDFamily, fmt.Sprintf("has %s addresses only, the peer's %s only: no family in common",
						families(routable(l)), families(routable(r)))))
				}
				continue
			}
			matched = true
			if l.LinkLayer != r.LinkLayer {
				ps = append(ps, pairProblem(l, peer.Name, r, ReasonLinkLayer, fmt.Sprintf("is %s, the peer's %s", l.LinkLayer, r.LinkLayer)))
				continue
			}
			t, ok := choose(l, r, cands)
			if !ok {
				c := cands[0]
				ps = append(ps, pairProblem(l, peer.Name, r, ReasonGIDFamily, fmt.Sprintf("reaches %s over %s only, and %s",
					c.b, family(c.b), gidGap(l, c.a, r, c.b))))
				continue
			}
			t.Peer, t.Addr = peer.Name, netip.AddrPortFrom(t.Addr.Addr(), peer.ResponderPort)
			ts = append(ts, t)
		}
		if !matched && mode == SameSubnet {
			var nets []string
			for _, a := range routable(l) {
				nets = append(nets, a.Masked().String())
			}
			var theirs []netip.Prefix
			for _, r := range peer.Rails {
				theirs = append(theirs, routable(r)...)
			}
			hint := ""
			if len(theirs) > 0 && families(theirs) != families(routable(l)) && !strings.Contains(families(theirs), families(routable(l))) {
				hint = fmt.Sprintf(" (its rails have %s addresses only)", families(theirs))
			}
			ps = append(ps, Problem{Peer: peer.Name, Device: l.Device, Port: l.Port, Reason: ReasonNoSubnet, Detail: fmt.Sprintf(
				"%s port %d: peer %q has no rail in %s%s: nothing to probe from this rail", l.Device, l.Port, peer.Name, strings.Join(nets, " or "), hint)})
		}
	}
	return ts, ps
}

type cand struct{ a, b netip.Addr }

// candidates are the pairs of addresses (local, peer) of one family that mode allows
// between rails l and r: IPv4 pairs first, then IPv6, each in the documents' order.
func candidates(l, r Rail, mode Mode) []cand {
	var v4, v6 []cand
	for _, pa := range routable(l) {
		for _, pb := range routable(r) {
			a, b := pa.Addr(), pb.Addr()
			if a.Is4() != b.Is4() || mode == SameSubnet && !pa.Masked().Contains(b) {
				continue
			}
			if a.Is4() {
				v4 = append(v4, cand{a, b})
			} else {
				v6 = append(v6, cand{a, b})
			}
		}
	}
	return append(v4, v6...)
}

// choose is the first candidate whose addresses both ports' GID tables carry.
func choose(l, r Rail, cands []cand) (Target, bool) {
	for _, c := range cands {
		if carries(l, c.a) && carries(r, c.b) {
			return Target{Device: l.Device, Port: l.Port, Source: c.a, Addr: netip.AddrPortFrom(c.b, 0),
				PeerDevice: r.Device, PeerPort: r.Port}, true
		}
	}
	return Target{}, false
}

// carries: a RoCE port reaches an address through the GID of that address (rdma_cm
// takes the source GID from the source address, the peer answers on the GID of the
// destination); an InfiniBand port's GIDs do not depend on IPoIB's addresses.
func carries(r Rail, a netip.Addr) bool {
	switch r.LinkLayer {
	case LinkInfiniBand:
		return true
	case LinkEthernet:
		want := netip.AddrFrom16(a.As16()) // IPv4 as ::ffff:a.b.c.d
		for _, g := range r.GIDs {
			if g.GID == want && (g.Type == GIDTypeRoCEv1 || g.Type == GIDTypeRoCEv2) {
				return true
			}
		}
	}
	return false
}

// gidGap says which side's GID table lacks the GID of the pair (a, b).
func gidGap(l Rail, a netip.Addr, r Rail, b netip.Addr) string {
	var gaps []string
	if !carries(l, a) {
		gaps = append(gaps, fmt.Sprintf("this port's GID table has no RoCE GID for %s (it has %s)", a, gidList(l)))
	}
	if !carries(r, b) {
		gaps = append(gaps, fmt.Sprintf("the peer port's GID table has no RoCE GID for %s (it has %s)", b, gidList(r)))
	}
	return strings.Join(gaps, ", and ") + ": an address family the GID table cannot carry; not probed"
}

func gidList(r Rail) string {
	if len(r.GIDs) == 0 {
		return "none"
	}
	var s []string
	for i, g := range r.GIDs {
		if i == 4 {
			s = append(s, "...")
			break
		}
		s = append(s, fmt.Sprintf("%s %s", g.GID, g.Type))
	}
	return strings.Join(s, ", ")
}

func pairProblem(l Rail, peer string, r Rail, reason, what string) Problem {
	return Problem{Peer: peer, Device: l.Device, Port: l.Port, Reason: reason, Detail: fmt.Sprintf(
		"%s port %d -> %s's %s port %d: this port %s", l.Device, l.Port, peer, r.Device, r.Port, what)}
}

// routable are a rail's addresses that another host can reach: not loopback,
// link-local (they would need a zone) or multicast.
func routable(r Rail) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range r.Addresses {
		if a := p.Addr(); !a.IsLoopback() && !a.IsLinkLocalUnicast() && !a.IsMulticast() && !a.IsUnspecified() {
			out = append(out, p)
		}
	}
	return out
}

func knownLink(r Rail) bool { return r.LinkLayer == LinkEthernet || r.LinkLayer == LinkInfiniBand }

func family(a netip.Addr) string {
	if a.Is4() {
		return "IPv4"
	}
	return "IPv6"
}

func families(ps []netip.Prefix) string {
	has4, has6 := false, false
	for _, p := range ps {
		has4, has6 = has4 || p.Addr().Is4(), has6 || p.Addr().Is6()
	}
	switch {
	case has4 && has6:
		return "IPv4 and IPv6"
	case has4:
		return "IPv4"
	}
	return "IPv6"
}

// RailProblems are the rails of an agent's own description that cannot take part, or
// not over all their addresses: to log once when the agent describes itself.
func (d Description) RailProblems() []Problem {
	var ps []Problem
	for _, r := range d.Rails {
		p := Problem{Device: r.Device, Port: r.Port}
		switch {
		case !knownLink(r):
			p.Reason, p.Detail = ReasonLinkLayer, fmt.Sprintf("%s port %d: link layer %q is unknown to this gorping: not used", r.Device, r.Port, r.LinkLayer)
		case len(routable(r)) == 0:
			p.Reason, p.Detail = ReasonNoAddress, fmt.Sprintf("%s port %d (netdev %q): no routable address: it can neither probe nor be probed", r.Device, r.Port, r.Netdev)
		default:
			var missing []string
			for _, a := range routable(r) {
				if !carries(r, a.Addr()) {
					missing = append(missing, a.Addr().String())
				}
			}
			if len(missing) == 0 {
				continue
			}
			p.Reason, p.Detail = ReasonNoGID, fmt.Sprintf("%s port %d: no RoCE GID for %s (GID table: %s): not used over that address",
				r.Device, r.Port, strings.Join(missing, ", "), gidList(r))
		}
		ps = append(ps, p)
	}
	return ps
}
