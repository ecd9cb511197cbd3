//go:build !guest

package mesh

// --paths K: K connections per target, each its own flow, on the series the shipped
// localisation rules read (deploy/localisation_test.go, pair).

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorping/gorping/rping"
	"github.com/gorping/gorping/test/meshtest"
)

// pathSeries returns the target's path series: gorping_path_* and
// gorping_target_paths_up.
func pathSeries(m meshtest.Metrics, target string) []meshtest.Sample {
	var out []meshtest.Sample
	for _, s := range m.Samples() {
		if s.Labels["target"] == target && (strings.HasPrefix(s.Name, "gorping_path_") || s.Name == "gorping_target_paths_up") {
			out = append(out, s)
		}
	}
	return out
}

// pathInfos returns the target's gorping_path_info series by path.
func pathInfos(t *testing.T, m meshtest.Metrics, target string) map[string][]meshtest.Sample {
	t.Helper()
	ss, err := m.Select(`gorping_path_info{target="` + target + `"}`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]meshtest.Sample{}
	for _, s := range ss {
		out[s.Labels["path"]] = append(out[s.Labels["path"]], s)
	}
	return out
}

// near reports whether a and b differ by at most d: counters scraped one family after
// the other may be a slot or two apart while the loops run.
func near(a, b, d float64) bool { return a-b <= d && b-a <= d }

// TestPaths: with --paths 3 every target gets three connections (distinct QPs, one
// path_info each); a path whose connections fail (an ECMP member dropping its flow)
// is down alone: the target stays up with 2 paths up, the failures counted on the path
// and the target, whose probes are the paths' sum.
func TestPaths(t *testing.T) {
	fn := newFakeNet()
	const good, bad = "192.0.2.1:7174", "192.0.2.2:7174"
	fn.set(good, behavior{rtt: 3 * time.Microsecond})
	fn.set(bad, behavior{rtt: 3 * time.Microsecond})
	fn.setPath(bad, 1, behavior{dialErr: rping.ReasonUnreachable})
	ta := startAgent(t, deps{dial: fn.dial, resolver: &fakeResolver{m: map[string][]netip.Addr{}}},
		"--interval", "20ms", "--backoff-max", "50ms", "--paths", "3", "--peers", "192.0.2.1,192.0.2.2")
	ta.wait(t, `gorping_target_paths_up{target="`+good+`"}`, eq(3))
	ta.wait(t, `gorping_path_failures_total{target="`+bad+`",path="1",reason="unreachable"}`, ge(3))
	ta.wait(t, `gorping_path_probes_total{target="`+bad+`",path="2"}`, ge(3))
	m, err := ta.Scrape()
	if err != nil {
		t.Fatal(err)
	}
	for sel, want := range map[string]float64{
		`gorping_target_up{target="` + good + `"}`:                  1,
		`gorping_target_up{target="` + bad + `"}`:                   1,
		`gorping_target_paths_up{target="` + bad + `"}`:             2,
		`gorping_path_up{target="` + bad + `",path="0"}`:            1,
		`gorping_path_up{target="` + bad + `",path="1"}`:            0,
		`gorping_path_up{target="` + bad + `",path="2"}`:            1,
		`gorping_connections_total{target="` + good + `"}`:          3,
		`gorping_target_path_info{target="` + good + `"}`:           1,
		`gorping_path_up{target="` + good + `",path="2"}`:           1,
		`gorping_path_probes_total{target="` + good + `",path="3"}`: -1, // no fourth path
	} {
		v, err := m.Value(sel)
		if want == -1 {
			if err == nil {
				t.Errorf("%s = %v, want no series", sel, v)
			}
			continue
		}
		if err != nil || v != want {
			t.Errorf("%s = %v (%v), want %v", sel, v, err, want)
		}
	}
	// Three connections: three path_info, one each, with their own QPs and UDP port.
	infos := pathInfos(t, m, good)
	seen := map[string]bool{}
	for _, p := range []string{"0", "1", "2"} {
		if len(infos[p]) != 1 {
			t.Fatalf("path %s has %d path_info series, want 1: %v", p, len(infos[p]), infos[p])
		}
		l := infos[p][0].Labels
		for _, k := range []string{"local_qpn", "remote_qpn", "udp_sport"} {
			if l[k] == "" || seen[k+l[k]] {
				t.Errorf("path %s: %s %q empty or shared with another path", p, k, l[k])
			}
			seen[k+l[k]] = true
		}
	}
	if len(infos) != 3 {
		t.Errorf("path_info for paths %v, want 0, 1, 2", infos)
	}
	// The failures are the bad path's, counted on it and on the target; the target's
	// slots are its paths' (give or take the slots recorded during the scrape).
	pathFails, _ := m.Value(`gorping_path_failures_total{target="` + bad + `",path="1",reason="unreachable"}`)
	targetFails, _ := m.Value(`gorping_probe_failures_total{target="` + bad + `",reason="unreachable"}`)
	if !near(pathFails, targetFails, 2) {
		t.Errorf("unreachable: %g on path 1, %g on the target", pathFails, targetFails)
	}
	for _, target := range []string{good, bad} {
		probes, _ := m.Value(`gorping_probes_total{target="` + target + `"}`)
		sum, _ := m.Sum(`gorping_path_probes_total{target="` + target + `"}`)
		if !near(probes, sum, 3) {
			t.Errorf("%s: %g probes, its paths' %g", target, probes, sum)
		}
		rtts, _ := m.Value(`gorping_probe_rtt_seconds_count{target="` + target + `"}`)
		fails, _ := m.Sum(`gorping_probe_failures_total{target="` + target + `"}`)
		if !near(probes, rtts+fails, 3) {
			t.Errorf("%s: %g probes, %g RTTs + %g failures", target, probes, rtts, fails)
		}
	}
	// Every path probes once per interval: no path is starved by the others.
	for _, p := range []string{"0", "1", "2"} {
		if v, _ := m.Value(`gorping_path_probes_total{target="` + good + `",path="` + p + `"}`); v < 3 {
			t.Errorf("path %s of %s: %g probes", p, good, v)
		}
	}
	if s, _ := m.Select(`gorping_path_failures_total{target="` + good + `"}`); len(s) != 0 {
		t.Errorf("failures on the good target's paths: %v", s)
	}
	// The bad path never connected: it has no path_info.
	if infos := pathInfos(t, m, bad); len(infos) != 2 || len(infos["0"]) != 1 || len(infos["2"]) != 1 {
		t.Errorf("path_info of %s: %v, want paths 0 and 2", bad, infos)
	}
	// The budget: per path up, probes, info (once connected) and one per reason it has
	// had; one more per target (paths up).
	for _, target := range []string{good, bad} {
		fails, _ := m.Select(`gorping_path_failures_total{target="` + target + `"}`)
		infos, _ := m.Select(`gorping_path_info{target="` + target + `"}`)
		if n, want := len(pathSeries(m, target)), 3*2+1+len(infos)+len(fails); n != want {
			t.Errorf("%s: %d path series, want %d: %v", target, n, want, pathSeries(m, target))
		}
		if n := seriesPerTarget(m)[target]; n > maxSeriesPerTarget+3*maxSeriesPerPath+len(fails) {
			t.Errorf("%s: %d series, over the budget of 3 paths", target, n)
		}
	}
}

