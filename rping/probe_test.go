//go:build !guest

package rping

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorping/gorping/internal/hostenv/hostenvtest"
	"github.com/gorping/gorping/rdmacm"
	"github.com/gorping/gorping/test/mlx5model"
	"github.com/gorping/gorping/test/rxemodel"
	"github.com/gorping/gorping/uverbs"
	"github.com/gorping/gorping/uverbs/providerkit"
	"golang.org/x/sys/unix"
)

// The prober runs here over the fake CM and the device models, on the path Run's client
// takes (openCM, dialClient, clientPing): the guest tier runs it on the kernel.

// probeBed is one prober test's fake CM, device model and server side.
type probeBed struct {
	t     *testing.T
	g     glueRun
	m     deviceModel
	cm    *fakeCM
	sv    *side // the server's Config and output
	ctx   context.Context
	stop  context.CancelFunc
	wg    sync.WaitGroup
	serve func(ctx context.Context, cfg *Config, child cmID) // per connection request; nil: serve
}

// newProbeBed is a bed over model m's device name.
func newProbeBed(t *testing.T, m deviceModel, name string) *probeBed {
	b := &probeBed{t: t, g: modelGlue(m, name), m: m, sv: newSide(true, DefaultSize, 0)}
	b.g.host = glueHost(t)
	b.cm = newFakeCM(b.g.dev)
	b.sv.cfg.verbs, b.sv.cfg.host, b.sv.cfg.Persistent = b.g.open, b.g.host, true
	b.ctx, b.stop = context.WithCancel(context.Background())
	t.Cleanup(b.close)
	return b
}

// start serves every connection request until the bed closes (a persistent server).
func (b *probeBed) start() {
	b.wg.Go(func() {
		for {
			select {
			case child := <-b.cm.requests:
				b.wg.Go(func() {
					cfg := b.sv.cfg
					if b.serve != nil {
						b.serve(b.ctx, &cfg, child)
						return
					}
					serve(b.ctx, &cfg, newOut(&cfg), child)
				})
			case <-b.ctx.Done():
				return
			}
		}
	})
}

// close ends the server side and requires the model to hold nothing.
func (b *probeBed) close() {
	b.stop()
	b.wg.Wait()
	modelClean(b.t, b.m)
}

// dial dials the bed's server with the prober's Config plus the bed's host, fake CM and
// model.
func (b *probeBed) dial(ctx context.Context, cfg ProbeConfig) (*Prober, error) {
	if !cfg.Target.IsValid() {
		cfg.Target = netip.MustParseAddrPort("192.0.2.1:7174")
	}
	rc := cfg.client()
	rc.verbs, rc.host, rc.cm = b.g.open, b.g.host, b.cm.channel
	return dialProbe(ctx, cfg, rc)
}

// reasonOf is a probe error's reason.
func reasonOf(t *testing.T, err error) string {
	t.Helper()
	var pe *ProbeError
	if !errors.As(err, &pe) {
		t.Fatalf("%v (%T) is no *ProbeError", err, err)
	}
	return pe.Reason
}

// models are the device models the prober's tests run over.
var probeModels = []struct {
	name string
	new  func(t *testing.T) (deviceModel, string)
	ts   string // the prober's TSSource over it
}{
	{"rxe", func(t *testing.T) (deviceModel, string) {
		nic, err := rxemodel.New()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nic.Close)
		return nic, "rxe0"
	}, "sw"},
	{"mlx5", func(t *testing.T) (deviceModel, string) {
		return mlx5model.NewForTest(t, mlx5model.Config{BfRegSize: 512}), "mlx5_0"
	}, "nic"},
}

