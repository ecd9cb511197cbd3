//go:build !guest

package mesh

// The agent facing a hostile or careless network (issue 26): HTTP clients that hold
// connections, DNS that does not answer, target files that are not what they seem.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/crypto/bcrypt"

	"github.com/gorping/gorping/mesh/probe"
	"github.com/gorping/gorping/mesh/source"
	"github.com/gorping/gorping/mesh/target"
	"github.com/gorping/gorping/test/meshtest"
)

// rawConn opens a TCP connection to the agent's listener.
func rawConn(t *testing.T, ta *testAgent) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", ta.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waitClosed waits until the server closes c (a read returns EOF or a reset).
func waitClosed(t *testing.T, c net.Conn, within time.Duration, what string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(within))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Errorf("%s: the agent still holds the connection after %s", what, within)
	}
}

// get sends one keep-alive GET on c and reads the response.
func get(t *testing.T, c net.Conn, r *bufio.Reader, path string) *http.Response {
	t.Helper()
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: agent\r\n\r\n", path)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// TestHTTPLimits (issue 26 finding 1): idle keep-alive connections and slow request
// bodies are closed, a huge header is refused, and the listener holds a bounded number
// of connections. The limits are shortened here; their values are defaultHTTPLimits.
func TestHTTPLimits(t *testing.T) {
	short := httpLimits{readHeader: 300 * time.Millisecond, read: 500 * time.Millisecond, write: 15 * time.Second,
		idle: 500 * time.Millisecond, maxHeaderBytes: 8 << 10, maxConns: 64}
	ta := startAgent(t, deps{dial: newFakeNet().dial, resolver: &fakeResolver{m: map[string][]netip.Addr{}}, limits: &short},
		"--no-responder")

	idle := rawConn(t, ta)
	if resp := get(t, idle, bufio.NewReader(idle), "/-/healthy"); resp.StatusCode != 200 {
		t.Fatalf("/-/healthy: %d", resp.StatusCode)
	}
	waitClosed(t, idle, 10*time.Second, "an idle keep-alive connection")

	slow := rawConn(t, ta)
	fmt.Fprintf(slow, "POST /probe?target=192.0.2.1 HTTP/1.1\r\nHost: agent\r\nContent-Length: 100000\r\n\r\nx")
	waitClosed(t, slow, 10*time.Second, "a request body sent slowly")

	big := rawConn(t, ta)
	fmt.Fprintf(big, "GET /metrics HTTP/1.1\r\nHost: agent\r\nX-Big: %s\r\n\r\n", strings.Repeat("a", 100<<10))
	big.SetReadDeadline(time.Now().Add(10 * time.Second))
	if resp, err := http.ReadResponse(bufio.NewReader(big), nil); err != nil || resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("a 100 KiB header: %v %v, want 431", resp, err)
	}

	// At most maxConns connections at once: a fifth waits until one of four goes.
	capped := httpLimits{readHeader: 5 * time.Second, read: 10 * time.Second, write: 15 * time.Second, idle: time.Minute,
		maxHeaderBytes: 8 << 10, maxConns: 4}
	tb := startAgent(t, deps{dial: newFakeNet().dial, resolver: &fakeResolver{m: map[string][]netip.Addr{}}, limits: &capped},
		"--no-responder")
	var held []net.Conn
	for range 4 {
		c := rawConn(t, tb)
		get(t, c, bufio.NewReader(c), "/-/healthy")
		held = append(held, c)
	}
	fifth := rawConn(t, tb)
	fr := bufio.NewReader(fifth)
	fmt.Fprintf(fifth, "GET /-/healthy HTTP/1.1\r\nHost: agent\r\n\r\n")
	fifth.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := fr.Peek(1); err == nil {
		t.Error("a fifth connection was served while four were held (maxConns 4)")
	}
	held[0].Close()
	fifth.SetReadDeadline(time.Now().Add(10 * time.Second))
	if resp, err := http.ReadResponse(fr, nil); err != nil || resp.StatusCode != 200 {
		t.Errorf("the fifth connection after one of four closed: %v %v", resp, err)
	}
}

