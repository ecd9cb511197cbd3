//go:build !guest

// Package deploy_test checks the Prometheus files with the tool their ecosystem uses:
// promtool (Debian's prometheus package) for the configuration and the rules. The
// Kubernetes manifests are decoded strictly against Kubernetes' own Go types by
// tools/deploycheck (a module of its own: those types stay out of gorping's go.mod).
package deploy_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gorping/gorping/test/promtest"
)

func promtool(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(promtest.Tool(t, "promtool"), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestPrometheusConfig(t *testing.T) {
	out := promtool(t, "check", "config", "prometheus/prometheus.yml")
	if !strings.Contains(out, "SUCCESS") {
		t.Errorf("promtool check config: %s", out)
	}
}

func TestAlertRules(t *testing.T) {
	rules, err := os.ReadFile("prometheus/gorping-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	// promtool counts every rule of the file: as many as the file has.
	n := 0
	for _, l := range strings.Split(string(rules), "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "- alert: ") || strings.HasPrefix(l, "- record: ") {
			n++
		}
	}
	out := promtool(t, "check", "rules", "prometheus/gorping-rules.yml")
	if !strings.Contains(out, fmt.Sprintf("SUCCESS: %d rules found", n)) {
		t.Errorf("promtool check rules (want %d rules): %s", n, out)
	}
	// Every alert has a test case in one of the test files.
	testFiles, err := filepath.Glob("prometheus/*.test.yml")
	if err != nil || len(testFiles) == 0 {
		t.Fatalf("no prometheus/*.test.yml: %v", err)
	}
	var tests []byte
	for _, f := range testFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		tests = append(tests, b...)
	}
	for _, l := range strings.Split(string(rules), "\n") {
		if name, ok := strings.CutPrefix(strings.TrimSpace(l), "- alert: "); ok &&
			!strings.Contains(string(tests), "alertname: "+name+"\n") {
			t.Errorf("alert %s has no case in %v", name, testFiles)
		}
	}
	out = promtool(t, "test", "rules", "prometheus/gorping-rules.test.yml")
	if !strings.Contains(out, "SUCCESS") {
		t.Errorf("promtool test rules: %s", out)
	}
}
