//go:build !guest

package deploy_test

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The localisation rules' unit tests (prometheus/gorping-localisation.test.yml) are
// written from the scenarios below: a five-host fleet with two rails per host, every pair
// with its counters, so each case is a whole fabric rather than a handful of series. The
// file is committed so that `promtool test rules` runs it as it is;
// TestLocalisationRules fails when it is not what the scenarios give
// (`go test ./deploy -run TestLocalisationRules -update` rewrites it) and runs promtool
// on it.

var update = flag.Bool("update", false, "rewrite prometheus/gorping-localisation.test.yml from the scenarios")

const localisationTests = "prometheus/gorping-localisation.test.yml"

// host is one agent of the test fleet. Its rail r's address is 10.r.0.n:7174.
type host struct {
	name, group string
	n           int
}

var fleet = []host{{"a1", "A", 1}, {"a2", "A", 2}, {"b1", "B", 3}, {"b2", "B", 4}, {"c1", "C", 5}}

const rails = 2

func (h host) instance() string    { return h.name + ":10174" }
func (h host) target(r int) string { return fmt.Sprintf("10.%d.0.%d:7174", r, h.n) }
func device(r int) string          { return fmt.Sprintf("mlx5_%d", r) }

// A scenario is a fabric over minutes 0..minutes. Every pair (source host, target host,
// rail) has a share of failed slots each minute; an agent that is down (a dead host, a
// restart) is not scraped: its series go stale, its counters restart from 0 when it comes
// back, and its peers fail every probe toward it.
type scenario struct {
	name    string
	comment string
	minutes int
	// loss is the share of the pair's slots that fail in minute m (60 slots a minute).
	loss func(src, dst host, rail, m int) float64
	// paths > 0: every pair has that many paths, and pathLoss replaces loss per path; the
	// target's counters are the sum of its paths'.
	paths    int
	pathLoss func(src, dst host, rail, path, m int) float64
	// deadConns: the pair's connections in minute m that were set up but whose first
	// ping failed (gorping_dead_connections_total; nil: the series is not written).
	deadConns func(src, dst host, rail, m int) float64
	// down says the agent on h is not running in minute m.
	down func(h host, m int) bool
	// peerUp is the observer's gorping_peer_up for peer in minute m (default: the peer's
	// agent runs, or went down less than 2 minutes ago: discovery's stale window).
	peerUp func(observer, peer host, m int) bool
	// reason of a failed slot.
	reason func(src, dst host, rail, m int) string
	// rtt: every pair has RTT histograms (classic buckets, rttBuckets): every probe of
	// minute m lands in bucket swBucket (the software RTT) and, where split says the
	// source's NIC stamps completions (ts_source="nic"), netBucket (the network's part).
	rtt       bool
	split     func(src host) bool
	netBucket func(src, dst host, rail, m int) int
	swBucket  func(src, dst host, rail, m int) int
	evals     []eval
}

type eval struct {
	minute int
	// firing: alert name -> the alerts expected (every localisation alert not named is
	// expected quiet).
	firing map[string][]alert
}

type alert struct {
	labels      map[string]string
	summary     string
	description string
}

var localisationAlerts = []string{"GorpingPathBlackhole", "GorpingFlowBlackhole", "GorpingTargetRailDown", "GorpingGroupRailDown",
	"GorpingTargetRailLoss", "GorpingSourceRailDown", "GorpingGroupPairLoss", "GorpingGroupPairLatency"}

// rttBuckets are the classic buckets of the test's RTT histograms (the agent's, from
// 4 µs to 256 µs): a bucket's median is its middle, 10 µs, 40 µs, 160 µs.
var rttBuckets = []string{"4e-06", "1.6e-05", "6.4e-05", "0.000256", "+Inf"}

func hostByName(name string) host {
	for _, h := range fleet {
		if h.name == name {
			return h
		}
	}
	panic(name)
}

// between says whether a pair joins the two hosts (either way).
func between(src, dst host, x, y string) bool {
	return (src.name == x && dst.name == y) || (src.name == y && dst.name == x)
}

func touches(src, dst host, x string) bool { return src.name == x || dst.name == x }

func targetRailDown(peer string, rail int, ratio, summaryTail string) alert {
	h := hostByName(peer)
	return alert{
		labels: map[string]string{"severity": "critical", "peer": peer, "peer_group": h.group,
			"target": h.target(rail), "device": device(rail), "port": "1"},
		summary: fmt.Sprintf("%s's rail %s port 1 (%s) is unreachable: its NIC, port or cable", peer, device(rail), h.target(rail)),
		description: fmt.Sprintf("%s of the agents that probe %s (%s, group %s) on rail %s port 1 cannot reach it, its group-mates too, while %s itself is alive and the same agents reach other hosts: %s's NIC, its port, its cable or its switch port on that rail.",
			ratio, h.target(rail), peer, h.group, device(rail), peer, peer) + summaryTail,
	}
}

