package grafanatest_test

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gorping/gorping/test/grafanatest"
	"github.com/gorping/gorping/test/promtest"
)

const dashboard = "../../deploy/grafana/gorping-mesh.json"

// railAddr is host hN's rail r address: 10.r.0.N:7174 (never dialled: the fake agents
// only report it).
func railAddr(host string, r int) string {
	return fmt.Sprintf("10.%d.0.%s:7174", r, strings.TrimPrefix(host, "h"))
}

func TestSubstitute(t *testing.T) {
	vars := map[string]string{"rail": "mlx5_0", "target": "10.0.0.2:7174", "targets": "x"}
	got, err := grafanatest.Substitute(`a{device="$rail", t="${target}", u="[[targets]]"}[$__rate_interval]`, vars)
	if err != nil || got != `a{device="mlx5_0", t="10.0.0.2:7174", u="x"}[30s]` {
		t.Errorf("Substitute = %q, %v", got, err)
	}
	if _, err := grafanatest.Substitute(`a{x="$agent", y="$rail"}`, map[string]string{"rail": "r"}); err == nil ||
		!strings.Contains(err.Error(), "$agent") {
		t.Errorf("a variable without a value: err = %v, want it named", err)
	}
}

func TestQueriesRefusesAPanelWithoutQuery(t *testing.T) {
	_, err := grafanatest.Queries([]byte(`{"panels": [{"type": "timeseries", "title": "empty", "targets": []}]}`), nil)
	if err == nil || !strings.Contains(err.Error(), `"empty"`) {
		t.Errorf("err = %v, want the panel without a query named", err)
	}
}

// fakeAgent serves the mesh's metric contract (docs/mesh.md; the series the agent is
// getting from issues 21 and 22) for one agent of a small fleet, with counters that grow
// as probes would: it stands in for agents that do not export these series yet, so that
// the dashboard's queries and the localisation rules are run by a real Prometheus now.
// Path 1 of h1's first target fails every probe (a black hole), so a localisation alert
// is pending and the culprits panel has a row.
type fakeAgent struct {
	reg  *prometheus.Registry
	stop chan struct{}
	wg   sync.WaitGroup
}

