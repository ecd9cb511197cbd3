package mesh

import (
	"context"
	"net/http"
	"os"
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
	mg := ta.a.mgr
	mg.mu.Lock()
	defer mg.mu.Unlock()
	return len(mg.running)
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
