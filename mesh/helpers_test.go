package mesh

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorping/gorping/internal/hostenv"
	"github.com/gorping/gorping/test/meshtest"
)

// maxSeriesPerTarget is the cardinality budget of one target (docs/mesh.md) that has
// failed in five ways: the RTT histogram (one native histogram), probes, up,
// connections, dead connections, path, ts_source, and the failure reasons the target has seen; a target
// whose connection is NIC-timed (ts_source="nic") has maxSeriesPerTargetNIC, the split's
// two histograms more. With --paths K of 2 or more each path adds at most
// maxSeriesPerPath — its up, probes and info, and its share of the target's paths up —
// plus one per failure reason it has had.
const (
	maxSeriesPerTarget    = 12
	maxSeriesPerTargetNIC = maxSeriesPerTarget + 2
	maxSeriesPerPath      = 4
)

// seriesPerTarget counts each target's series in a scrape, a histogram as the one
// native histogram series Prometheus stores for it.
func seriesPerTarget(m meshtest.Metrics) map[string]int {
	n := map[string]int{}
	for _, mf := range m {
		for _, mt := range mf.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "target" {
					n[l.GetValue()]++
				}
			}
		}
	}
	return n
}

func defaultClient() *http.Client { return &http.Client{Timeout: 10 * time.Second} }

// testAgent is an agent run in this process (run, not a binary).
type testAgent struct {
	*meshtest.Agent
	cancel context.CancelFunc
	done   chan int // run's status; a test that takes it puts it back for the cleanup
	logs   *meshtest.Buffer
	hup    chan os.Signal
	a      *Agent
}

// runAgent runs cfg with d in this process and waits up to timeout for its listener.
// The test's cleanup stops it.
func runAgent(t *testing.T, cfg Config, d deps, timeout time.Duration) *testAgent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ta := &testAgent{cancel: cancel, done: make(chan int, 1), logs: &meshtest.Buffer{}, hup: make(chan os.Signal, 1)}
	d.hup = ta.hup
	if d.rails == nil {
		// This machine's RDMA ports must not matter.
		d.rails = &hostRails{env: hostenv.NoRDMA(t.TempDir())}
	}
	cfg.Log = ta.logs
	a, err := newAgent(cfg, d)
	if err != nil {
		t.Fatal(err)
	}
	ta.a = a
	go func() {
		if err := a.Run(ctx); err != nil {
			ta.logs.Write([]byte("Run: " + err.Error() + "\n"))
			ta.done <- exitError
			return
		}
		ta.done <- exitOK
	}()
	var addr string
	meshtest.WaitFor(t, timeout, "agent listening", func() (bool, string) {
		for _, l := range strings.Split(ta.logs.String(), "\n") {
			if !strings.Contains(l, "gorping mesh started") {
				continue
			}
			if _, rest, ok := strings.Cut(l, " listen="); ok { // logfmt
				addr = strings.Fields(rest)[0]
				return true, ""
			}
			if _, rest, ok := strings.Cut(l, `"listen":"`); ok { // json
				addr, _, _ = strings.Cut(rest, `"`)
				return true, ""
			}
		}
		return false, ta.logs.String()
	})
	ta.Agent = &meshtest.Agent{Name: "in-process agent", Addr: addr, Scheme: "http", Client: defaultClient()}
	t.Cleanup(func() {
		ta.cancel()
		select {
		case <-ta.done:
		case <-time.After(timeout):
			t.Errorf("the agent did not stop\n%s", ta.logs)
		}
		if t.Failed() {
			t.Logf("agent logs:\n%s", ta.logs)
		}
	})
	return ta
}

// stop ends the agent and returns run's status.
func (ta *testAgent) stop(t *testing.T, timeout time.Duration) int {
	t.Helper()
	ta.cancel()
	select {
	case st := <-ta.done:
		ta.done <- st
		return st
	case <-time.After(timeout):
		t.Fatalf("the agent did not stop within %s\n%s", timeout, ta.logs)
		return -1
	}
}

// checkArgs is what New makes of the words after "mesh".
func checkArgs(args []string) (*agentConfig, error) {
	cfg, err := parseArgs(args)
	if err != nil {
		return nil, err
	}
	return cfg.check()
}

// running is how many target loops the agent runs.
func (ta *testAgent) running() int {
	return ta.a.mgr.Running()
}

