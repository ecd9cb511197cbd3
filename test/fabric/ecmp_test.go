//go:build fabric

package fabric

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorping/gorping/test/grafanatest"
	"github.com/gorping/gorping/test/promtest"
	"github.com/gorping/gorping/test/vm"
)

// ecmpMembers is the size of TestMeshRails's ECMP group on rail 0 between
// tor-a (h1, h2) and tor-b (h3): a leaf's uplinks.
const ecmpMembers = 8

// railPaths is --paths of TestMeshRails's agents.
const railPaths = 4

// ecmpSide is a host's side of the group: 0 for tor-a, 1 for tor-b.
func ecmpSide(h *vm.Host) int {
	if railGroups[h.Name] == "tor-b" {
		return 1
	}
	return 0
}

// pathFlow is one path's two flows across the group, as its agent's
// gorping_path_info names them.
type pathFlow struct {
	agent, peer, target, path string
	sport                     uint16
	lqpn, rqpn                uint32
}

func (p pathFlow) String() string {
	return fmt.Sprintf("%s -> %s path %s (sport %d, QP %d -> %d)", p.agent, p.target, p.path, p.sport, p.lqpn, p.rqpn)
}

func (p pathFlow) key() string { return p.agent + " " + p.target + " " + p.path }

// wire is what the path's frames look like on the group: the prober's toward
// the responder's QP, the responder's toward the prober's, one UDP source port.
func (p pathFlow) wire(byName map[string]*vm.Host) [2]vm.Flow {
	from := ecmpSide(byName[p.agent])
	return [2]vm.Flow{{From: from, SPort: p.sport, DQPN: p.rqpn}, {From: 1 - from, SPort: p.sport, DQPN: p.lqpn}}
}

// crossingPaths reads the rail-0 paths between the two sides from Prometheus,
// once all of them (2 tor-a hosts x 1 tor-b host, both ways, railPaths each)
// are up with their labels, none of them a connection in stale (the last
// draw's, whose series outlive it until its next probe fails).
func crossingPaths(t *testing.T, prom *promtest.Server, byName map[string]*vm.Host, stale []pathFlow) []pathFlow {
	t.Helper()
	const want = 4 * railPaths
	var out []pathFlow
	prom.WaitFor(t, 3*time.Minute, `gorping_path_info{device="rxe0"} * on (instance, job, target, path) group_left gorping_path_up`, func(v promtest.Vector) bool {
		out = out[:0]
		for _, s := range v {
			me, peer := byName[s.Metric["host"]], byName[s.Metric["peer"]]
			if me == nil || peer == nil || ecmpSide(me) == ecmpSide(peer) || s.Value != 1 {
				continue
			}
			sp, err1 := strconv.ParseUint(s.Metric["udp_sport"], 10, 16)
			l, err2 := strconv.ParseUint(s.Metric["local_qpn"], 10, 24)
			r, err3 := strconv.ParseUint(s.Metric["remote_qpn"], 10, 24)
			if err1 != nil || err2 != nil || err3 != nil || sp == 0 {
				continue // a connection whose flow is not known
			}
			p := pathFlow{agent: me.Name, peer: peer.Name, target: s.Metric["target"], path: s.Metric["path"],
				sport: uint16(sp), lqpn: uint32(l), rqpn: uint32(r)}
			if slices.Contains(stale, p) {
				return false
			}
			out = append(out, p)
		}
		return len(out) == want
	})
	sort.Slice(out, func(i, j int) bool { return out[i].key() < out[j].key() })
	return out
}

// blackholeFor is how long ecmpBlackhole keeps its member dead: a fault that
// outlives the 2-minute windows the rules read, so that one vanishing from them
// (the paths reconnecting onto members that work) fails the test.
const blackholeFor = 5 * time.Minute

