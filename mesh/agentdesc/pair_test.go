package agentdesc

import (
	"net/netip"
	"strings"
	"testing"
)

// rail is a rail with the given addresses; gids lists the addresses that have a RoCE v2
// GID ("all": every address).
func rail(dev string, link string, addrs []string, gids ...string) Rail {
	r := Rail{Device: dev, Port: 1, LinkLayer: link, ActiveMTU: 4096}
	for _, a := range addrs {
		r.Addresses = append(r.Addresses, netip.MustParsePrefix(a))
	}
	if len(gids) == 1 && gids[0] == "all" {
		gids = nil
		for _, p := range r.Addresses {
			gids = append(gids, p.Addr().String())
		}
	}
	for i, g := range gids {
		a := netip.MustParseAddr(g)
		r.GIDs = append(r.GIDs, GID{Index: i + 1, GID: netip.AddrFrom16(a.As16()), Type: GIDTypeRoCEv2})
	}
	if link == LinkInfiniBand {
		r.GIDs = []GID{{Index: 0, GID: netip.MustParseAddr("fe80::2:c903:1"), Type: GIDTypeIB}}
	}
	return r
}

func desc(name string, port uint16, rails ...Rail) Description {
	return Description{Version: Version, Name: name, GorpingVersion: "v1", ResponderPort: port, Rails: rails}
}

