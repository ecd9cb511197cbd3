//go:build !guest

package mesh

import (
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorping/gorping/mesh/probe"
	"github.com/gorping/gorping/rping"
	"github.com/gorping/gorping/test/meshtest"
)

// fakeNet is the RDMA fabric of the host tests: per address, how a dial and its pings go.
type fakeNet struct {
	mu       sync.Mutex
	behavior map[netip.AddrPort]behavior
	dials    map[netip.AddrPort]int
	open     int
	gate     chan struct{}                      // if set, Close waits for it
	sources  map[netip.AddrPort][]netip.Addr    // if set, each dial's source address
	device   func(src netip.Addr) (string, int) // if set, the device and port of a connection from src
	// byPath overrides behavior for one path of a target (--paths); failQPN fails the
	// pings of the connection with that local QPN with the reason (once it reconnects,
	// with new QPs, it works).
	byPath  map[pathKey]behavior
	failQPN map[uint32]string
	// failFlow, if set, fails every ping of a connection whose flow it names (a reason):
	// an ECMP member that black-holes the flows hashed onto it.
	failFlow func(rping.Flow) string
	qpn      uint32                    // the last QPN handed out (each connection takes its own and its peer's)
	lastQPN  map[netip.AddrPort]uint32 // the local QPN of each address's latest connection
}

type pathKey struct {
	addr netip.AddrPort
	path int
}

type behavior struct {
	dialErr   string        // dial fails with this reason
	rtt       time.Duration // successful pings take this
	failAfter int           // the (failAfter+1)th ping on a connection fails with failWith
	failWith  string
	dieAfter  time.Duration // the connection dies by itself (Done) after this, with failWith
	hang      bool          // the dial waits until its context ends
	nic       time.Duration // the connection is NIC-timed: each ping's split is nic + (rtt - nic)
}

func newFakeNet() *fakeNet {
	return &fakeNet{behavior: map[netip.AddrPort]behavior{}, dials: map[netip.AddrPort]int{}}
}

func (f *fakeNet) set(addr string, b behavior) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.behavior[netip.MustParseAddrPort(addr)] = b
}

func (f *fakeNet) dialCount(addr string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dials[netip.MustParseAddrPort(addr)]
}

func (f *fakeNet) totalDials() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, d := range f.dials {
		n += d
	}
	return n
}

func (f *fakeNet) openConns() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.open
}

func (f *fakeNet) setPath(addr string, path int, b behavior) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.byPath == nil {
		f.byPath = map[pathKey]behavior{}
	}
	f.byPath[pathKey{netip.MustParseAddrPort(addr), path}] = b
}

// failLatest fails the pings of addr's latest connection with reason.
func (f *fakeNet) failLatest(addr string, reason string) {
	f.mu.Lock()
	qpn := f.lastQPN[netip.MustParseAddrPort(addr)]
	f.mu.Unlock()
	f.failConn(qpn, reason)
}

func (f *fakeNet) failConn(qpn uint32, reason string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failQPN == nil {
		f.failQPN = map[uint32]string{}
	}
	f.failQPN[qpn] = reason
}

func (f *fakeNet) dial(ctx context.Context, src netip.Addr, addr netip.AddrPort, path int, _ io.Writer) (probe.Conn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dials[addr]++
	if f.sources != nil {
		f.sources[addr] = append(f.sources[addr], src)
	}
	b, ok := f.behavior[addr]
	if pb, found := f.byPath[pathKey{addr, path}]; found {
		b, ok = pb, true
	}
	if b.hang {
		f.mu.Unlock()
		<-ctx.Done()
		f.mu.Lock()
		return nil, &rping.ProbeError{Reason: rping.ReasonCanceled, Err: ctx.Err()}
	}
	if !ok {
		return nil, &rping.ProbeError{Reason: rping.ReasonConnectRefused, Err: errors.New("fake: nothing listens")}
	}
	if b.dialErr != "" {
		return nil, &rping.ProbeError{Reason: b.dialErr, Err: errors.New("fake")}
	}
	f.open++
	f.qpn += 2
	if f.lastQPN == nil {
		f.lastQPN = map[netip.AddrPort]uint32{}
	}
	f.lastQPN[addr] = f.qpn
	c := &fakeConn{f: f, b: b, done: make(chan struct{}), dev: "mlx5_0", port: 1,
		flow: rping.Flow{LocalQPN: f.qpn, RemoteQPN: f.qpn + 1, SrcPort: uint16(40000 + f.qpn), DstPort: addr.Port(),
			UDPSourcePort: uint16(0xC000 + f.qpn)}}
	if f.device != nil {
		c.dev, c.port = f.device(src)
	}
	if b.dieAfter > 0 {
		c.timer = time.AfterFunc(b.dieAfter, func() { c.kill() })
	}
	return c, nil
}