// ecmpBlackhole: one member of the group black-holed, not the one that carries
// the connection manager's MADs (so failed paths can reconnect around it, as on a
// fabric), for blackholeFor. Every crossing path's flows cross the member the hash
// predicts (gorping_path_info's udp_sport is the port on the wire); from within 2
// minutes of the fault to its end GorpingFlowBlackhole fires, naming the two groups
// on rail 0, and the agents' own path failures between the two sides grow in every
// 2-minute window; nothing names a host; healed, the alert clears and every path
// comes back.
func ecmpBlackhole(t *testing.T, prom *promtest.Server, g *vm.ECMP, byName map[string]*vm.Host) {
	// A quiet start: nothing pending from the subtests before (their faults are
	// healed, but an alert clears an evaluation after its series do).
	prom.WaitFor(t, 2*time.Minute, `ALERTS{alertname=~"GorpingTargetRailDown|GorpingSourceRailDown|GorpingTargetDown|GorpingPathBlackhole|GorpingFlowBlackhole"}`,
		func(v promtest.Vector) bool { return len(v) == 0 })
	paths := crossingPaths(t, prom, byName, nil)
	flows := g.Flows()
	mads := map[int]bool{}
	for f, st := range flows {
		if f.DQPN == 1 {
			mads[st.Member] = true
		}
	}
	// Each path's flows crossed on the member the hash predicts: its udp_sport label
	// is the port on the wire, both ways. The member to black-hole carries the most
	// of them, so that the fault meets live paths at once.
	load := make([]int, ecmpMembers)
	for _, p := range paths {
		for _, f := range p.wire(byName) {
			st, seen := flows[f]
			if !seen || st.Frames == 0 {
				t.Fatalf("%s: no frame of its flow %+v crossed the group (flows seen: %v): the predicted UDP source port is not the one on the wire", p, f, flows)
			}
			if want := vm.ECMPMember(f.SPort, f.DQPN, ecmpMembers); st.Member != want {
				t.Fatalf("%s: flow %+v crossed member %d, the hash says %d", p, f, st.Member, want)
			}
			load[st.Member]++
		}
	}
	dead := -1
	for m, n := range load {
		if !mads[m] && (dead < 0 || n > load[dead]) {
			dead = m
		}
	}
	if dead < 0 {
		t.Fatalf("every member carries the CM's MADs (%v): no member can be black-holed without cutting the connection manager", mads)
	}
	var lines []string
	for _, p := range paths {
		w := p.wire(byName)
		m0, m1 := vm.ECMPMember(w[0].SPort, w[0].DQPN, ecmpMembers), vm.ECMPMember(w[1].SPort, w[1].DQPN, ecmpMembers)
		mark := "ok  "
		if m0 == dead || m1 == dead {
			mark = "DEAD"
		}
		lines = append(lines, fmt.Sprintf("%s %s: members %d/%d", mark, p, m0, m1))
	}
	t.Logf("black-holing member %d of %d for %s (the MADs cross %v; it carries %d of the %d crossing paths' flows now):\n%s",
		dead, ecmpMembers, blackholeFor, mads, load[dead], 2*len(paths), strings.Join(lines, "\n"))

	began := time.Now()
	g.Impair(dead, vm.Impairment{Blackhole: true})
	healed := false
	defer func() {
		if !healed {
			g.Impair(dead, vm.Impairment{})
		}
	}()

	// From within 2 minutes to the end: the alert fires (pending within 1, its `for`
	// is 1m), and the path failures between the two sides grow in every 2-minute window.
	const alert = `ALERTS{alertname="GorpingFlowBlackhole", alertstate="firing"}`
	crossing := `sum(increase(gorping_path_failures_total{device="rxe0", host=~"h1|h2", peer="h3"}[2m]) or increase(gorping_path_failures_total{device="rxe0", host="h3"}[2m]))`
	prom.WaitFor(t, 2*time.Minute, alert, promtest.NonEmpty)
	firingAfter := time.Since(began)
	t.Logf("GorpingFlowBlackhole firing %.0fs after the black hole began", firingAfter.Seconds())
	var dashboardDone bool
	target := "" // h1's crossing target: h3's rail 0
	for _, p := range paths {
		if p.agent == "h1" {
			target = p.target
		}
	}
	polls, named := 0, map[string]bool{}
	for time.Since(began) < blackholeFor {
		v, err := prom.Query(alert)
		if err != nil {
			t.Fatalf("%s: %v", alert, err)
		}
		if len(v) == 0 {
			t.Fatalf("GorpingFlowBlackhole stopped firing %.0fs into the black hole (it fired at %.0fs): the fault left the rules' view while the member is dead",
				time.Since(began).Seconds(), firingAfter.Seconds())
		}
		for _, s := range v {
			m := s.Metric
			named[m["group"]+" -> "+m["peer_group"]] = true
			if m["device"] != "rxe0" || m["port"] != "1" || m["group"] == m["peer_group"] {
				t.Errorf("GorpingFlowBlackhole names %v: want rail rxe0 port 1 between tor-a and tor-b", m)
			}
		}
		if time.Since(began) >= 2*time.Minute {
			f, err := prom.Query(crossing)
			if err != nil || len(f) != 1 || f[0].Value == 0 {
				t.Fatalf("%.0fs into the black hole the crossing paths' failures over 2 minutes are %v (%v): the agents' own series lost the dead member",
					time.Since(began).Seconds(), f, err)
			}
		}
		polls++
		if !dashboardDone && target != "" {
			// Once: every panel of the shipped dashboard shows the fault.
			dashboardShows(t, prom, byName["h1"], target)
			dashboardDone = true
			continue
		}
		time.Sleep(5 * time.Second)
	}
	t.Logf("%d polls over %s, GorpingFlowBlackhole firing at each, for %v", polls, blackholeFor, named)
	if v, err := prom.Query(`count(max_over_time(gorping:pair_dead_connections:increase_2m{device="rxe0"}[` + fmt.Sprintf("%ds", int(time.Since(began).Seconds())) + `]) > 0)`); err == nil {
		t.Logf("pairs with dead connections during the black hole: %v", v)
	}
	// Nothing names a host, its rail or a target.
	window := fmt.Sprintf("%ds", int(time.Since(began).Seconds())+1)
	if v, err := prom.Query(`max_over_time(ALERTS{alertname=~"GorpingTargetRailDown|GorpingSourceRailDown|GorpingTargetDown"}[` + window + `])`); err != nil || len(v) > 0 {
		t.Errorf("alerts naming a host during the black hole: %v %v", v, err)
	}
	if v, err := prom.Query(`sum(increase(gorping_dead_connections_total{device="rxe0"}[` + window + `]))`); err == nil && len(v) == 1 {
		c, _ := prom.Query(`sum(increase(gorping_connections_total{device="rxe0"}[` + window + `]))`)
		t.Logf("during the black hole: %v dead connections of %v on rail 0", v[0].Value, c)
	}

	// Healed: the alert clears within its 2-minute window and an evaluation, and
	// every path comes back.
	g.Impair(dead, vm.Impairment{})
	healed = true
	repaired := time.Now()
	prom.WaitFor(t, 4*time.Minute, `ALERTS{alertname="GorpingFlowBlackhole"}`, func(v promtest.Vector) bool { return len(v) == 0 })
	t.Logf("GorpingFlowBlackhole cleared %.0fs after the repair", time.Since(repaired).Seconds())
	prom.WaitFor(t, 3*time.Minute, `count(gorping_path_up == 1)`, count(3*2*2*railPaths))
	if c, d := g.MemberFrames(dead, 0); d == 0 {
		t.Errorf("the dead member discarded nothing from tor-a (%d crossed)", c)
	}
}