// TestProberPings: the prober connects over each model, pings (validated echoes,
// positive round trips), reports its path, closes releasing everything, and dials
// again, as the mesh does after a failure. In steady state a ping allocates nothing, its
// NIC split included (the mlx5 model stamps completions; rxe has none).
func TestProberPings(t *testing.T) {
	for _, mod := range probeModels {
		t.Run(mod.name, func(t *testing.T) {
			m, name := mod.new(t)
			b := newProbeBed(t, m, name)
			b.start()
			for round := range 2 {
				p, err := b.dial(context.Background(), ProbeConfig{})
				if err != nil {
					t.Fatalf("round %d: dial: %v", round, err)
				}
				if p.Device() != name || p.Port() != 1 || p.Err() != nil || p.TSSource() != mod.ts {
					t.Errorf("path %s port %d err %v ts_source %s, want %s port 1, no error, %s", p.Device(), p.Port(), p.Err(), p.TSSource(), name, mod.ts)
				}
				// The flow: both QPs, rdma_cm's ports (the fake CM's are fixed).
				if f := p.Flow(); f.LocalQPN == 0 || f.RemoteQPN == 0 || f.LocalQPN == f.RemoteQPN || f.SrcPort == 0 || f.DstPort != 7174 {
					t.Errorf("round %d: flow %+v, want both QPNs, the CM's source port and destination port 7174", round, f)
				} else if k := kernelVersion(); k[0] > 5 && f.UDPSourcePort != providerkit.FlowLabelSport(rdmacm.FlowLabel(f.SrcPort, f.DstPort), f.LocalQPN, f.RemoteQPN) {
					t.Errorf("round %d: flow %+v on kernel %v: UDP source port not rdma_cm's", round, f, k)
				}
				for i := range 300 {
					rtt, err := p.Ping(10 * time.Second)
					if err != nil || rtt <= 0 {
						t.Fatalf("round %d ping %d: rtt %v err %v", round, i, rtt, err)
					}
					if nic, host, ok := p.LastSplit(); ok != (mod.ts == "nic") || ok && (nic <= 0 || nic+host != rtt) {
						t.Fatalf("round %d ping %d: rtt %v split %v + %v (%v), want one only with ts_source nic", round, i, rtt, nic, host, ok)
					}
				}
				if round == 1 {
					// The models allocate as they execute work (test code); what runs
					// through no model, the prober, the server and the providers,
					// allocates nothing per ping.
					per, sites := allocsOutsideModels(200, func() {
						if _, err := p.Ping(10 * time.Second); err != nil {
							t.Fatal(err)
						}
						if _, _, ok := p.LastSplit(); ok != (mod.ts == "nic") {
							t.Fatal("no split")
						}
					})
					// A per-ping cost shows as 1 or more; the runtime's odd allocation (a
					// first itab, a stack) is tolerated, as in the guest's test.
					if per > 0.05 {
						t.Errorf("%.3f allocations per ping outside the model, at:\n%s", per, sites)
					} else if sites != "" {
						t.Logf("%.3f allocations per ping outside the model, at:\n%s", per, sites)
					}
				}
				p.Close()
				if reasonOf(t, p.Err()) != ReasonCanceled {
					t.Errorf("after Close: %v, want %s", p.Err(), ReasonCanceled)
				}
				select {
				case <-p.Done():
				default:
					t.Error("Done not closed after Close")
				}
				if qps, _, _ := m.Live(); qps != 1 && qps != 0 {
					// The server's QP goes when its session sees the disconnect.
					t.Logf("QPs live right after Close: %d", qps)
				}
			}
		})
	}
}