func sourceRailDown(agent string, rail int, ratio string) alert {
	h := hostByName(agent)
	return alert{
		labels: map[string]string{"severity": "critical", "instance": h.instance(), "job": "gorping-mesh",
			"agent": agent, "group": h.group, "device": device(rail), "port": "1"},
		summary: fmt.Sprintf("%s cannot reach most of its targets on %s port 1: its own NIC or rail", agent, device(rail)),
		description: fmt.Sprintf("%s (%s, group %s) fails %s of its targets on %s port 1 while the other agents reach them: that host's NIC, port, cable, or its own set-up on that rail (addresses, GIDs, routes; gorping_probe_failures_total{instance=\"%s\",device=\"%s\"} says which).",
			agent, h.instance(), h.group, ratio, device(rail), h.instance(), device(rail)),
	}
}

func groupRailDown(group string, rail int, ratio string) alert {
	return alert{
		labels:  map[string]string{"severity": "critical", "group": group, "device": device(rail), "port": "1"},
		summary: fmt.Sprintf("group %s's switch on %s port 1 is down: %s of its hosts unreachable there", group, device(rail), ratio),
		description: fmt.Sprintf("Most agents cannot reach %s of group %s's hosts on rail %s port 1 (two or more), nor can their group-mates, while those hosts are alive on their other rails: the group's switch on that rail (the ToR, its power, or all its uplinks at once), rather than each host's NIC.",
			ratio, group, device(rail)),
	}
}

func targetRailLoss(peer string, rail int, ratio string) alert {
	h := hostByName(peer)
	return alert{
		labels: map[string]string{"severity": "warning", "peer": peer, "peer_group": h.group,
			"target": h.target(rail), "device": device(rail), "port": "1"},
		summary: fmt.Sprintf("%s's rail %s port 1 (%s) loses probes: its NIC, port or cable flaps or drops", peer, device(rail), h.target(rail)),
		description: fmt.Sprintf("%s of the agents that probe %s (%s, group %s) on rail %s port 1, its group-mates too, lost between 5 %% and 90 %% of their probes over 2 minutes, while %s's other rails do not: its NIC, its port, its cable or its switch port on that rail goes down and up, or drops.",
			ratio, h.target(rail), peer, h.group, device(rail), peer),
	}
}

func groupPairLoss(from, to string, rail int, ratio string) alert {
	return alert{
		labels:  map[string]string{"severity": "warning", "group": from, "peer_group": to, "device": device(rail), "port": "1"},
		summary: fmt.Sprintf("%s -> %s on %s port 1: %s loss between the groups, none inside", from, to, device(rail), ratio),
		description: fmt.Sprintf("Probes from group %s to group %s on rail %s port 1 lost %s over 5 minutes while both groups lose under 1 %% inside and no host or path explains it: the links between those groups' switches (or the spine between them) on that rail.",
			from, to, device(rail), ratio),
	}
}

func groupPairLatency(from, to string, rail int, rise string) alert {
	return alert{
		labels:  map[string]string{"severity": "warning", "group": from, "peer_group": to, "device": device(rail), "port": "1"},
		summary: fmt.Sprintf("%s -> %s on %s port 1: median RTT %s times its past hour's, not inside the groups", from, to, device(rail), rise),
		description: fmt.Sprintf("The median RTT from group %s to group %s on rail %s port 1 has been over twice its median of the past hour for 5 minutes while the RTT inside both groups did not rise by half: queueing on the links between those groups' switches (check ECN/CNP counters) or a longer path.",
			from, to, device(rail)),
	}
}

func pathBlackhole(src, dst string, rail, path int, ratio string) alert {
	s, d := hostByName(src), hostByName(dst)
	return alert{
		labels: map[string]string{"severity": "warning", "instance": s.instance(), "job": "gorping-mesh", "agent": src,
			"device": device(rail), "port": "1", "target": d.target(rail), "peer": dst, "path": strconv.Itoa(path)},
		summary: fmt.Sprintf("%s -> %s (%s): path %d is black-holed while other paths work", src, d.target(rail), dst, path),
		description: fmt.Sprintf("%s of the probes on path %d from %s (%s port 1) to %s failed over 2 minutes while another path to it lost under 5 %%: an ECMP member between them drops the flows hashed onto it. The path's flow now: UDP source port %d, QP %d -> %d.",
			ratio, path, src, device(rail), d.target(rail), udpSport(s, d, rail, path), localQPN(s, d, rail, path), remoteQPN(s, d, rail, path)),
	}
}

