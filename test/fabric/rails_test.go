//go:build fabric

package fabric

import (
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorping/gorping/test/promtest"
	"github.com/gorping/gorping/test/vm"
)

// railGroups are the pinglist groups of TestMeshRails: two hosts under one
// switch, one under another.
var railGroups = map[string]string{"h1": "tor-a", "h2": "tor-a", "h3": "tor-b"}

// startRailAgent starts h's agent the way a GPU cluster runs it: it knows its
// peers only by their node addresses (node0, no RDMA there) and finds their
// rails in their descriptions. owner's end stops it (TestMeshRails, also for an
// agent a subtest restarts).
func startRailAgent(t, owner *testing.T, h *vm.Host, group string) *rproc {
	t.Helper()
	return startNamedRailAgent(t, owner, h, h.Name, group)
}

// startNamedRailAgent is startRailAgent with --agent-name name.
func startNamedRailAgent(t, owner *testing.T, h *vm.Host, name, group string) *rproc {
	t.Helper()
	var agents []string
	for _, p := range cl.Hosts {
		agents = append(agents, addrPort(p.NodeIPv4, meshPort))
	}
	// 4 paths x 4 targets every 2 s is the probe rate one path had every 0.5 s: four
	// times that starves the emulated guests' single CPU (pings time out, paths redial).
	a := startOwned(t, owner, h, gorping, "mesh", "--web.listen-address", fmt.Sprintf("0.0.0.0:%d", meshPort),
		"--agents", strings.Join(agents, ","), "--agent-name", name, "--group", group,
		"--agents-refresh", "1s", "--interval", "2", "--log.format", "json",
		"--paths", strconv.Itoa(railPaths), "--backoff-max", "5s")
	waitOutput(t, a, `"msg":"gorping mesh started"`, time.Minute)
	return a
}

// rail0SinceCut returns rail 0's probe failures since cut ("" if none) and fails
// t if any of them is not to or from h3. h3 has one emulated CPU, on which rxe
// does in software what a NIC does in hardware: the retransmissions, teardowns and
// redials of the cut rail's 16 connections can hold its rail-0 probes past their
// 1 s timeout (RTTs of 0.5-0.9 s on bookworm/arm64). Those failures are real, so
// the rules may see loss toward h3's group on rail 0 too; failures between h1 and
// h2, which carry no cut rail's work, would be the fabric's.
func rail0SinceCut(t *testing.T, prom *promtest.Server, cut time.Time, h3 *vm.Host) string {
	t.Helper()
	at := fmt.Sprintf("@ %.3f", float64(cut.UnixMilli())/1000)
	f := `gorping_probe_failures_total{device="rxe0"}`
	// A reason's counter is born at its first failure: new series count whole.
	v, err := prom.Query(`sum by (host, peer, reason) ((` + f + ` - ` + f + ` ` + at + `) > 0 or (` + f + ` unless ` + f + ` ` + at + `))`)
	if err != nil {
		t.Error(err)
		return ""
	}
	if len(v) == 0 {
		return ""
	}
	for _, s := range v {
		if s.Metric["host"] != h3.Name && s.Metric["peer"] != h3.Name {
			t.Errorf("rail 0 failed between %s and %s while h3's rail 1 was cut (%v): rail 0 must carry on", s.Metric["host"], s.Metric["peer"], s)
		}
	}
	rtt, err := prom.Query(`histogram_quantile(0.9, sum by (host, peer) (rate(gorping_probe_rtt_seconds{device="rxe0"}[` +
		fmt.Sprintf("%ds", int(time.Since(cut).Seconds())+2) + `])))`)
	t.Logf("rail 0 since h3's rail 1 was cut: failures %v; p90 RTT %v %v", v, rtt, err)
	return v.String()
}

// localisationAlerts are the localisation rules' alerts (pending or firing).
const localisationAlerts = `ALERTS{alertname=~"GorpingTargetRailDown|GorpingSourceRailDown|GorpingPathBlackhole|GorpingGroupPairLoss"}`

// railOf is the rail (0-based) of a cluster address, -1 if none.
func railOf(h *vm.Host, addr string) int {
	for _, r := range h.Rails {
		if r.IPv4 == addr || r.IPv6 == addr {
			return r.N
		}
	}
	return -1
}

