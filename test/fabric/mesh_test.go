//go:build fabric

package fabric

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorping/gorping/test/promtest"
	"github.com/gorping/gorping/test/vm"
)

// meshPort is the agents' metrics port in the guests; TestMain forwards it
// from 127.0.0.1 (vm.Host.Forwards), the only way the host reaches a guest.
const meshPort = 10174

// meshTargets is h's agent's targets file: all three hosts (an agent skips
// itself) and h's own stock rping -s -P on h3.
func meshTargets(h *vm.Host) string {
	return fmt.Sprintf(`# the mesh: every host (an agent skips its own address on its own port)
10.0.3.1
10.0.3.2
10.0.3.3
10.0.3.3:%d   # stock rping -s -P on h3, for this agent alone
`, stockPort(h))
}

// stockPort is the port of h's agent's stock rping -s -P on h3: 7301 for h1,
// 7302 for h2, 7303 for h3. One server per agent because stock rping before
// v44.9 (bookworm's 44.0) loses connection requests that arrive together at
// one -P server and then dies (rping.md §6.2 and §6.4), and agents that
// reconnect after h3's reboot do arrive together.
func stockPort(h *vm.Host) int { return 7300 + int(h.Name[1]-'0') }

// startMesh starts h's agent on its targets file, one ping per 0.5 s.
func startMesh(t *testing.T, h *vm.Host) *rproc {
	t.Helper()
	call(t, 30*time.Second, func(ctx context.Context) error {
		return h.Agent.WriteFile(ctx, "/root/targets", []byte(meshTargets(h)), 0o644)
	})
	a := start(t, h, gorping, "mesh", "--web.listen-address", fmt.Sprintf("0.0.0.0:%d", meshPort), "--targets", "/root/targets",
		"--interval", "0.5", "--log.format", "json")
	waitOutput(t, a, `"msg":"gorping mesh started"`, time.Minute)
	return a
}

// startStockResponders starts on h3 the stock rping -s -P of each agent.
func startStockResponders(t *testing.T, h3 *vm.Host, agents []*vm.Host) {
	t.Helper()
	for _, h := range agents {
		s := start(t, h3, stock, "-s", "-P", "-a", h3.IPv4, "-p", strconv.Itoa(stockPort(h)))
		waitListening(t, s, addrPort(h3.IPv4, stockPort(h)), time.Minute)
	}
}

// count is a condition: the vector has one sample whose value is n.
func count(n float64) func(promtest.Vector) bool {
	return func(v promtest.Vector) bool { return len(v) == 1 && v[0].Value == n }
}

// rules is the shipped alert rules file.
func rules(t *testing.T) string {
	t.Helper()
	return repoFile(t, "deploy", "prometheus", "gorping-rules.yml")
}

// repoFile is a file of this repository, by its path from the module's root.
func repoFile(t *testing.T, elem ...string) string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(append([]string{root}, elem...)...)
}