func flowBlackhole(from, to string, rail int) alert {
	return alert{
		labels:  map[string]string{"severity": "warning", "group": from, "peer_group": to, "device": device(rail), "port": "1"},
		summary: fmt.Sprintf("%s -> %s on %s port 1: new connections die at their first ping: a black-holed flow", from, to, device(rail)),
		description: fmt.Sprintf("Connections from group %s to group %s on rail %s port 1 were set up over the last 2 minutes but never carried a ping, while the hosts answer: an ECMP member between the two groups drops the flows hashed onto it. gorping:pair_dead_connections:increase_2m names the pairs that met it; gorping_path_info gives their flows (UDP source port, QPs).",
			from, to, device(rail)),
	}
}

func localQPN(src, dst host, rail, path int) int  { return 100 + 40*src.n + 8*dst.n + 4*rail + path }
func remoteQPN(src, dst host, rail, path int) int { return 300 + 40*dst.n + 8*src.n + 4*rail + path }
func udpSport(src, dst host, rail, path int) int {
	return 0xC000 | (localQPN(src, dst, rail, path)*31+remoteQPN(src, dst, rail, path))&0x3FFF
}

func never(host, int) bool { return false }

func noLoss(host, host, int, int) float64 { return 0 }

var localisationScenarios = []scenario{
	{
		name:    "localisation: a healthy fabric raises nothing",
		minutes: 20,
		evals:   []eval{{minute: 15}},
	},
	{
		name:    "localisation: a host's rail down names that host and rail, not its peers' sources or the groups",
		comment: "b1's rail 1 dies from minute 5 (cable): nobody reaches it there, b1 reaches nobody there; its rail 0 works.",
		minutes: 20,
		loss: func(src, dst host, rail, m int) float64 {
			if rail == 1 && touches(src, dst, "b1") && m >= 5 {
				return 1
			}
			return 0
		},
		evals: []eval{
			{minute: 6}, // pending: the for: of 90 s has not passed
			{minute: 14, firing: map[string][]alert{"GorpingTargetRailDown": {targetRailDown("b1", 1, "100%", "")}}},
		},
	},
	{
		name:    "localisation: an agent that cannot reach anyone on one rail, while everyone reaches it, is its own NIC or set-up",
		comment: "a1's prober on rail 0 fails every target from minute 5 (a GID problem); its responder answers the others.",
		minutes: 20,
		loss: func(src, dst host, rail, m int) float64 {
			if rail == 0 && src.name == "a1" && m >= 5 {
				return 1
			}
			return 0
		},
		evals: []eval{
			{minute: 7},
			{minute: 14, firing: map[string][]alert{"GorpingSourceRailDown": {sourceRailDown("a1", 0, "100%")}}},
		},
	},
	{
		name:    "localisation: a dead host raises no rail, path or group alert",
		comment: "b2 is powered off from minute 5: its agent is not scraped, every probe toward it fails, and from minute 7 its peers' discovery keeps it as stale (gorping_peer_up 0).",
		minutes: 20,
		down:    func(h host, m int) bool { return h.name == "b2" && m >= 5 },
		evals:   []eval{{minute: 8}, {minute: 12}, {minute: 19}},
	},
	{
		name:    "localisation: a host alive with all its rails down raises its source alerts, not a target rail alert",
		comment: "b2's RDMA is gone on both rails from minute 5 (a driver crash) while its agent runs and answers discovery: its rails are not 'fine' elsewhere, so no TargetRailDown; its own probes fail while the others reach their targets.",
		minutes: 20,
		loss: func(src, dst host, rail, m int) float64 {
			if touches(src, dst, "b2") && m >= 5 {
				return 1
			}
			return 0
		},
		evals: []eval{{minute: 14, firing: map[string][]alert{"GorpingSourceRailDown": {
			sourceRailDown("b2", 0, "100%"), sourceRailDown("b2", 1, "100%")}}}},
	},
	{
		name:    "localisation: one agent restarting pages nobody",
		comment: "a2's agent restarts in minute 10: not scraped for that minute, its counters start again from 0, its peers' probes toward it fail for that minute.",
		minutes: 22,
		down:    func(h host, m int) bool { return h.name == "a2" && m == 10 },
		reason: func(src, dst host, rail, m int) string {
			return "connect_refused"
		},
		evals: []eval{{minute: 10}, {minute: 11}, {minute: 13}, {minute: 16}, {minute: 21}},
	},
	{
		name:    "localisation: loss between two groups while both are healthy inside names the pair of groups and rail",
		comment: "10 % of the slots between groups A and B on rail 0 fail from minute 2 (the links between their switches); inside A and B, and to and from C, nothing is lost.",
		minutes: 20,
		loss: func(src, dst host, rail, m int) float64 {
			if rail == 0 && m >= 2 && src.group != dst.group && (src.group == "A" || src.group == "B") && (dst.group == "A" || dst.group == "B") {
				return 0.1
			}
			return 0
		},
		reason: func(host, host, int, int) string { return "retry_exc_err" },
		evals: []eval{
			{minute: 6},
			{minute: 15, firing: map[string][]alert{"GorpingGroupPairLoss": {
				groupPairLoss("A", "B", 0, "10%"), groupPairLoss("B", "A", 0, "10%")}}},
		},
	},
	{
		name:    "localisation: loss toward a group that also loses inside is that group's, not the links between groups",
		comment: "b1's link on rail 0 loses 10 % from minute 2 (a dirty fibre): every pair to or from b1 there, b2's included. No group alert; the lossy rail is b1's.",
		minutes: 20,
		loss: func(src, dst host, rail, m int) float64 {
			if rail == 0 && m >= 2 && touches(src, dst, "b1") {
				return 0.1
			}
			return 0
		},
		evals: []eval{{minute: 15, firing: map[string][]alert{"GorpingTargetRailLoss": {targetRailLoss("b1", 0, "100%")}}}},
	},
	{
		name:    "localisation: a singleton group cut off on a rail looks like its host's rail",
		comment: "c1 is the only host of group C: its switch's uplinks on rail 1 failing (from minute 5) and its own cable failing look the same from outside, and the rule names c1. Documented in docs/mesh.md.",
		minutes: 20,
		loss: func(src, dst host, rail, m int) float64 {
			if rail == 1 && touches(src, dst, "c1") && m >= 5 {
				return 1
			}
			return 0
		},
		evals: []eval{{minute: 14, firing: map[string][]alert{"GorpingTargetRailDown": {targetRailDown("c1", 1, "100%", "")}}}},
	},
	{
		name:    "localisation: a group's switch cut off on a rail is not a host's rail",
		comment: "Group B's switch loses its uplinks on rail 1 from minute 5: A and C cannot reach b1, b2 there, and b1, b2 cannot reach them, but b1 <-> b2 works. Most observers fail toward b1 and b2, their group-mate does not: no TargetRailDown. The groups see total loss between them; GroupPairLoss excludes nothing here, so it names the pairs of groups.",
		minutes: 20,
		loss: func(src, dst host, rail, m int) float64 {
			if rail == 1 && m >= 5 && (src.group == "B") != (dst.group == "B") {
				return 1
			}
			return 0
		},
		evals: []eval{{minute: 14, firing: map[string][]alert{"GorpingGroupPairLoss": {
			groupPairLoss("A", "B", 1, "100%"), groupPairLoss("B", "A", 1, "100%"),
			groupPairLoss("B", "C", 1, "100%"), groupPairLoss("C", "B", 1, "100%")}}}},
	},
	{
		name:    "localisation: a group's switch down on a rail names the group, not each of its hosts",
		comment: "Group B's switch on rail 1 dies from minute 5: nobody reaches b1 or b2 there, b1 and b2 not each other either; their rail 0 works. Two hosts of one group down on one rail at once are their switch.",
		minutes: 20,
		loss: func(src, dst host, rail, m int) float64 {
			if rail == 1 && m >= 5 && (src.group == "B" || dst.group == "B") {
				return 1
			}
			return 0
		},
		evals: []eval{
			{minute: 6},
			{minute: 14, firing: map[string][]alert{"GorpingGroupRailDown": {groupRailDown("B", 1, "100%")}}},
		},
	},
	{
		name:    "localisation: a flapping NIC is named as its host's rail losing probes",
		comment: "a1's rail 1 is down every other minute from minute 5 (a flapping port): never down for long enough for TargetRailDown; every observer, its group-mate a2 too, loses about half of its slots toward it over 2 minutes, and not toward a1's rail 0.",
		minutes: 20,
		loss: func(src, dst host, rail, m int) float64 {
			if rail == 1 && touches(src, dst, "a1") && m >= 5 && m%2 == 1 {
				return 1
			}
			return 0
		},
		evals: []eval{
			{minute: 6},
			{minute: 12, firing: map[string][]alert{"GorpingTargetRailLoss": {targetRailLoss("a1", 1, "100%")}}},
		},
	},
	{
		name:    "localisation: black-holed ECMP paths are named by path; the targets stay up and no host or group is named",
		comment: "4 paths per pair. From minute 3 an ECMP member between A and B on rail 0 drops the flows hashed onto it: path 2 of a1 -> b1 and path 0 of a2 -> b2.",
		minutes: 20,
		paths:   4,
		pathLoss: func(src, dst host, rail, path, m int) float64 {
			if rail == 0 && m >= 3 && ((src.name == "a1" && dst.name == "b1" && path == 2) || (src.name == "a2" && dst.name == "b2" && path == 0)) {
				return 1
			}
			return 0
		},
		evals: []eval{
			{minute: 5},
			{minute: 12, firing: map[string][]alert{"GorpingPathBlackhole": {
				pathBlackhole("a1", "b1", 0, 2, "100%"), pathBlackhole("a2", "b2", 0, 0, "100%")}}},
		},
	},
	{
		name: "localisation: a black-holed ECMP member under path rotation: new connections die at their first ping, the pairs of groups are named until the repair",
		comment: "4 paths per pair, each replaced on a schedule. From minute 3 to minute 12 an ECMP member between A and B on rail 0 drops the flows hashed onto it: " +
			"a1 -> b1 and b2 -> a2 get a dead connection or two a minute (one failed slot each), so no path stays down.",
		minutes: 20,
		paths:   4,
		pathLoss: func(src, dst host, rail, path, m int) float64 {
			if rail == 0 && m >= 3 && m < 12 && path == m%4 && (between(src, dst, "a1", "b1") && src.name == "a1" || between(src, dst, "a2", "b2") && src.name == "b2") {
				return 1.0 / 60
			}
			return 0
		},
		deadConns: func(src, dst host, rail, m int) float64 {
			if rail == 0 && m >= 3 && m < 12 && (src.name == "a1" && dst.name == "b1" || src.name == "b2" && dst.name == "a2") {
				return float64(1 + m%2)
			}
			return 0
		},
		evals: []eval{
			{minute: 3},
			{minute: 6, firing: map[string][]alert{"GorpingFlowBlackhole": {flowBlackhole("A", "B", 0), flowBlackhole("B", "A", 0)}}},
			{minute: 11, firing: map[string][]alert{"GorpingFlowBlackhole": {flowBlackhole("A", "B", 0), flowBlackhole("B", "A", 0)}}},
			{minute: 15},
		},
	},
	{
		name:    "localisation: an agent restarting kills the connections it had just accepted: no flow alert",
		comment: "4 paths per pair; b1's agent is down in minutes 5 and 6; a1's and a2's connections to b1 set up just before die at their first ping.",
		minutes: 20,
		paths:   4,
		down:    func(h host, m int) bool { return h.name == "b1" && (m == 5 || m == 6) },
		deadConns: func(src, dst host, rail, m int) float64 {
			if dst.name == "b1" && src.group == "A" && (m == 5 || m == 7) {
				return 1
			}
			return 0
		},
		evals: []eval{{minute: 6}, {minute: 8}, {minute: 9}},
	},
	{
		name:    "localisation: a dead host fails all its paths at once: no path alert",
		comment: "4 paths per pair; b1 is powered off from minute 5.",
		minutes: 20,
		paths:   4,
		down:    func(h host, m int) bool { return h.name == "b1" && m >= 5 },
		evals:   []eval{{minute: 6}, {minute: 8}, {minute: 15}},
	},
}