type fakeConn struct {
	f      *fakeNet
	b      behavior
	n      int
	done   chan struct{}
	once   sync.Once
	closed bool
	timer  *time.Timer
	err    error
	dev    string
	port   int
	flow   rping.Flow
}

func (c *fakeConn) kill() { c.once.Do(func() { close(c.done) }) }

func (c *fakeConn) Ping(time.Duration) (time.Duration, error) {
	if c.err != nil {
		return 0, c.err
	}
	select {
	case <-c.done:
		c.err = &rping.ProbeError{Reason: c.b.failWith, Err: errors.New("fake: died")}
		return 0, c.err
	default:
	}
	c.n++
	c.f.mu.Lock()
	reason, fail := c.f.failQPN[c.flow.LocalQPN]
	if !fail && c.f.failFlow != nil {
		reason = c.f.failFlow(c.flow)
		fail = reason != ""
	}
	c.f.mu.Unlock()
	if fail {
		c.err = &rping.ProbeError{Reason: reason, Err: errors.New("fake: this connection fails")}
		return 0, c.err
	}
	if c.b.failWith != "" && c.b.failAfter > 0 && c.n > c.b.failAfter {
		c.err = &rping.ProbeError{Reason: c.b.failWith, Err: errors.New("fake")}
		return 0, c.err
	}
	return c.b.rtt, nil
}

func (c *fakeConn) LastSplit() (nic, host time.Duration, ok bool) {
	if c.b.nic == 0 || c.err != nil {
		return 0, 0, false
	}
	return c.b.nic, c.b.rtt - c.b.nic, true
}

func (c *fakeConn) TSSource() string {
	if c.b.nic != 0 {
		return "nic"
	}
	return "sw"
}

func (c *fakeConn) Done() <-chan struct{} { return c.done }
func (c *fakeConn) Device() string        { return c.dev }
func (c *fakeConn) Port() int             { return c.port }
func (c *fakeConn) Flow() rping.Flow      { return c.flow }

func (c *fakeConn) Close() error {
	if c.timer != nil {
		c.timer.Stop()
	}
	if g := c.f.gate; g != nil {
		<-g
	}
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	if !c.closed {
		c.closed = true
		c.f.open--
	}
	return nil
}

// fakeResolver resolves from a map.
type fakeResolver struct {
	mu sync.Mutex
	m  map[string][]netip.Addr
}

func (r *fakeResolver) set(name string, addrs ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var as []netip.Addr
	for _, a := range addrs {
		as = append(as, netip.MustParseAddr(a))
	}
	r.m[name] = as
}

func (r *fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if as, ok := r.m[host]; ok && len(as) > 0 {
		return as, nil
	}
	return nil, fmt.Errorf("lookup %s: no such host", host)
}

// startAgent runs an agent in this process with args, the fakes of d and a responder
// that listens at once; this machine's addresses do not count as the agent's own.
func startAgent(t *testing.T, d deps, args ...string) *testAgent {
	t.Helper()
	cfg, err := parseArgs(append([]string{"--listen", "127.0.0.1:0"}, args...))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Version = "v0.0.0-test"
	if d.respond == nil {
		d.respond = func(ctx context.Context, c rping.ResponderConfig) error {
			c.Listening()
			<-ctx.Done()
			return nil
		}
	}
	if d.local == nil {
		// The machine's own addresses must not matter (a CI host may own 192.0.2.x).
		d.local = func() map[netip.Addr]bool {
			return map[netip.Addr]bool{netip.MustParseAddr("127.0.0.1"): true, netip.MustParseAddr("::1"): true}
		}
	}
	return runAgent(t, cfg, d, 10*time.Second)
}

