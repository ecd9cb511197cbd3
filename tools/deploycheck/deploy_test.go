package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

const root = "../.."

// build runs kustomize over dir (what kubectl apply -k does) and decodes every object
// strictly into its Go type by kind: an unknown field, a wrong type or an unknown kind
// fails.
func build(t *testing.T, dir string) map[string]any {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(root, dir))
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	objs := map[string]any{}
	for _, r := range res.Resources() {
		y, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		var obj any
		switch gvk := r.GetApiVersion() + "/" + r.GetKind(); gvk {
		case "v1/Namespace":
			obj = &corev1.Namespace{}
		case "v1/Service":
			obj = &corev1.Service{}
		case "apps/v1/DaemonSet":
			obj = &appsv1.DaemonSet{}
		case "v1/ServiceAccount":
			obj = &corev1.ServiceAccount{}
		case "rbac.authorization.k8s.io/v1/Role":
			obj = &rbacv1.Role{}
		case "rbac.authorization.k8s.io/v1/RoleBinding":
			obj = &rbacv1.RoleBinding{}
		case "monitoring.coreos.com/v1/PodMonitor":
			obj = &monitoringv1.PodMonitor{}
		case "monitoring.coreos.com/v1/PrometheusRule":
			obj = &monitoringv1.PrometheusRule{}
		default:
			t.Fatalf("%s: %s %s: no Go type to check it against", dir, gvk, r.GetName())
		}
		if err := yaml.UnmarshalStrict(y, obj); err != nil {
			t.Errorf("%s: %s %s does not decode strictly: %v", dir, r.GetKind(), r.GetName(), err)
		}
		objs[r.GetKind()] = obj
	}
	return objs
}

// Strict decoding has teeth: a misspelt field fails.
func TestStrictDecodeRejectsUnknownFields(t *testing.T) {
	var ds appsv1.DaemonSet
	bad := "apiVersion: apps/v1\nkind: DaemonSet\nspec:\n  template:\n    spec:\n      nodeSelectr: {a: b}\n"
	if err := yaml.UnmarshalStrict([]byte(bad), &ds); err == nil || !strings.Contains(err.Error(), "nodeSelectr") {
		t.Errorf("a misspelt field decoded: %v", err)
	}
}

