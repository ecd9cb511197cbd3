package rping

import (
	"bufio"
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestHistogramPrecision(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	vals := []uint64{0, 1, 511, 512, 513, 1023, 1024, 1 << 40, math.MaxUint64}
	for range 10000 {
		vals = append(vals, r.Uint64N(1<<uint(r.IntN(63)+1)))
	}
	for _, v := range vals {
		i := histIndex(v)
		if i < 0 || i >= histBuckets {
			t.Fatalf("histIndex(%d) = %d, out of [0, %d)", v, i, histBuckets)
		}
		mid := histMid(i)
		if diff := math.Abs(float64(mid) - float64(v)); diff > float64(v)/512+0.5 {
			t.Errorf("value %d: bucket %d middle %d, off by %.0f (more than 1/512)", v, i, mid, diff)
		}
		if i > 0 && histIndex(v) < histIndex(v/2) {
			t.Errorf("histIndex not monotonic at %d", v)
		}
	}
}

// The summary figures against a direct computation over the same samples.
func TestRTTStats(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var s rttStats
	var samples []time.Duration
	for range 5000 {
		d := time.Duration(200_000 + r.NormFloat64()*30_000)
		if r.IntN(100) == 0 {
			d *= 10 // a tail
		}
		samples = append(samples, d)
		s.sent++
		s.record(d)
	}
	slices.Sort(samples)
	var sum, sumSq float64
	for _, d := range samples {
		sum += float64(d)
		sumSq += float64(d) * float64(d)
	}
	n := float64(len(samples))
	mean := sum / n
	wantMdev := math.Sqrt(sumSq/n - mean*mean)
	near := func(what string, got, want time.Duration, tol float64) {
		t.Helper()
		if math.Abs(float64(got-want)) > tol*float64(want)+1 {
			t.Errorf("%s = %v, want %v (±%.2f%%)", what, got, want, tol*100)
		}
	}
	near("min", s.min, samples[0], 0)
	near("max", s.max, samples[len(samples)-1], 0)
	near("avg", s.avg(), time.Duration(mean), 1e-9)
	near("mdev", s.mdev(), time.Duration(wantMdev), 1e-6)
	for _, p := range []float64{50, 99, 100, 0.01} {
		rank := int(math.Ceil(p / 100 * n))
		near(sprintf("p%v", p), s.percentile(p), samples[rank-1], 1.0/512)
	}
	if s.lossPercent() != 0 {
		t.Errorf("loss %d%%, want 0", s.lossPercent())
	}
	s.sent += 5000 // as many lost
	if s.lossPercent() != 50 {
		t.Errorf("loss %d%%, want 50", s.lossPercent())
	}
}

// statsRun runs a client with the given options against a fake server and
// returns the client side.
func statsRun(t *testing.T, count int, setup func(cfg *Config)) (*side, int) {
	t.Helper()
	cl, sv := newSide(false, 64, count), newSide(true, 64, 0)
	cl.cfg.Addr = netip.MustParseAddr("192.0.2.1")
	cl.cfg.Verbose = true
	setup(&cl.cfg)
	cl.cfg.rep = newReporter(&cl.cfg)
	n := newFakeNet()
	c, s := n.pair(64, 64)
	ctx := context.Background()
	if cl.cfg.Deadline > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cl.cfg.Deadline)
		defer cancel()
	}
	sv.startServer(context.Background(), s)
	cl.startClient(ctx, c)
	st := cl.wait(t)
	sv.wait(t)
	return cl, st
}

var (
	pingLineRE = regexp.MustCompile(`^64 bytes from 192\.0\.2\.1: seq=(\d+) time=\d+\.\d{3} ms$`)
	rttLineRE  = regexp.MustCompile(`^rtt min/avg/max/mdev = (\d+\.\d{3})/(\d+\.\d{3})/(\d+\.\d{3})/(\d+\.\d{3}) ms, p50/p99 = (\d+\.\d{3})/(\d+\.\d{3}) ms$`)
)