func init() {
	always := func(host) bool { return true }
	nowhere := func(host) bool { return false }
	flat := func(b int) func(host, host, int, int) int { return func(host, host, int, int) int { return b } }
	loaded := func(name string, from int) func(src, dst host, rail, m int) int {
		return func(src, dst host, rail, m int) int {
			if m >= from && touches(src, dst, name) {
				return 3 // 160 µs: prober and responder delay
			}
			return 2 // 40 µs: the software RTT of an idle pair
		}
	}
	localisationScenarios = append(localisationScenarios,
		scenario{
			name:    "localisation: latency between two groups, not inside them, names the pair of groups and rail",
			comment: "With the RTT split everywhere: from minute 65 the network's part of the RTT between A and B on rail 0 goes from 10 µs to 40 µs (queueing on the links between their switches), and the software RTT with it.",
			minutes: 80, rtt: true, split: always,
			netBucket: func(src, dst host, rail, m int) int {
				if m >= 65 && rail == 0 && src.group != dst.group && (src.group == "A" || src.group == "B") && (dst.group == "A" || dst.group == "B") {
					return 2
				}
				return 1
			},
			swBucket: func(src, dst host, rail, m int) int {
				if m >= 65 && rail == 0 && src.group != dst.group && (src.group == "A" || src.group == "B") && (dst.group == "A" || dst.group == "B") {
					return 3
				}
				return 2
			},
			evals: []eval{{minute: 66}, {minute: 80, firing: map[string][]alert{"GorpingGroupPairLatency": {
				groupPairLatency("A", "B", 0, "4.0"), groupPairLatency("B", "A", 0, "4.0")}}}},
		},
		scenario{
			name:    "localisation: a host under CPU load raises no network alert where the RTT split exists",
			comment: "c1 (a group of one) is loaded from minute 65: its software RTTs go from 40 µs to 160 µs both ways (prober and responder delay); the network's part stays at 10 µs.",
			minutes: 80, rtt: true, split: always, netBucket: flat(1), swBucket: loaded("c1", 65),
			evals: []eval{{minute: 72}, {minute: 80}},
		},
		scenario{
			name:    "localisation: without the split, a loaded host with group-mates is its group's, not the links'",
			comment: "rxe/siw (software RTT only): b1 is loaded from minute 65; its group-mate b2 sees it too, so group B is not healthy inside.",
			minutes: 80, rtt: true, split: nowhere, swBucket: loaded("b1", 65),
			evals: []eval{{minute: 80}},
		},
		scenario{
			name:    "localisation: without the split, a loaded host alone in its group looks like the links to its group",
			comment: "rxe/siw: c1, alone in group C, is loaded from minute 65: nothing inside C tells its CPU from C's links (docs/mesh.md, Localisation). With the split this case is quiet (above).",
			minutes: 80, rtt: true, split: nowhere, swBucket: loaded("c1", 65),
			evals: []eval{{minute: 80, firing: map[string][]alert{"GorpingGroupPairLatency": {
				groupPairLatency("A", "C", 0, "4.0"), groupPairLatency("A", "C", 1, "4.0"),
				groupPairLatency("B", "C", 0, "4.0"), groupPairLatency("B", "C", 1, "4.0"),
				groupPairLatency("C", "A", 0, "4.0"), groupPairLatency("C", "A", 1, "4.0"),
				groupPairLatency("C", "B", 0, "4.0"), groupPairLatency("C", "B", 1, "4.0")}}}},
		},
	)
}