// heldResolver answers every lookup with addr, but only once released (a DNS server that
// does not answer; it ignores the context as a stuck resolver would), and counts.
type heldResolver struct {
	addr    netip.Addr
	release chan struct{}
	mu      sync.Mutex
	calls   int
	now     int // lookups in flight
	most    int
}

func newHeldResolver(addr string) *heldResolver {
	return &heldResolver{addr: netip.MustParseAddr(addr), release: make(chan struct{})}
}

func (r *heldResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	r.calls++
	r.now++
	r.most = max(r.most, r.now)
	r.mu.Unlock()
	<-r.release
	r.mu.Lock()
	r.now--
	r.mu.Unlock()
	return []netip.Addr{r.addr}, nil
}

func (r *heldResolver) counts() (calls, most int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls, r.most
}

// probeStatuses sends n /probe requests for names at once and returns their statuses
// as they arrive.
func probeStatuses(ta *testAgent, n int) chan int {
	out := make(chan int, n)
	for i := range n {
		go func() {
			code, _, err := ta.Get(fmt.Sprintf("/probe?target=n%d.slow.test", i))
			if err != nil {
				code = -1
			}
			out <- code
		}()
	}
	return out
}

// TestProbeDNSBounded (finding 2): /probe takes its slot before any resolution and
// resolves only names the allow-list could admit, so parallel requests for names make
// at most maxProbesInFlight lookups, and none when only the agent's targets are allowed.
func TestProbeDNSBounded(t *testing.T) {
	res := newHeldResolver("203.0.113.9") // outside the allow-list below
	defer close(res.release)
	ta := startAgent(t, deps{dial: newFakeNet().dial, resolver: res}, "--no-responder", "--peers", "192.0.2.1")
	got := probeStatuses(ta, 40)
	for range 40 {
		if code := <-got; code != http.StatusForbidden {
			t.Errorf("/probe of a name that is no target, without --probe-allow: %d, want 403", code)
		}
	}
	if calls, _ := res.counts(); calls != 0 {
		t.Errorf("%d DNS lookups for names that no allow-list could admit", calls)
	}

	res2 := newHeldResolver("203.0.113.9")
	tb := startAgent(t, deps{dial: newFakeNet().dial, resolver: res2}, "--no-responder", "--probe-allow", "198.51.100.0/24")
	got = probeStatuses(tb, 40)
	// maxProbesInFlight requests wait on DNS; every other one is answered 503 at once.
	for i := range 40 - maxProbesInFlight {
		select {
		case code := <-got:
			if code != http.StatusServiceUnavailable {
				t.Errorf("answer %d while %d probes wait on DNS: %d, want 503", i, maxProbesInFlight, code)
			}
		case <-time.After(10 * time.Second):
			calls, _ := res2.counts()
			t.Fatalf("only %d of 40 requests answered while DNS does not answer (%d lookups in flight)", i, calls)
		}
	}
	close(res2.release)
	for range maxProbesInFlight {
		if code := <-got; code != http.StatusForbidden {
			t.Errorf("a name that resolves outside --probe-allow: %d, want 403", code)
		}
	}
	if calls, most := res2.counts(); calls > maxProbesInFlight || most > maxProbesInFlight {
		t.Errorf("%d lookups, %d at once, for 40 requests: want at most %d", calls, most, maxProbesInFlight)
	}
}

