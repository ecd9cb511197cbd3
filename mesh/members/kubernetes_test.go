package members

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/gorping/gorping/test/kubeapi"
)

const (
	ns       = "gorping"
	selector = "app.kubernetes.io/name=gorping-mesh"
	manifest = "../../deploy/kubernetes/gorping-mesh.yaml"
)

// syncLog is a log the test reads while the source writes it.
type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *syncLog) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), s)
}

// applyRBAC creates the namespace and the manifest's ServiceAccount, Role and
// RoleBinding: the agent reads as the DaemonSet's account, with exactly its rights.
func applyRBAC(t *testing.T, c kubernetes.Interface) {
	t.Helper()
	ctx := context.Background()
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	var roles, bindings int
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			t.Fatal(err)
		}
		switch tm.Kind {
		case "Role":
			var r rbacv1.Role
			if err := yaml.UnmarshalStrict([]byte(doc), &r); err != nil {
				t.Fatal(err)
			}
			_, err = c.RbacV1().Roles(ns).Create(ctx, &r, metav1.CreateOptions{})
			roles++
		case "RoleBinding":
			var b rbacv1.RoleBinding
			if err := yaml.UnmarshalStrict([]byte(doc), &b); err != nil {
				t.Fatal(err)
			}
			_, err = c.RbacV1().RoleBindings(ns).Create(ctx, &b, metav1.CreateOptions{})
			bindings++
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if roles != 1 || bindings != 1 {
		t.Fatalf("%s: %d Roles and %d RoleBindings, want one each", manifest, roles, bindings)
	}
}

// agentPod creates a Running agent pod on node with a pod IP, as the kubelet would
// report it (status is the kubelet's to write: the test writes it as admin).
func agentPod(t *testing.T, c kubernetes.Interface, name, node, zone, ip string, lbls map[string]string) {
	t.Helper()
	ctx := context.Background()
	l := map[string]string{"app.kubernetes.io/name": "gorping-mesh"}
	if zone != "" {
		l[DefaultGroupLabel] = zone
	}
	for k, v := range lbls {
		l[k] = v
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: l},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "gorping", Image: "gorping"}}}}
	p, err := c.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ip == "" {
		return
	}
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}}
	if _, err := c.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitMembers waits until the source's members are want.
func waitMembers(t *testing.T, k *Kubernetes, want []Member, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for {
		got := k.Members()
		if slices.Equal(got, want) {
			return
		}
		select {
		case <-k.Changed():
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatalf("members after %s:\n got %v\nwant %v", within, got, want)
		}
	}
}

