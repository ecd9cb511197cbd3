//go:build guest

package mesh

// Agents on the Soft-RoCE guest (test/vm). rxe only carries traffic between equal
// addresses, so the agents share the guest's address and differ by port.

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorping/gorping/mesh/probe"
	"github.com/gorping/gorping/rping"
	"github.com/gorping/gorping/test/guesttest"
	"github.com/gorping/gorping/test/meshtest"
)

// guest tests run under TCG: generous bounds.
const guestWait = 90 * time.Second

func hostPort(host string, port int) string {
	return netip.AddrPortFrom(netip.MustParseAddr(host), uint16(port)).String()
}

// waitValue waits until the agent's series selector has a value cond accepts.
func waitValue(t *testing.T, a *meshtest.Agent, selector string, what string, cond func(float64) bool) float64 {
	t.Helper()
	var v float64
	meshtest.WaitFor(t, guestWait, a.Name+": "+what, func() (bool, string) {
		var err error
		v, err = a.Value(selector)
		if err != nil {
			return false, err.Error()
		}
		return cond(v), fmt.Sprintf("%s = %g", selector, v)
	})
	return v
}

func is(want float64) func(float64) bool { return func(v float64) bool { return v == want } }
func atLeast(n float64) func(float64) bool {
	return func(v float64) bool { return v >= n }
}

// stockServer starts rdma-core's rping -s -P on addr:port and waits for its listener.
func stockServer(t *testing.T, addr string, port int) *exec.Cmd {
	t.Helper()
	bin, err := exec.LookPath("rping")
	if err != nil {
		t.Fatalf("stock rping: %v", err)
	}
	cmd := exec.Command(bin, "-s", "-P", "-a", addr, "-p", strconv.Itoa(port))
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	guesttest.WaitListening(t, hostPort(addr, port), guestWait, nil, nil)
	return cmd
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil { // atomically, as a ConfigMap update does
		t.Fatal(err)
	}
}