// TestTargetFileLongLine (finding 3): a line over any buffer size is one bad line, the
// lines after it apply, and neither the error nor the log carries the line.
func TestTargetFileLongLine(t *testing.T) {
	long := strings.Repeat("a", 2<<20)
	nearly := strings.Repeat("b", 1<<20-10) + " x" // under bufio.Scanner's 1 MiB, two words
	data := "192.0.2.1\n" + long + "\n192.0.2.2\n" + nearly + "\n192.0.2.3\n"
	ts, errs := target.ParseFile([]byte(data), 7174)
	var keys []string
	for _, tg := range ts {
		keys = append(keys, tg.Key())
	}
	if got := strings.Join(keys, " "); got != "192.0.2.1:7174 192.0.2.2:7174 192.0.2.3:7174" {
		t.Errorf("targets %q: the lines after a long one must apply", got)
	}
	if len(errs) != 2 || errs[0].Line != 2 || errs[1].Line != 4 {
		t.Errorf("bad lines %v, want lines 2 and 4", errs)
	}
	for _, e := range errs {
		if n := len(e.Error()); n > 200 {
			t.Errorf("line %d: a %d-byte error message", e.Line, n)
		}
	}

	// In the agent: the targets after the long line keep probing, and no log line is long.
	fn := newFakeNet()
	for _, a := range []string{"192.0.2.1:7174", "192.0.2.2:7174", "192.0.2.3:7174"} {
		fn.set(a, behavior{rtt: 5 * time.Microsecond})
	}
	file := filepath.Join(t.TempDir(), "targets")
	if err := os.WriteFile(file, []byte("192.0.2.1\n192.0.2.2\n192.0.2.3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ta := startAgent(t, deps{dial: fn.dial, resolver: &fakeResolver{m: map[string][]netip.Addr{}}}, "--no-responder",
		"--interval", "20ms", "--targets", file, "--targets-reload", "100ms")
	ta.wait(t, `gorping_target_up{target="192.0.2.3:7174"}`, eq(1))
	if err := os.WriteFile(file, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	meshtest.WaitFor(t, 10*time.Second, "the file with the long line loaded", func() (bool, string) {
		return strings.Contains(ta.logs.String(), "bad_lines=2"), ""
	})
	before, _ := ta.Value(`gorping_probes_total{target="192.0.2.3:7174"}`)
	ta.wait(t, `gorping_probes_total{target="192.0.2.3:7174"}`, ge(before+2))
	for _, l := range strings.Split(ta.logs.String(), "\n") {
		if len(l) > 1024 {
			t.Errorf("a %d-byte log line: %.200s...", len(l), l)
		}
	}
}

// TestErrorsBounded (finding 10, error bodies): /probe's 400 quotes its input once and
// briefly, whatever its size.
func TestErrorsBounded(t *testing.T) {
	ta := startAgent(t, deps{dial: newFakeNet().dial, resolver: &fakeResolver{m: map[string][]netip.Addr{}}}, "--no-responder")
	for _, q := range []string{"target=" + strings.Repeat("x", 6000) + "!", "target=[" + strings.Repeat("1", 6000),
		"target=192.0.2.1&count=" + strings.Repeat("9", 6000)} {
		code, body, err := ta.Get("/probe?" + q)
		if err != nil || code != http.StatusBadRequest {
			t.Errorf("/probe?%.40s...: %d %v, want 400", q, code, err)
		}
		if len(body) > 512 {
			t.Errorf("/probe?%.40s...: a %d-byte error body: %.200s...", q, len(body), body)
		}
	}
}

// children counts the series c collects.
func children(c prometheus.Collector) int {
	ch := make(chan prometheus.Metric)
	go func() { c.Collect(ch); close(ch) }()
	n := 0
	for range ch {
		n++
	}
	return n
}

// manyTargets is a target file of n distinct addresses.
func manyTargets(n int) []byte {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "10.%d.%d.%d\n", i>>16&255, i>>8&255, i&255)
	}
	return []byte(b.String())
}