func (ta *testAgent) wait(t *testing.T, selector string, cond func(float64) bool) {
	t.Helper()
	meshtest.WaitFor(t, 10*time.Second, selector, func() (bool, string) {
		v, err := ta.Value(selector)
		if err != nil {
			return false, err.Error()
		}
		return cond(v), fmt.Sprint(v)
	})
}

func eq(want float64) func(float64) bool { return func(v float64) bool { return v == want } }
func ge(want float64) func(float64) bool { return func(v float64) bool { return v >= want } }

func TestAgentProbesAndReasons(t *testing.T) {
	fn := newFakeNet()
	fn.set("192.0.2.1:7174", behavior{rtt: 3 * time.Microsecond})
	fn.set("192.0.2.2:7174", behavior{rtt: 3 * time.Microsecond, failAfter: 3, failWith: "retry_exc_err"})
	fn.set("192.0.2.3:7174", behavior{dialErr: rping.ReasonNoDevice})
	fn.set("192.0.2.5:7174", behavior{rtt: 3 * time.Microsecond, dieAfter: 100 * time.Millisecond, failWith: rping.ReasonDeviceRemoved})
	res := &fakeResolver{m: map[string][]netip.Addr{}}
	res.set("node-a", "192.0.2.1")
	ta := startAgent(t, deps{dial: fn.dial, resolver: res}, "--interval", "20ms", "--backoff-max", "50ms",
		"--peers", "node-a,192.0.2.2,192.0.2.3,192.0.2.4,192.0.2.5,missing.example")
	ta.wait(t, `gorping_target_up{target="node-a:7174"}`, eq(1))
	ta.wait(t, `gorping_probe_rtt_seconds_count{target="node-a:7174"}`, ge(5))
	ta.wait(t, `gorping_probe_failures_total{target="192.0.2.2:7174",reason="retry_exc_err"}`, ge(2))
	ta.wait(t, `gorping_probe_failures_total{target="192.0.2.3:7174",reason="no_device"}`, ge(2))
	ta.wait(t, `gorping_probe_failures_total{target="192.0.2.4:7174",reason="connect_refused"}`, ge(2))
	ta.wait(t, `gorping_probe_failures_total{target="192.0.2.5:7174",reason="device_removed"}`, ge(2))
	ta.wait(t, `gorping_probe_failures_total{target="missing.example:7174",reason="resolve_error"}`, ge(2))
	ta.wait(t, `gorping_connections_total{target="192.0.2.2:7174"}`, ge(2)) // reconnects after each failure
	m, err := ta.Scrape()
	if err != nil {
		t.Fatal(err)
	}
	for sel, want := range map[string]float64{
		`gorping_target_path_info{target="node-a:7174",device="mlx5_0",port="1"}`: 1,
		`gorping_connections_total{target="node-a:7174"}`:                         1,
		`gorping_target_up{target="192.0.2.3:7174"}`:                              0,
		`gorping_targets{source="peers"}`:                                         6,
		`gorping_responder_up`:                                                    1,
		`gorping_build_info{version="v0.0.0-test"}`:                               1,
	} {
		if v, err := m.Value(sel); err != nil || v != want {
			t.Errorf("%s = %v (%v), want %v", sel, v, err, want)
		}
	}
	// RTTs land in the microsecond buckets.
	if v, _ := m.Value(`gorping_probe_rtt_seconds_bucket{target="node-a:7174",le="4e-06"}`); v < 5 {
		t.Errorf("3 µs RTTs not in the 4 µs bucket: %g", v)
	}
	// Backoff: a target that keeps refusing is not dialed every slot.
	probes, _ := m.Value(`gorping_probes_total{target="192.0.2.4:7174"}`)
	if dials := fn.dialCount("192.0.2.4:7174"); float64(dials) > probes/2+2 {
		t.Errorf("%d dials in %g slots of a refusing target: no backoff", dials, probes)
	}
	// Every slot has one outcome: probes = RTTs + failures, exactly once the agent has
	// stopped (a scrape reads the counters while slots are being recorded).
	ta.stop(t, 10*time.Second)
	mfs, err := ta.a.m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	type outcomes struct{ probes, rtts, fails float64 }
	per := map[string]*outcomes{}
	for _, mf := range mfs {
		for _, s := range mf.GetMetric() {
			var target string
			for _, l := range s.GetLabel() {
				if l.GetName() == "target" {
					target = l.GetValue()
				}
			}
			o := per[target]
			if o == nil {
				o = &outcomes{}
				per[target] = o
			}
			switch mf.GetName() {
			case "gorping_probes_total":
				o.probes += s.GetCounter().GetValue()
			case "gorping_probe_rtt_seconds":
				o.rtts += float64(s.GetHistogram().GetSampleCount())
			case "gorping_probe_failures_total":
				o.fails += s.GetCounter().GetValue()
			}
		}
	}
	for target := range seriesPerTarget(m) {
		o := per[target]
		if o == nil || o.probes == 0 || o.probes != o.rtts+o.fails {
			t.Errorf("%s after the stop: %+v; want probes = RTTs + failures > 0", target, o)
		}
	}
}