// TestGuestMesh: two agents probe each other (IPv4 and IPv6) and a stock rping -s -P;
// the RTT histograms fill; the agent skips itself and counts a bad line; /probe works
// and refuses unknown targets; a killed target fails with a reason; editing the target
// file (and SIGHUP) adds and removes targets without touching the others' connections;
// SIGTERM ends both with status 0.
func TestGuestMesh(t *testing.T) {
	bin := guesttest.Env(t, "GORPING_BIN")
	v4, v6 := guesttest.Env(t, "GORPING_IPV4"), guesttest.Env(t, "GORPING_IPV6")
	const pa, pb, pStock, pNone, pNew = 7401, 7402, 7403, 7404, 7405
	stock := stockServer(t, v4, pStock)

	dir := t.TempDir()
	fileA, fileB := filepath.Join(dir, "a.targets"), filepath.Join(dir, "b.targets")
	writeFile(t, fileA, fmt.Sprintf("# agent A's targets\n%s\n%s   # stock rping -s -P\n%s\nnot a target\n",
		hostPort(v4, pb), hostPort(v4, pStock), hostPort(v4, pa) /* itself: skipped */))
	writeFile(t, fileB, "")
	common := []string{"--web.listen-address", "127.0.0.1:0", "--interval", "0.2", "--timeout", "2s"}
	a := meshtest.Start(t, bin, nil, append(common, "--port", strconv.Itoa(pa), "--targets", fileA,
		"--targets-reload", "200ms")...)
	b := meshtest.Start(t, bin, nil, append(common, "--port", strconv.Itoa(pb), "--targets", fileB,
		"--targets-reload", "0", "--peers", hostPort(v4, pa)+","+hostPort(v6, pa))...)

	tB, tStock := hostPort(v4, pb), hostPort(v4, pStock)
	for _, c := range []struct {
		a      *meshtest.Agent
		target string
	}{{a, tB}, {a, tStock}, {b, hostPort(v4, pa)}, {b, hostPort(v6, pa)}} {
		waitValue(t, c.a, `gorping_target_up{target="`+c.target+`"}`, c.target+" up", is(1))
		waitValue(t, c.a, `gorping_probe_rtt_seconds_count{target="`+c.target+`"}`, c.target+" RTTs", atLeast(5))
	}
	m, err := a.Scrape()
	if err != nil {
		t.Fatal(err)
	}
	if ss, _ := m.Select(`gorping_probes_total{target="` + hostPort(v4, pa) + `"}`); len(ss) != 0 {
		t.Errorf("agent A probes itself: %v", ss)
	}
	for sel, want := range map[string]float64{
		`gorping_targets{source="file"}`:                                       2,
		`gorping_target_file_bad_lines`:                                        1,
		`gorping_target_path_info{target="` + tB + `",device="rxe0",port="1"}`: 1,
		`gorping_responder_up`:                                                 1,
	} {
		if v, err := m.Value(sel); err != nil || v != want {
			t.Errorf("%s = %v (%v), want %v", sel, v, err, want)
		}
	}
	// Cardinality on a real scrape: every target within its budget.
	checkCardinality(t, m)

	// /probe: a known target answers; an unknown one is refused.
	pm, err := a.ScrapePath("/probe?target=" + tB + "&count=3")
	if err != nil {
		t.Fatalf("/probe: %v", err)
	}
	for sel, want := range map[string]float64{"probe_success": 1, "gorping_probes_total": 3, "gorping_probe_rtt_seconds_count": 3} {
		if v, err := pm.Value(sel); err != nil || v != want {
			t.Errorf("/probe %s = %v (%v), want %v", sel, v, err, want)
		}
	}
	if code, body, err := a.Get("/probe?target=" + hostPort(v4, 7999)); err != nil || code != 403 {
		t.Errorf("/probe of an unknown target: %d %q %v, want 403", code, body, err)
	}

	// The stock server dies: its target goes down and counts failures with a reason.
	stock.Process.Kill()
	stock.Wait()
	waitValue(t, a, `gorping_target_up{target="`+tStock+`"}`, "stock target down", is(0))
	m, _ = a.Scrape()
	fails, _ := m.Select(`gorping_probe_failures_total{target="` + tStock + `"}`)
	var reasons []string
	for _, f := range fails {
		reasons = append(reasons, fmt.Sprintf("%s=%g", f.Labels["reason"], f.Value))
		if !slices.Contains(probe.Reasons, f.Labels["reason"]) && !strings.HasSuffix(f.Labels["reason"], "_err") {
			t.Errorf("unknown failure reason %q", f.Labels["reason"])
		}
	}
	if len(fails) == 0 {
		t.Errorf("the killed target counts no failure")
	}
	t.Logf("failures after killing the stock server: %v", reasons)

	// Edit A's file: the dead target goes, two new ones come; B's target keeps its
	// connection and its series (no gap: its probe count only grows).
	conns, _ := a.Value(`gorping_connections_total{target="` + tB + `"}`)
	probes, _ := a.Value(`gorping_probes_total{target="` + tB + `"}`)
	tNone := hostPort(v4, pNone)
	writeFile(t, fileA, tB+"\n"+tNone+"\n")
	waitValue(t, a, `gorping_probe_failures_total{target="`+tNone+`",reason="connect_refused"}`, "new target refused", atLeast(1))
	meshtest.WaitFor(t, guestWait, "removed target's series gone", func() (bool, string) {
		m, err := a.Scrape()
		if err != nil {
			return false, err.Error()
		}
		ss, _ := m.Select(`gorping_probes_total{target="` + tStock + `"}`)
		return len(ss) == 0, fmt.Sprint(ss)
	})
	m, _ = a.Scrape()
	if v, _ := m.Value(`gorping_connections_total{target="` + tB + `"}`); v != conns {
		t.Errorf("the reload reconnected an unchanged target: connections %g -> %g", conns, v)
	}
	if v, _ := m.Value(`gorping_probes_total{target="` + tB + `"}`); v <= probes {
		t.Errorf("the unchanged target's probes did not go on: %g -> %g", probes, v)
	}
	if v, _ := m.Value(`gorping_target_up{target="` + tB + `"}`); v != 1 {
		t.Errorf("the unchanged target is down after the reload")
	}

	// B reloads only on SIGHUP.
	stopNew := startedResponder(t, pNew)
	writeFile(t, fileB, hostPort(v4, pNew)+"\n")
	if err := b.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitValue(t, b, `gorping_target_up{target="`+hostPort(v4, pNew)+`"}`, "target added on SIGHUP", is(1))
	stopNew()

	for _, ag := range []*meshtest.Agent{a, b} {
		if code := ag.Terminate(t, guestWait); code != 0 {
			t.Errorf("%s: exit %d after SIGTERM\n%s", ag.Name, code, ag.Logs())
		}
	}
}