// dashboardShows: during the black hole, every variable of the shipped dashboard
// offers the value an operator would pick (rail 0, h1, the target an alert names)
// and every panel's query returns data from the agents' own series and the rules:
// the host test's check (test/grafanatest) on real agents.
func dashboardShows(t *testing.T, prom *promtest.Server, h1 *vm.Host, target string) {
	t.Helper()
	b, err := os.ReadFile(repoFile(t, "deploy", "grafana", "gorping-mesh.json"))
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"datasource": "prometheus", "rail": "rxe0", "agent": "h1", "instance": h1.Forwards[meshPort], "target": target}
	vs, err := grafanatest.Variables(b, vars)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		prom.WaitFor(t, time.Minute, v.Expr, func(got promtest.Vector) bool {
			return slices.ContainsFunc(got, func(s promtest.Sample) bool { return s.Metric[v.Label] == vars[v.Name] })
		})
	}
	qs, err := grafanatest.Queries(b, vars)
	if err != nil {
		t.Fatal(err)
	}
	bound := time.Minute
	// The group-pair rows leave out, for 5 minutes, a peer rail that was unreachable
	// and a source rail that reached nothing, as a start-up whose first dials timed
	// out on a slow guest leaves them (EveryRailOfEveryPeer took 76 s where it takes
	// 6): the rows wait for that window to pass.
	excluded := `max(max_over_time(timestamp(gorping:peer_rail:unreachable{device="rxe0"} or gorping:source_rail_up:ratio{device="rxe0"} == 0)[5m:5s]))`
	if v, err := prom.Query(excluded); err != nil {
		t.Errorf("%s: %v", excluded, err)
	} else if len(v) == 1 {
		last := time.UnixMilli(int64(v[0].Value * 1000))
		if b := time.Until(last.Add(5*time.Minute)) + time.Minute; b > bound {
			t.Logf("a rail on rxe0 was unreachable or reached nothing at %s (%s ago): the group-pair rows come back 5 minutes after; waiting up to %s", last.Format(time.TimeOnly), time.Since(last).Round(time.Second), b.Round(time.Second))
			bound = b
		}
	}
	for _, q := range qs {
		v := prom.WaitFor(t, bound, q.Expr, promtest.NonEmpty)
		t.Logf("dashboard %q [%s]: %d series", q.Panel, q.RefID, len(v))
	}
}