// TestCardinality drives one target through every way it can fail and checks its
// series stay within the budget docs/mesh.md states: software-timed (rxe, siw), and
// NIC-timed, with the split's two histograms more.
func TestCardinality(t *testing.T) {
	t.Run("sw", func(t *testing.T) { testCardinality(t, 0, maxSeriesPerTarget) })
	t.Run("nic", func(t *testing.T) { testCardinality(t, 600*time.Nanosecond, maxSeriesPerTargetNIC) })
}

func testCardinality(t *testing.T, nic time.Duration, budget int) {
	fn := newFakeNet()
	const addr = "192.0.2.9:7174"
	ta := startAgent(t, deps{dial: fn.dial, resolver: &fakeResolver{m: map[string][]netip.Addr{}}},
		"--interval", "10ms", "--backoff-max", "10ms", "--peers", addr)
	// A day of a bad target: refused, then timeouts, a peer that leaves, a path error.
	for _, b := range []behavior{
		{dialErr: rping.ReasonConnectRefused},
		{rtt: time.Microsecond, failAfter: 2, failWith: rping.ReasonTimeout},
		{rtt: time.Microsecond, failAfter: 2, failWith: rping.ReasonDisconnected},
		{rtt: time.Microsecond, failAfter: 2, failWith: "retry_exc_err"},
		{dialErr: rping.ReasonUnreachable},
		{rtt: 2 * time.Microsecond},
	} {
		if b.rtt > 0 {
			b.nic = nic
		}
		fn.set(addr, b)
		reason := b.dialErr + b.failWith
		if reason == "" {
			ta.wait(t, `gorping_target_up{target="`+addr+`"}`, eq(1))
			continue
		}
		ta.wait(t, `gorping_probe_failures_total{target="`+addr+`",reason="`+reason+`"}`, ge(1))
	}
	m, err := ta.Scrape()
	if err != nil {
		t.Fatal(err)
	}
	n := seriesPerTarget(m)[addr]
	hists := 1
	if nic > 0 {
		hists = 3
	}
	t.Logf("series of a target that failed 5 ways: %d (classic histogram buckets: %d more)", n, hists*(len(rttBuckets)+2))
	if n > budget {
		t.Errorf("%d series for one target, budget %d:\n%v", n, budget, m.Samples())
	}
	// Agent-wide series (a histogram counted as one) are few and do not grow with targets.
	other := 0
	for name, mf := range m {
		if !strings.HasPrefix(name, "gorping_") {
			continue
		}
		for _, mt := range mf.GetMetric() {
			hasTarget := false
			for _, l := range mt.GetLabel() {
				hasTarget = hasTarget || l.GetName() == "target"
			}
			if !hasTarget {
				other++
			}
		}
	}
	if other > 16 {
		t.Errorf("%d gorping_ series without a target label", other)
	}
}

