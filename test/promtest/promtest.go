// Package promtest runs a real Prometheus server (Debian's prometheus package) for
// tests and queries it through its HTTP API: the mesh's host end-to-end test and the
// multi-guest tier use it. The server listens on 127.0.0.1 with a temporary data
// directory and a generated configuration, and is stopped by the test's cleanup.
//
//	prom := promtest.Start(t, promtest.Config{Jobs: []promtest.Job{{Name: "gorping", Targets: []string{addr}}}})
//	prom.WaitFor(t, time.Minute, `gorping_target_up == 0`, promtest.NonEmpty)
//	v, err := prom.Query(`sum(gorping_probes_total)`)
//
// A missing prometheus or promtool binary skips the test with a loud message, and fails
// it under CI=true (the Makefile's host-deps installs the package).
package promtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorping/gorping/test/meshtest"
)

// Tool returns the path of name (prometheus, promtool). Missing: a loud skip, or a
// failure under CI=true.
func Tool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	msg := fmt.Sprintf("*** %s not found (Debian package prometheus; `make host-deps` as root installs it): %v ***", name, err)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// Job is one scrape job.
type Job struct {
	Name        string
	Targets     []string // host:port
	Labels      map[string]string
	Scheme      string // "http" (default) or "https"
	MetricsPath string // default /metrics
	Params      map[string][]string
	CAFile      string // https: the CA that signed the target's certificate
	ServerName  string // https: the name to verify (default: the target's host)
	Username    string // basic auth
	Password    string
	// Relabel, if set, is raw YAML for relabel_configs (indented list items), e.g.
	// blackbox-style /probe jobs.
	Relabel string
}

// Config is the server's configuration.
type Config struct {
	Jobs               []Job
	ScrapeInterval     time.Duration // default 1s
	EvaluationInterval time.Duration // default 1s
	RuleFiles          []string      // absolute paths
	// NativeHistograms enables the native-histograms feature (Prometheus 2.40+): it then
	// scrapes protobuf and stores native histograms; ScrapeClassicHistograms keeps the
	// classic buckets too.
	NativeHistograms        bool
	ScrapeClassicHistograms bool
	ExtraFlags              []string
}

// Server is a running Prometheus.
type Server struct {
	URL    string // http://127.0.0.1:PORT
	Dir    string
	cmd    *exec.Cmd
	logs   meshtest.Buffer
	done   chan struct{}
	client *http.Client
}