// startedResponder runs rping.Respond in this process on port p, waits until it
// listens and returns its stop function.
func startedResponder(t *testing.T, p int) func() {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	up := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		rping.Respond(ctx, rping.ResponderConfig{Port: uint16(p), Listening: func() { up <- struct{}{} }})
	}()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	select {
	case <-up:
	case <-done:
		t.Fatalf("the responder on port %d stopped", p)
	case <-time.After(guestWait):
		t.Fatalf("the responder on port %d did not listen", p)
	}
	return stop
}

// checkCardinality checks every target's series count, counting a histogram as the one
// native histogram series Prometheus stores, and that rxe's targets are software-timed:
// ts_source="sw", no split histograms.
func checkCardinality(t *testing.T, m meshtest.Metrics) {
	t.Helper()
	for target, n := range seriesPerTarget(m) {
		if n > maxSeriesPerTarget {
			t.Errorf("target %s has %d series, budget %d", target, n, maxSeriesPerTarget)
		}
	}
	for _, s := range m.Samples() {
		switch {
		case s.Name == "gorping_target_ts_source" && (s.Labels["ts_source"] != "sw" || s.Value != 1):
			t.Errorf("%s %v = %g on rxe, want ts_source sw = 1", s.Name, s.Labels, s.Value)
		case strings.HasPrefix(s.Name, "gorping_probe_network_rtt_seconds"), strings.HasPrefix(s.Name, "gorping_probe_host_rtt_seconds"):
			t.Errorf("%s %v on rxe, which has no completion timestamps", s.Name, s.Labels)
		}
	}
}

// TestGuestMeshDeviceRemoval: the agents' device goes away and comes back (rdma link
// delete/add): the delete completes (the agents let go of the device), the agents keep
// running with their targets down and a reason counted, then everything comes back.
func TestGuestMeshDeviceRemoval(t *testing.T) {
	bin := guesttest.Env(t, "GORPING_BIN")
	tool := guesttest.RDMATool(t)
	v4 := guesttest.Env(t, "GORPING_IPV4")
	const pa, pb = 7411, 7412
	common := []string{"--web.listen-address", "127.0.0.1:0", "--interval", "0.2", "--backoff-max", "1s"}
	a := meshtest.Start(t, bin, nil, append(common, "--port", strconv.Itoa(pa), "--peers", hostPort(v4, pb))...)
	b := meshtest.Start(t, bin, nil, append(common, "--port", strconv.Itoa(pb), "--peers", hostPort(v4, pa))...)
	ta, tb := hostPort(v4, pa), hostPort(v4, pb)
	waitValue(t, a, `gorping_target_up{target="`+tb+`"}`, "up", is(1))
	waitValue(t, b, `gorping_target_up{target="`+ta+`"}`, "up", is(1))

	netdev := rxeNetdev(t, tool)
	del := exec.Command(tool, "link", "delete", "rxe0")
	out, err := runWithin(del, guestWait)
	if err != nil {
		t.Fatalf("rdma link delete rxe0 (blocks until every user lets go): %v\n%s", err, out)
	}
	restored := false
	t.Cleanup(func() {
		if !restored {
			exec.Command(tool, "link", "add", "rxe0", "type", "rxe", "netdev", netdev).Run()
			waitGIDs(t, v4, guesttest.Env(t, "GORPING_IPV6"))
		}
	})
	// The responders' wildcard listeners may outlive the device (rdma_cm listens on the
	// device again when it returns); a responder whose session saw the removal ends as
	// rping -P does, and the agent starts it again.
	for _, ag := range []*meshtest.Agent{a, b} {
		if !ag.Running() {
			t.Fatalf("%s exited after the device went away\n%s", ag.Name, ag.Logs())
		}
	}
	waitValue(t, a, `gorping_target_up{target="`+tb+`"}`, "down", is(0))
	// The target goes down at once; its failure is counted in its next probe slot.
	meshtest.WaitFor(t, guestWait, a.Name+": a failure counted while the device is gone", func() (bool, string) {
		m, err := a.Scrape()
		if err != nil {
			return false, err.Error()
		}
		fails, _ := m.Select(`gorping_probe_failures_total{target="` + tb + `"}`)
		return len(fails) > 0, fmt.Sprintf("failures %v", fails)
	})

	if out, err := exec.Command(tool, "link", "add", "rxe0", "type", "rxe", "netdev", netdev).CombinedOutput(); err != nil {
		t.Fatalf("rdma link add: %v\n%s", err, out)
	}
	restored = true
	waitGIDs(t, v4, guesttest.Env(t, "GORPING_IPV6"))
	for _, c := range []struct {
		ag     *meshtest.Agent
		target string
	}{{a, tb}, {b, ta}} {
		waitValue(t, c.ag, `gorping_responder_up`, "responder back", is(1))
		waitValue(t, c.ag, `gorping_target_up{target="`+c.target+`"}`, "up again", is(1))
	}
	for _, ag := range []*meshtest.Agent{a, b} {
		if code := ag.Terminate(t, guestWait); code != 0 {
			t.Errorf("%s: exit %d after SIGTERM", ag.Name, code)
		}
	}
}