func TestTargetFileReload(t *testing.T) {
	fn := newFakeNet()
	for _, a := range []string{"192.0.2.1:7174", "192.0.2.2:7174", "192.0.2.3:7174", "192.0.2.4:7174"} {
		fn.set(a, behavior{rtt: 5 * time.Microsecond})
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "targets")
	write := func(s string) { replaceFile(t, file, s, 0o644) }
	write("192.0.2.1\n192.0.2.2 # b\nnot/a/target\n")
	ta := startAgent(t, deps{dial: fn.dial, resolver: &fakeResolver{m: map[string][]netip.Addr{}}},
		"--interval", "20ms", "--targets", file, "--targets-reload", "100ms")
	ta.wait(t, `gorping_target_up{target="192.0.2.2:7174"}`, eq(1))
	ta.wait(t, `gorping_target_file_bad_lines`, eq(1))
	before, _ := ta.Value(`gorping_probes_total{target="192.0.2.1:7174"}`)

	write("192.0.2.1\n192.0.2.3\n")
	ta.wait(t, `gorping_target_up{target="192.0.2.3:7174"}`, eq(1))
	meshtest.WaitFor(t, 10*time.Second, "192.0.2.2's series gone", func() (bool, string) {
		m, err := ta.Scrape()
		if err != nil {
			return false, err.Error()
		}
		ss, _ := m.Select(`gorping_probes_total{target="192.0.2.2:7174"}`)
		return len(ss) == 0, fmt.Sprint(ss)
	})
	// The unchanged target kept its connection and its series went on.
	if n := fn.dialCount("192.0.2.1:7174"); n != 1 {
		t.Errorf("the unchanged target was dialed %d times", n)
	}
	if after, _ := ta.Value(`gorping_probes_total{target="192.0.2.1:7174"}`); after <= before {
		t.Errorf("the unchanged target's probes went from %g to %g", before, after)
	}
	if v, _ := ta.Value(`gorping_target_file_bad_lines`); v != 0 {
		t.Errorf("bad lines %g after a clean file, want 0", v)
	}
	// The removed target's connection was closed: two open (192.0.2.1 and .3).
	meshtest.WaitFor(t, 5*time.Second, "removed target's connection closed", func() (bool, string) {
		return fn.openConns() == 2, fmt.Sprint(fn.openConns())
	})

	// A file that disappears keeps its targets (a log line, a metric)...
	os.Remove(file)
	ta.wait(t, `gorping_target_config_errors_total{source="file",reason="read"}`, ge(1))
	if v, _ := ta.Value(`gorping_target_up{target="192.0.2.3:7174"}`); v != 1 {
		t.Errorf("targets dropped when the file went away")
	}
	// ...and SIGHUP reloads at once, even with the periodic check off.
	write("192.0.2.4\n")
	ta.hup <- syscall.SIGHUP
	ta.wait(t, `gorping_target_up{target="192.0.2.4:7174"}`, eq(1))
	if !strings.Contains(ta.logs.String(), "SIGHUP") {
		t.Error("no log line for SIGHUP")
	}
}