// TestRemoveManyTargets (finding 4): replacing a 10,000-target file by one line removes
// the targets and their series in linear time, and a shutdown during a removal is
// honoured.
func TestRemoveManyTargets(t *testing.T) {
	const n = 10000
	file := filepath.Join(t.TempDir(), "targets")
	if err := os.WriteFile(file, manyTargets(n), 0o644); err != nil {
		t.Fatal(err)
	}
	fn := newFakeNet() // every target refuses: nothing to connect
	ta := startAgent(t, deps{dial: fn.dial, resolver: &fakeResolver{m: map[string][]netip.Addr{}}}, "--no-responder",
		"--interval", "10s", "--targets", file, "--targets-reload", "0", "--max-targets", "20000")
	meshtest.WaitFor(t, time.Minute, "10,000 targets running", func() (bool, string) {
		return ta.running() == n, fmt.Sprint(ta.running())
	})
	replace := func() {
		if err := os.WriteFile(file, []byte("192.0.2.1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		ta.hup <- syscall.SIGHUP
	}
	replace()
	// (The agent's own collectors are counted: a scrape of 10,000 targets under the race
	// detector takes longer than the removal.)
	meshtest.WaitFor(t, 30*time.Second, "9,999 targets and their series removed", func() (bool, string) {
		up, probes := children(ta.a.m.up), children(ta.a.m.probes)
		return up == 1 && probes == 1 && ta.running() == 1, fmt.Sprintf("%d up series, %d probes series, %d loops", up, probes, ta.running())
	})

	// Again, and the agent is stopped while it removes them.
	if err := os.WriteFile(file, manyTargets(n), 0o644); err != nil {
		t.Fatal(err)
	}
	ta.hup <- syscall.SIGHUP
	meshtest.WaitFor(t, time.Minute, "10,000 targets running again", func() (bool, string) {
		return ta.running() == n, fmt.Sprint(ta.running())
	})
	replace()
	if st := ta.stop(t, 20*time.Second); st != 0 {
		t.Errorf("exit %d", st)
	}
}

// BenchmarkRemoveTargets: n running targets replaced by one, series deleted (the
// removal of finding 4; it was O(n²) with DeletePartialMatch).
func BenchmarkRemoveTargets(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			log := slog.New(slog.DiscardHandler)
			s := probe.Settings{Interval: time.Hour, Timeout: time.Second, ConnectTimeout: time.Second, BackoffMax: time.Hour,
				Dial: newFakeNet().dial, Resolver: &fakeResolver{m: map[string][]netip.Addr{}}, Log: log}
			ts, _ := target.ParseFile(manyTargets(n), 7174)
			one := ts[:1]
			for b.Loop() {
				b.StopTimer()
				mg := probe.NewManager(ctx, s, newMetrics("bench"))
				mg.Reconcile(ctx, ts)
				runtime.GC()
				b.StartTimer()
				mg.Reconcile(ctx, one)
				b.StopTimer()
				mg.StopAll()
				b.StartTimer()
			}
		})
	}
}