func TestStatsText(t *testing.T) {
	cl, st := statsRun(t, 5, func(cfg *Config) { cfg.Stats = true })
	if st != 0 {
		t.Fatalf("exit %d, stderr %q", st, cl.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(cl.stdout.String(), "\n"), "\n")
	// Per ping: rping's data line, then the time; then ping(8)'s summary.
	if len(lines) != 2*5+4 {
		t.Fatalf("got %d lines:\n%s", len(lines), cl.stdout)
	}
	for i := range 5 {
		if want := "ping data: " + PayloadString(i, 64); lines[2*i] != want {
			t.Errorf("line %d = %q, want %q", 2*i, lines[2*i], want)
		}
		m := pingLineRE.FindStringSubmatch(lines[2*i+1])
		if m == nil || m[1] != sprintf("%d", i) {
			t.Errorf("line %d = %q, want ping %d's time", 2*i+1, lines[2*i+1], i)
		}
	}
	tail := lines[10:]
	if tail[0] != "" || tail[1] != "--- 192.0.2.1 rping statistics ---" {
		t.Errorf("summary header %q", tail[:2])
	}
	if !regexp.MustCompile(`^5 pings transmitted, 5 received, 0% loss, 0 errors, time \d+ms$`).MatchString(tail[2]) {
		t.Errorf("summary counts %q", tail[2])
	}
	m := rttLineRE.FindStringSubmatch(tail[3])
	if m == nil {
		t.Fatalf("summary rtt %q", tail[3])
	}
	var f [6]float64
	for i := range f {
		f[i], _ = strconv.ParseFloat(m[i+1], 64)
	}
	if !(f[0] <= f[1] && f[1] <= f[2] && f[0] <= f[4] && f[4] <= f[5] && f[5] <= f[2]) {
		t.Errorf("want min ≤ avg ≤ max and min ≤ p50 ≤ p99 ≤ max: %q", tail[3])
	}
}

// Without --stats/--json nothing changes: rping's lines only.
func TestNoStatsNoExtraOutput(t *testing.T) {
	cl, st := statsRun(t, 3, func(cfg *Config) {})
	if st != 0 || cl.stdout.String() != pingLines("ping data: ", 3, 64) {
		t.Errorf("exit %d stdout %q", st, cl.stdout)
	}
}

// decodeLines parses every stdout line as one JSON object.
func decodeLines(t *testing.T, text string) []map[string]any {
	t.Helper()
	var objs []map[string]any
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		var m map[string]any
		dec := json.NewDecoder(strings.NewReader(sc.Text()))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("line %q is not JSON: %v", sc.Text(), err)
		}
		if dec.More() {
			t.Fatalf("line %q holds more than one value", sc.Text())
		}
		objs = append(objs, m)
	}
	return objs
}

func TestJSONPingsAndSummary(t *testing.T) {
	cl, st := statsRun(t, 4, func(cfg *Config) { cfg.Stats, cfg.JSON = true, true })
	if st != 0 {
		t.Fatalf("exit %d, stderr %q", st, cl.stderr)
	}
	// -v's data lines went to stderr, so stdout is only JSON.
	if !strings.Contains(cl.stderr.String(), pingLines("ping data: ", 4, 64)) {
		t.Errorf("stderr %q lacks the ping data lines", cl.stderr)
	}
	objs := decodeLines(t, cl.stdout.String())
	if len(objs) != 5 {
		t.Fatalf("%d JSON lines, want 4 pings and a summary:\n%s", len(objs), cl.stdout)
	}
	for i, o := range objs[:4] {
		rtt, _ := o["rtt_ns"].(json.Number).Int64()
		if o["type"] != "ping" || o["seq"] != json.Number(sprintf("%d", i)) || rtt <= 0 {
			t.Errorf("ping %d: %v", i, o)
		}
	}
	s := objs[4]
	if s["type"] != "summary" || s["transmitted"] != json.Number("4") || s["received"] != json.Number("4") ||
		s["loss_pct"] != json.Number("0") || s["errors"] != json.Number("0") || s["peer"] != "192.0.2.1" {
		t.Errorf("summary %v", s)
	}
	rtt, ok := s["rtt_ns"].(map[string]any)
	if !ok {
		t.Fatalf("summary without rtt_ns: %v", s)
	}
	var vals []int64
	for _, k := range []string{"min", "p50", "p99", "max"} {
		v, err := rtt[k].(json.Number).Int64()
		if err != nil {
			t.Fatalf("rtt_ns.%s = %v", k, rtt[k])
		}
		vals = append(vals, v)
	}
	if !slices.IsSorted(vals) || vals[0] <= 0 {
		t.Errorf("min ≤ p50 ≤ p99 ≤ max fails: %v", vals)
	}
}

