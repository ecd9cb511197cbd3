// Package meshtest starts `gorping mesh` agents for tests and reads their metrics: the
// host end-to-end test, the guest tests and the multi-guest tier share it.
//
//	a := meshtest.Start(t, bin, nil, "--web.listen-address", "127.0.0.1:0", "--peers", "192.0.2.1:7202")
//	meshtest.WaitFor(t, time.Minute, "target up", func() (bool, string) {
//		v, err := a.Value(`gorping_target_up{target="192.0.2.1:7202"}`)
//		return err == nil && v == 1, fmt.Sprint(v, err)
//	})
//	a.Terminate(t, 30*time.Second) // SIGTERM: exit 0 once everything is released
package meshtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorping/gorping/test/freeport"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Agent is a `gorping mesh` process. Start adds --log.format json and reads the actual
// listen address from the agent's start line, so "--web.listen-address 127.0.0.1:0" works.
type Agent struct {
	Name   string
	Addr   string // host:port of the metrics listener
	cmd    *exec.Cmd
	logs   Buffer
	done   chan struct{}
	err    error
	Client *http.Client // for Get; defaults to one with a 10 s timeout
	Scheme string       // "http" unless the test set up TLS
}

// Start runs bin with "mesh", args and --log.format json, env added to the process's
// environment (nil: inherited), and waits up to 30 s for its metrics listener. The
// test's cleanup kills it if it still runs.
func Start(t testing.TB, bin string, env []string, args ...string) *Agent {
	t.Helper()
	a := &Agent{Name: "gorping mesh " + strings.Join(args, " "), done: make(chan struct{}), Scheme: "http",
		Client: &http.Client{Timeout: 10 * time.Second}}
	a.cmd = exec.Command(bin, append([]string{"mesh", "--log.format", "json"}, args...)...)
	if env != nil {
		a.cmd.Env = env
	}
	a.cmd.Stdout = &a.logs
	a.cmd.Stderr = &a.logs
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := a.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", a.Name, err)
	}
	go func() {
		a.err = a.cmd.Wait()
		close(a.done)
	}()
	t.Cleanup(func() {
		if a.Running() {
			if t.Failed() {
				a.cmd.Process.Signal(syscall.SIGQUIT) // the Go runtime prints every stack
				select {
				case <-a.done:
				case <-time.After(5 * time.Second):
				}
				t.Logf("%s logs:\n%s", a.Name, a.Logs())
			}
			syscall.Kill(-a.cmd.Process.Pid, syscall.SIGKILL)
			<-a.done
		}
	})
	WaitFor(t, 30*time.Second, a.Name+": metrics listener", func() (bool, string) {
		if !a.Running() {
			t.Fatalf("%s exited: %v\n%s", a.Name, a.err, a.Logs())
		}
		for _, rec := range a.LogRecords() {
			if rec["msg"] == "gorping mesh started" {
				if s, ok := rec["listen"].(string); ok {
					a.Addr = s
					return true, ""
				}
			}
		}
		return false, "no start line yet"
	})
	return a
}

// Pid is the agent's process id.
func (a *Agent) Pid() int { return a.cmd.Process.Pid }

// Running reports whether the agent has not exited.
func (a *Agent) Running() bool {
	select {
	case <-a.done:
		return false
	default:
		return true
	}
}

// Logs is what the agent wrote so far.
func (a *Agent) Logs() string { return a.logs.String() }

// LogRecords parses the agent's JSON log lines (others are skipped).
func (a *Agent) LogRecords() []map[string]any {
	var recs []map[string]any
	sc := bufio.NewScanner(strings.NewReader(a.Logs()))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			recs = append(recs, m)
		}
	}
	return recs
}

// Signal sends sig to the agent.
func (a *Agent) Signal(sig syscall.Signal) error { return a.cmd.Process.Signal(sig) }

// Terminate sends SIGTERM and returns the exit status (-1: killed by a signal), failing
// the test if the agent does not exit within timeout.
func (a *Agent) Terminate(t testing.TB, timeout time.Duration) int {
	t.Helper()
	a.cmd.Process.Signal(syscall.SIGTERM)
	return a.Wait(t, timeout)
}

// Wait waits for the agent to exit and returns its status.
func (a *Agent) Wait(t testing.TB, timeout time.Duration) int {
	t.Helper()
	select {
	case <-a.done:
	case <-time.After(timeout):
		a.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-a.done:
		case <-time.After(5 * time.Second):
			syscall.Kill(-a.cmd.Process.Pid, syscall.SIGKILL)
			<-a.done
		}
		t.Fatalf("%s did not exit within %s\n%s", a.Name, timeout, a.Logs())
	}
	if a.err == nil {
		return 0
	}
	if ee, ok := a.err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -1
}

// URL is the agent's URL for path ("/metrics").
func (a *Agent) URL(path string) string { return a.Scheme + "://" + a.Addr + path }

// Get fetches path and returns the status code and body.
func (a *Agent) Get(path string) (int, string, error) {
	resp, err := a.Client.Get(a.URL(path))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// Scrape fetches /metrics (text format) and parses it.
func (a *Agent) Scrape() (Metrics, error) { return a.ScrapePath("/metrics") }

// ScrapePath fetches path (e.g. "/probe?target=...") and parses it.
func (a *Agent) ScrapePath(path string) (Metrics, error) {
	code, body, err := a.Get(path)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d %s", path, code, strings.TrimSpace(body))
	}
	return Parse(body)
}