// TestMesh: gorping mesh on three hosts, one target a stock rping -s -P, and
// a real Prometheus on the host scraping the agents through their 127.0.0.1
// forwards. Every assertion goes through Prometheus's query API: every
// directed pair up, RTT histograms filling; a netem delay on one host shows in
// the median RTT of exactly the pairs through it; a host powered off turns
// its targets down with a reason and comes back; a targets-file edit removes
// a target's series without a gap or a reconnection for the others; /probe
// answers through a blackbox-style job; the metrics pass promtool.
func TestMesh(t *testing.T) {
	h1, h2, h3 := host(t, 1), host(t, 2), host(t, 3)
	hosts := []*vm.Host{h1, h2, h3}
	startStockResponders(t, h3, hosts)
	agents := map[*vm.Host]*rproc{}
	for _, h := range hosts {
		agents[h] = startMesh(t, h)
	}
	var jobs []promtest.Job
	for _, h := range hosts {
		jobs = append(jobs, promtest.Job{Name: "gorping-mesh-" + h.Name, Targets: []string{h.Forwards[meshPort]},
			Labels: map[string]string{"host": h.Name}})
	}
	jobs = append(jobs, promtest.Job{Name: "gorping-probe", Targets: []string{h1.Forwards[meshPort]}, MetricsPath: "/probe",
		Params: map[string][]string{"target": {h2.IPv4}, "count": {"3"}}, Labels: map[string]string{"host": "h1"}})
	prom := promtest.Start(t, promtest.Config{Jobs: jobs, NativeHistograms: true,
		RuleFiles: []string{rules(t)}})

	t.Run("AllPairsUp", func(t *testing.T) {
		// h1 and h2 probe the other two hosts and their stock server on h3; h3 probes
		// h1, h2 and its stock server on itself.
		prom.WaitFor(t, 3*time.Minute, `count(gorping_target_up{job=~"gorping-mesh-.*"} == 1)`, count(9))
		prom.WaitFor(t, time.Minute, `count(histogram_count(rate(gorping_probe_rtt_seconds{job=~"gorping-mesh-.*"}[5s])) > 0)`, count(9))
		prom.WaitFor(t, time.Minute, `count(gorping_target_path_info{device="rxe0",port="1"})`, count(9))
	})

	t.Run("DelayShowsOnItsPairsOnly", func(t *testing.T) {
		const delay = 30 * time.Millisecond
		netem(t, h2, "delay", delay.String())
		// Pings through h2 cross its egress 4 times: their median gains 120 ms.
		median := `histogram_quantile(0.5, sum by (host, target) (rate(gorping_probe_rtt_seconds{job=~"gorping-mesh-.*"}[4s])))`
		through := `host="h2" or target=~"10.0.3.2:.*"`
		v := prom.WaitFor(t, time.Minute, median, func(v promtest.Vector) bool {
			slow, fast := 0, 0
			for _, s := range v {
				viaH2 := s.Metric["host"] == "h2" || strings.HasPrefix(s.Metric["target"], "10.0.3.2:")
				switch {
				case viaH2 && s.Value >= 0.9*4*delay.Seconds():
					slow++
				case !viaH2 && s.Value < 2*delay.Seconds():
					fast++
				}
			}
			return slow == 5 && fast == 4
		})
		t.Logf("median RTTs with %v on h2's egress (pairs %s are slow): %v", delay, through, v)
	})

	outer := t // what the subtests start must outlive them
	t.Run("HostPowerOff", func(t *testing.T) {
		h3.PowerOff()
		down := `gorping_target_up{job=~"gorping-mesh-.*", target=~"10.0.3.3:.*"} == 0`
		prom.WaitFor(t, time.Minute, `count(`+down+`)`, count(4))
		v := prom.WaitFor(t, time.Minute, `sum by (reason) (increase(gorping_probe_failures_total{target=~"10.0.3.3:.*"}[30s])) > 0`, promtest.NonEmpty)
		t.Logf("failures toward the powered-off h3, by reason: %v", v)
		prom.WaitFor(t, time.Minute, `count(ALERTS{alertname="GorpingTargetDown", target=~"10.0.3.3:.*"})`, count(4))
		// h1 <-> h2 go on.
		prom.WaitFor(t, 30*time.Second, `count(gorping_target_up{host=~"h1|h2", target=~"10.0.3.[12]:7174"} == 1)`, count(2))

		if err := h3.Boot(t.Context()); err != nil {
			t.Fatalf("booting h3 again: %v", err)
		}
		startStockResponders(outer, h3, hosts)
		agents[h3] = startMesh(outer, h3)
		prom.WaitFor(t, 3*time.Minute, `count(gorping_target_up{job=~"gorping-mesh-.*"} == 1)`, count(9))
	})

	t.Run("TargetFileEdit", func(t *testing.T) {
		keep := `{host="h1", target="10.0.3.2:7174"}`
		conns := prom.WaitFor(t, time.Minute, `gorping_connections_total`+keep, promtest.NonEmpty)[0].Value
		removed := addrPort(h3.IPv4, stockPort(h1))
		edited := strings.ReplaceAll(meshTargets(h1), removed, "# "+removed+" (removed)")
		call(t, 30*time.Second, func(ctx context.Context) error {
			return h1.Agent.WriteFile(ctx, "/root/targets", []byte(edited), 0o644)
		})
		edit := time.Now()
		prom.WaitFor(t, time.Minute, `count(gorping_target_up{host="h1", target="`+removed+`"})`, func(v promtest.Vector) bool { return len(v) == 0 })
		// Twenty seconds after the edit, the kept target's series has every
		// scrape of those seconds (one a second) and the same connection.
		prom.WaitFor(t, time.Minute, fmt.Sprintf(`count_over_time(gorping_target_up%s[20s]) >= 19 and on () vector(time()) > %d`,
			keep, edit.Unix()+20), promtest.NonEmpty)
		if now := prom.WaitFor(t, time.Minute, `gorping_connections_total`+keep, promtest.NonEmpty)[0].Value; now != conns {
			t.Errorf("h1 reconnected to h2 during the edit: connections %v -> %v", conns, now)
		}
		prom.WaitFor(t, time.Minute, `resets(gorping_probes_total`+keep+`[1m])`, count(0))
		// And back: the target's series come again.
		call(t, 30*time.Second, func(ctx context.Context) error {
			return h1.Agent.WriteFile(ctx, "/root/targets", []byte(meshTargets(h1)), 0o644)
		})
		prom.WaitFor(t, time.Minute, `gorping_target_up{host="h1", target="`+removed+`"}`, count(1))
	})

	t.Run("Probe", func(t *testing.T) {
		prom.WaitFor(t, time.Minute, `probe_success{job="gorping-probe"}`, count(1))
		prom.WaitFor(t, time.Minute, `gorping_probes_total{job="gorping-probe"}`, count(3))
	})

	t.Run("PromtoolCheckMetrics", func(t *testing.T) {
		resp, err := http.Get("http://" + h2.Forwards[meshPort] + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
		}
		f := filepath.Join(t.TempDir(), "metrics")
		os.WriteFile(f, body, 0o644)
		cmd := exec.Command(promtest.Tool(t, "promtool"), "check", "metrics")
		cmd.Stdin = strings.NewReader(string(body))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool check metrics: %v\n%s", err, out)
		}
		if n := strings.Count(string(body), "\n"); n < 50 {
			t.Errorf("/metrics has only %d lines", n)
		}
	})

	// Every agent stops cleanly: SIGTERM, exit 0.
	for _, h := range hosts {
		a := agents[h]
		a.signal(t, syscall.SIGTERM)
		if st := a.wait(t, time.Minute); st.Code != 0 {
			t.Errorf("%s's agent: exit %d after SIGTERM\n%s", h.Name, st.Code, lastLines(st.Stderr, 5))
		}
	}
}
