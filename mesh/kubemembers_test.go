//go:build !guest

package mesh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gorping/gorping/rping"
	"github.com/gorping/gorping/test/kubeapi"
	"github.com/gorping/gorping/test/meshtest"
)

func TestAgentsKubernetesOption(t *testing.T) {
	c, err := checkArgs([]string{"--agents-kubernetes", "app.kubernetes.io/name=gorping-mesh"})
	if err != nil || !c.discovers() {
		t.Fatalf("a selector: %v, discovers %v", err, c != nil && c.discovers())
	}
	for args, want := range map[string]string{
		"--agents-kubernetes=a b":   "--agents.kubernetes \"a b\": not a label selector",
		"--agents-kubernetes=!!":    "--agents.kubernetes \"!!\": not a label selector",
		"--agents-kubernetes= ":     "selects every pod",
		"--agents-kubernetes=a=b,,": "not a label selector",
	} {
		_, err := checkArgs([]string{args})
		var ue usageError
		if err == nil || !strings.Contains(err.Error(), want) || !errors.As(err, &ue) {
			t.Errorf("%s: %v, want a usage error with %q", args, err, want)
		}
	}
}

// Agents whose only discovery is --agents-kubernetes find each other through a real API
// server (as the DaemonSet's account, with its Role) and probe each other's rails.
func TestRailsKubernetes(t *testing.T) {
	s := kubeapi.Start(t)
	admin := kubernetes.NewForConfigOrDie(s.Admin())
	ctx := context.Background()
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gorping"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rule := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "watch"}}
	if _, err := admin.RbacV1().Roles("gorping").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "r"},
		Rules: []rbacv1.PolicyRule{rule}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().RoleBindings("gorping").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "r"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "r"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "gorping-mesh", Namespace: "gorping"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Each agent listens on its own loopback address, all on one port: what the pods'
	// node IPs and the DaemonSet's one port are.
	port := meshtest.FreePort(t)
	fn := railNet(4)
	var agents []*testAgent
	for n := 1; n <= 4; n++ {
		ip := fmt.Sprintf("127.0.0.%d", n)
		args := []string{"--listen", fmt.Sprintf("%s:%d", ip, port), "--agent-name", fmt.Sprintf("node%d", n),
			"--group", fmt.Sprintf("tor-%d", n%2), "--interval", "50ms", "--agents-refresh", "100ms",
			"--agents-kubernetes", "app.kubernetes.io/name=gorping-mesh"}
		if n == 4 {
			// Not a pod of the list (it need not be), with a budget of one peer: it reads
			// and probes the one the pinglist chooses.
			args = append(args, "--max-peers", "1")
		}
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("gorping-mesh-%d", n), Namespace: "gorping",
			Labels: map[string]string{"app.kubernetes.io/name": "gorping-mesh", "topology.kubernetes.io/zone": fmt.Sprintf("tor-%d", n%2)}},
			Spec: corev1.PodSpec{NodeName: fmt.Sprintf("node%d", n), Containers: []corev1.Container{{Name: "gorping", Image: "gorping"}}}}
		if n < 4 {
			p, err := admin.CoreV1().Pods("gorping").Create(ctx, p, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip}
			if _, err := admin.CoreV1().Pods("gorping").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		cfg, err := parseArgs(args)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Version = "v0.0.0-test"
		d := deps{dial: fn.dial, resolver: &fakeResolver{m: map[string][]netip.Addr{}}, rails: &twoRails(t, n).rails,
			respond: func(ctx context.Context, c rping.ResponderConfig) error {
				c.Listening()
				<-ctx.Done()
				return nil
			},
			local:    func() map[netip.Addr]bool { return map[netip.Addr]bool{netip.MustParseAddr(ip): true} },
			kube:     func() (*rest.Config, string, error) { return s.Agent(), "gorping", nil },
			kubePort: uint16(port)}
		agents = append(agents, runAgent(t, cfg, d, 30*time.Second))
	}
	a1 := agents[0]
	for _, s := range []string{railSeries("10.0.1.2:7174", "rxe0", "node2"), railSeries("10.0.2.3:7174", "rxe1", "node3")} {
		a1.wait(t, s, eq(1))
	}
	a1.wait(t, `gorping_members_kubernetes_up`, eq(1))
	a1.wait(t, `gorping_members_kubernetes`, eq(3))
	a1.wait(t, `gorping_peer_info{peer="node2",peer_group="tor-0",peer_version="v0.0.0-test"}`, eq(1))
	a1.wait(t, `gorping_targets{source="rails"}`, eq(4))
	agents[2].wait(t, railSeries("10.0.1.1:7174", "rxe0", "node1"), eq(1))
	a4 := agents[3]
	a4.wait(t, `gorping_members_kubernetes`, eq(3))
	a4.wait(t, `gorping_targets{source="rails"}`, eq(2)) // one peer's two rails
	// It read only that peer's description: one peer known, not the three listed.
	m, err := a4.Scrape()
	if err != nil {
		t.Fatal(err)
	}
	var known []string
	for _, s := range m.Samples() {
		if s.Name == "gorping_peer_info" {
			known = append(known, s.Labels["peer"])
		}
	}
	if len(known) != 1 {
		t.Errorf("node4 (--max-peers 1) knows the descriptions of %v: want its one chosen peer's", known)
	}

	// A pod that goes takes its agent out of the others' targets.
	if err := admin.CoreV1().Pods("gorping").Delete(ctx, "gorping-mesh-3", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	a1.wait(t, `gorping_members_kubernetes`, eq(2))
	a1.wait(t, `gorping_targets{source="rails"}`, eq(2))
}

// /agent carries an ETag; a request with it gets a 304 and no body while the description
// has not changed, and discovery's reads of an unchanged peer are those 304s.
func TestAgentConditional(t *testing.T) {
	fn := railNet(2)
	ports := []int{meshtest.FreePort(t), meshtest.FreePort(t)}
	all := agentAddr(ports[0]) + "," + agentAddr(ports[1])
	a1 := railAgent(t, "node1", twoRails(t, 1), fn, ports[0], "--agents", all)
	a2 := railAgent(t, "node2", twoRails(t, 2), fn, ports[1], "--agents", all)
	resp, err := a2.Client.Get(a2.URL("/agent"))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	etag := resp.Header.Get("ETag")
	if resp.StatusCode != 200 || !strings.HasPrefix(etag, `"`) {
		t.Fatalf("/agent: %s, ETag %q", resp.Status, etag)
	}
	req, _ := http.NewRequest(http.MethodGet, a2.URL("/agent"), nil)
	req.Header.Set("If-None-Match", etag)
	resp, err = a2.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotModified || len(body) != 0 {
		t.Errorf("/agent with its ETag: %s and %d bytes, want 304 and none", resp.Status, len(body))
	}
	// node1 keeps reading node2 (every 100 ms), now conditionally: node2 stays up.
	a1.wait(t, `gorping_peer_up{peer="node2"}`, eq(1))
	a1.wait(t, `gorping_agent_fetches_total`, ge(10))
	a1.wait(t, `gorping_peer_up{peer="node2"}`, eq(1))
	// A 304 that discovery did not take would be an http_status failure, and peer down.
	a1.wait(t, `gorping_agent_fetch_failures_total{reason="http_status"}`, eq(0))
	a1.wait(t, `gorping_agent_fetch_failures_total{reason="bad_description"}`, eq(0))
}