// Start writes the configuration, starts Prometheus and waits until it is ready.
func Start(t testing.TB, cfg Config) *Server {
	t.Helper()
	bin := Tool(t, "prometheus")
	dir := t.TempDir()
	conf := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(conf, []byte(cfg.YAML()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(Tool(t, "promtool"), "check", "config", conf).CombinedOutput(); err != nil {
		t.Fatalf("promtool check config: %v\n%s\n%s", err, out, cfg.YAML())
	}
	port := meshtest.FreePort(t)
	s := &Server{URL: "http://127.0.0.1:" + strconv.Itoa(port), Dir: dir, done: make(chan struct{}),
		client: &http.Client{Timeout: 10 * time.Second}}
	args := []string{"--config.file=" + conf, "--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--web.listen-address=127.0.0.1:" + strconv.Itoa(port), "--log.level=warn"}
	if cfg.NativeHistograms {
		args = append(args, "--enable-feature=native-histograms")
	}
	args = append(args, cfg.ExtraFlags...)
	s.cmd = exec.Command(bin, args...)
	s.cmd.Stdout, s.cmd.Stderr = &s.logs, &s.logs
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start prometheus: %v", err)
	}
	go func() { s.cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("prometheus logs:\n%s", s.logs.String())
		}
		s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(20 * time.Second):
			syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
			<-s.done
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-s.done:
			t.Fatalf("prometheus exited at startup:\n%s", s.logs.String())
		default:
		}
		if resp, err := s.client.Get(s.URL + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready after 60s:\n%s", s.logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Logs is what Prometheus printed.
func (s *Server) Logs() string { return s.logs.String() }

// YAML renders the configuration file.
func (c Config) YAML() string {
	si, ei := c.ScrapeInterval, c.EvaluationInterval
	if si == 0 {
		si = time.Second
	}
	if ei == 0 {
		ei = time.Second
	}
	var b strings.Builder
	fmt.Fprintf(&b, "global:\n  scrape_interval: %s\n  scrape_timeout: %s\n  evaluation_interval: %s\n",
		promDuration(si), promDuration(si), promDuration(ei))
	if len(c.RuleFiles) > 0 {
		b.WriteString("rule_files:\n")
		for _, f := range c.RuleFiles {
			fmt.Fprintf(&b, "  - %s\n", quote(f))
		}
	}
	b.WriteString("scrape_configs:\n")
	for _, j := range c.Jobs {
		fmt.Fprintf(&b, "  - job_name: %s\n", quote(j.Name))
		if c.ScrapeClassicHistograms {
			b.WriteString("    scrape_classic_histograms: true\n")
		}
		if j.Scheme != "" {
			fmt.Fprintf(&b, "    scheme: %s\n", j.Scheme)
		}
		if j.MetricsPath != "" {
			fmt.Fprintf(&b, "    metrics_path: %s\n", quote(j.MetricsPath))
		}
		if len(j.Params) > 0 {
			b.WriteString("    params:\n")
			for k, vs := range j.Params {
				fmt.Fprintf(&b, "      %s: [", quote(k))
				for i, v := range vs {
					if i > 0 {
						b.WriteString(", ")
					}
					b.WriteString(quote(v))
				}
				b.WriteString("]\n")
			}
		}
		if j.CAFile != "" || j.ServerName != "" {
			b.WriteString("    tls_config:\n")
			if j.CAFile != "" {
				fmt.Fprintf(&b, "      ca_file: %s\n", quote(j.CAFile))
			}
			if j.ServerName != "" {
				fmt.Fprintf(&b, "      server_name: %s\n", quote(j.ServerName))
			}
		}
		if j.Username != "" {
			fmt.Fprintf(&b, "    basic_auth:\n      username: %s\n      password: %s\n", quote(j.Username), quote(j.Password))
		}
		if j.Relabel != "" {
			b.WriteString("    relabel_configs:\n" + j.Relabel)
			if !strings.HasSuffix(j.Relabel, "\n") {
				b.WriteString("\n")
			}
		}
		b.WriteString("    static_configs:\n      - targets: [")
		for i, tg := range j.Targets {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(quote(tg))
		}
		b.WriteString("]\n")
		if len(j.Labels) > 0 {
			b.WriteString("        labels:\n")
			for k, v := range j.Labels {
				fmt.Fprintf(&b, "          %s: %s\n", k, quote(v))
			}
		}
	}
	return b.String()
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

func promDuration(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return fmt.Sprintf("%dms", d/time.Millisecond)
}

// Sample is one element of an instant vector.
type Sample struct {
	Metric map[string]string
	Value  float64
}

// Vector is an instant query's result.
type Vector []Sample

func (v Vector) String() string {
	var b strings.Builder
	for _, s := range v {
		fmt.Fprintf(&b, "%v => %g; ", s.Metric, s.Value)
	}
	if b.Len() == 0 {
		return "(empty)"
	}
	return b.String()
}

// Query runs an instant query now and returns its vector (a scalar becomes one sample).
func (s *Server) Query(expr string) (Vector, error) {
	resp, err := s.client.PostForm(s.URL+"/api/v1/query", url.Values{"query": {expr}})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var r struct {
		Status    string `json:"status"`
		Error     string `json:"error"`
		ErrorType string `json:"errorType"`
		Data      struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("query %q: %v: %s", expr, err, body)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("query %q: %s: %s", expr, r.ErrorType, r.Error)
	}
	switch r.Data.ResultType {
	case "vector":
		var res []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		}
		if err := json.Unmarshal(r.Data.Result, &res); err != nil {
			return nil, err
		}
		v := make(Vector, 0, len(res))
		for _, e := range res {
			f, err := parseValue(e.Value[1])
			if err != nil {
				return nil, err
			}
			v = append(v, Sample{Metric: e.Metric, Value: f})
		}
		return v, nil
	case "scalar":
		var res [2]any
		if err := json.Unmarshal(r.Data.Result, &res); err != nil {
			return nil, err
		}
		f, err := parseValue(res[1])
		return Vector{{Metric: map[string]string{}, Value: f}}, err
	}
	return nil, fmt.Errorf("query %q: result type %s", expr, r.Data.ResultType)
}

func parseValue(v any) (float64, error) {
	s, ok := v.(string)
	if !ok {
		return 0, fmt.Errorf("value %v is not a string", v)
	}
	return strconv.ParseFloat(s, 64)
}

// NonEmpty accepts any vector with at least one sample.
func NonEmpty(v Vector) bool { return len(v) > 0 }

// WaitFor runs expr every 250 ms until cond accepts its vector, failing the test after
// timeout with the last result.
func (s *Server) WaitFor(t testing.TB, timeout time.Duration, expr string, cond func(Vector) bool) Vector {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		v, err := s.Query(expr)
		if err == nil && cond(v) {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus: %s: not as wanted within %s; last: %v (err %v)", expr, timeout, v, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// TargetHealth returns each scrape target's health ("up", "down", "unknown") and last
// error, keyed by scrape URL.
func (s *Server) TargetHealth() (map[string][2]string, error) {
	resp, err := s.client.Get(s.URL + "/api/v1/targets")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Data struct {
			ActiveTargets []struct {
				ScrapeURL string `json:"scrapeUrl"`
				Health    string `json:"health"`
				LastError string `json:"lastError"`
			} `json:"activeTargets"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, err
	}
	m := map[string][2]string{}
	for _, a := range r.Data.ActiveTargets {
		m[a.ScrapeURL] = [2]string{a.Health, a.LastError}
	}
	return m, nil
}