// replaceFile gives path the content s at once (write beside it, rename), as an
// operator's editor or a config manager does: a reload never reads half a file.
func replaceFile(t *testing.T, path, s string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path+".new", []byte(s), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
}

// parseArgs is the tests' shorthand for a Config: the defaults with options set as
// `gorping mesh` words would set them (old names and new). It is not the command line
// (package cli parses it, and its tests hold the parse's errors): a word it does not
// know fails the test's setup.
func parseArgs(args []string) (Config, error) {
	cfg := DefaultConfig()
	listen := false
	for i := 0; i < len(args); i++ {
		name, v, hasValue := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		var err error
		set := func(f func(string) error) {
			if !hasValue {
				if i+1 >= len(args) {
					err = fmt.Errorf("--%s: needs a value", name)
					return
				}
				i++
				v = args[i]
			}
			err = f(v)
		}
		str := func(p *string) func(string) error { return func(s string) error { *p = s; return nil } }
		num := func(p *int) func(string) error {
			return func(s string) (e error) { *p, e = strconv.Atoi(s); return e }
		}
		dur := func(p *time.Duration) func(string) error {
			return func(s string) error {
				if d, e := time.ParseDuration(s); e == nil {
					*p = d
					return nil
				}
				f, e := strconv.ParseFloat(s, 64)
				*p = time.Duration(f * float64(time.Second))
				return e
			}
		}
		add := func(p *[]string) func(string) error {
			return func(s string) error { *p = append(*p, strings.Split(s, ",")...); return nil }
		}
		switch name {
		case "web.listen-address", "listen":
			if !listen {
				cfg.Listen, listen = nil, true
			}
			set(add(&cfg.Listen))
		case "web.config.file":
			set(str(&cfg.WebConfigFile))
		case "port":
			set(num(&cfg.Port))
		case "bind":
			set(str(&cfg.Bind))
		case "no-responder":
			cfg.NoResponder = true
		case "targets", "targets.file":
			set(str(&cfg.TargetsFile))
		case "targets-reload", "targets.reload":
			set(dur(&cfg.TargetsReload))
		case "peers":
			set(add(&cfg.Peers))
		case "targets-dns", "targets.dns":
			set(str(&cfg.TargetsDNS))
		case "dns-refresh", "dns.refresh":
			set(dur(&cfg.DNSRefresh))
		case "max-targets":
			set(num(&cfg.MaxTargets))
		case "interval":
			set(dur(&cfg.Interval))
		case "paths":
			set(num(&cfg.Paths))
		case "jitter":
			set(func(s string) (e error) { cfg.Jitter, e = strconv.ParseFloat(s, 64); return e })
		case "timeout":
			set(dur(&cfg.Timeout))
		case "connect-timeout":
			set(dur(&cfg.ConnectTimeout))
		case "backoff-max":
			set(dur(&cfg.BackoffMax))
		case "path-lifetime":
			set(dur(&cfg.PathLifetime))
		case "size":
			set(num(&cfg.Size))
		case "source":
			set(str(&cfg.Source))
		case "agent-name":
			set(str(&cfg.AgentName))
		case "group":
			set(str(&cfg.Group))
		case "agents":
			set(add(&cfg.Agents))
		case "agents-file", "agents.file":
			set(str(&cfg.AgentsFile))
		case "agents-dns", "agents.dns":
			set(str(&cfg.AgentsDNS))
		case "agents-kubernetes", "agents.kubernetes":
			set(str(&cfg.AgentsKubernetes))
		case "agents.http-config":
			set(str(&cfg.AgentsHTTPConfig))
		case "agents-refresh", "agents.refresh":
			set(dur(&cfg.AgentsRefresh))
		case "agents-keep", "agents.keep":
			set(dur(&cfg.AgentsKeep))
		case "rails":
			set(str(&cfg.Rails))
		case "max-peers":
			set(num(&cfg.MaxPeers))
		case "rotate":
			set(dur(&cfg.Rotate))
		case "probe-allow", "probe.allow":
			set(add(&cfg.ProbeAllow))
		case "probe-any", "probe.any":
			cfg.ProbeAny = true
		case "log.format":
			set(str(&cfg.LogFormat))
		case "log.level":
			set(str(&cfg.LogLevel))
		default:
			err = fmt.Errorf("parseArgs: no option %q", args[i])
		}
		if err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}

// The statuses a test agent's run ends with (the command line's: 0, and 1 when Run fails).
const (
	exitOK    = 0
	exitError = 1
)