// TestTargetFileNotRegular (finding 5): a FIFO, a device or an oversized file in place
// of the target file is refused without being read into memory or blocking; SIGHUP and
// shutdown work meanwhile, and the last good targets stay.
func TestTargetFileNotRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	// A reader blocked on the FIFO (the bug) is let go when the test ends.
	t.Cleanup(func() {
		if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	ta := startAgent(t, deps{dial: newFakeNet().dial, resolver: &fakeResolver{m: map[string][]netip.Addr{}}}, "--no-responder",
		"--targets", fifo, "--targets-reload", "100ms")
	ta.hup <- syscall.SIGHUP
	meshtest.WaitFor(t, 10*time.Second, "SIGHUP handled and the FIFO refused", func() (bool, string) {
		l := ta.logs.String()
		return strings.Contains(l, "SIGHUP") && strings.Contains(l, "not a regular file"), ""
	})
	if st := ta.stop(t, 10*time.Second); st != 0 {
		t.Errorf("exit %d", st)
	}

	// A good file, then a symlink to /dev/zero and a file over the size limit in its
	// place: both refused, the targets kept.
	fn := newFakeNet()
	fn.set("192.0.2.1:7174", behavior{rtt: 5 * time.Microsecond})
	file := filepath.Join(dir, "targets")
	if err := os.WriteFile(file, []byte("192.0.2.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tb := startAgent(t, deps{dial: fn.dial, resolver: &fakeResolver{m: map[string][]netip.Addr{}}}, "--no-responder",
		"--interval", "20ms", "--targets", file, "--targets-reload", "100ms")
	tb.wait(t, `gorping_target_up{target="192.0.2.1:7174"}`, eq(1))
	os.Remove(file)
	if err := os.Symlink("/dev/zero", file); err != nil {
		t.Fatal(err)
	}
	meshtest.WaitFor(t, 10*time.Second, "/dev/zero refused", func() (bool, string) {
		return strings.Count(tb.logs.String(), "not a regular file") >= 1, ""
	})
	big := append([]byte("192.0.2.1\n"), make([]byte, source.MaxFileBytes)...)
	if err := os.WriteFile(file+".new", big, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(file+".new", file); err != nil {
		t.Fatal(err)
	}
	meshtest.WaitFor(t, 10*time.Second, "an oversized file refused", func() (bool, string) {
		return strings.Contains(tb.logs.String(), "larger than"), ""
	})
	if v, err := tb.Value(`gorping_target_up{target="192.0.2.1:7174"}`); err != nil || v != 1 {
		t.Errorf("the last good target after refused files: %v %v", v, err)
	}
}

// TestBadLinesOncePerChange (finding 10): a bad line is logged once per change of the
// file, not at every reload, and counted by a gauge of the current file; a file of many
// bad lines logs a few and a count.
func TestBadLinesOncePerChange(t *testing.T) {
	file := filepath.Join(t.TempDir(), "targets")
	write := func(s string) {
		if err := os.WriteFile(file, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("192.0.2.1\nbad target\n")
	ta := startAgent(t, deps{dial: newFakeNet().dial, resolver: &fakeResolver{m: map[string][]netip.Addr{}}}, "--no-responder",
		"--targets", file, "--targets-reload", "0")
	ta.wait(t, `gorping_target_file_bad_lines`, eq(1))
	for range 20 {
		ta.hup <- syscall.SIGHUP
	}
	write("192.0.2.1\nbad target\nworse target\n")
	ta.hup <- syscall.SIGHUP
	ta.wait(t, `gorping_target_file_bad_lines`, eq(2))
	if n := strings.Count(ta.logs.String(), "bad line in the target file"); n != 3 {
		t.Errorf("%d bad-line warnings for a file with one bad line, reloaded 21 times, then one with two: want 3", n)
	}
	var b strings.Builder
	for i := range 50 {
		fmt.Fprintf(&b, "bad target %d\n", i)
	}
	write(b.String())
	ta.hup <- syscall.SIGHUP
	ta.wait(t, `gorping_target_file_bad_lines`, eq(50))
	if n := strings.Count(ta.logs.String(), "bad line in the target file"); n > 3+11 {
		t.Errorf("a file of 50 bad lines logged %d lines", n-3)
	}
	write("192.0.2.1\n")
	ta.hup <- syscall.SIGHUP
	ta.wait(t, `gorping_target_file_bad_lines`, eq(0))
}

// TestDurationLimits (finding 6): every duration has a minimum, each refused with a line
// naming its own option. (A timeout longer than the interval is allowed, as the guest
// tests use it under emulation, and --help now says what it does.)
func TestDurationLimits(t *testing.T) {
	for _, c := range []struct {
		args []string
		opt  string
	}{
		{[]string{"--interval", "1ns"}, "--interval"},
		{[]string{"--interval", "0"}, "--interval"},
		{[]string{"--timeout", "1ns"}, "--timeout"},
		{[]string{"--connect-timeout", "1ns"}, "--connect-timeout"},
		{[]string{"--backoff-max", "1ns"}, "--backoff-max"},
		{[]string{"--targets-reload", "1ns"}, "--targets.reload"},
		{[]string{"--targets-reload", "-1s"}, "--targets.reload"},
		{[]string{"--dns-refresh", "1ns"}, "--dns.refresh"},
		{[]string{"--dns-refresh", "-1s"}, "--dns.refresh"},
	} {
		_, err := checkArgs(c.args)
		if err == nil {
			t.Errorf("%q accepted", c.args)
			continue
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, c.opt+" ") || strings.Count(msg, "--") > 2 {
			t.Errorf("%q: %q, want one line about %s", c.args, msg, c.opt)
		}
	}
	for _, ok := range [][]string{{"--targets-reload", "0"}, {"--interval", "10ms"}, {"--timeout", "5s", "--interval", "1s"}} {
		if _, err := checkArgs(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
}

// TestSelfCheckOffPath (finding 7): names on the responder's port are checked against
// this host's addresses in the background: while DNS does not answer for them, every
// other target is probed, a target added meanwhile is probed and /probe-able, and the
// names start once they resolve elsewhere.
func TestSelfCheckOffPath(t *testing.T) {
	res := newHeldResolver("203.0.113.1") // not this host
	released := false
	defer func() {
		if !released {
			close(res.release)
		}
	}()
	fn := newFakeNet()
	fn.set("192.0.2.1:7174", behavior{rtt: 5 * time.Microsecond})
	fn.set("192.0.2.2:7174", behavior{rtt: 5 * time.Microsecond})
	file := filepath.Join(t.TempDir(), "targets")
	names := "n1.slow.test\nn2.slow.test\nn3.slow.test\nn4.slow.test\nn5.slow.test\n"
	if err := os.WriteFile(file, []byte(names+"192.0.2.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ta := startAgent(t, deps{dial: fn.dial, resolver: res}, "--interval", "20ms", "--targets", file, "--targets-reload", "0")
	ta.wait(t, `gorping_target_up{target="192.0.2.1:7174"}`, eq(1))
	if err := os.WriteFile(file, []byte(names+"192.0.2.1\n192.0.2.2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ta.hup <- syscall.SIGHUP
	ta.wait(t, `gorping_target_up{target="192.0.2.2:7174"}`, eq(1))
	if code, _, err := ta.Get("/probe?target=192.0.2.2"); err != nil || code != 200 {
		t.Errorf("/probe of a target added while names wait on DNS: %d %v", code, err)
	}
	close(res.release)
	released = true
	ta.wait(t, `gorping_probes_total{target="n5.slow.test:7174"}`, ge(1))
}

// TestWebConfigAtRunTime (finding 8): the web configuration applies to every path,
// /-/healthy included (exporter-toolkit has no per-path exemption; docs/mesh.md says how
// the probes carry credentials); a configuration broken at run time is answered 500 on
// every path as exporter-toolkit documents, and the agent says so once, naming the
// file, and again when it is fixed; an empty basic_auth_users is warned about.
func TestWebConfigAtRunTime(t *testing.T) {
	const user, pass = "prometheus", "s3cret"
	hash, err := bcrypt.GenerateFromPassword([]byte(pass), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	good := "basic_auth_users:\n  " + user + ": " + string(hash) + "\n"
	file := filepath.Join(t.TempDir(), "web.yml")
	write := func(s string) { replaceFile(t, file, s, 0o600) }
	write(good)
	ta := startAgent(t, deps{dial: newFakeNet().dial, resolver: &fakeResolver{m: map[string][]netip.Addr{}}, webConfigPoll: 100 * time.Millisecond},
		"--no-responder", "--web.config.file", file)
	status := func(path string, auth bool) (int, string) {
		req, _ := http.NewRequest("GET", ta.URL(path), nil)
		if auth {
			req.SetBasicAuth(user, pass)
		}
		resp, err := ta.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := status("/-/healthy", false); code != http.StatusUnauthorized {
		t.Errorf("/-/healthy without credentials: %d, want 401 (every path is authenticated)", code)
	}
	if code, body := status("/-/healthy", true); code != 200 || strings.TrimSpace(body) != "Healthy" {
		t.Errorf("/-/healthy with credentials: %d %q", code, body)
	}
	// The landing page too: it shows the targets.
	if code, body := status("/", false); code != http.StatusUnauthorized || strings.Contains(body, "Targets") {
		t.Errorf("/ without credentials: %d, want 401", code)
	}
	if code, body := status("/", true); code != 200 || !strings.Contains(body, `<table class="gorping" id="agent">`) {
		t.Errorf("/ with credentials: %d\n%s", code, body)
	}

	write("basic_auth_users: [broken\n")
	meshtest.WaitFor(t, 10*time.Second, "the broken web configuration reported", func() (bool, string) {
		return strings.Contains(ta.logs.String(), "every request is answered 500"), ""
	})
	for range 5 {
		if code, _ := status("/metrics", true); code != http.StatusInternalServerError {
			t.Errorf("/metrics with a broken web configuration: %d, want 500", code)
		}
	}
	logs := ta.logs.String()
	if n := strings.Count(logs, "every request is answered 500"); n != 1 {
		t.Errorf("the broken configuration reported %d times, want once", n)
	}
	if n := strings.Count(logs, "Unable to parse configuration"); n > 1 {
		t.Errorf("exporter-toolkit's line for each of 5 requests logged %d times, want at most once", n)
	}
	write(good)
	meshtest.WaitFor(t, 10*time.Second, "the fixed web configuration reported", func() (bool, string) {
		return strings.Contains(ta.logs.String(), "web configuration is valid again"), ""
	})
	if code, _ := status("/metrics", true); code != 200 {
		t.Errorf("/metrics after the fix: %d", code)
	}
	write("basic_auth_users: {}\n")
	meshtest.WaitFor(t, 10*time.Second, "an empty basic_auth_users warned about", func() (bool, string) {
		return strings.Contains(ta.logs.String(), "no basic_auth_users"), ""
	})
	if code, _ := status("/metrics", false); code != 200 {
		t.Errorf("/metrics without credentials and basic_auth_users: {}: %d (exporter-toolkit: no authentication)", code)
	}
}

// TestShutdownAnswersProbes (finding 9): a /probe in flight when the agent is told to
// stop is cancelled and answered (503, saying why) instead of being cut off after the
// listener's shutdown timeout.
func TestShutdownAnswersProbes(t *testing.T) {
	fn := newFakeNet()
	fn.set("192.0.2.1:7174", behavior{hang: true}) // a dial that lasts until cancelled
	ta := startAgent(t, deps{dial: fn.dial, resolver: &fakeResolver{m: map[string][]netip.Addr{}}}, "--no-responder",
		"--interval", "1h", "--peers", "192.0.2.1")
	type answer struct {
		code int
		body string
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		code, body, err := ta.Get("/probe?target=192.0.2.1")
		got <- answer{code, body, err}
	}()
	// The probe holds its slot and its dial hangs. The dial alone is not enough: the
	// agent's own loop dials the same target, and cancelling before the request reached
	// the agent gave a reset, not a 503.
	meshtest.WaitFor(t, 10*time.Second, "the probe's slot and dial", func() (bool, string) {
		n, slots := fn.dialCount("192.0.2.1:7174"), len(ta.a.probeSlots)
		return n >= 1 && slots == 1, fmt.Sprintf("%d dials, %d probe slots held", n, slots)
	})
	ta.cancel()
	a := <-got
	if a.err != nil || a.code != http.StatusServiceUnavailable || !strings.Contains(a.body, "shutting down") {
		t.Errorf("a probe in flight at shutdown: %d %q %v, want 503 saying the agent is shutting down", a.code, a.body, a.err)
	}
	if st := ta.stop(t, 10*time.Second); st != 0 {
		t.Errorf("exit %d", st)
	}
}

// TestOptionRules (finding 10): repeated and empty options follow one rule (the lists
// add up, any other option is taken once, an empty value is refused; --help says so),
// IPv4-mapped prefixes match, and /probe takes GET and HEAD only.
func TestOptionRules(t *testing.T) {
	c, err := checkArgs([]string{"--peers", "192.0.2.1", "--peers", "192.0.2.2,192.0.2.3", "--probe-allow", "10.0.0.0/8",
		"--probe-allow", "::ffff:127.0.0.0/104", "--listen", "127.0.0.1:0", "--listen", "[::1]:0"})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.peers) != 3 {
		t.Errorf("--peers a --peers b,c: %v, want all three", c.peers)
	}
	if len(c.probeAllow) != 2 || c.probeAllow[1] != netip.MustParsePrefix("127.0.0.0/8") {
		t.Errorf("--probe-allow ::ffff:127.0.0.0/104: %v, want 127.0.0.0/8 (addresses are matched unmapped)", c.probeAllow)
	}
	if len(c.Listen) != 2 {
		t.Errorf("two --listen: %v, want both", c.Listen)
	}
	// An empty --group is no group (a manifest's --group=$(LABEL) on a node without it).
	if c, err := checkArgs([]string{"--group", ""}); err != nil {
		t.Errorf("--group '': %v, want no group", err)
	} else if c.Group != "" {
		t.Errorf("--group '': group %q, want none", c.Group)
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		// (Given twice, empty: the command line's, cli's TestMeshOptionRules.)
		{[]string{"--probe-allow", "::ffff:0:0/80"}, "--probe.allow"},
		{[]string{"--probe-allow", "fe80::1%eth0"}, "--probe.allow"},
		{[]string{"--max-targets", "0"}, "--max-targets"},
		{[]string{"--targets-dns", "bad name"}, "--targets.dns"},
		{[]string{"--web.config.file", "/dev/null"}, "--web.config.file"},
	} {
		_, err := checkArgs(bad.args)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: %v, want an error naming %s", bad.args, err, bad.want)
		}
	}

	ta := startAgent(t, deps{dial: newFakeNet().dial, resolver: &fakeResolver{m: map[string][]netip.Addr{}}}, "--no-responder",
		"--peers", "192.0.2.1")
	for _, m := range []string{"POST", "PUT", "DELETE", "TRACE"} {
		req, _ := http.NewRequest(m, ta.URL("/probe?target=192.0.2.1"), nil)
		resp, err := ta.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
			t.Errorf("%s /probe: %d (Allow %q), want 405 (Allow: GET, HEAD)", m, resp.StatusCode, resp.Header.Get("Allow"))
		}
	}
	if resp, err := ta.Client.Head(ta.URL("/probe?target=192.0.2.1")); err != nil || resp.StatusCode != 200 {
		t.Errorf("HEAD /probe: %v %v", resp, err)
	}
	if n := probesRun(ta); n != 1 {
		t.Errorf("%g probes ran for 4 refused methods and one HEAD, want 1", n)
	}
}

func probesRun(ta *testAgent) float64 {
	v, _ := ta.Value(`gorping_probe_requests_total{outcome="ok"}`)
	return v
}

// TestMaxTargets (finding 10): more targets than --max-targets probes the first ones in
// a stable order, says so once per change, and counts the others.
func TestMaxTargets(t *testing.T) {
	file := filepath.Join(t.TempDir(), "targets")
	if err := os.WriteFile(file, manyTargets(20), 0o644); err != nil {
		t.Fatal(err)
	}
	ta := startAgent(t, deps{dial: newFakeNet().dial, resolver: &fakeResolver{m: map[string][]netip.Addr{}}}, "--no-responder",
		"--interval", "1h", "--targets", file, "--targets-reload", "0", "--peers", "192.0.2.1", "--max-targets", "5")
	ta.wait(t, `gorping_targets_ignored{reason="max_targets"}`, eq(16))
	ta.hup <- syscall.SIGHUP
	ta.hup <- syscall.SIGHUP
	if err := os.WriteFile(file, manyTargets(10), 0o644); err != nil {
		t.Fatal(err)
	}
	ta.hup <- syscall.SIGHUP
	ta.wait(t, `gorping_targets_ignored{reason="max_targets"}`, eq(6))
	if n := ta.running(); n != 5 {
		t.Errorf("%d targets running, --max-targets 5", n)
	}
	if v, _ := ta.Value(`gorping_targets{source="file"}`); v != 5 {
		t.Errorf("file targets %g, want the first 5", v)
	}
	if n := strings.Count(ta.logs.String(), "more than --max-targets"); n != 2 {
		t.Errorf("the cap was logged %d times for two different lists, want 2", n)
	}
}