// seriesWriter collects one promtool input series per metric and label set.
type seriesWriter struct {
	order  []string
	values map[string][]string
	n      int // samples per series: minutes+1
}

func (w *seriesWriter) set(series string, m int, v string) {
	if w.values == nil {
		w.values = map[string][]string{}
	}
	vs, ok := w.values[series]
	if !ok {
		vs = make([]string, w.n)
		for i := range vs {
			vs[i] = "_"
		}
		w.values[series] = vs
		w.order = append(w.order, series)
	}
	vs[m] = v
}

func num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// compress writes values in promtool's expanding notation: a run of three or more
// values with a constant step as `a+bxn`, runs of missing samples as `_xn`.
func compress(vs []string) string {
	var out []string
	for i := 0; i < len(vs); {
		j := i + 1
		if vs[i] == "_" {
			for j < len(vs) && vs[j] == "_" {
				j++
			}
			if j-i >= 2 {
				out = append(out, fmt.Sprintf("_x%d", j-i))
			} else {
				out = append(out, "_")
			}
			i = j
			continue
		}
		a, err := strconv.ParseFloat(vs[i], 64)
		if err != nil || i+1 >= len(vs) {
			out = append(out, vs[i])
			i++
			continue
		}
		b, err := strconv.ParseFloat(vs[i+1], 64)
		if err != nil {
			out = append(out, vs[i])
			i++
			continue
		}
		step := b - a
		for j = i + 2; j < len(vs); j++ {
			c, err := strconv.ParseFloat(vs[j], 64)
			if err != nil || c-a != float64(j-i)*step {
				break
			}
		}
		if j-i < 3 {
			out = append(out, vs[i])
			i++
			continue
		}
		switch {
		case step == 0:
			out = append(out, fmt.Sprintf("%sx%d", vs[i], j-i-1))
		case step > 0:
			out = append(out, fmt.Sprintf("%s+%sx%d", vs[i], num(step), j-i-1))
		default:
			out = append(out, fmt.Sprintf("%s%sx%d", vs[i], num(step), j-i-1))
		}
		i = j
	}
	return strings.Join(out, " ")
}

