//go:build !guest

package mesh

// The RTT split (rping.Prober.LastSplit) in the agent's series: ts_source per target, the
// NIC-timed and host parts' histograms only while its connection is NIC-timed, following
// reconnections and removal, and the probe loop allocating nothing for it.

import (
	"fmt"
	"math"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/gorping/gorping/mesh/probe"
	"github.com/gorping/gorping/mesh/target"
	"github.com/gorping/gorping/rping"
	"github.com/gorping/gorping/test/meshtest"
)

// splitSeries returns the target's ts_source gauges and split histogram samples.
func splitSeries(m meshtest.Metrics, target string) (ts map[string]float64, split []meshtest.Sample) {
	ts = map[string]float64{}
	for _, s := range m.Samples() {
		if s.Labels["target"] != target {
			continue
		}
		switch s.Name {
		case "gorping_target_ts_source":
			ts[s.Labels["ts_source"]] = s.Value
		case "gorping_probe_network_rtt_seconds_bucket", "gorping_probe_network_rtt_seconds_sum", "gorping_probe_network_rtt_seconds_count",
			"gorping_probe_host_rtt_seconds_bucket", "gorping_probe_host_rtt_seconds_sum", "gorping_probe_host_rtt_seconds_count":
			split = append(split, s)
		}
	}
	return ts, split
}

// TestRTTSplit: a NIC-timed target (mlx5) has ts_source="nic" and the split's two
// histograms, with the parts its connection reports, in the RTT's buckets; a
// software-timed one (rxe) only ts_source="sw". A reconnection to a connection with the
// other source moves the gauge (never both at 1) and adds or deletes the histograms; a
// removed target leaves none of them.
func TestRTTSplit(t *testing.T) {
	const nicT, swT = "192.0.2.1:7174", "192.0.2.2:7174"
	fn := newFakeNet()
	timed := behavior{rtt: 10 * time.Microsecond, nic: 7 * time.Microsecond}
	fn.set(nicT, timed)
	fn.set(swT, behavior{rtt: 10 * time.Microsecond})
	file := filepath.Join(t.TempDir(), "targets")
	write := func(s string) { replaceFile(t, file, s, 0o644) }
	write("192.0.2.1\n192.0.2.2\n")
	ta := startAgent(t, deps{dial: fn.dial, resolver: &fakeResolver{m: map[string][]netip.Addr{}}},
		"--interval", "10ms", "--backoff-max", "10ms", "--targets", file, "--targets-reload", "100ms")
	ta.wait(t, `gorping_probe_network_rtt_seconds_count{target="`+nicT+`",ts_source="nic"}`, ge(5))
	ta.wait(t, `gorping_probe_rtt_seconds_count{target="`+swT+`"}`, ge(5))
	m, err := ta.Scrape()
	if err != nil {
		t.Fatal(err)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-12+1e-9*math.Abs(b) }
	if ts, _ := splitSeries(m, nicT); len(ts) != 1 || ts["nic"] != 1 {
		t.Errorf("%s: ts_source %v, want nic=1 only", nicT, ts)
	}
	// As many parts as RTTs, give or take the slots recorded while the scrape read them.
	rtts, _ := m.Value(`gorping_probe_rtt_seconds_count{target="` + nicT + `"}`)
	for _, part := range []struct {
		name     string
		each     float64
		inBucket string // the classic bucket the part lands in (the one below it holds none)
		below    string
	}{
		{"network", 7e-6, "1.6e-05", "4e-06"},
		{"host", 3e-6, "4e-06", "1e-06"},
	} {
		sel := func(suffix, extra string) float64 {
			v, err := m.Value(`gorping_probe_` + part.name + `_rtt_seconds` + suffix + `{target="` + nicT + `",ts_source="nic"` + extra + `}`)
			if err != nil {
				t.Errorf("%s%s: %v", part.name, suffix, err)
			}
			return v
		}
		n, sum := sel("_count", ""), sel("_sum", "")
		if n < 5 || !near(sum, n*part.each) || math.Abs(n-rtts) > 2 {
			t.Errorf("%s: %g observations summing %g, want each %g, as many as the %g RTTs", part.name, n, sum, part.each, rtts)
		}
		if in, below := sel("_bucket", `,le="`+part.inBucket+`"`), sel("_bucket", `,le="`+part.below+`"`); in != n || below != 0 {
			t.Errorf("%s: %g in le=%s, %g in le=%s; want all %g in the first", part.name, in, part.inBucket, below, part.below, n)
		}
	}
	if ts, split := splitSeries(m, swT); len(ts) != 1 || ts["sw"] != 1 || len(split) != 0 {
		t.Errorf("%s: ts_source %v and split series %v, want sw=1 only and none", swT, ts, split)
	}
	// follow waits until target's ts_source is want, and requires exactly that gauge and
	// the histograms only with nic.
	follow := func(target, want string) {
		t.Helper()
		meshtest.WaitFor(t, 10*time.Second, target+" ts_source "+want, func() (bool, string) {
			m, err := ta.Scrape()
			if err != nil {
				return false, err.Error()
			}
			ts, split := splitSeries(m, target)
			if len(ts) != 1 || ts[want] != 1 {
				return false, fmt.Sprint("ts_source ", ts)
			}
			if want == "sw" && len(split) != 0 {
				return false, fmt.Sprint("split series ", split)
			}
			if v, _ := m.Value(`gorping_probe_host_rtt_seconds_count{target="` + target + `",ts_source="nic"}`); want == "nic" && v < 1 {
				return false, fmt.Sprint("host parts ", v)
			}
			return true, ""
		})
	}
	// nic to sw (the device lost its timestamps, a rail moved to an rxe port), and back.
	fn.set(nicT, behavior{rtt: 10 * time.Microsecond})
	fn.failLatest(nicT, "retry_exc_err")
	follow(nicT, "sw")
	fn.set(nicT, timed)
	fn.failLatest(nicT, "retry_exc_err")
	follow(nicT, "nic")
	// sw to nic for the other.
	fn.set(swT, timed)
	fn.failLatest(swT, "retry_exc_err")
	follow(swT, "nic")
	// Removed: nothing left.
	write("192.0.2.2\n")
	meshtest.WaitFor(t, 10*time.Second, "the removed target's series gone", func() (bool, string) {
		m, err := ta.Scrape()
		if err != nil {
			return false, err.Error()
		}
		n := seriesPerTarget(m)[nicT]
		return n == 0, fmt.Sprint(n, " series")
	})
}