func startFakeAgent(t *testing.T, self string, group string, peers map[string]string) string {
	t.Helper()
	reg := prometheus.NewRegistry()
	targetLabels := []string{"device", "port", "target", "peer"}
	info := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "gorping_agent_info"}, []string{"agent", "group", "version"})
	peerInfo := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "gorping_peer_info"}, []string{"peer", "peer_group"})
	peerUp := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "gorping_peer_up"}, []string{"peer"})
	up := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "gorping_target_up"}, targetLabels)
	pathsUp := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "gorping_target_paths_up"}, targetLabels)
	probes := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gorping_probes_total"}, targetLabels)
	failures := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gorping_probe_failures_total"}, append(targetLabels, "reason"))
	tsSource := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "gorping_target_ts_source"}, append(targetLabels, "ts_source"))
	rtt := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "gorping_probe_rtt_seconds",
		Buckets: prometheus.ExponentialBuckets(1e-6, 4, 10), NativeHistogramBucketFactor: 1.1}, targetLabels)
	pathLabels := append(targetLabels, "path")
	pathUp := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "gorping_path_up"}, pathLabels)
	pathProbes := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gorping_path_probes_total"}, pathLabels)
	pathFailures := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gorping_path_failures_total"}, append(pathLabels, "reason"))
	pathInfo := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "gorping_path_info"}, append(pathLabels, "local_qpn", "remote_qpn", "udp_sport"))
	reg.MustRegister(info, peerInfo, peerUp, up, pathsUp, probes, failures, tsSource, rtt, pathUp, pathProbes, pathFailures, pathInfo)

	info.WithLabelValues(self, group, "v0.0.0-test").Set(1)
	type pair struct{ labels []string }
	var pairs []pair
	for peer, g := range peers {
		peerInfo.WithLabelValues(peer, g).Set(1)
		peerUp.WithLabelValues(peer).Set(1)
		for r, dev := range []string{"mlx5_0", "mlx5_1"} {
			l := []string{dev, "1", railAddr(peer, r), peer}
			pairs = append(pairs, pair{l})
			tsSource.WithLabelValues(append(l, "sw")...).Set(1)
			failures.WithLabelValues(append(l, "timeout")...).Add(0)
		}
	}
	blackholed := func(p pair, path int) bool {
		return self == "h1" && p.labels[3] == "h2" && p.labels[0] == "mlx5_0" && path == 1
	}
	a := &fakeAgent{reg: reg, stop: make(chan struct{})}
	tick := func() {
		for _, p := range pairs {
			working := 0
			for path := range 2 {
				pl := append(append([]string{}, p.labels...), string(rune('0'+path)))
				pathProbes.WithLabelValues(pl...).Inc()
				qpn := string(rune('1'+path)) + "7"
				pathInfo.WithLabelValues(append(pl, qpn, "4"+qpn, "4919"+qpn[:1])...).Set(1)
				if blackholed(p, path) {
					pathFailures.WithLabelValues(append(pl, "retry_exc_err")...).Inc()
					pathUp.WithLabelValues(pl...).Set(0)
					failures.WithLabelValues(append(p.labels, "timeout")...).Inc()
				} else {
					pathFailures.WithLabelValues(append(pl, "retry_exc_err")...).Add(0)
					pathUp.WithLabelValues(pl...).Set(1)
					working++
					rtt.WithLabelValues(p.labels...).Observe(12e-6)
				}
				probes.WithLabelValues(p.labels...).Inc()
			}
			pathsUp.WithLabelValues(p.labels...).Set(float64(working))
			up.WithLabelValues(p.labels...).Set(1)
		}
	}
	tick()
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		tk := time.NewTicker(100 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-a.stop:
				return
			case <-tk.C:
				tick()
			}
		}
	}()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}
	go srv.Serve(ln)
	t.Cleanup(func() { close(a.stop); a.wg.Wait(); srv.Close() })
	return ln.Addr().String()
}

// TestDashboardQueriesReturnData: every panel's query of the committed dashboard, run by
// a real Prometheus (Debian's) on the contract's series from three fake agents with the
// shipped rules loaded, returns data; so do the variables' queries. The fabric tier runs
// the same check on real agents once they export these series (docs/mesh.md).
func TestDashboardQueriesReturnData(t *testing.T) {
	rules, err := filepath.Abs("../../deploy/prometheus/gorping-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	promtest.Tool(t, "prometheus")
	groups := map[string]string{"h1": "A", "h2": "A", "h3": "B"}
	listen := map[string]string{}
	for h := range groups {
		peers := map[string]string{}
		for p, g := range groups {
			if p != h {
				peers[p] = g
			}
		}
		listen[h] = startFakeAgent(t, h, groups[h], peers)
	}
	prom := promtest.Start(t, promtest.Config{NativeHistograms: true, RuleFiles: []string{rules},
		Jobs: []promtest.Job{{Name: "gorping-mesh", Targets: []string{listen["h1"], listen["h2"], listen["h3"]}}}})

	b, err := os.ReadFile(dashboard)
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"datasource": "prometheus", "rail": "mlx5_0", "agent": "h1", "instance": listen["h1"], "target": railAddr("h2", 0)}
	vs, err := grafanatest.Variables(b, vars)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		// The value the test gives the variable is among the variable's values.
		prom.WaitFor(t, time.Minute, v.Expr, func(got promtest.Vector) bool {
			for _, s := range got {
				if s.Metric[v.Label] == vars[v.Name] {
					return true
				}
			}
			return false
		})
	}
	qs, err := grafanatest.Queries(b, vars)
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) < 8 {
		t.Fatalf("%d queries in the dashboard, want at least 8", len(qs))
	}
	for _, q := range qs {
		v := prom.WaitFor(t, time.Minute, q.Expr, promtest.NonEmpty)
		t.Logf("%s [%s]: %d series", q.Panel, q.RefID, len(v))
	}
}