func labels(kv ...string) string {
	var b strings.Builder
	for i := 0; i < len(kv); i += 2 {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s=%q", kv[i], kv[i+1])
	}
	return b.String()
}

// series renders the scenario's input series.
func (s scenario) series() *seriesWriter {
	w := &seriesWriter{n: s.minutes + 1}
	down := s.down
	if down == nil {
		down = never
	}
	peerUp := s.peerUp
	if peerUp == nil {
		peerUp = func(_, peer host, m int) bool {
			for k := 0; k <= 2; k++ {
				if m-k < 0 || !down(peer, m-k) {
					return true
				}
			}
			return false
		}
	}
	reason := s.reason
	if reason == nil {
		reason = func(_, _ host, _, _ int) string { return "timeout" }
	}
	// Counters per series since the agent's last start.
	counters := map[string]float64{}
	add := func(series string, m int, delta float64) {
		counters[series] += delta
		w.set(series, m, num(counters[series]))
	}
	for _, src := range fleet {
		job := []string{"instance", src.instance(), "job", "gorping-mesh"}
		for m := 0; m <= s.minutes; m++ {
			if down(src, m) {
				// Not scraped: up 0, and every series of the agent goes stale once.
				w.set("up{"+labels(job...)+"}", m, "0")
				for _, name := range w.order {
					if strings.Contains(name, `instance="`+src.instance()+`"`) && !strings.HasPrefix(name, "up{") {
						if m == 0 || w.values[name][m-1] != "stale" && w.values[name][m-1] != "_" {
							w.values[name][m] = "stale"
						}
					}
				}
				for k := range counters {
					if strings.Contains(k, `instance="`+src.instance()+`"`) {
						counters[k] = 0
					}
				}
				continue
			}
			w.set("up{"+labels(job...)+"}", m, "1")
			w.set("gorping_agent_info{"+labels(append(job, "agent", src.name, "group", src.group, "version", "v1.0.0")...)+"}", m, "1")
			for _, dst := range fleet {
				if dst == src {
					continue
				}
				w.set("gorping_peer_info{"+labels(append(job, "peer", dst.name, "peer_group", dst.group)...)+"}", m, "1")
				up := "0"
				if peerUp(src, dst, m) {
					up = "1"
				}
				w.set("gorping_peer_up{"+labels(append(job, "peer", dst.name)...)+"}", m, up)
				for r := range rails {
					tl := append(slices.Clone(job), "device", device(r), "port", "1", "target", dst.target(r), "peer", dst.name)
					s.pair(w, add, tl, src, dst, r, m, down(dst, m), reason(src, dst, r, m))
				}
			}
		}
	}
	return w
}