// JSON without --stats: the summary only.
func TestJSONWithoutStats(t *testing.T) {
	cl, st := statsRun(t, 3, func(cfg *Config) { cfg.JSON = true; cfg.Verbose = false })
	objs := decodeLines(t, cl.stdout.String())
	if st != 0 || len(objs) != 1 || objs[0]["type"] != "summary" {
		t.Errorf("exit %d, JSON %v", st, objs)
	}
}

// -i spaces the pings; -w ends an endless run with status 0 and its summary.
func TestIntervalAndDeadline(t *testing.T) {
	start := time.Now()
	cl, st := statsRun(t, 0, func(cfg *Config) {
		cfg.Stats = true
		cfg.Interval = 40 * time.Millisecond
		cfg.Deadline = 300 * time.Millisecond
	})
	elapsed := time.Since(start)
	if st != 0 {
		t.Fatalf("exit %d, stderr %q", st, cl.stderr)
	}
	pings := 0
	for _, l := range strings.Split(cl.stdout.String(), "\n") {
		if pingLineRE.MatchString(l) {
			pings++
		}
	}
	// Pings start at 0, 40, 80, ... ms: the interval (not the fake's speed)
	// bounds them to one per 40 ms of the run. The bound uses the measured
	// length, since a loaded machine may fire the deadline late (11 pings in
	// 428 ms seen under -race).
	if most := int(elapsed/(40*time.Millisecond)) + 1; pings < 1 || pings > most {
		t.Errorf("%d pings in a %v run with -i 0.04 (at most %d); output:\n%s", pings, elapsed, most, cl.stdout)
	}
	if elapsed < 300*time.Millisecond {
		t.Errorf("run ended after %v, before its deadline", elapsed)
	}
	if elapsed > 30*time.Second {
		t.Errorf("run ended after %v: the 300 ms deadline did not end it", elapsed)
	}
	if !strings.Contains(cl.stdout.String(), sprintf("%d pings transmitted, %d received", pings, pings)) &&
		!strings.Contains(cl.stdout.String(), sprintf("%d pings transmitted, %d received", pings+1, pings)) {
		t.Errorf("summary does not count %d pings:\n%s", pings, cl.stdout)
	}
}

// -w with -C that the deadline cuts short: ping(8)'s status 1 and a line.
func TestDeadlineBeforeCount(t *testing.T) {
	cl, st := statsRun(t, 1000, func(cfg *Config) {
		cfg.Interval = 50 * time.Millisecond
		cfg.Deadline = 120 * time.Millisecond
	})
	if st != 1 || !regexp.MustCompile(`^rping client: deadline reached after [1-3] of 1000 pings\n$`).MatchString(cl.stderr.String()) {
		t.Errorf("exit %d stderr %q, want 1 and the deadline line", st, cl.stderr)
	}
}

// Ctrl-C (ctx cancelled) while a ping is in flight: in a --stats run that ping
// completes first, so the peer sees the connection end between pings and the
// summary counts it received.
func TestStatsInterruptFinishesPingInFlight(t *testing.T) {
	n := newFakeNet()
	c, s := n.pair(64, 64)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var once sync.Once
	// The server's echo WRITE lands: the client is waiting for the last go-ahead.
	s.onWrite = func([]byte) { once.Do(cancel) }
	cl, sv := newSide(false, 64, 0), newSide(true, 64, 0)
	cl.cfg.Addr = netip.MustParseAddr("192.0.2.1")
	cl.cfg.Stats = true
	cl.cfg.rep = newReporter(&cl.cfg)
	sv.startServer(context.Background(), s)
	cl.startClient(ctx, c)
	if st := cl.wait(t); st != 0 {
		t.Errorf("client exit %d, stderr %q; want 0", st, cl.stderr)
	}
	if !strings.Contains(cl.stdout.String(), "\n1 pings transmitted, 1 received, 0% loss") {
		t.Errorf("summary does not count the ping in flight as received:\n%s", cl.stdout)
	}
	if st := sv.wait(t); st != 0 {
		t.Errorf("server exit %d, stderr %q; want 0 (a disconnect between pings)", st, sv.stderr)
	}
}