// TestProberSplit: over the mlx5 model, whose CQEs carry its device clock, a prober's
// CQ has completion timestamps (a client with no --stats) and each ping's split is the
// model's own: nic is the time between the ping's first SEND completion and its last
// receive completion as the model stamped them (to ±2 ns, the clock_info conversion's
// rounding), within the RTT, and host the rest. Without timestamps (the model's
// NoTimestamps, as mlx5 on a kernel that reports no mask) and over rxe the prober says
// ts_source sw, why in its log, and splits nothing.
func TestProberSplit(t *testing.T) {
	t.Run("nic", func(t *testing.T) {
		const pings = 100
		nic := mlx5model.NewForTest(t, mlx5model.Config{BfRegSize: 512, KeepStamps: true})
		b := newProbeBed(t, nic, "mlx5_0")
		b.start()
		var log syncBuffer
		p, err := b.dial(context.Background(), ProbeConfig{Log: &log})
		if err != nil {
			t.Fatal(err)
		}
		if p.TSSource() != "nic" {
			t.Fatalf("ts_source %q, want nic (log %q)", p.TSSource(), log.String())
		}
		if _, _, ok := p.LastSplit(); ok {
			t.Error("a split before the first ping")
		}
		type split struct{ rtt, nic, host time.Duration }
		got := make([]split, pings)
		for i := range got {
			rtt, err := p.Ping(10 * time.Second)
			if err != nil {
				t.Fatalf("ping %d: %v", i, err)
			}
			n, h, ok := p.LastSplit()
			if !ok {
				t.Fatalf("ping %d: no split (log %q)", i, log.String())
			}
			got[i] = split{rtt, n, h}
		}
		p.Close()
		if _, err := p.Ping(time.Second); err == nil {
			t.Fatal("a ping after Close")
		}
		if _, _, ok := p.LastSplit(); ok {
			t.Error("a split after a failed ping")
		}
		want := expectedNIC(t, nic, pings)
		for i, g := range got {
			if g.nic <= 0 || g.nic > g.rtt || g.nic+g.host != g.rtt || g.nic < want[i]-2 || g.nic > want[i]+2 {
				t.Errorf("ping %d: rtt %v = nic %v + host %v; want nic within the rtt, the model's %v ±2 ns", i, g.rtt, g.nic, g.host, want[i])
			}
		}
		if l := log.String(); strings.Count(l, "NIC completion timestamps") != 1 || !strings.Contains(l, "mlx5_0: NIC completion timestamps") {
			t.Errorf("log %q, want one line about the NIC's timestamps", l)
		}
	})
	for _, tc := range []struct {
		name, dev, note string
		new             func(t *testing.T) deviceModel
	}{
		{"mlx5 without", "mlx5_0", "the mlx5 driver has none", func(t *testing.T) deviceModel {
			return mlx5model.NewForTest(t, mlx5model.Config{BfRegSize: 512, NoTimestamps: true})
		}},
		{"rxe", "rxe0", "ts_source=sw", func(t *testing.T) deviceModel { m, _ := probeModels[0].new(t); return m }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newProbeBed(t, tc.new(t), tc.dev)
			b.start()
			var log syncBuffer
			p, err := b.dial(context.Background(), ProbeConfig{Log: &log})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			for i := range 20 {
				if _, err := p.Ping(10 * time.Second); err != nil {
					t.Fatalf("ping %d: %v", i, err)
				}
				if n, h, ok := p.LastSplit(); ok {
					t.Fatalf("ping %d: split %v + %v without timestamps", i, n, h)
				}
			}
			if p.TSSource() != "sw" || !strings.Contains(log.String(), tc.note) {
				t.Errorf("ts_source %q, log %q; want sw and a line saying %q", p.TSSource(), log.String(), tc.note)
			}
		})
	}
}