// TestPathsReconnect: a path whose connection fails reconnects with new QPs; its
// path_info follows (the old series deleted, one per path) and the other path keeps
// its connection.
func TestPathsReconnect(t *testing.T) {
	fn := newFakeNet()
	const addr = "192.0.2.1:7174"
	fn.set(addr, behavior{rtt: 3 * time.Microsecond})
	ta := startAgent(t, deps{dial: fn.dial, resolver: &fakeResolver{m: map[string][]netip.Addr{}}},
		"--interval", "20ms", "--backoff-max", "50ms", "--paths", "2", "--peers", addr)
	ta.wait(t, `gorping_target_paths_up{target="`+addr+`"}`, eq(2))
	m, err := ta.Scrape()
	if err != nil {
		t.Fatal(err)
	}
	before := pathInfos(t, m, addr)
	if len(before["0"]) != 1 || len(before["1"]) != 1 {
		t.Fatalf("path_info before: %v", before)
	}
	old := before["0"][0].Labels
	var qpn uint32
	fmt.Sscan(old["local_qpn"], &qpn)
	fn.failConn(qpn, "retry_exc_err")
	ta.wait(t, `gorping_path_failures_total{target="`+addr+`",path="0",reason="retry_exc_err"}`, eq(1))
	meshtest.WaitFor(t, 10*time.Second, "path 0 reconnected with new QPs", func() (bool, string) {
		m, err := ta.Scrape()
		if err != nil {
			return false, err.Error()
		}
		infos := pathInfos(t, m, addr)
		up, _ := m.Value(`gorping_path_up{target="` + addr + `",path="0"}`)
		return len(infos["0"]) == 1 && infos["0"][0].Labels["local_qpn"] != old["local_qpn"] && up == 1,
			fmt.Sprint(infos, " up ", up)
	})
	m, err = ta.Scrape()
	if err != nil {
		t.Fatal(err)
	}
	after := pathInfos(t, m, addr)
	n := after["0"][0].Labels
	if n["remote_qpn"] == old["remote_qpn"] || n["udp_sport"] == old["udp_sport"] {
		t.Errorf("path 0's new connection %v keeps the old flow %v", n, old)
	}
	if len(after["1"]) != 1 || after["1"][0].Labels["local_qpn"] != before["1"][0].Labels["local_qpn"] {
		t.Errorf("path 1 changed: %v, was %v", after["1"], before["1"])
	}
	if s, _ := m.Select(`gorping_path_info{local_qpn="` + old["local_qpn"] + `"}`); len(s) != 0 {
		t.Errorf("the old connection's path_info is still there: %v", s)
	}
	if v, _ := m.Value(`gorping_connections_total{target="` + addr + `"}`); v != 3 {
		t.Errorf("connections_total %g, want 3 (two paths, one reconnection)", v)
	}
	if v, _ := m.Value(`gorping_target_up{target="` + addr + `"}`); v != 1 {
		t.Errorf("target_up %g while path 1 worked throughout", v)
	}
}

