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

// ecmpBlackhole: one member of the group black-holed fails exactly the paths
// with a flow hashed onto it (predicted from gorping_path_info, checked on the
// switch), every target stays up through its other paths, and
// GorpingPathBlackhole names those paths and nothing names a host.
func ecmpBlackhole(t *testing.T, prom *promtest.Server, g *vm.ECMP, byName map[string]*vm.Host, restart func(*vm.Host)) {
	// The member to black-hole carries the connection manager's MADs (QP 1), so a
	// failed path cannot reconnect around it: the paths on it stay down, as a
	// connection on a black-holed member does whose new flow hashes back onto it.
	// A quiet start: nothing pending from the subtests before (their faults are
	// healed, but an alert clears an evaluation after its series do).
	prom.WaitFor(t, 2*time.Minute, `ALERTS{alertname=~"GorpingTargetRailDown|GorpingSourceRailDown|GorpingTargetDown|GorpingPathBlackhole"}`,
		func(v promtest.Vector) bool { return len(v) == 0 })
	var paths []pathFlow
	var dead int
	failing := map[string]pathFlow{}
	for try := 1; ; try++ {
		paths = crossingPaths(t, prom, byName, paths)
		flows := g.Flows()
		dead = -1
		for f, st := range flows {
			if f.DQPN == 1 {
				if dead >= 0 && st.Member != dead {
					t.Fatalf("the MADs to QP 1 cross members %d and %d (flows %v): the test needs one member for all", dead, st.Member, flows)
				}
				dead = st.Member
			}
		}
		if dead < 0 {
			t.Fatalf("no frame to QP 1 crossed the group: did the agents connect before it was set? flows: %v", flows)
		}
		// Each path's flows crossed on the member the hash predicts: its
		// udp_sport label is the port on the wire, both ways.
		clear(failing)
		perTarget := map[string][2]int{} // failing, all
		for _, p := range paths {
			onDead := false
			for _, f := range p.wire(byName) {
				st, seen := flows[f]
				if !seen || st.Frames == 0 {
					t.Fatalf("%s: no frame of its flow %+v crossed the group (flows seen: %v): the predicted UDP source port is not the one on the wire", p, f, flows)
				}
				if want := vm.ECMPMember(f.SPort, f.DQPN, ecmpMembers); st.Member != want {
					t.Fatalf("%s: flow %+v crossed member %d, the hash says %d", p, f, st.Member, want)
				}
				onDead = onDead || st.Member == dead
			}
			c := perTarget[p.agent+" "+p.target]
			c[1]++
			if onDead {
				failing[p.key()] = p
				c[0]++
			}
			perTarget[p.agent+" "+p.target] = c
		}
		degenerate := len(failing) == 0
		for k, c := range perTarget {
			if c[0] == c[1] {
				t.Logf("every path of %s hashes onto member %d", k, dead)
				degenerate = true
			}
		}
		if !degenerate {
			break
		}
		// The flows are the kernel's draw: draw again (new QPs, new rdma_cm ports).
		if try == 5 {
			t.Fatalf("5 draws of QPs left no pair with some, not all, paths on the MADs' member %d", dead)
		}
		t.Logf("draw %d: %d of %d paths on member %d, and a target with none left: restarting h3's agent", try, len(failing), len(paths), dead)
		restart(byName["h3"])
	}
	var lines []string
	for _, p := range paths {
		mark := "ok  "
		if _, ok := failing[p.key()]; ok {
			mark = "DEAD"
		}
		w := p.wire(byName)
		lines = append(lines, fmt.Sprintf("%s %s: members %d/%d", mark, p, vm.ECMPMember(w[0].SPort, w[0].DQPN, ecmpMembers), vm.ECMPMember(w[1].SPort, w[1].DQPN, ecmpMembers)))
	}
	t.Logf("black-holing member %d of %d (the MADs'); %d of %d crossing paths predicted to fail:\n%s", dead, ecmpMembers, len(failing), len(paths), strings.Join(lines, "\n"))

	began := time.Now()
	g.Impair(dead, vm.Impairment{Blackhole: true})
	healed := false
	defer func() {
		if !healed {
			g.Impair(dead, vm.Impairment{})
		}
	}()

	// Exactly the predicted paths go down; the targets stay up.
	prom.WaitFor(t, 2*time.Minute, `gorping_path_up`, func(v promtest.Vector) bool {
		down := 0
		for _, s := range v {
			if s.Value == 0 {
				if _, ok := failing[s.Metric["host"]+" "+s.Metric["target"]+" "+s.Metric["path"]]; !ok {
					return false
				}
				down++
			}
		}
		return down == len(failing)
	})
	prom.WaitFor(t, time.Minute, `count(gorping_target_up == 1)`, count(3*2*2))

	// GorpingPathBlackhole holds (pending: its `for` is promtool's to test) for
	// exactly those paths.
	alerts := prom.WaitFor(t, 4*time.Minute, `ALERTS{alertname="GorpingPathBlackhole"}`, func(v promtest.Vector) bool {
		if len(v) != len(failing) {
			return false
		}
		for _, s := range v {
			if _, ok := failing[s.Metric["agent"]+" "+s.Metric["target"]+" "+s.Metric["path"]]; !ok {
				return false
			}
		}
		return true
	})
	for _, s := range alerts {
		if s.Metric["device"] != "rxe0" || s.Metric["port"] != "1" {
			t.Errorf("GorpingPathBlackhole on %s port %s, want rxe0 port 1: %v", s.Metric["device"], s.Metric["port"], s.Metric)
		}
	}
	t.Logf("GorpingPathBlackhole after %.0fs: %v", time.Since(began).Seconds(), alerts)
	// The paths not predicted never failed after the black hole began.
	window := fmt.Sprintf("%ds", int(time.Since(began).Seconds())+1)
	for _, p := range paths {
		if _, ok := failing[p.key()]; ok {
			continue
		}
		q := fmt.Sprintf(`increase(gorping_path_failures_total{host=%q, target=%q, path=%q}[%s])`, p.agent, p.target, p.path, window)
		if v, err := prom.Query(q); err != nil {
			t.Errorf("%s: %v", q, err)
		} else {
			for _, s := range v {
				if s.Value > 0 {
					t.Errorf("%s is not on the dead member but failed (%v)", p, s)
				}
			}
		}
	}
	// Nothing names a host, its rail or a target.
	if v, err := prom.Query(`max_over_time(ALERTS{alertname=~"GorpingTargetRailDown|GorpingSourceRailDown|GorpingTargetDown"}[` + window + `])`); err != nil || len(v) > 0 {
		t.Errorf("alerts naming a host during the black hole: %v %v", v, err)
	}

	dashboardShows(t, prom, byName["h1"], paths, failing)

	// Healed, every path comes back.
	g.Impair(dead, vm.Impairment{})
	healed = true
	prom.WaitFor(t, 3*time.Minute, `count(gorping_path_up == 1)`, count(3*2*2*railPaths))
	if c, d := g.MemberFrames(dead, 0); d == 0 {
		t.Errorf("the dead member discarded nothing from tor-a (%d crossed)", c)
	}
}

// dashboardShows: during the black hole, every variable of the shipped dashboard
// offers the value an operator would pick (rail 0, h1, h1's target on a dead path)
// and every panel's query returns data from the agents' own series and the rules:
// the host test's check (test/grafanatest) on real agents.
func dashboardShows(t *testing.T, prom *promtest.Server, h1 *vm.Host, paths []pathFlow, failing map[string]pathFlow) {
	t.Helper()
	b, err := os.ReadFile(repoFile(t, "deploy", "grafana", "gorping-mesh.json"))
	if err != nil {
		t.Fatal(err)
	}
	target := ""
	for _, p := range paths {
		if _, dead := failing[p.key()]; p.agent == "h1" && (dead || target == "") {
			target = p.target
		}
	}
	if target == "" {
		t.Fatalf("h1 has no crossing path: %v", paths)
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