func TestPair(t *testing.T) {
	eth, ib := LinkEthernet, LinkInfiniBand
	two := desc("node1", 7174,
		rail("mlx5_0", eth, []string{"10.0.0.1/24", "fd00::1/64"}, "all"),
		rail("mlx5_1", eth, []string{"10.0.1.1/24", "fd00:1::1/64"}, "all"))
	twoPeer := desc("node2", 7300,
		rail("mlx5_0", eth, []string{"10.0.0.2/24", "fd00::2/64"}, "all"),
		rail("mlx5_1", eth, []string{"10.0.1.2/24", "fd00:1::2/64"}, "all"))
	for _, c := range []struct {
		name        string
		local, peer Description
		mode        Mode
		targets     []string // "dev -> addr:port"
		problems    []string // "reason: detail fragment"
	}{
		{name: "rail-optimized: rail i to rail i, IPv4 first, the peer's responder port",
			local: two, peer: twoPeer,
			targets: []string{"mlx5_0 -> 10.0.0.2:7300", "mlx5_1 -> 10.0.1.2:7300"}},
		{name: "all rails", local: two, peer: twoPeer, mode: AllRails,
			targets: []string{"mlx5_0 -> 10.0.0.2:7300", "mlx5_0 -> 10.0.1.2:7300", "mlx5_1 -> 10.0.0.2:7300", "mlx5_1 -> 10.0.1.2:7300"}},
		{name: "the agent itself", local: two, peer: two,
			problems: []string{`self: peer "node1" is this agent`}},
		{name: "R-Pingmesh #39: this host under another name (its own sibling NICs)", local: two,
			peer: desc("node1-alias", 7174, rail("mlx5_1", eth, []string{"10.0.1.1/24"}, "all")), mode: AllRails,
			problems: []string{`self: peer "node1-alias" describes 10.0.1.1, an address of this host's mlx5_1 port 1: its rails are this host's own NICs`}},
		{name: "R-Pingmesh #41, same subnet: the shared family is IPv6 and this port has only its IPv4-mapped GID",
			local:    desc("node1", 7174, rail("mlx5_0", eth, []string{"10.0.0.1/24", "fd00::1/64"}, "10.0.0.1")),
			peer:     desc("node2", 7174, rail("mlx5_0", eth, []string{"fd00::2/64"}, "all")),
			problems: []string{"gid_family: mlx5_0 port 1 -> node2's mlx5_0 port 1: this port reaches fd00::2 over IPv6 only, and this port's GID table has no RoCE GID for fd00::1 (it has ::ffff:10.0.0.1 RoCE v2)"}},
		{name: "R-Pingmesh #41, all rails: IPv4-mapped GIDs only against native IPv6 only",
			local: desc("node1", 7174, rail("mlx5_0", eth, []string{"10.9.0.1/24"}, "all")),
			peer:  desc("node2", 7174, rail("mlx5_3", eth, []string{"fd00:3::2/64"}, "all")), mode: AllRails,
			problems: []string{"gid_family: mlx5_0 port 1 -> node2's mlx5_3 port 1: this port has IPv4 addresses only, the peer's IPv6 only: no family in common"}},
		{name: "the peer's GID table lacks the shared family",
			local: two,
			peer: desc("node2", 7174, rail("mlx5_0", eth, []string{"10.0.0.2/24"}), // no GID at all
				rail("mlx5_1", eth, []string{"10.0.1.2/24"}, "all")),
			targets:  []string{"mlx5_1 -> 10.0.1.2:7174"},
			problems: []string{"gid_family: mlx5_0 port 1 -> node2's mlx5_0 port 1: this port reaches 10.0.0.2 over IPv4 only, and the peer port's GID table has no RoCE GID for 10.0.0.2 (it has none)"}},
		{name: "dual stack, IPv4 GID missing on this side: IPv6",
			local: desc("node1", 7174, rail("mlx5_0", eth, []string{"10.0.0.1/24", "fd00::1/64"}, "fd00::1")),
			peer:  twoPeer, targets: []string{"mlx5_0 -> [fd00::2]:7300"}},
		{name: "no rail in the subnet (a peer on other planes)",
			local: two, peer: desc("node3", 7174, rail("mlx5_0", eth, []string{"10.5.0.3/24"}, "all")),
			problems: []string{`no_rail_in_subnet: mlx5_0 port 1: peer "node3" has no rail in 10.0.0.0/24 or fd00::/64`,
				`no_rail_in_subnet: mlx5_1 port 1: peer "node3" has no rail in 10.0.1.0/24 or fd00:1::/64`}},
		{name: "no rail in the subnet, and the peer's family is the other one",
			local:    desc("node1", 7174, rail("mlx5_0", eth, []string{"10.0.0.1/24"}, "all")),
			peer:     desc("node2", 7174, rail("mlx5_0", eth, []string{"fd00::2/64"}, "all")),
			problems: []string{`no_rail_in_subnet: mlx5_0 port 1: peer "node2" has no rail in 10.0.0.0/24 (its rails have IPv6 addresses only)`}},
		{name: "InfiniBand over IPoIB addresses",
			local:   desc("node1", 7174, rail("mlx5_0", ib, []string{"192.168.10.1/24"})),
			peer:    desc("node2", 7174, rail("mlx5_0", ib, []string{"192.168.10.2/24"})),
			targets: []string{"mlx5_0 -> 192.168.10.2:7174"}},
		{name: "RoCE against InfiniBand in one subnet",
			local:    desc("node1", 7174, rail("mlx5_0", eth, []string{"192.168.10.1/24"}, "all")),
			peer:     desc("node2", 7174, rail("mlx5_0", ib, []string{"192.168.10.2/24"})),
			problems: []string{"link_layer: mlx5_0 port 1 -> node2's mlx5_0 port 1: this port is Ethernet, the peer's InfiniBand"}},
		{name: "a peer rail of a link layer from a newer version",
			local:    desc("node1", 7174, rail("mlx5_0", eth, []string{"10.0.0.1/24"}, "all")),
			peer:     desc("node2", 7174, rail("x_0", "OmniPath", []string{"10.0.0.2/24"})),
			problems: []string{"link_layer: mlx5_0 port 1 -> node2's x_0 port 1: this port is Ethernet, the peer's OmniPath"}},
		{name: "a link-local address both hosts use is not the peer being this host",
			local:   desc("node1", 7174, rail("mlx5_0", eth, []string{"fe80::1/64", "10.0.0.1/24"}, "all")),
			peer:    desc("node2", 7174, rail("mlx5_0", eth, []string{"fe80::1/64", "10.0.0.2/24"}, "all")),
			targets: []string{"mlx5_0 -> 10.0.0.2:7174"}},
		{name: "link-local addresses only: no target, no problem (RailProblems says it)",
			local: desc("node1", 7174, rail("mlx5_0", eth, []string{"fe80::1/64"}, "all")),
			peer:  desc("node2", 7174, rail("mlx5_0", eth, []string{"fe80::2/64"}, "all"))},
		{name: "two local rails in one flat subnet: each probes the peer's rail",
			local:   desc("node1", 7174, rail("mlx5_0", eth, []string{"10.0.0.1/16"}, "all"), rail("mlx5_1", eth, []string{"10.0.1.1/16"}, "all")),
			peer:    desc("node2", 7174, rail("mlx5_0", eth, []string{"10.0.2.2/16"}, "all")),
			targets: []string{"mlx5_0 -> 10.0.2.2:7174", "mlx5_1 -> 10.0.2.2:7174"}},
		{name: "a peer without rails",
			local: two, peer: desc("node2", 7174),
			problems: []string{`no_rail_in_subnet: mlx5_0 port 1: peer "node2" has no rail in 10.0.0.0/24 or fd00::/64: nothing`,
				`no_rail_in_subnet: mlx5_1 port 1`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ts, ps := Pair(c.local, c.peer, c.mode)
			var got []string
			for _, x := range ts {
				got = append(got, x.Device+" -> "+x.Addr.String())
				if x.Peer != c.peer.Name || x.Port != 1 || !x.Source.IsValid() || x.PeerDevice == "" {
					t.Errorf("target %+v: peer, port, source or peer device missing", x)
				}
			}
			if strings.Join(got, ", ") != strings.Join(c.targets, ", ") {
				t.Errorf("targets %q, want %q", got, c.targets)
			}
			if len(ps) != len(c.problems) {
				t.Errorf("problems %v, want %d", ps, len(c.problems))
			}
			for i, p := range ps {
				if i < len(c.problems) && !strings.Contains(p.Reason+": "+p.Detail, c.problems[i]) {
					t.Errorf("problem %q: %q, want %q", p.Reason, p.Detail, c.problems[i])
				}
				if p.Peer != c.peer.Name || p.Error() != p.Detail {
					t.Errorf("problem %+v: peer or Error()", p)
				}
			}
		})
	}
}