// TestPathsRemoved: a target removed from the list takes every series of its paths
// with it; the remaining target's stay.
func TestPathsRemoved(t *testing.T) {
	fn := newFakeNet()
	const stay, leave = "192.0.2.1:7174", "192.0.2.2:7174"
	fn.set(stay, behavior{rtt: 3 * time.Microsecond})
	fn.set(leave, behavior{rtt: 3 * time.Microsecond})
	fn.setPath(leave, 2, behavior{dialErr: rping.ReasonConnectTimeout}) // a failure reason to delete too
	file := filepath.Join(t.TempDir(), "targets")
	write := func(s string) { replaceFile(t, file, s, 0o644) }
	write("192.0.2.1\n192.0.2.2\n")
	ta := startAgent(t, deps{dial: fn.dial, resolver: &fakeResolver{m: map[string][]netip.Addr{}}},
		"--interval", "20ms", "--backoff-max", "50ms", "--paths", "3", "--targets", file, "--targets-reload", "100ms")
	ta.wait(t, `gorping_target_paths_up{target="`+leave+`"}`, eq(2))
	ta.wait(t, `gorping_path_failures_total{target="`+leave+`",path="2"}`, ge(1))
	write("192.0.2.1\n")
	meshtest.WaitFor(t, 10*time.Second, "every series of the removed target gone", func() (bool, string) {
		m, err := ta.Scrape()
		if err != nil {
			return false, err.Error()
		}
		n := seriesPerTarget(m)[leave]
		return n == 0, fmt.Sprint(n, " series: ", pathSeries(m, leave))
	})
	m, err := ta.Scrape()
	if err != nil {
		t.Fatal(err)
	}
	if n := len(pathSeries(m, stay)); n != 3*3+1 {
		t.Errorf("the remaining target has %d path series, want 10", n)
	}
}

// TestPathsOne: --paths 1 (the default) is one connection per target and no path
// series at all, whatever the target goes through.
func TestPathsOne(t *testing.T) {
	fn := newFakeNet()
	fn.set("192.0.2.1:7174", behavior{rtt: 3 * time.Microsecond})
	fn.set("192.0.2.2:7174", behavior{rtt: 3 * time.Microsecond, failAfter: 2, failWith: "retry_exc_err"})
	for _, args := range [][]string{{"--paths", "1"}, nil} {
		ta := startAgent(t, deps{dial: fn.dial, resolver: &fakeResolver{m: map[string][]netip.Addr{}}},
			append([]string{"--interval", "20ms", "--backoff-max", "50ms", "--peers", "192.0.2.1,192.0.2.2"}, args...)...)
		ta.wait(t, `gorping_target_up{target="192.0.2.1:7174"}`, eq(1))
		ta.wait(t, `gorping_probe_failures_total{target="192.0.2.2:7174",reason="retry_exc_err"}`, ge(2))
		m, err := ta.Scrape()
		if err != nil {
			t.Fatal(err)
		}
		for name := range m {
			if strings.HasPrefix(name, "gorping_path_") || name == "gorping_target_paths_up" {
				t.Errorf("%v: %s exported with one path", args, name)
			}
		}
		if v, _ := m.Value(`gorping_connections_total{target="192.0.2.1:7174"}`); v != 1 {
			t.Errorf("%v: %g connections to a good target, want 1", args, v)
		}
		ta.stop(t, 10*time.Second)
	}
}

// TestPathsOption: --paths takes 1..16 (its words: cli's TestMeshPathsOption).
func TestPathsOption(t *testing.T) {
	for _, v := range []string{"1", "2", "16"} {
		c, err := checkArgs([]string{"--paths", v})
		if err != nil || fmt.Sprint(c.Paths) != v {
			t.Errorf("--paths %s: %v, %v", v, c, err)
		}
	}
	if c, err := checkArgs(nil); err != nil || c.Paths != 1 {
		t.Errorf("default --paths: %v %v, want 1", c, err)
	}
	for v, want := range map[string]string{
		"0": "--paths 0: want 1..16", "17": "--paths 17: want 1..16", "-1": "--paths -1: want 1..16",
	} {
		_, err := checkArgs([]string{"--paths", v})
		if err == nil || err.Error() != want {
			t.Errorf("--paths %q: %v, want %q", v, err, want)
		}
	}
}