// TestProberDialFailures: every way a dial fails has its reason, says what rping said
// first, and leaves nothing behind (the bed's cleanup checks the model).
func TestProberDialFailures(t *testing.T) {
	einval := func(cmd uint32) func(uint32) error {
		return func(c uint32) error {
			if c == cmd {
				return unix.EINVAL
			}
			return nil
		}
	}
	for _, tc := range []struct {
		name    string
		fail    func(uint32) error // the model's
		fault   func(cm *fakeCM)
		cfg     ProbeConfig
		noDev   bool
		reason  string
		err     string // the start of ProbeError.Err
		atLeast time.Duration
	}{
		{name: "refused", fault: func(cm *fakeCM) { cm.refuse = true }, reason: ReasonConnectRefused,
			err: "cma event RDMA_CM_EVENT_REJECTED, error 28"},
		{name: "no answer", fault: func(cm *fakeCM) { cm.silent = true }, cfg: ProbeConfig{ConnectTimeout: 300 * time.Millisecond},
			// The figure is the time since the request went out: the budget less what
			// resolution took (on a loaded machine 0.2 s of the 0.3 s); checked below.
			reason: ReasonConnectTimeout, err: "rping client: no answer to the connection request from 192.0.2.1:7174 for 0.", atLeast: 300 * time.Millisecond},
		{name: "qp", fail: einval(24), reason: ReasonSetupError, err: "rdma_create_qp: Invalid argument"},
		{name: "pd", fail: einval(3), reason: ReasonSetupError, err: "ibv_alloc_pd failed"},
		{name: "no device", noDev: true, reason: ReasonNoDevice, err: "No RDMA devices were detected"},
		{name: "size", cfg: ProbeConfig{Size: 1}, reason: ReasonSetupError, err: "size 1 outside"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nic := mlx5model.NewForTest(t, mlx5model.Config{BfRegSize: 512, Fail: tc.fail})
			b := newProbeBed(t, nic, "mlx5_0")
			if tc.noDev {
				b.g.host = uverbs.NewHost(hostenvtest.NoRDMA(t))
			}
			if tc.fault != nil {
				tc.fault(b.cm)
			}
			b.start()
			var log syncBuffer
			tc.cfg.Log = &log
			start := time.Now()
			p, err := b.dial(context.Background(), tc.cfg)
			if err == nil {
				p.Close()
				t.Fatal("dial succeeded")
			}
			var pe *ProbeError
			if !errors.As(err, &pe) || pe.Reason != tc.reason || pe.Err == nil || !strings.HasPrefix(pe.Err.Error(), tc.err) {
				t.Errorf("dial: %v; want reason %s, error starting %q (log %q)", err, tc.reason, tc.err, log.String())
			}
			if d := time.Since(start); d < tc.atLeast {
				t.Errorf("gave up after %v, before %v", d, tc.atLeast)
			}
			if tc.reason == ReasonConnectTimeout && pe != nil && pe.Err != nil {
				f := -1.0
				if m := regexp.MustCompile(` for (\d+\.\d) s: `).FindStringSubmatch(pe.Err.Error()); m != nil {
					f, _ = strconv.ParseFloat(m[1], 64)
				}
				if f <= 0 || f > 0.3 {
					t.Errorf("the request waited %q, want 0.1 to 0.3 s (within --connect-timeout 0.3 s)", pe.Err)
				}
			}
		})
	}
}

// TestProberFailures: a prober that was up fails with the reason of what ended it: the
// peer left, a ping outlasted its timeout, the device went away, the prober's context
// ended. It is then spent (Done closed where the connection's life ended, Err and every
// Ping say the same) and Close releases everything.
func TestProberFailures(t *testing.T) {
	for _, tc := range []struct {
		name   string
		silent bool                             // the server accepts and never serves a ping
		end    func(b *probeBed, cancel func()) // what ends it, after one good ping
		reason []string
		done   bool // Done is closed by the failure
	}{
		// The peer's DISCONNECTED, or a ping in flight that its QP's end failed first.
		{name: "peer leaves", end: func(b *probeBed, _ func()) { b.stop() },
			reason: []string{ReasonDisconnected, "wr_flush_err", "retry_exc_err"}},
		{name: "timeout", silent: true, reason: []string{ReasonTimeout}, done: true},
		{name: "removal", end: func(b *probeBed, _ func()) { b.cm.remove() }, reason: []string{ReasonDeviceRemoved}, done: true},
		{name: "canceled", end: func(_ *probeBed, cancel func()) { cancel() }, reason: []string{ReasonCanceled}, done: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nic := mlx5model.NewForTest(t, mlx5model.Config{BfRegSize: 512})
			b := newProbeBed(t, nic, "mlx5_0")
			if tc.silent {
				// Accept, then serve nothing until the bed closes.
				b.serve = func(ctx context.Context, cfg *Config, child cmID) {
					c, st := setupConn(child, cfg, newOut(cfg), true)
					if st != 0 {
						return
					}
					defer c.close()
					if c.up(ctx, cfg, func(ctx context.Context) int { return accept(ctx, c, c.out, connPolicy(cfg.Timeout)) }) == 0 {
						<-ctx.Done()
						c.disconnect()
					}
				}
			}
			b.start()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var log syncBuffer
			p, err := b.dial(ctx, ProbeConfig{Log: &log})
			if err != nil {
				t.Fatalf("dial: %v", err)
			}
			defer p.Close()
			timeout := 10 * time.Second
			if tc.silent {
				timeout = 200 * time.Millisecond
			} else {
				if _, err := p.Ping(timeout); err != nil {
					t.Fatalf("first ping: %v", err)
				}
				tc.end(b, cancel)
			}
			if tc.done {
				if !tc.silent {
					select {
					case <-p.Done():
					case <-time.After(30 * time.Second):
						t.Fatal("Done not closed 30 s after the end")
					}
					if err := p.Err(); err == nil || !slices.Contains(tc.reason, reasonOf(t, err)) {
						t.Errorf("Err after Done: %v, want %v", err, tc.reason)
					}
				}
			}
			var perr error
			for range 100 { // a ping in flight when the peer left may still complete
				if _, perr = p.Ping(timeout); perr != nil {
					break
				}
			}
			if perr == nil || !slices.Contains(tc.reason, reasonOf(t, perr)) {
				t.Fatalf("ping: %v, want reason %v (log %q)", perr, tc.reason, log.String())
			}
			if tc.done {
				select {
				case <-p.Done():
				default:
					t.Error("Done not closed")
				}
			}
			if _, again := p.Ping(timeout); again != perr || p.Err() != perr {
				t.Errorf("a spent prober answered %v, then %v and Err %v; want the same error", perr, again, p.Err())
			}
			p.Close()
		})
	}
}

