//go:build !guest

// Package deploy_test checks the deployment files with the tools their ecosystems use:
// promtool (Debian's prometheus package) for the Prometheus configuration and rules,
// and a structural check of the Kubernetes manifests (no cluster here).
package deploy_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v2"

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
	if !strings.Contains(out, "SUCCESS: 7 rules found") {
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

// manifest is a Kubernetes object, loosely.
type manifest map[string]any

func (m manifest) get(path ...string) any {
	var cur any = map[string]any(m)
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = mm[p]
	}
	return cur
}

// normalize turns yaml.v2's map[any]any into map[string]any all the way down.
func normalize(v any) any {
	switch x := v.(type) {
	case map[any]any:
		m := map[string]any{}
		for k, vv := range x {
			m[k.(string)] = normalize(vv)
		}
		return m
	case []any:
		for i := range x {
			x[i] = normalize(x[i])
		}
	}
	return v
}

func TestKubernetesManifests(t *testing.T) {
	data, err := os.ReadFile("kubernetes/gorping-mesh.yaml")
	if err != nil {
		t.Fatal(err)
	}
	byKind := map[string]manifest{}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc any
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("YAML: %v", err)
		}
		m, ok := normalize(doc).(map[string]any)
		if !ok || m["kind"] == nil || m["apiVersion"] == nil {
			t.Fatalf("a document without kind/apiVersion: %v", doc)
		}
		byKind[m["kind"].(string)] = m
	}
	ds, svc := byKind["DaemonSet"], byKind["Service"]
	if ds == nil || svc == nil || byKind["Namespace"] == nil {
		t.Fatalf("want a Namespace, a Service and a DaemonSet, have %v", byKind)
	}
	spec := manifest(ds.get("spec", "template", "spec").(map[string]any))
	if spec.get("hostNetwork") != true {
		t.Error("DaemonSet: hostNetwork is not true")
	}
	if spec.get("dnsPolicy") != "ClusterFirstWithHostNet" {
		t.Error("DaemonSet: a host-network pod needs dnsPolicy ClusterFirstWithHostNet to resolve the Service")
	}
	c := manifest(spec.get("containers").([]any)[0].(map[string]any))
	args := c.get("args").([]any)
	if args[0] != "mesh" {
		t.Errorf("container args %v do not start with mesh", args)
	}
	svcName := svc.get("metadata", "name").(string) + "." + svc.get("metadata", "namespace").(string) + ".svc.cluster.local"
	if !slices.Contains(args, any("--targets-dns="+svcName)) {
		t.Errorf("args %v do not discover peers through the headless Service %s", args, svcName)
	}
	if caps := c.get("securityContext", "capabilities", "add").([]any); !slices.Contains(caps, any("IPC_LOCK")) {
		t.Errorf("capabilities %v lack IPC_LOCK", caps)
	}
	limits := c.get("resources", "limits").(map[string]any)
	hasRDMA := false
	for k := range limits {
		hasRDMA = hasRDMA || strings.HasPrefix(k, "rdma/")
	}
	if !hasRDMA {
		t.Errorf("limits %v ask for no RDMA device-plugin resource", limits)
	}
	if c.get("livenessProbe", "httpGet", "path") != "/-/healthy" {
		t.Error("liveness probe is not /-/healthy")
	}
	if c.get("readinessProbe", "httpGet", "path") != "/-/ready" {
		t.Error("readiness probe is not /-/ready (503 until the responder listens)")
	}
	// exporter-toolkit's web configuration covers every path: an agent with basic auth
	// needs probes that send credentials, or the kubelet restarts it for ever.
	for _, a := range args {
		if !strings.HasPrefix(a.(string), "--web.config.file") {
			continue
		}
		for _, probe := range []string{"livenessProbe", "readinessProbe"} {
			auth := false
			hs, _ := c.get(probe, "httpGet", "httpHeaders").([]any)
			for _, h := range hs {
				auth = auth || h.(map[string]any)["name"] == "Authorization"
			}
			if !auth {
				t.Errorf("%s sends no Authorization header to an agent with %s", probe, a)
			}
		}
	}
	mounted := false
	for _, vm := range c.get("volumeMounts").([]any) {
		mounted = mounted || vm.(map[string]any)["mountPath"] == "/dev/infiniband"
	}
	if !mounted {
		t.Error("/dev/infiniband is not mounted")
	}
	if svc.get("spec", "clusterIP") != "None" {
		t.Error("the Service is not headless (clusterIP: None)")
	}
	sel := svc.get("spec", "selector").(map[string]any)
	labels := ds.get("spec", "template", "metadata", "labels").(map[string]any)
	for k, v := range sel {
		if labels[k] != v {
			t.Errorf("the Service selects %s=%v, the pods have %v", k, v, labels[k])
		}
	}
}