func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The members come from a real API server (etcd behind it), read as the DaemonSet's
// service account with the manifest's Role: pods come, change group and go; an API
// server that goes away leaves the members in place, said once and in the metric, and
// its return is followed.
func TestKubernetesMembers(t *testing.T) {
	s := kubeapi.Start(t)
	admin := kubernetes.NewForConfigOrDie(s.Admin())
	applyRBAC(t, admin)
	agentPod(t, admin, "gorping-mesh-a", "node-a", "zone-1", "192.0.2.1", nil)
	agentPod(t, admin, "gorping-mesh-b", "node-b", "zone-2", "192.0.2.2", nil)
	agentPod(t, admin, "gorping-mesh-c", "node-c", "", "2001:db8::3", nil)
	agentPod(t, admin, "gorping-mesh-pending", "node-d", "zone-1", "", nil)                                        // no IP yet
	agentPod(t, admin, "other", "node-e", "zone-1", "192.0.2.5", map[string]string{"app.kubernetes.io/name": "x"}) // not an agent
	agentPod(t, admin, "gorping-mesh-a2", "node-a", "zone-9", "192.0.2.9", nil)                                    // a second pod on node-a: the first by name counts

	// The agent's account may not read what the Role does not grant.
	agent := kubernetes.NewForConfigOrDie(s.Agent())
	if _, err := agent.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the agent's account lists nodes: %v (the Role grants pods only)", err)
	}
	if _, err := agent.CoreV1().Pods(ns).Get(context.Background(), "gorping-mesh-a", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the agent's account gets a pod: %v (the Role grants list and watch only)", err)
	}

	var log syncLog
	reg := prometheus.NewRegistry()
	k, err := NewKubernetes(KubernetesConfig{REST: s.Agent(), Namespace: ns, Selector: selector, Port: 10174,
		Timeout: 2 * time.Second, Log: slog.New(slog.NewTextHandler(&log, nil)), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { k.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	a := Member{Name: "node-a", Group: "zone-1", Addr: "192.0.2.1:10174"}
	b := Member{Name: "node-b", Group: "zone-2", Addr: "192.0.2.2:10174"}
	c := Member{Name: "node-c", Group: "", Addr: "[2001:db8::3]:10174"}
	waitMembers(t, k, []Member{a, b, c}, time.Minute)
	waitFor(t, "the informer synced", 30*time.Second, k.Synced)
	if !k.Up() {
		t.Error("not up after the first list")
	}
	if v := testutil.ToFloat64(k.mMembers); v != 3 {
		t.Errorf("gorping_members_kubernetes %v, want 3", v)
	}

	// Changes arrive by the watch.
	ctxb := context.Background()
	p, err := admin.CoreV1().Pods(ns).Get(ctxb, "gorping-mesh-b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Labels[DefaultGroupLabel] = "zone-3"
	if _, err := admin.CoreV1().Pods(ns).Update(ctxb, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := admin.CoreV1().Pods(ns).Delete(ctxb, "gorping-mesh-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	b.Group = "zone-3"
	a2 := Member{Name: "node-a", Group: "zone-9", Addr: "192.0.2.9:10174"} // node-a's other pod now
	waitMembers(t, k, []Member{a2, b, c}, 30*time.Second)

	// The API server goes: the members stay, one line, the gauge at 0.
	s.Stop()
	waitFor(t, "gorping_members_kubernetes_up 0 with the API server stopped", time.Minute, func() bool {
		return testutil.ToFloat64(k.mUp) == 0
	})
	waitFor(t, "three failed lists or watches", time.Minute, func() bool { return testutil.ToFloat64(k.mErrors) >= 3 })
	if got := k.Members(); !slices.Equal(got, []Member{a2, b, c}) {
		t.Errorf("members with the API server gone: %v, want the last ones %v", got, []Member{a2, b, c})
	}
	if n := log.count("does not answer"); n != 1 {
		t.Errorf("the outage logged %d times over %v failures, want once:\n%s", n, testutil.ToFloat64(k.mErrors), log.String())
	}

	// It comes back: said once, and changes flow again.
	s.Restart()
	agentPod(t, admin, "gorping-mesh-g", "node-g", "zone-1", "192.0.2.7", nil)
	g := Member{Name: "node-g", Group: "zone-1", Addr: "192.0.2.7:10174"}
	waitMembers(t, k, []Member{a2, b, c, g}, time.Minute)
	waitFor(t, "gorping_members_kubernetes_up 1 again", time.Minute, func() bool { return testutil.ToFloat64(k.mUp) == 1 })
	if n := log.count("answers again"); n != 1 {
		t.Errorf("the return logged %d times, want once:\n%s", n, log.String())
	}
	t.Logf("log:\n%s", log.String())
}

// A selector that selects nothing, or every pod, is refused before anything is read.
func TestKubernetesConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg  KubernetesConfig
		want string
	}{
		{KubernetesConfig{Namespace: ns, Selector: selector, Port: 1}, "no API server"},
		{KubernetesConfig{REST: nil}, "no API server"},
	} {
		_, err := NewKubernetes(tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.want)
		}
	}
	s := &rest.Config{Host: "https://127.0.0.1:1"} // never reached: the checks come first
	for sel, want := range map[string]string{"": "selects every pod", "a b": "label selector", "a=b,,": "label selector"} {
		_, err := NewKubernetes(KubernetesConfig{REST: s, Namespace: ns, Selector: sel, Port: 1})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("selector %q: %v, want %q", sel, err, want)
		}
	}
	if _, err := NewKubernetes(KubernetesConfig{REST: s, Selector: selector, Port: 1}); err == nil || !strings.Contains(err.Error(), "no namespace") {
		t.Errorf("no namespace: %v", err)
	}
}