// pair writes one pair's series for minute m: 60 slots a minute per path.
func (s scenario) pair(w *seriesWriter, add func(string, int, float64), tl []string, src, dst host, r, m int, dstDown bool, reason string) {
	lossOf := func(path int) float64 {
		switch {
		case dstDown:
			return 1
		case s.paths > 0 && s.pathLoss != nil:
			return s.pathLoss(src, dst, r, path, m)
		case s.paths == 0 && s.loss != nil:
			return s.loss(src, dst, r, m)
		}
		return 0
	}
	if s.rtt && !dstDown {
		s.histograms(w, add, tl, src, dst, r, m)
	}
	if s.deadConns != nil {
		add("gorping_dead_connections_total{"+labels(tl...)+"}", m, s.deadConns(src, dst, r, m))
	}
	if s.paths == 0 {
		f := lossOf(0)
		add("gorping_probes_total{"+labels(tl...)+"}", m, 60)
		if f > 0 {
			add("gorping_probe_failures_total{"+labels(append(slices.Clone(tl), "reason", reason)...)+"}", m, 60*f)
		} else if _, ok := w.values["gorping_probe_failures_total{"+labels(append(slices.Clone(tl), "reason", reason)...)+"}"]; ok {
			add("gorping_probe_failures_total{"+labels(append(slices.Clone(tl), "reason", reason)...)+"}", m, 0)
		}
		up := "1"
		if f >= 1 {
			up = "0"
		}
		w.set("gorping_target_up{"+labels(tl...)+"}", m, up)
		return
	}
	working := 0
	var failed float64
	for p := range s.paths {
		f := lossOf(p)
		pl := append(slices.Clone(tl), "path", strconv.Itoa(p))
		add("gorping_path_probes_total{"+labels(pl...)+"}", m, 60)
		fl := "gorping_path_failures_total{" + labels(append(slices.Clone(pl), "reason", reason)...) + "}"
		if _, ok := w.values[fl]; ok || f > 0 {
			add(fl, m, 60*f)
		}
		up := "1"
		if f >= 1 {
			up = "0"
		} else {
			working++
		}
		w.set("gorping_path_up{"+labels(pl...)+"}", m, up)
		w.set("gorping_path_info{"+labels(append(pl, "local_qpn", strconv.Itoa(localQPN(src, dst, r, p)),
			"remote_qpn", strconv.Itoa(remoteQPN(src, dst, r, p)), "udp_sport", strconv.Itoa(udpSport(src, dst, r, p)))...)+"}", m, "1")
		failed += 60 * f
	}
	add("gorping_probes_total{"+labels(tl...)+"}", m, float64(60*s.paths))
	fl := "gorping_probe_failures_total{" + labels(append(slices.Clone(tl), "reason", reason)...) + "}"
	if _, ok := w.values[fl]; ok || failed > 0 {
		add(fl, m, failed)
	}
	w.set("gorping_target_paths_up{"+labels(tl...)+"}", m, strconv.Itoa(working))
	up := "0"
	if working > 0 {
		up = "1"
	}
	w.set("gorping_target_up{"+labels(tl...)+"}", m, up)
}

