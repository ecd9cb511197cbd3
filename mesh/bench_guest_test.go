//go:build guest

package mesh

// TestGuestMeshBench is a figure, not a test: one agent probing many targets on the
// guest, and the per-probe cost of what operators script today (a shell loop of
// `rping -c -C 1`). `make bench-mesh` runs it; the guest matrix of `make test` leaves it
// out (MATRIX_SKIP). It asserts only that the measurement happened (every target up).

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorping/gorping/rping"
	"github.com/gorping/gorping/test/guesttest"
	"github.com/gorping/gorping/test/meshtest"
)

func TestGuestMeshBench(t *testing.T) {
	for _, c := range []struct {
		n     int
		rails int    // RDMA devices the targets are spread over
		paths int    // --paths
		procs string // GOMAXPROCS of the agent; "" its default
	}{{64, 1, 1, ""}, {64, 1, 1, "2"}, {256, 1, 1, ""}, {64, 1, 4, ""}, {128, 2, 1, ""}} { // "": the agent's own choice, one P
		name := fmt.Sprintf("%dx%d/GOMAXPROCS=%s", c.rails, c.n, c.procs)
		if c.paths > 1 {
			name = fmt.Sprintf("%dx%dx%dpaths/GOMAXPROCS=%s", c.rails, c.n, c.paths, c.procs)
		}
		t.Run(name, func(t *testing.T) {
			addrs := []string{guesttest.Env(t, "GORPING_IPV4")}
			if c.rails == 2 {
				addrs = append(addrs, secondRail(t))
			}
			benchTargets(t, addrs, c.n, c.paths, 30*time.Second, c.procs)
		})
	}
	t.Run("allocs", benchAllocs)
	t.Run("rping-loop", benchRpingLoop)
}

// procStat is what /proc says about a process.
type procStat struct {
	cpu     time.Duration // user + system
	rssKiB  int
	fds     int
	threads int
}

func readProc(t *testing.T, pid int) procStat {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.Atoi(f[11]) // utime, field 14 of stat
	st, _ := strconv.Atoi(f[12])
	s := procStat{cpu: time.Duration(ut+st) * 10 * time.Millisecond} // USER_HZ = 100
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(status), "\n") {
		k, v, _ := strings.Cut(l, ":")
		fs := strings.Fields(v)
		if len(fs) == 0 {
			continue
		}
		switch k {
		case "VmRSS":
			s.rssKiB, _ = strconv.Atoi(fs[0])
		case "Threads":
			s.threads, _ = strconv.Atoi(fs[0])
		}
	}
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	s.fds = len(ents)
	return s
}

// histQuantile is a classic histogram's quantile as the upper bound of the bucket that
// holds it (no interpolation: a bound, not an estimate).
func histQuantile(m meshtest.Metrics, name string, q float64) string {
	ss, _ := m.Select(name + "_bucket")
	var total float64
	for _, s := range ss {
		if s.Labels["le"] == "+Inf" {
			total = s.Value
		}
	}
	best := math.Inf(1)
	for _, s := range ss {
		le, err := strconv.ParseFloat(s.Labels["le"], 64)
		if err == nil && s.Value >= q*total && le < best {
			best = le
		}
	}
	if math.IsInf(best, 1) {
		return "> last bucket"
	}
	return "≤ " + time.Duration(best*float64(time.Second)).String()
}