func TestMeshManifests(t *testing.T) {
	objs := build(t, "deploy/kubernetes")
	ds, _ := objs["DaemonSet"].(*appsv1.DaemonSet)
	svc, _ := objs["Service"].(*corev1.Service)
	if ds == nil || svc == nil || objs["Namespace"] == nil {
		t.Fatalf("want a Namespace, a Service and a DaemonSet, have %v", objs)
	}
	spec := ds.Spec.Template.Spec
	if !spec.HostNetwork || spec.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
		t.Error("DaemonSet: want hostNetwork with dnsPolicy ClusterFirstWithHostNet (to resolve the Service)")
	}
	if len(spec.NodeSelector) == 0 && spec.Affinity == nil {
		t.Error("DaemonSet: no nodeSelector or affinity: pods on nodes without RDMA hang Pending")
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers", len(spec.Containers))
	}
	c := spec.Containers[0]
	// The image is the one kustomization.yaml names (the README says how to push it).
	if !strings.HasSuffix(strings.Split(c.Image, ":")[0], "/gorping") || !strings.Contains(c.Image, ":") {
		t.Errorf("image %q: not REGISTRY/gorping:TAG as kustomization.yaml sets it", c.Image)
	}
	if len(c.Args) == 0 || c.Args[0] != "mesh" {
		t.Errorf("container args %v do not start with mesh", c.Args)
	}
	// The peers come from the API server: the DaemonSet's own pods, by its selector.
	sel := metav1.FormatLabelSelector(ds.Spec.Selector)
	if !slices.Contains(c.Args, "--agents.kubernetes="+sel) && !slices.Contains(c.Args, "--agents-kubernetes="+sel) {
		t.Errorf("args %v do not discover peer agents as the DaemonSet's pods (--agents.kubernetes=%s)", c.Args, sel)
	}
	// --agents.kubernetes reads every agent's /agent on the listener's default port: the
	// listener and the Service's port must be it.
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 10174 || !slices.Contains(c.Args, "--web.listen-address=:10174") {
		t.Errorf("Service ports %+v, args %v: want the agents' listener port 10174, which --agents.kubernetes assumes", svc.Spec.Ports, c.Args)
	}
	checkRBAC(t, objs, ds)
	// Kubernetes expands $(VAR) in args only for the container's own env (an unknown one
	// stays literal and would become the agent's name or group).
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	for _, a := range c.Args {
		for _, m := range regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`).FindAllStringSubmatch(a, -1) {
			if _, ok := env[m[1]]; !ok {
				t.Errorf("arg %q uses $(%s), which the container's env does not define", a, m[1])
			}
		}
	}
	if e, ok := env["GORPING_GROUP"]; !ok || e.ValueFrom == nil || e.ValueFrom.FieldRef == nil ||
		!strings.HasPrefix(e.ValueFrom.FieldRef.FieldPath, "metadata.labels['") {
		t.Errorf("GORPING_GROUP %+v: want the pod's topology label (downward API metadata.labels['...'])", e)
	}
	if !slices.Contains(c.Args, "--group=$(GORPING_GROUP)") || !slices.Contains(c.Args, "--agent-name=$(NODE_NAME)") {
		t.Errorf("args %v: want --agent-name=$(NODE_NAME) and --group=$(GORPING_GROUP)", c.Args)
	}
	probe := func(p *corev1.Probe, path string) {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path || p.HTTPGet.Port != intstr.FromString("metrics") {
			t.Errorf("probe %+v: want GET %s on the metrics port", p, path)
		}
	}
	probe(c.ReadinessProbe, "/-/ready")
	probe(c.LivenessProbe, "/-/healthy")
	// exporter-toolkit's web configuration covers every path: an agent with basic auth
	// needs probes that send credentials, or the kubelet restarts it for ever.
	if slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--web.config.file") }) {
		for name, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
			if p == nil || p.HTTPGet == nil || !slices.ContainsFunc(p.HTTPGet.HTTPHeaders, func(h corev1.HTTPHeader) bool { return h.Name == "Authorization" }) {
				t.Errorf("%s probe sends no Authorization header to an agent with --web.config.file", name)
			}
		}
	}
	// Hardened: non-root, no privilege escalation, read-only root, no capability beyond
	// the ones it names.
	psc, sc := spec.SecurityContext, c.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != 65532 {
		t.Errorf("pod securityContext %+v: want runAsNonRoot, user 65532 (the image's)", psc)
	}
	if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 {
		t.Errorf("container securityContext %+v: want no privilege escalation, a read-only root, capabilities drop ALL", sc)
	}
	hasRDMA := false
	for k := range c.Resources.Limits {
		hasRDMA = hasRDMA || strings.HasPrefix(string(k), "rdma/")
	}
	if !hasRDMA {
		t.Errorf("limits %v ask for no RDMA device-plugin resource", c.Resources.Limits)
	}
	mounted := false
	for _, vm := range c.VolumeMounts {
		mounted = mounted || vm.MountPath == "/dev/infiniband"
	}
	if !mounted {
		t.Error("/dev/infiniband is not mounted")
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Error("the Service is not headless (clusterIP: None)")
	}
	for k, v := range svc.Spec.Selector {
		if ds.Spec.Template.Labels[k] != v {
			t.Errorf("the Service selects %s=%v, the pods have %v", k, v, ds.Spec.Template.Labels[k])
		}
	}
}

// checkRBAC: the pods run as a service account bound to a Role that grants exactly what
// the agent reads (mesh/members: a list and a watch of the pods of its namespace) and
// nothing more; the members' tests read a real API server as that account.
func checkRBAC(t *testing.T, objs map[string]any, ds *appsv1.DaemonSet) {
	t.Helper()
	sa, _ := objs["ServiceAccount"].(*corev1.ServiceAccount)
	role, _ := objs["Role"].(*rbacv1.Role)
	rb, _ := objs["RoleBinding"].(*rbacv1.RoleBinding)
	if sa == nil || role == nil || rb == nil {
		t.Fatalf("want a ServiceAccount, a Role and a RoleBinding, have %v", objs)
	}
	if objs["ClusterRole"] != nil || objs["ClusterRoleBinding"] != nil {
		t.Error("a cluster-wide role: the agent reads its own namespace only")
	}
	spec := ds.Spec.Template.Spec
	if spec.ServiceAccountName != sa.Name || sa.Namespace != ds.Namespace {
		t.Errorf("the DaemonSet runs as %q, the ServiceAccount is %s/%s", spec.ServiceAccountName, sa.Namespace, sa.Name)
	}
	if spec.AutomountServiceAccountToken != nil && !*spec.AutomountServiceAccountToken {
		t.Error("automountServiceAccountToken false: the agent cannot authenticate to the API server")
	}
	want := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "watch"}}}
	if role.Namespace != ds.Namespace || len(role.Rules) != 1 || !slices.Equal(role.Rules[0].APIGroups, want[0].APIGroups) ||
		!slices.Equal(role.Rules[0].Resources, want[0].Resources) || !slices.Equal(role.Rules[0].Verbs, want[0].Verbs) ||
		len(role.Rules[0].ResourceNames) != 0 || len(role.Rules[0].NonResourceURLs) != 0 {
		t.Errorf("Role %s/%s rules %+v: want exactly %+v in the DaemonSet's namespace", role.Namespace, role.Name, role.Rules, want)
	}
	if rb.Namespace != ds.Namespace || rb.RoleRef != (rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}) ||
		!slices.Equal(rb.Subjects, []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: sa.Namespace}}) {
		t.Errorf("RoleBinding %+v: want the Role %s bound to the ServiceAccount %s/%s only", rb, role.Name, sa.Namespace, sa.Name)
	}
}

func TestOperatorObjects(t *testing.T) {
	objs := build(t, "deploy/kubernetes/prometheus-operator")
	pm, _ := objs["PodMonitor"].(*monitoringv1.PodMonitor)
	pr, _ := objs["PrometheusRule"].(*monitoringv1.PrometheusRule)
	if pm == nil || pr == nil {
		t.Fatalf("want a PodMonitor and a PrometheusRule, have %v", objs)
	}
	mesh := build(t, "deploy/kubernetes")
	ds := mesh["DaemonSet"].(*appsv1.DaemonSet)
	if pm.Namespace != ds.Namespace {
		t.Errorf("PodMonitor in %q, the DaemonSet in %q", pm.Namespace, ds.Namespace)
	}
	for k, v := range pm.Spec.Selector.MatchLabels {
		if ds.Spec.Template.Labels[k] != v {
			t.Errorf("the PodMonitor selects %s=%v, the pods have %v", k, v, ds.Spec.Template.Labels[k])
		}
	}
	// The job label is the pods' app name: gorping-mesh, which GorpingAgentDown selects.
	if job := ds.Spec.Template.Labels[pm.Spec.JobLabel]; !strings.HasPrefix(job, "gorping-mesh") {
		t.Errorf("PodMonitor jobLabel %q gives job %q; GorpingAgentDown selects gorping-mesh.*", pm.Spec.JobLabel, job)
	}
	ports := map[string]bool{}
	for _, p := range ds.Spec.Template.Spec.Containers[0].Ports {
		ports[p.Name] = true
	}
	for _, ep := range pm.Spec.PodMetricsEndpoints {
		if ep.Port == nil || !ports[*ep.Port] {
			t.Errorf("PodMonitor endpoint port %v is not a container port of the DaemonSet (%v)", ep.Port, ports)
		}
	}
	alerts := 0
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				alerts++
			}
		}
	}
	if alerts < 4 {
		t.Errorf("the PrometheusRule has %d alerts", alerts)
	}
}

// The generated files are what Generate makes of the rules file now.
func TestGeneratedCurrent(t *testing.T) {
	files, err := Generate(root)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(root, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s is not what %s makes (make deploy-update): %v", name, RulesFile, err)
		}
	}
}