// Value scrapes /metrics and returns one sample (see Metrics.Value).
func (a *Agent) Value(selector string) (float64, error) {
	m, err := a.Scrape()
	if err != nil {
		return 0, err
	}
	return m.Value(selector)
}

// Metrics is a parsed exposition, by family name.
type Metrics map[string]*dto.MetricFamily

// Parse parses the Prometheus text format with expfmt.
func Parse(text string) (Metrics, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return nil, err
	}
	return Metrics(mfs), nil
}

// Sample is one series of an exposition: its name (with _bucket, _sum, _count for
// histograms), labels and value.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Samples flattens the exposition into its series, as a classic scrape stores them.
func (m Metrics) Samples() []Sample {
	var out []Sample
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		for _, mt := range m[name].GetMetric() {
			l := map[string]string{}
			for _, lp := range mt.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			switch {
			case mt.Counter != nil:
				out = append(out, Sample{name, l, mt.Counter.GetValue()})
			case mt.Gauge != nil:
				out = append(out, Sample{name, l, mt.Gauge.GetValue()})
			case mt.Untyped != nil:
				out = append(out, Sample{name, l, mt.Untyped.GetValue()})
			case mt.Histogram != nil:
				h := mt.Histogram
				for _, b := range h.GetBucket() {
					bl := copyLabels(l)
					bl["le"] = strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)
					out = append(out, Sample{name + "_bucket", bl, float64(b.GetCumulativeCount())})
				}
				bl := copyLabels(l)
				bl["le"] = "+Inf"
				out = append(out, Sample{name + "_bucket", bl, float64(h.GetSampleCount())},
					Sample{name + "_sum", copyLabels(l), h.GetSampleSum()},
					Sample{name + "_count", copyLabels(l), float64(h.GetSampleCount())})
			case mt.Summary != nil:
				out = append(out, Sample{name + "_sum", copyLabels(l), mt.Summary.GetSampleSum()},
					Sample{name + "_count", copyLabels(l), float64(mt.Summary.GetSampleCount())})
			}
		}
	}
	return out
}

func copyLabels(l map[string]string) map[string]string {
	c := make(map[string]string, len(l)+1)
	for k, v := range l {
		c[k] = v
	}
	return c
}

// Value returns the value of the one series that selector names: a series name with
// optional exact label matchers, `gorping_target_up{target="192.0.2.1:7202"}`. Series
// with more labels match too; more than one match is an error, none is ErrNoSeries.
func (m Metrics) Value(selector string) (float64, error) {
	ss, err := m.Select(selector)
	if err != nil {
		return 0, err
	}
	switch len(ss) {
	case 0:
		return 0, fmt.Errorf("%w: %s", ErrNoSeries, selector)
	case 1:
		return ss[0].Value, nil
	}
	return 0, fmt.Errorf("%s matches %d series", selector, len(ss))
}

// Sum adds the values of every series selector matches (0 if none).
func (m Metrics) Sum(selector string) (float64, error) {
	ss, err := m.Select(selector)
	var s float64
	for _, x := range ss {
		s += x.Value
	}
	return s, err
}

// Select returns the series selector matches.
func (m Metrics) Select(selector string) ([]Sample, error) {
	name, want, err := parseSelector(selector)
	if err != nil {
		return nil, err
	}
	var out []Sample
	for _, s := range m.Samples() {
		if s.Name != name {
			continue
		}
		ok := true
		for k, v := range want {
			if s.Labels[k] != v {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, s)
		}
	}
	return out, nil
}

// ErrNoSeries is Value's error when nothing matches.
var ErrNoSeries = fmt.Errorf("no such series")

func parseSelector(s string) (string, map[string]string, error) {
	name, rest, ok := strings.Cut(s, "{")
	want := map[string]string{}
	if !ok {
		return s, want, nil
	}
	rest, ok = strings.CutSuffix(rest, "}")
	if !ok {
		return "", nil, fmt.Errorf("selector %q: missing }", s)
	}
	for rest != "" {
		k, after, ok := strings.Cut(rest, `="`)
		if !ok {
			return "", nil, fmt.Errorf("selector %q: want label=\"value\"", s)
		}
		v, after2, ok := strings.Cut(after, `"`)
		if !ok {
			return "", nil, fmt.Errorf("selector %q: unterminated value", s)
		}
		want[strings.TrimSpace(k)] = v
		rest = strings.TrimPrefix(strings.TrimSpace(after2), ",")
	}
	return name, want, nil
}

// WaitFor polls cond (every 100 ms) until it holds, failing the test after timeout
// with what cond last said.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %s", what, timeout, why)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// FreePort returns a TCP port that was free on 127.0.0.1 a moment ago and is
// not one the kernel hands out to other sockets (freeport).
func FreePort(t testing.TB) int {
	t.Helper()
	p, err := freeport.Port("tcp4")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Buffer collects output written from several goroutines (a process's, a logger's).
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