// secondRail adds a second RDMA device, rxe9 on dummy d8 with 198.51.100.1, for the
// shape of a two-rail host: connections to that address use rxe9 (rdma_cm resolves a
// local address to the netdev holding it), its own verbs context, PD and CQs.
func secondRail(t *testing.T) string {
	const addr = "198.51.100.1"
	tool := guesttest.Env(t, "GORPING_RDMA_TOOL")
	if out, err := exec.Command("sh", "-c", "ip link add d8 type dummy && ip link set d8 up && ip addr add "+addr+"/24 dev d8 && "+
		tool+" link add rxe9 type rxe netdev d8").CombinedOutput(); err != nil {
		t.Fatalf("a second rail: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		// rdma link delete blocks until every user of rxe9 lets go: bounded, and said.
		if out, err := runWithin(exec.Command(tool, "link", "delete", "rxe9"), guestWait); err != nil {
			t.Errorf("rdma link delete rxe9 (waits for every user of the device): %v\n%s", err, out)
		}
		exec.Command("ip", "link", "del", "d8").Run()
	})
	meshtest.WaitFor(t, guestWait, "rxe9 ACTIVE with the GID of "+addr, func() (bool, string) {
		st, _ := os.ReadFile("/sys/class/infiniband/rxe9/ports/1/state")
		out, _ := exec.Command("sh", "-c", "cat /sys/class/infiniband/rxe9/ports/1/gids/* 2>/dev/null").Output()
		return strings.Contains(string(st), "ACTIVE") && strings.Contains(string(out), "ffff:c633:6401"), string(st)
	})
	return addr
}