func TestDNSTargetsAndSelf(t *testing.T) {
	fn := newFakeNet()
	for _, a := range []string{"192.0.2.1:7300", "192.0.2.2:7300", "[2001:db8::2]:7300", "127.0.0.1:7174"} {
		fn.set(a, behavior{rtt: 5 * time.Microsecond})
	}
	res := &fakeResolver{m: map[string][]netip.Addr{}}
	// 127.0.0.1 is this host: with the responder on 7300 it is skipped there, and probed
	// on another port (several agents on one host).
	res.set("mesh.svc", "192.0.2.1", "192.0.2.2", "127.0.0.1", "2001:db8::2")
	res.set("me", "127.0.0.1")
	ta := startAgent(t, deps{dial: fn.dial, resolver: res}, "--interval", "20ms", "--port", "7300",
		"--targets-dns", "mesh.svc", "--dns-refresh", "1s", "--peers", "me,me:7174")
	ta.wait(t, `gorping_target_up{target="192.0.2.2:7300"}`, eq(1))
	ta.wait(t, `gorping_target_up{target="[2001:db8::2]:7300"}`, eq(1))
	ta.wait(t, `gorping_target_up{target="me:7174"}`, eq(1))
	m, _ := ta.Scrape()
	for _, self := range []string{"127.0.0.1:7300", "me:7300"} {
		if ss, _ := m.Select(`gorping_probes_total{target="` + self + `"}`); len(ss) != 0 {
			t.Errorf("the agent probes itself as %s", self)
		}
	}
	if v, _ := m.Value(`gorping_targets{source="dns"}`); v != 3 {
		t.Errorf("dns targets %g, want 3", v)
	}
	// The name's records change: one goes, one comes; a failing lookup keeps them.
	fn.set("192.0.2.3:7300", behavior{rtt: 5 * time.Microsecond})
	res.set("mesh.svc", "192.0.2.2", "192.0.2.3", "2001:db8::2")
	ta.wait(t, `gorping_target_up{target="192.0.2.3:7300"}`, eq(1))
	meshtest.WaitFor(t, 10*time.Second, "192.0.2.1 removed", func() (bool, string) {
		m, _ := ta.Scrape()
		ss, _ := m.Select(`gorping_target_up{target="192.0.2.1:7300"}`)
		return len(ss) == 0, fmt.Sprint(ss)
	})
	res.set("mesh.svc")
	ta.wait(t, `gorping_target_config_errors_total{source="dns",reason="resolve"}`, ge(1))
	if v, _ := ta.Value(`gorping_targets{source="dns"}`); v != 3 {
		t.Errorf("a failed lookup changed the dns targets to %g", v)
	}
}

func TestProbeEndpoint(t *testing.T) {
	fn := newFakeNet()
	fn.set("192.0.2.1:7174", behavior{rtt: 7 * time.Microsecond})
	fn.set("198.51.100.7:7174", behavior{rtt: 9 * time.Microsecond})
	fn.set("203.0.113.5:7174", behavior{rtt: 9 * time.Microsecond, failAfter: 2, failWith: rping.ReasonTimeout})
	res := &fakeResolver{m: map[string][]netip.Addr{}}
	ta := startAgent(t, deps{dial: fn.dial, resolver: res}, "--interval", "1s", "--peers", "192.0.2.1",
		"--probe-allow", "198.51.100.0/24,203.0.113.5")
	status := func(q string) int {
		code, _, err := ta.Get("/probe?" + q)
		if err != nil {
			t.Fatal(err)
		}
		return code
	}
	for q, want := range map[string]int{
		"target=192.0.2.1&count=3":    200, // a known target
		"target=192.0.2.1:7174":       200,
		"target=198.51.100.7":         200, // in --probe-allow
		"target=203.0.113.5&count=4":  200,
		"target=192.0.2.77":           403, // neither
		"target=198.51.101.7":         403,
		"target=":                     400,
		"target=192.0.2.1&count=0":    400,
		"target=192.0.2.1&count=101":  400,
		"target=192.0.2.1&count=many": 400,
	} {
		if got := status(q); got != want {
			t.Errorf("/probe?%s: %d, want %d", q, got, want)
		}
	}
	m, err := ta.ScrapePath("/probe?target=192.0.2.1&count=3")
	if err != nil {
		t.Fatal(err)
	}
	for sel, want := range map[string]float64{"probe_success": 1, "gorping_probes_total": 3,
		"gorping_probe_rtt_seconds_count": 3, `gorping_probe_path_info{device="mlx5_0",port="1"}`: 1} {
		if v, err := m.Value(sel); err != nil || v != want {
			t.Errorf("/probe: %s = %v (%v), want %v", sel, v, err, want)
		}
	}
	m, _ = ta.ScrapePath("/probe?target=203.0.113.5&count=4")
	for sel, want := range map[string]float64{"probe_success": 0, "gorping_probes_total": 4,
		"gorping_probe_rtt_seconds_count": 2, `gorping_probe_failures_total{reason="timeout"}`: 2} {
		if v, err := m.Value(sel); err != nil || v != want {
			t.Errorf("/probe of a target that times out: %s = %v (%v), want %v", sel, v, err, want)
		}
	}
	// --probe-any lifts the allow-list.
	tb := startAgent(t, deps{dial: fn.dial, resolver: res}, "--probe-any", "--no-responder")
	if code, _, _ := tb.Get("/probe?target=198.51.100.7"); code != 200 {
		t.Errorf("--probe-any: %d", code)
	}
	if v, _ := ta.Value(`gorping_probe_requests_total{outcome="refused"}`); v != 2 {
		t.Errorf("refused probe requests %g, want 2", v)
	}
	if code, body, _ := ta.Get("/-/healthy"); code != 200 || !strings.Contains(body, "Healthy") {
		t.Errorf("/-/healthy: %d %q", code, body)
	}
}