func rxeNetdev(t *testing.T, tool string) string {
	out, err := exec.Command(tool, "link", "show", "rxe0/1").CombinedOutput()
	if err != nil {
		t.Fatalf("rdma link show: %v\n%s", err, out)
	}
	f := strings.Fields(string(out))
	if i := slices.Index(f, "netdev"); i >= 0 && i+1 < len(f) {
		return f[i+1]
	}
	t.Fatalf("no netdev in %q", out)
	return ""
}

// waitGIDs waits until rxe0's port is ACTIVE with the GIDs of the guest's addresses, as
// the guest's setup leaves it for the tests after this one.
func waitGIDs(t *testing.T, addrs ...string) {
	var gids []string
	for _, addr := range addrs {
		b := netip.MustParseAddr(addr).As16()
		var g []string
		for i := 0; i < 16; i += 2 {
			g = append(g, fmt.Sprintf("%02x%02x", b[i], b[i+1]))
		}
		gids = append(gids, strings.Join(g, ":"))
	}
	meshtest.WaitFor(t, guestWait, "rxe0 ACTIVE with its GIDs", func() (bool, string) {
		st, _ := os.ReadFile("/sys/class/infiniband/rxe0/ports/1/state")
		out, _ := exec.Command("sh", "-c", "cat /sys/class/infiniband/rxe0/ports/1/gids/* 2>/dev/null").Output()
		if !strings.Contains(string(st), "ACTIVE") {
			return false, string(st)
		}
		for _, g := range gids {
			if !strings.Contains(string(out), g) {
				return false, "no GID " + g
			}
		}
		return true, ""
	})
}

func runWithin(cmd *exec.Cmd, d time.Duration) ([]byte, error) {
	var buf strings.Builder
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return []byte(buf.String()), err
	case <-time.After(d):
		cmd.Process.Kill()
		<-done
		return []byte(buf.String()), fmt.Errorf("still running after %s", d)
	}
}

