//go:build !guest

// Package deploy_test checks the Prometheus files with the tool their ecosystem uses:
// promtool (Debian's prometheus package) for the configuration and the rules. The
// Kubernetes manifests are decoded strictly against Kubernetes' own Go types by
// tools/deploycheck (a module of its own: those types stay out of gorping's go.mod).
package deploy_test

import (
	"os"
	"os/exec"
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
	out := promtool(t, "check", "rules", "prometheus/gorping-rules.yml")
	if !strings.Contains(out, "SUCCESS: 6 rules found") {
		t.Errorf("promtool check rules: %s", out)
	}
	// Every alert has a test case.
	rules, err := os.ReadFile("prometheus/gorping-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile("prometheus/gorping-rules.test.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(rules), "\n") {
		if name, ok := strings.CutPrefix(strings.TrimSpace(l), "- alert: "); ok &&
			!strings.Contains(string(tests), "alertname: "+name+"\n") {
			t.Errorf("alert %s has no case in gorping-rules.test.yml", name)
		}
	}
	out = promtool(t, "test", "rules", "prometheus/gorping-rules.test.yml")
	if !strings.Contains(out, "SUCCESS") {
		t.Errorf("promtool test rules: %s", out)
	}
}