// TestRTTSplitPaths: with --paths 3 every path's split feeds the target's histograms,
// as its RTTs feed the RTT histogram; one ts_source gauge per target.
func TestRTTSplitPaths(t *testing.T) {
	const target = "192.0.2.1:7174"
	fn := newFakeNet()
	fn.set(target, behavior{rtt: 10 * time.Microsecond, nic: 7 * time.Microsecond})
	ta := startAgent(t, deps{dial: fn.dial, resolver: &fakeResolver{m: map[string][]netip.Addr{}}},
		"--interval", "10ms", "--paths", "3", "--peers", target)
	ta.wait(t, `gorping_probe_network_rtt_seconds_count{target="`+target+`"}`, ge(15))
	m, err := ta.Scrape()
	if err != nil {
		t.Fatal(err)
	}
	// As many parts as RTTs and path slots, give or take the slots recorded while the
	// scrape read them.
	rtts, _ := m.Value(`gorping_probe_rtt_seconds_count{target="` + target + `"}`)
	paths, _ := m.Sum(`gorping_path_probes_total{target="` + target + `"}`)
	for _, part := range []string{"network", "host"} {
		if n, _ := m.Value(`gorping_probe_` + part + `_rtt_seconds_count{target="` + target + `"}`); math.Abs(n-rtts) > 3 || n > paths+3 {
			t.Errorf("%s: %g parts, %g RTTs, %g path slots", part, n, rtts, paths)
		}
	}
	if ts, _ := splitSeries(m, target); len(ts) != 1 || ts["nic"] != 1 {
		t.Errorf("ts_source %v, want nic=1 only", ts)
	}
}

// TestRecordAllocs: recording a slot that succeeds allocates nothing in the agent's
// metrics, the RTT split's bookkeeping included (probe's TestSlotAllocs has the loop's
// side of a slot).
func TestRecordAllocs(t *testing.T) {
	for _, tc := range []struct {
		name string
		nic  time.Duration
	}{{"sw", 0}, {"nic", 7 * time.Microsecond}} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMetrics("v0.0.0-test")
			tg := target.Target{Host: "192.0.2.1", Port: 7174, Source: target.SourcePeers}
			var rec probe.Recorder = m
			pm := rec.Target(tg, 1).Path(0)
			ts := "sw"
			if tc.nic > 0 {
				ts = "nic"
			}
			pm.Connected("rxe0", "1", rping.Flow{LocalQPN: 17, RemoteQPN: 18}, ts)
			rtt := 10 * time.Microsecond
			if per := testing.AllocsPerRun(1000, func() { pm.Success(rtt, tc.nic, rtt-tc.nic, tc.nic > 0) }); per != 0 {
				t.Errorf("%g allocations per slot", per)
			}
			tm := m.lookup(tg.ID())
			if tm == nil {
				t.Fatal("the target's record is not kept for the landing page")
			}
			var d dto.Metric
			if err := tm.rtt.(prometheus.Metric).Write(&d); err != nil || d.GetHistogram().GetSampleCount() != 1001 {
				t.Errorf("RTT histogram %v (%v), want 1001 RTTs", d.GetHistogram().GetSampleCount(), err)
			}
			parts := uint64(0)
			if tc.nic > 0 {
				parts = 1001
			}
			for _, v := range []*prometheus.HistogramVec{m.networkRTT, m.hostRTT} {
				d.Reset()
				if tc.nic > 0 {
					v.WithLabelValues(tg.Key(), "", "", "", "nic").(prometheus.Metric).Write(&d)
				}
				if n := d.GetHistogram().GetSampleCount(); n != parts {
					t.Errorf("%d parts in a split histogram, want %d", n, parts)
				}
			}
		})
	}
}