// The prober's goroutines end with it (the CM, async and removal watches).
func TestProberLeavesNoGoroutines(t *testing.T) {
	nic := mlx5model.NewForTest(t, mlx5model.Config{BfRegSize: 512})
	b := newProbeBed(t, nic, "mlx5_0")
	b.start()
	before := runtime.NumGoroutine()
	for range 5 {
		p, err := b.dial(context.Background(), ProbeConfig{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Ping(10 * time.Second); err != nil {
			t.Fatal(err)
		}
		p.Close()
	}
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before+2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // the server's sessions end on their own
	}
	if n := runtime.NumGoroutine(); n > before+2 {
		t.Errorf("%d goroutines after 5 probers, %d before", n, before)
	}
}

// allocsOutsideModels runs f n times and returns the allocations per run whose stack
// runs through no package under test/ (the device models), and where they were made.
func allocsOutsideModels(n int, f func()) (float64, string) {
	f() // warm up
	old := runtime.MemProfileRate
	runtime.MemProfileRate = 1
	defer func() { runtime.MemProfileRate = old }()
	profile := func() map[[32]uintptr]runtime.MemProfileRecord {
		runtime.GC()
		runtime.GC() // the profile is published a cycle late
		recs := make([]runtime.MemProfileRecord, 1024)
		for {
			k, ok := runtime.MemProfile(recs, true)
			if ok {
				recs = recs[:k]
				break
			}
			recs = make([]runtime.MemProfileRecord, k+256)
		}
		m := map[[32]uintptr]runtime.MemProfileRecord{}
		for _, r := range recs {
			m[r.Stack0] = r
		}
		return m
	}
	before := profile()
	for range n {
		f()
	}
	var total int64
	var sites strings.Builder
	for k, r := range profile() {
		d := r.AllocObjects - before[k].AllocObjects
		if d <= 0 {
			continue
		}
		var stack strings.Builder
		model := false
		frames := runtime.CallersFrames(r.Stack())
		for {
			fr, more := frames.Next()
			model = model || strings.Contains(fr.Function, "gorping/gorping/test/")
			if !strings.HasPrefix(fr.Function, "runtime.") {
				fmt.Fprintf(&stack, "    %s %s:%d\n", fr.Function, fr.File, fr.Line)
			}
			if !more {
				break
			}
		}
		if strings.Contains(stack.String(), "allocsOutsideModels") && !strings.Contains(stack.String(), ".Ping") {
			continue // this helper's own bookkeeping
		}
		if !model {
			total += d
			fmt.Fprintf(&sites, "%d objects at:\n%s", d, stack.String())
		}
	}
	return float64(total) / float64(n), sites.String()
}