// TestMeshRails: agents started with nothing but the node addresses of the
// three hosts (each with two rails, each rail its own switch and subnet) find
// every rail of every peer from its description and probe exactly those, rail
// to rail, never their own rails and never a node address; a real Prometheus
// sees it per rail. A partition of one rail of one host turns exactly that
// rail's targets down and heals; a group change, and an agent that leaves and
// returns, are followed by its peers.
func TestMeshRails(t *testing.T) {
	h1, h2, h3 := host(t, 1), host(t, 2), host(t, 3)
	hosts := []*vm.Host{h1, h2, h3}
	if len(h1.Rails) < 2 || h1.NodeIPv4 == "" {
		t.Fatalf("the test bed has %d rails and node address %q: TestMain must start it with Rails 2 and NodeNet", len(h1.Rails), h1.NodeIPv4)
	}
	top := t // the agents live as long as the whole test, restarted ones too
	// Rail 0's switch splits into tor-a and tor-b joined by an ECMP group, set
	// before the agents connect so that it has seen every flow.
	var sideB []int
	for _, h := range hosts {
		if ecmpSide(h) == 1 {
			sideB = append(sideB, h.N-1)
		}
	}
	ecmp, err := cl.Switch.SetECMP(ecmpMembers, sideB...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Switch.SetECMP(0) })
	agents := map[*vm.Host]*rproc{}
	for _, h := range hosts {
		agents[h] = startRailAgent(t, t, h, railGroups[h.Name])
	}
	var jobs []promtest.Job
	for _, h := range hosts {
		jobs = append(jobs, promtest.Job{Name: "gorping-rails-" + h.Name, Targets: []string{h.Forwards[meshPort]},
			Labels: map[string]string{"host": h.Name}})
	}
	prom := promtest.Start(t, promtest.Config{Jobs: jobs, NativeHistograms: true, RuleFiles: []string{rules(t)}})
	byName := map[string]*vm.Host{"h1": h1, "h2": h2, "h3": h3}

	// Every agent probes 2 peers x 2 rails, rail r of its own to rail r of each peer.
	const all = 3 * 2 * 2
	t.Run("EveryRailOfEveryPeer", func(t *testing.T) {
		defer func() {
			if t.Failed() {
				v, err := prom.Query(`sum by (host, target, reason) (gorping_probe_failures_total)`)
				t.Logf("probe failures by agent, target and reason: %v %v", v, err)
			}
		}()
		v := prom.WaitFor(t, 3*time.Minute, `gorping_target_up == 1`, func(v promtest.Vector) bool { return len(v) == all })
		var lines []string
		for _, s := range v {
			me, peer := byName[s.Metric["host"]], byName[s.Metric["peer"]]
			if me == nil || peer == nil || me == peer {
				t.Errorf("target %v: its host or peer label is not another host of the bed", s.Metric)
				continue
			}
			addr, _, _ := strings.Cut(s.Metric["target"], ":")
			r := railOf(peer, addr)
			if r < 0 {
				t.Errorf("%s probes %s, which is not a rail of %s (node or management addresses must never be probed)", me.Name, s.Metric["target"], peer.Name)
				continue
			}
			if want := me.Rails[r].Device; s.Metric["device"] != want || s.Metric["port"] != "1" {
				t.Errorf("%s's target %s (rail %d) is probed from %s port %s, want %s port 1", me.Name, s.Metric["target"], r, s.Metric["device"], s.Metric["port"], want)
			}
			lines = append(lines, fmt.Sprintf("%s -> %s (%s, %s/%s)", me.Name, s.Metric["target"], s.Metric["peer"], s.Metric["device"], s.Metric["port"]))
		}
		sort.Strings(lines)
		t.Logf("%d rail targets up:\n%s", len(lines), strings.Join(lines, "\n"))
		// No agent probes anything else (its own rails, a node address).
		prom.WaitFor(t, time.Minute, `count(gorping_target_up)`, count(all))
		prom.WaitFor(t, time.Minute, `count(gorping_peer_up == 1)`, count(6))
		// A target is up with its first path; the next subtests read every path, so the
		// bed is settled once every path has connected.
		prom.WaitFor(t, 3*time.Minute, `count(gorping_path_up == 1)`, count(all*railPaths))
		// And once the rules see nothing: the start-up's few failed slots (a path's
		// first dial timing out on a busy emulated guest) are over 5 % of a young
		// 5-minute window, and pend GorpingGroupPairLoss until more probes dilute them
		// (as on a fleet that starts together; `for: 5m` keeps it from firing). The cut
		// is judged by what it raises after this.
		prom.WaitFor(t, 4*time.Minute, `count_over_time(`+localisationAlerts+`[10s])`, func(v promtest.Vector) bool { return len(v) == 0 })
		// What an operator's curl shows (README's walk quotes it).
		t.Logf("h1's /metrics, its targets and peers:\n%s", scrapeLines(t, h1, "gorping_target_up{", "gorping_peer_up{"))
	})

	t.Run("OneRailPartitioned", func(t *testing.T) {
		// h3's rail 1 loses everything it sends: h1 and h2 lose their rail-1 targets
		// on h3, h3 loses its rail-1 targets on them; rail 0 stays up, and h1<->h2
		// lose nothing (rail0SinceCut).
		cut := time.Now()
		netemOn(t, h3, h3.Rails[1].Netdev, "loss", "100%")
		rail1h3 := `target=~"` + strings.ReplaceAll(h3.Rails[1].IPv4, ".", `\\.`) + `:.*"`
		down := prom.WaitFor(t, time.Minute, `gorping_target_up == 0`, func(v promtest.Vector) bool { return len(v) == 4 })
		for _, s := range down {
			addr, _, _ := strings.Cut(s.Metric["target"], ":")
			toH3 := addr == h3.Rails[1].IPv4
			fromH3 := s.Metric["host"] == "h3" && (addr == h1.Rails[1].IPv4 || addr == h2.Rails[1].IPv4)
			if !toH3 && !fromH3 || s.Metric["device"] != "rxe1" {
				t.Errorf("target down that is not on h3's rail 1: %v", s.Metric)
			}
		}
		prom.WaitFor(t, time.Minute, `count(gorping_target_up{`+rail1h3+`} == 0)`, count(2))
		prom.WaitFor(t, time.Minute, `count(gorping_target_up == 1)`, count(all-4))
		// The rules name h3's rail 1 (pending: `for` is promtool's to test), and
		// nothing else for long. Until every observer's every path has failed toward
		// the cut rail, the rules see part of the picture: h3 failing alone on its rail
		// (GorpingSourceRailDown), loss between its group and the other on that rail
		// (GorpingGroupPairLoss), some paths of a target failing before the others
		// (GorpingPathBlackhole) can each be pending for a few evaluations (seen on
		// trixie and arm64). Every one of them is about the cut rail, and they end long
		// before their 2 to 5 minute `for`.
		culprit := prom.WaitFor(t, time.Minute, `ALERTS{alertname="GorpingTargetRailDown"}`, promtest.NonEmpty)
		for _, s := range culprit {
			if s.Metric["peer"] != "h3" || s.Metric["device"] != "rxe1" || !strings.HasPrefix(s.Metric["target"], h3.Rails[1].IPv4+":") {
				t.Errorf("GorpingTargetRailDown names %v, want h3's rail 1 only", s.Metric)
			}
		}
		t.Logf("GorpingTargetRailDown: %v", culprit)
		others := `ALERTS{alertname=~"GorpingSourceRailDown|GorpingPathBlackhole|GorpingGroupPairLoss"}`
		// Ten evaluations in a row (at 1 s) with none of them, the culprit pending.
		prom.WaitFor(t, 90*time.Second, `count_over_time(`+others+`[10s])`, func(v promtest.Vector) bool { return len(v) == 0 })
		prom.WaitFor(t, time.Minute, `count_over_time(ALERTS{alertname="GorpingTargetRailDown", peer="h3", device="rxe1"}[10s]) >= 9`, promtest.NonEmpty)
		sinceCut := fmt.Sprintf("%ds", int(time.Since(cut).Seconds())+2)
		rail0 := rail0SinceCut(t, prom, cut, h3)
		if v, err := prom.Query(`count_over_time(` + others + `[` + sinceCut + `])`); err != nil {
			t.Error(err)
		} else {
			for _, s := range v {
				m := s.Metric
				aboutH3 := m["agent"] == "h3" || m["peer"] == "h3" || m["group"] == "tor-b" || m["peer_group"] == "tor-b"
				switch {
				case m["device"] == "rxe1" && aboutH3:
					t.Logf("while the rules saw part of the cut: %s %v pending for %g evaluations", m["alertname"], m, s.Value)
				case m["device"] == "rxe0" && aboutH3 && rail0 != "":
					t.Logf("on rail 0, where h3's probes failed under the cut's load: %s %v pending for %g evaluations", m["alertname"], m, s.Value)
				default:
					t.Errorf("an alert while h3's rail 1 is cut that is not about it: %v (rail 0's failures since the cut: %q)", s, rail0)
				}
			}
		}
		// The agents still describe each other: the node network is not partitioned.
		prom.WaitFor(t, time.Minute, `count(gorping_peer_up == 1)`, count(6))
		run(t, h3, time.Minute, tc, "qdisc", "del", "dev", h3.Rails[1].Netdev, "root")
		prom.WaitFor(t, 3*time.Minute, `count(gorping_target_up == 1)`, count(all))
	})

	t.Run("ECMPMemberBlackholed", func(t *testing.T) {
		ecmpBlackhole(t, prom, ecmp, byName)
	})

	t.Run("GroupChange", func(t *testing.T) {
		prom.WaitFor(t, time.Minute, `count(gorping_peer_info{host=~"h1|h2", peer="h3", peer_group="tor-b"})`, count(2))
		agents[h3].signal(t, 15)
		agents[h3].wait(t, time.Minute)
		agents[h3] = startRailAgent(t, top, h3, "tor-a")
		prom.WaitFor(t, time.Minute, `count(gorping_peer_info{host=~"h1|h2", peer="h3", peer_group="tor-a"})`, count(2))
		prom.WaitFor(t, time.Minute, `count(gorping_peer_info{peer="h3", peer_group="tor-b"})`, func(v promtest.Vector) bool { return len(v) == 0 })
		prom.WaitFor(t, 3*time.Minute, `count(gorping_target_up == 1)`, count(all))
	})

	t.Run("AgentLeavesAndReturns", func(t *testing.T) {
		// h2's agent stops: h1 and h3 say so (peer_up 0) and keep its rails for
		// --agents-keep (5m), whose targets go down; back, it is followed again.
		zeros := func(want int) func(promtest.Vector) bool {
			return func(v promtest.Vector) bool {
				n := 0
				for _, s := range v {
					if s.Value == 0 {
						n++
					}
				}
				return len(v) == 2 && n == want
			}
		}
		prom.WaitFor(t, time.Minute, `gorping_peer_up{host=~"h1|h3", peer="h2"}`, zeros(0))
		agents[h2].signal(t, 15)
		agents[h2].wait(t, time.Minute)
		defer func() {
			if t.Failed() {
				for _, h := range []*vm.Host{h1, h3} {
					t.Logf("%s's agent log:\n%s", h.Name, agents[h].status(t).Stderr)
				}
			}
		}()
		prom.WaitFor(t, time.Minute, `gorping_peer_up{host=~"h1|h3", peer="h2"}`, zeros(2))
		prom.WaitFor(t, time.Minute, `count(gorping_target_up{peer="h2"} == 0)`, count(4))
		prom.WaitFor(t, time.Minute, `count(gorping_target_up{host=~"h1|h3", peer!="h2"} == 1)`, count(4))
		agents[h2] = startRailAgent(t, top, h2, railGroups["h2"])
		prom.WaitFor(t, time.Minute, `gorping_peer_up{host=~"h1|h3", peer="h2"}`, zeros(0))
		prom.WaitFor(t, 3*time.Minute, `count(gorping_target_up == 1)`, count(all))
	})

	t.Run("TwoAgentsOfOneName", func(t *testing.T) {
		// h2's agent comes back named h1, as a host cloned from h1's image would: h1
		// and h2 know themselves by their instance IDs, so each probes the other (as
		// h1~INSTANCE), says so once at WARN and counts the conflict; h3 probes both.
		agents[h2].signal(t, 15)
		agents[h2].wait(t, time.Minute)
		agents[h2] = startNamedRailAgent(t, top, h2, "h1", railGroups["h2"])
		prom.WaitFor(t, time.Minute, `gorping_peer_name_conflicts`, func(v promtest.Vector) bool {
			want := map[string]float64{"h1": 1, "h2": 1, "h3": 2}
			for _, s := range v {
				if want[s.Metric["host"]] != s.Value {
					return false
				}
				delete(want, s.Metric["host"])
			}
			return len(want) == 0
		})
		prom.WaitFor(t, 3*time.Minute, `count(gorping_target_up == 1)`, count(all))
		// h1 probes h2's two rails, h2 (named h1) h1's, h3 both, under the peer name
		// h1~INSTANCE.
		prom.WaitFor(t, time.Minute, `count by (host) (gorping_target_up{peer=~"h1~.*"} == 1)`, func(v promtest.Vector) bool {
			got := map[string]float64{}
			for _, s := range v {
				got[s.Metric["host"]] = s.Value
			}
			return len(v) == 3 && got["h1"] == 2 && got["h2"] == 2 && got["h3"] == 4
		})
		for _, h := range []*vm.Host{h1, h2} {
			logs := agents[h].status(t).Stderr
			if n := strings.Count(logs, "two agents answer with one name"); n != 1 {
				t.Errorf("%s's agent warned of the duplicate name %d times, want once:\n%s", h.Name, n, logs)
			}
		}
	})
}

// scrapeLines are the lines of h's agent's /metrics (through its forward) that
// start with one of prefixes.
func scrapeLines(t *testing.T, h *vm.Host, prefixes ...string) string {
	t.Helper()
	resp, err := http.Get("http://" + h.Forwards[meshPort] + "/metrics")
	if err != nil {
		t.Fatalf("GET %s's /metrics: %v", h.Name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s's /metrics: %s %v", h.Name, resp.Status, err)
	}
	var out []string
	for _, l := range strings.Split(string(body), "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				out = append(out, l)
			}
		}
	}
	return strings.Join(out, "\n")
}