// TestPairSource: the probe of a rail leaves from that rail's address, the one in the
// target's subnet.
func TestPairSource(t *testing.T) {
	local := desc("a", 1, rail("mlx5_0", LinkEthernet, []string{"10.0.0.1/24", "10.1.0.1/24"}, "all"))
	peer := desc("b", 1, rail("mlx5_4", LinkEthernet, []string{"10.1.0.2/24"}, "all"))
	ts, _ := Pair(local, peer, SameSubnet)
	if len(ts) != 1 || ts[0].Source.String() != "10.1.0.1" || ts[0].PeerDevice != "mlx5_4" {
		t.Fatalf("%v", ts)
	}
	if s := ts[0].String(); s != "mlx5_0 port 1 -> b 10.1.0.2:1 (mlx5_4 port 1)" {
		t.Errorf("String %q", s)
	}
}

func TestRailProblems(t *testing.T) {
	d := desc("a", 1,
		rail("mlx5_0", LinkEthernet, []string{"10.0.0.1/24"}, "all"),
		rail("mlx5_1", LinkEthernet, []string{"fe80::1/64"}, "all"),
		rail("mlx5_2", LinkEthernet, []string{"10.0.2.1/24", "fd00:2::1/64"}, "10.0.2.1"),
		rail("x_0", "OmniPath", []string{"10.0.3.1/24"}),
		rail("mlx5_4", LinkInfiniBand, nil))
	var got []string
	for _, p := range d.RailProblems() {
		got = append(got, p.Reason+": "+p.Detail)
	}
	want := []string{
		`no_address: mlx5_1 port 1 (netdev ""): no routable address`,
		"no_gid: mlx5_2 port 1: no RoCE GID for fd00:2::1 (GID table: ::ffff:10.0.2.1 RoCE v2): not used over that address",
		`link_layer: x_0 port 1: link layer "OmniPath" is unknown to this gorping`,
		`no_address: mlx5_4 port 1`,
	}
	if len(got) != len(want) {
		t.Fatalf("%q", got)
	}
	for i := range want {
		if !strings.Contains(got[i], want[i]) {
			t.Errorf("%q, want %q", got[i], want[i])
		}
	}
}