// TestGuestMeshReleases runs the agent in this process against a stock rping -s -P and
// its own responder, ends it, and checks that this process then owns no RDMA object
// and no more file descriptors than before: every QP, CQ, MR, PD, cm_id and context
// was released by the agent, not by the process's exit.
func TestGuestMeshReleases(t *testing.T) {
	v4 := guesttest.Env(t, "GORPING_IPV4")
	const pSelf, pStock = 7421, 7422
	stockServer(t, v4, pStock)
	fdsBefore := fdCount(t)
	cfg, err := parseArgs([]string{"--web.listen-address", "127.0.0.1:0", "--port", strconv.Itoa(pSelf), "--interval", "0.2",
		"--peers", hostPort(v4, pStock) + "," + hostPort(v4, pSelf+100)})
	if err != nil {
		t.Fatal(err)
	}
	ag := runAgent(t, cfg, deps{}, guestWait)
	waitValue(t, ag.Agent, `gorping_target_up{target="`+hostPort(v4, pStock)+`"}`, "stock target up", is(1))
	waitValue(t, ag.Agent, `gorping_responder_up`, "responder", is(1))
	// A connection to the stock server may be between a failed probe (a 200 ms
	// timeout on a loaded host) and its next dial: wait for one that is set up.
	meshtest.WaitFor(t, 30*time.Second, "the running agent to hold a QP, 3 MRs and 2 cm_ids (connection and listener)", func() (bool, string) {
		held := ownResources(t)
		return held["qp"] >= 1 && held["cm_id"] >= 2 && held["mr"] >= 3, fmt.Sprint(held)
	})
	if st := ag.stop(t, guestWait); st != 0 {
		t.Errorf("run returned %d", st)
	}
	meshtest.WaitFor(t, 30*time.Second, "every RDMA object released", func() (bool, string) {
		left := ownResources(t)
		return len(left) == 0, fmt.Sprint(left)
	})
	meshtest.WaitFor(t, 30*time.Second, "file descriptors back to the baseline", func() (bool, string) {
		n := fdCount(t)
		return n <= fdsBefore, fmt.Sprintf("%d open, %d before", n, fdsBefore)
	})
}

// ownResources counts the RDMA objects this process's threads own, by kind.
func ownResources(t *testing.T) map[string]int { return processResources(t, os.Getpid()) }

// processResources counts the RDMA objects process pid's threads own, by kind (the kernel
// records the creating thread).
func processResources(t *testing.T, pid int) map[string]int {
	tasks := map[int]bool{}
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			tasks[n] = true
		}
	}
	m := map[string]int{}
	for _, k := range guesttest.Kinds {
		for _, r := range guesttest.Resources(t, k) {
			if !r.Kernel() && tasks[r.PID()] {
				m[k]++
			}
		}
	}
	return m
}

func fdCount(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestGuestMeshPaths: an agent with --paths 3 keeps three connections to a stock
// rping -s -P, each its own QP pair: three path_info series with distinct local and
// remote QPNs and the predicted UDP source ports, the target up with 3 paths.
func TestGuestMeshPaths(t *testing.T) {
	bin := guesttest.Env(t, "GORPING_BIN")
	v4 := guesttest.Env(t, "GORPING_IPV4")
	const pStock = 7411
	stockServer(t, v4, pStock)
	target := hostPort(v4, pStock)
	a := meshtest.Start(t, bin, nil, "--web.listen-address", "127.0.0.1:0", "--no-responder", "--interval", "0.2",
		"--timeout", "2s", "--paths", "3", "--peers", target)
	waitValue(t, a, `gorping_target_paths_up{target="`+target+`"}`, "3 paths up", is(3))
	waitValue(t, a, `gorping_target_up{target="`+target+`"}`, "target up", is(1))
	m, err := a.Scrape()
	if err != nil {
		t.Fatal(err)
	}
	infos, _ := m.Select(`gorping_path_info{target="` + target + `"}`)
	if len(infos) != 3 {
		t.Fatalf("%d path_info series, want 3: %v", len(infos), infos)
	}
	seen := map[string]bool{}
	for _, s := range infos {
		for _, l := range []string{"local_qpn", "remote_qpn"} {
			v := s.Labels[l]
			if n, err := strconv.Atoi(v); err != nil || n == 0 || seen[l+v] {
				t.Errorf("path %s: %s=%q is not a fresh QP number", s.Labels["path"], l, v)
			}
			seen[l+v] = true
		}
		if p, err := strconv.Atoi(s.Labels["udp_sport"]); err != nil || p < 0xC000 || p > 0xFFFF {
			t.Errorf("path %s: udp_sport=%q, want a predicted port in 49152..65535 on this kernel", s.Labels["path"], s.Labels["udp_sport"])
		}
		t.Logf("path %s: QP %s -> %s, udp_sport %s", s.Labels["path"], s.Labels["local_qpn"], s.Labels["remote_qpn"], s.Labels["udp_sport"])
	}
	if code := a.Terminate(t, guestWait); code != 0 {
		t.Errorf("agent exit %d after SIGTERM", code)
	}
}