// benchTargets runs one agent probing n targets at each of addrs (n responders, each
// listening on every address).
func benchTargets(t *testing.T, addrs []string, n, paths int, window time.Duration, procs string) {
	bin := guesttest.Env(t, "GORPING_BIN")
	base := 7500 + int(benchPorts.Add(int32(n))) - n
	// The responders live in this process: n persistent rping servers.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, n)
	up := make(chan struct{}, n)
	for i := range n {
		go func() {
			rping.Respond(ctx, rping.ResponderConfig{Port: uint16(base + i), Log: io.Discard,
				Listening: func() { up <- struct{}{} }})
			done <- struct{}{}
		}()
	}
	responders := n // n becomes the number of targets below
	t.Cleanup(func() {
		cancel()
		deadline := time.After(guestWait)
		for i := range responders {
			select {
			case <-done:
			case <-deadline:
				t.Errorf("%d of %d responders still running %s after their context ended", responders-i, responders, guestWait)
				return
			}
		}
	})
	for range n {
		select {
		case <-up:
		case <-time.After(5 * time.Minute):
			t.Fatal("responders did not all listen")
		}
	}
	var file strings.Builder
	for _, addr := range addrs {
		for i := range n {
			fmt.Fprintf(&file, "%s\n", hostPort(addr, base+i))
		}
	}
	n *= len(addrs) // targets from here on
	path := filepath.Join(t.TempDir(), "targets")
	if err := os.WriteFile(path, []byte(file.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	var env []string
	if procs != "" {
		env = append(os.Environ(), "GOMAXPROCS="+procs)
	}
	a := meshtest.Start(t, bin, env, "--web.listen-address", "127.0.0.1:0", "--no-responder", "--targets", path, "--paths", strconv.Itoa(paths))
	pid := a.Pid()
	idle := readProc(t, pid)
	meshtest.WaitFor(t, 10*time.Minute, fmt.Sprintf("all %d targets up with %d paths each", n, paths), func() (bool, string) {
		m, err := a.Scrape()
		if err != nil {
			return false, err.Error()
		}
		s, _ := m.Sum("gorping_target_up")
		if paths == 1 {
			return s == float64(n), fmt.Sprintf("%g up", s)
		}
		p, _ := m.Sum("gorping_target_paths_up")
		return s == float64(n) && p == float64(n*paths), fmt.Sprintf("%g up, %g paths up", s, p)
	})
	time.Sleep(3 * time.Second) // past the connection storm

	scrape := func() meshtest.Metrics {
		m, err := a.Scrape()
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	// What one scrape allocates, to take out of the window's count.
	m0 := scrape()
	m1 := scrape()
	mallocs := func(m meshtest.Metrics) float64 { v, _ := m.Value("go_memstats_mallocs_total"); return v }
	perScrape := mallocs(m1) - mallocs(m0)
	p0 := readProc(t, pid)
	m0 = scrape()
	start := time.Now()
	time.Sleep(window)
	m1 = scrape()
	elapsed := time.Since(start)
	p1 := readProc(t, pid)
	objs := processResources(t, pid)
	t.Logf("over the window: RSS %d -> %d KiB, fds %d -> %d", p0.rssKiB, p1.rssKiB, p0.fds, p1.fds)

	probes0, _ := m0.Sum("gorping_probes_total")
	probes1, _ := m1.Sum("gorping_probes_total")
	fails0, _ := m0.Sum("gorping_probe_failures_total")
	fails1, _ := m1.Sum("gorping_probe_failures_total")
	rttSum0, _ := m0.Sum("gorping_probe_rtt_seconds_sum")
	rttSum1, _ := m1.Sum("gorping_probe_rtt_seconds_sum")
	rttN0, _ := m0.Sum("gorping_probe_rtt_seconds_count")
	rttN1, _ := m1.Sum("gorping_probe_rtt_seconds_count")
	probes := probes1 - probes0
	cpu := p1.cpu - p0.cpu
	allocs := (mallocs(m1) - mallocs(m0) - perScrape) / probes
	t.Logf("%d targets x %d paths on %d RDMA devices, %v window: %.0f probes (%.2f per target per second), %.0f failed", n, paths, len(addrs),
		elapsed.Round(time.Second), probes, probes/float64(n)/elapsed.Seconds(), fails1-fails0)
	t.Logf("agent CPU %.2f%% of one CPU (%.1f µs per probe); RSS %d KiB (idle before targets: %d KiB); %d fds; %d threads",
		100*cpu.Seconds()/elapsed.Seconds(), float64(cpu.Microseconds())/probes, p1.rssKiB, idle.rssKiB, p1.fds, p1.threads)
	t.Logf("RDMA objects held: %v (per target: %.2f QP, %.2f MR, %.2f cm_id)", objs,
		float64(objs["qp"])/float64(n), float64(objs["mr"])/float64(n), float64(objs["cm_id"])/float64(n))
	t.Logf("allocations per probe in steady state: %.3f (one scrape: %.0f, taken out)", allocs, perScrape)
	t.Logf("mean RTT %v; slot delay p50 %s, p99 %s (jitter is ±10%% of the interval by design)",
		time.Duration((rttSum1-rttSum0)/(rttN1-rttN0)*float64(time.Second)).Round(time.Microsecond),
		histQuantile(m1, "gorping_probe_slot_delay_seconds", 0.5), histQuantile(m1, "gorping_probe_slot_delay_seconds", 0.99))
	if fails1 > fails0 {
		t.Logf("note: %.0f probes failed in the window", fails1-fails0)
	}
	if code := a.Terminate(t, 2*time.Minute); code != 0 {
		t.Errorf("agent exit %d", code)
	}
}

// benchRpingLoop times what operators script today: one `rping -c -C 1` per target per
// interval, each a process that sets up and tears down a connection.
func benchRpingLoop(t *testing.T) {
	v4 := guesttest.Env(t, "GORPING_IPV4")
	stockBin, err := exec.LookPath("rping")
	if err != nil {
		t.Fatal(err)
	}
	const port, runs = 7990, 20
	stockServer(t, v4, port)
	for _, c := range []struct{ name, bin string }{{"rping -c -C 1", stockBin}, {"gorping -c -C 1", guesttest.Env(t, "GORPING_BIN")}} {
		var cpu, wall time.Duration
		for range runs {
			cmd := exec.Command(c.bin, "-c", "-a", v4, "-p", strconv.Itoa(port), "-C", "1")
			start := time.Now()
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", c.name, err, out)
			}
			wall += time.Since(start)
			cpu += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		}
		t.Logf("%s, %d runs: %.1f ms wall, %.1f ms CPU per probe (process, connection, one ping, teardown)",
			c.name, runs, float64(wall.Microseconds())/runs/1000, float64(cpu.Microseconds())/runs/1000)
	}
}

var benchPorts atomic.Int32

// benchAllocs runs the agent in this process against responders in this process and
// counts the allocations of the whole process over a window without scrapes: the
// probing path's allocations per probe.
func benchAllocs(t *testing.T) {
	v4 := guesttest.Env(t, "GORPING_IPV4")
	const n = 16
	base := 7500 + int(benchPorts.Add(n)) - n
	var peers []string
	for i := range n {
		startedResponder(t, base+i)
		peers = append(peers, hostPort(v4, base+i))
	}
	cfg, err := parseArgs([]string{"--web.listen-address", "127.0.0.1:0", "--no-responder", "--interval", "0.2", "--timeout", "2s", "--peers", strings.Join(peers, ",")})
	if err != nil {
		t.Fatal(err)
	}
	ag := runAgent(t, cfg, deps{}, guestWait)
	probes := func() float64 {
		m, err := ag.Scrape()
		if err != nil {
			t.Fatal(err)
		}
		up, _ := m.Sum("gorping_target_up")
		if up != n {
			t.Fatalf("%g of %d targets up", up, n)
		}
		v, _ := m.Sum("gorping_probes_total")
		return v
	}
	meshtest.WaitFor(t, 5*time.Minute, "targets up", func() (bool, string) {
		m, err := ag.Scrape()
		if err != nil {
			return false, err.Error()
		}
		up, _ := m.Sum("gorping_target_up")
		return up == n, fmt.Sprint(up)
	})
	time.Sleep(2 * time.Second)
	// Native histogram buckets are allocated the first time an RTT lands in them (per
	// target, up to 160), so later windows show the steady state. The third window
	// records every allocation's stack, which slows the process a lot under TCG.
	for w := 1; w <= 3; w++ {
		var m0, m1 runtime.MemStats
		s0 := time.Now()
		p0 := probes()
		runtime.GC()
		if w == 3 {
			runtime.MemProfileRate = 1 // every allocation of the window, with its stack
		}
		runtime.ReadMemStats(&m0)
		t0 := time.Now()
		time.Sleep(20 * time.Second)
		runtime.ReadMemStats(&m1)
		t1 := time.Now()
		runtime.MemProfileRate = 512 * 1024
		p1 := probes()
		s1 := time.Now()
		inWindow := (p1 - p0) * t1.Sub(t0).Seconds() / s1.Sub(s0).Seconds()
		t.Logf("window %d: %d targets at 5/s each, %v without scrapes: %.0f probes, %d allocations: %.3f per probe (agent and responders in one process)",
			w, n, t1.Sub(t0).Round(time.Millisecond), inWindow, m1.Mallocs-m0.Mallocs, float64(m1.Mallocs-m0.Mallocs)/inWindow)
	}
	logAllocSites(t)
}

// logAllocSites logs the five stacks that allocated most objects since profiling began.
func logAllocSites(t *testing.T) {
	runtime.GC()
	var recs []runtime.MemProfileRecord
	n, _ := runtime.MemProfile(nil, true)
	recs = make([]runtime.MemProfileRecord, n+50)
	n, _ = runtime.MemProfile(recs, true)
	recs = recs[:n]
	slices.SortFunc(recs, func(a, b runtime.MemProfileRecord) int { return int(b.AllocObjects - a.AllocObjects) })
	for _, r := range recs[:min(5, len(recs))] {
		var b strings.Builder
		frames := runtime.CallersFrames(r.Stack())
		for i := 0; i < 8; i++ {
			f, more := frames.Next()
			fmt.Fprintf(&b, "\n    %s:%d", f.Function, f.Line)
			if !more {
				break
			}
		}
		t.Logf("%d objects allocated at:%s", r.AllocObjects, b.String())
	}
}