// histograms writes the pair's RTT histograms for minute m: 60 probes, all in one bucket.
func (s scenario) histograms(w *seriesWriter, add func(string, int, float64), tl []string, src, dst host, r, m int) {
	split := s.split != nil && s.split(src)
	ts := "sw"
	if split {
		ts = "nic"
	}
	w.set("gorping_target_ts_source{"+labels(append(slices.Clone(tl), "ts_source", ts)...)+"}", m, "1")
	write := func(name string, bucket int, extra ...string) {
		for i, le := range rttBuckets {
			n := 0.0
			if i >= bucket {
				n = 60
			}
			add(name+"_bucket{"+labels(append(append(slices.Clone(tl), extra...), "le", le)...)+"}", m, n)
		}
	}
	write("gorping_probe_rtt_seconds", s.swBucket(src, dst, r, m))
	if split {
		write("gorping_probe_network_rtt_seconds", s.netBucket(src, dst, r, m), "ts_source", "nic")
	}
}

func yamlString(s string) string { return strconv.Quote(s) }

// renderLocalisationTests is the whole test file.
func renderLocalisationTests() string {
	var b strings.Builder
	b.WriteString(`# promtool test rules gorping-localisation.test.yml: the localisation alerts of
# gorping-rules.yml (group gorping-localisation) on a whole test fabric per case.
# GENERATED by deploy/localisation_test.go from its scenarios: edit those and run
#   go test ./deploy -run TestLocalisationRules -update
# The fleet: groups A (a1, a2), B (b1, b2), C (c1); two rails per host (mlx5_0 and
# mlx5_1, port 1; rail r of host n at 10.r.0.n:7174); every agent probes both rails of
# every other host, one probe slot a second per path. At every evaluation every
# localisation alert is checked: those not listed must be quiet.
rule_files:
  - gorping-rules.yml
evaluation_interval: 1m
tests:
`)
	for _, s := range localisationScenarios {
		fmt.Fprintf(&b, "  - name: %s\n", yamlString(s.name))
		if s.comment != "" {
			fmt.Fprintf(&b, "    # %s\n", s.comment)
		}
		b.WriteString("    interval: 1m\n    input_series:\n")
		w := s.series()
		for _, name := range w.order {
			fmt.Fprintf(&b, "      - series: '%s'\n        values: '%s'\n", name, compress(w.values[name]))
		}
		b.WriteString("    alert_rule_test:\n")
		for _, e := range s.evals {
			for _, name := range localisationAlerts {
				fmt.Fprintf(&b, "      - alertname: %s\n        eval_time: %dm\n", name, e.minute)
				as := e.firing[name]
				if len(as) == 0 {
					b.WriteString("        exp_alerts: []\n")
					continue
				}
				b.WriteString("        exp_alerts:\n")
				for _, a := range as {
					b.WriteString("          - exp_labels:\n")
					keys := make([]string, 0, len(a.labels))
					for k := range a.labels {
						keys = append(keys, k)
					}
					slices.Sort(keys)
					for _, k := range keys {
						fmt.Fprintf(&b, "              %s: %s\n", k, yamlString(a.labels[k]))
					}
					fmt.Fprintf(&b, "            exp_annotations:\n              summary: %s\n              description: %s\n",
						yamlString(a.summary), yamlString(a.description))
				}
			}
		}
	}
	return b.String()
}

func TestLocalisationRules(t *testing.T) {
	want := renderLocalisationTests()
	if *update {
		if err := os.WriteFile(localisationTests, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	have, err := os.ReadFile(localisationTests)
	if err != nil {
		t.Fatal(err)
	}
	if string(have) != want {
		t.Fatalf("%s is not what the scenarios in localisation_test.go give: run go test ./deploy -run TestLocalisationRules -update", localisationTests)
	}
	out := promtool(t, "test", "rules", localisationTests)
	if !strings.Contains(out, "SUCCESS") {
		t.Errorf("promtool test rules %s: %s", localisationTests, out)
	}
}

func TestCompress(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"0 60 120 180", "0+60x3"},
		{"1 1 1 0 0", "1x2 0 0"},
		{"_ _ _ 1", "_x3 1"},
		{"5 stale _ _ 0 60 120", "5 stale _x2 0+60x2"},
		{"3 2 1", "3-1x2"},
	} {
		if got := compress(strings.Fields(c.in)); got != c.want {
			t.Errorf("compress(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