// TestShutdownOrder: on SIGTERM the agent releases every connection while its listener
// still serves scrapes, then closes the listener, and exits 0.
func TestShutdownOrder(t *testing.T) {
	fn := newFakeNet()
	fn.set("192.0.2.1:7174", behavior{rtt: 5 * time.Microsecond})
	ta := startAgent(t, deps{dial: fn.dial, resolver: &fakeResolver{m: map[string][]netip.Addr{}}},
		"--interval", "20ms", "--peers", "192.0.2.1")
	ta.wait(t, `gorping_target_up{target="192.0.2.1:7174"}`, eq(1))
	gate := make(chan struct{})
	fn.mu.Lock()
	fn.gate = gate
	fn.mu.Unlock()
	ta.cancel()
	// Closing the connection is held: the agent is mid-teardown and must still answer.
	time.Sleep(50 * time.Millisecond)
	if _, err := ta.Scrape(); err != nil {
		t.Errorf("scrape during teardown: %v", err)
	}
	select {
	case <-ta.done:
		t.Fatal("the agent exited before its connections were closed")
	default:
	}
	close(gate)
	select {
	case st := <-ta.done:
		ta.done <- st // for the cleanup
		if st != 0 {
			t.Errorf("exit %d", st)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no exit after the connections closed")
	}
	if n := fn.openConns(); n != 0 {
		t.Errorf("%d connections open after the agent stopped", n)
	}
	if _, err := ta.Scrape(); err == nil {
		t.Error("the listener still answers after the agent stopped")
	}
}

// TestResponderRestarts: a responder that stops by itself (no device) is started again
// with backoff, and its gauge says whether it listens.
func TestResponderRestarts(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	respond := func(ctx context.Context, c rping.ResponderConfig) error {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n < 3 {
			c.Log.Write([]byte("No RDMA devices were detected\n"))
			return &rping.ResponderError{Status: 19}
		}
		c.Listening()
		<-ctx.Done()
		return nil
	}
	ta := startAgent(t, deps{dial: newFakeNet().dial, resolver: &fakeResolver{m: map[string][]netip.Addr{}}, respond: respond},
		"--interval", "1s")
	if v, _ := ta.Value("gorping_responder_up"); v != 0 {
		t.Errorf("responder_up %g before it listens", v)
	}
	meshtest.WaitFor(t, 15*time.Second, "responder listening after two failures", func() (bool, string) {
		v, err := ta.Value("gorping_responder_up")
		return err == nil && v == 1, fmt.Sprint(v, err)
	})
	if v, _ := ta.Value("gorping_responder_starts_total"); v != 1 {
		t.Errorf("responder starts %g, want 1", v)
	}
	if n := strings.Count(ta.logs.String(), "No RDMA devices were detected"); n != 1 {
		t.Errorf("the repeated rping line was logged %d times, want once", n)
	}
}

// TestArgs: the checks of a Config (the command line's words and errors: cli's
// TestMeshArgs).
func TestArgs(t *testing.T) {
	cfg, err := checkArgs([]string{"--interval", "250ms", "--peers", "x,[2001:db8::1]:9", "--probe-allow", "10.0.0.0/8,192.0.2.1"})
	if err != nil || cfg.Interval != 250*time.Millisecond || cfg.Timeout != 250*time.Millisecond || len(cfg.peers) != 2 ||
		len(cfg.probeAllow) != 2 || cfg.probeAllow[1].Bits() != 32 {
		t.Errorf("checkArgs: %+v %v", cfg, err)
	}
	for _, bad := range [][]string{{"--interval", "0"}, {"--jitter", "0.7"}, {"--size", "10"}, {"--port", "70000"},
		{"--bind", "x"}, {"--log.format", "xml"}, {"--log.level", "loud"}, {"--peers", "a b"}, {"--probe-allow", "x"},
		{"--agent-name", "a b"}, {"--group", "tor#1"}} {
		if _, err := checkArgs(bad); err == nil {
			t.Errorf("checkArgs(%q) accepted", bad)
		}
	}
}

// TestChurnLeaksNothing: targets that fail and reconnect thousands of times, and a
// target list that changes under them, leave no goroutine and no connection behind.
func TestChurnLeaksNothing(t *testing.T) {
	fn := newFakeNet()
	var peers []string
	for i := range 20 {
		a := fmt.Sprintf("192.0.2.%d:7174", i+1)
		fn.set(a, behavior{rtt: time.Microsecond, failAfter: 1, failWith: rping.ReasonDisconnected})
		peers = append(peers, a)
	}
	before := runtime.NumGoroutine()
	dir := t.TempDir()
	file := filepath.Join(dir, "targets")
	os.WriteFile(file, []byte(strings.Join(peers[:10], "\n")), 0o644)
	ta := startAgent(t, deps{dial: fn.dial, resolver: &fakeResolver{m: map[string][]netip.Addr{}}},
		"--interval", "10ms", "--backoff-max", "10ms", "--targets", file, "--targets-reload", "100ms", "--no-responder")
	// At least 10 changes of the target list and 100 connections, however
	// long a loaded machine takes for them (bounded).
	deadline := time.Now().Add(60 * time.Second)
	var conns float64
	for round := 0; ; round++ {
		os.WriteFile(file, []byte(strings.Join(peers[round%2*10:round%2*10+10], "\n")), 0o644)
		time.Sleep(150 * time.Millisecond)
		if _, err := ta.Scrape(); err != nil {
			t.Fatal(err)
		}
		// Connections made so far, the removed targets' included (their series are gone).
		conns = float64(fn.totalDials())
		if round >= 9 && conns >= 100 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %g connections after %d target-list changes in 60 s: not much churn", conns, round+1)
		}
	}
	t.Logf("%g connections made", conns)
	if n := fn.openConns(); n > 10 {
		t.Errorf("%d connections open for 10 targets", n)
	}
	ta.cancel()
	<-ta.done
	ta.done <- 0
	if n := fn.openConns(); n != 0 {
		t.Errorf("%d connections open after the agent stopped", n)
	}
	meshtest.WaitFor(t, 5*time.Second, "goroutines back to the baseline", func() (bool, string) {
		n := runtime.NumGoroutine()
		return n <= before, fmt.Sprintf("%d, %d before", n, before)
	})
}

// The landing page links only what the agent serves: every link answers, none is a
// 404 (exporter-toolkit adds /debug/pprof links unless told otherwise).
func TestLandingPageLinks(t *testing.T) {
	fn := newFakeNet()
	ta := startAgent(t, deps{dial: fn.dial, resolver: &fakeResolver{m: map[string][]netip.Addr{}}}, "--no-responder")
	code, body, err := ta.Get("/")
	if err != nil || code != 200 {
		t.Fatalf("GET /: %d %v", code, err)
	}
	links := regexp.MustCompile(`href="([^"]+)"`).FindAllStringSubmatch(body, -1)
	if len(links) < 3 {
		t.Fatalf("landing page has %d links:\n%s", len(links), body)
	}
	for _, l := range links {
		href := html.UnescapeString(l[1])
		if !strings.HasPrefix(href, "/") || strings.HasPrefix(href, "//") {
			continue // the toolkit's external links (its project page)
		}
		if strings.Contains(href, "HOST:PORT") {
			continue // a template for the reader to fill in
		}
		code, _, err := ta.Get(href)
		if err != nil || code == 404 {
			t.Errorf("the landing page links %s, which answers %d %v", href, code, err)
		}
	}
}
