package members

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/gorping/gorping/mesh/pinglist"
)

// DefaultGroupLabel is the pod label whose value is an agent's group: the node's zone,
// which Kubernetes copies onto the pods it binds there (PodTopologyLabels admission), the
// label the DaemonSet's --group=$(GORPING_GROUP) reads too.
const DefaultGroupLabel = "topology.kubernetes.io/zone"

// podScheme knows core/v1 and the list options only.
var (
	podScheme = func() *runtime.Scheme {
		s := runtime.NewScheme()
		if err := corev1.AddToScheme(s); err != nil {
			panic(err)
		}
		metav1.AddToGroupVersion(s, corev1.SchemeGroupVersion)
		return s
	}()
	podCodecs = serializer.NewCodecFactory(podScheme)
	podParams = runtime.NewParameterCodec(podScheme)
)

// DefaultTimeout bounds one list, and the wait for a watch to start, before the API
// server is said not to answer (the informer keeps trying; the members stay).
const DefaultTimeout = 30 * time.Second

// KubernetesConfig is where the agents' pods are and how to read them.
type KubernetesConfig struct {
	REST       *rest.Config // the API server and credentials (rest.InClusterConfig in a pod)
	Namespace  string       // the agents' namespace
	Selector   string       // label selector of the agents' pods
	GroupLabel string       // the pod label of the group; "": DefaultGroupLabel
	Port       uint16       // the agents' listener port
	Timeout    time.Duration
	Log        *slog.Logger          // nil: discard
	Registerer prometheus.Registerer // nil: no metrics
}

// Kubernetes is the membership the API server gives: the Running pods that match the
// selector, each a member named after its node (spec.nodeName, what the DaemonSet gives
// --agent-name), in the group of its group label, at its pod IP (the node's IP on the
// host network). One list, then a watch: the API server sends changes only, whatever the
// refresh of the agents. An API server that is slow or gone leaves the last members in
// place; that is logged once per outage and in gorping_members_kubernetes_up.
type Kubernetes struct {
	cfg      KubernetesConfig
	client   *rest.RESTClient // core/v1
	selector string
	log      *slog.Logger
	informer cache.SharedIndexInformer
	changed  chan struct{} // a value when the members may have changed

	mu      sync.Mutex
	up      bool   // the last list or watch started
	down    bool   // an outage has been logged
	lastErr string // the last failure, logged once per outage
	dirty   bool
	snap    []Member
	badLog  map[string]string // pod -> the problem logged for it

	mUp      prometheus.Gauge
	mMembers prometheus.Gauge
	mErrors  prometheus.Counter
}

// NewKubernetes checks cfg and makes the source; Run reads the API server.
func NewKubernetes(cfg KubernetesConfig) (*Kubernetes, error) {
	if cfg.REST == nil {
		return nil, errors.New("no API server configuration")
	}
	if cfg.Namespace == "" {
		return nil, errors.New("no namespace")
	}
	if err := CheckSelector(cfg.Selector); err != nil {
		return nil, fmt.Errorf("label selector %q: %w", cfg.Selector, err)
	}
	sel, _ := labels.Parse(cfg.Selector)
	if cfg.GroupLabel == "" {
		cfg.GroupLabel = DefaultGroupLabel
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Port == 0 {
		return nil, errors.New("no port")
	}
	rc := rest.CopyConfig(cfg.REST)
	if rc.UserAgent == "" {
		rc.UserAgent = "gorping-mesh"
	}
	// Protobuf, not JSON: a list of the fleet's pods is a third of the bytes.
	rc.ContentType = "application/vnd.kubernetes.protobuf"
	rc.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	// A REST client with core/v1 alone: the typed clientset's scheme registers every API
	// group, 37 MB of the binary.
	rc.APIPath, rc.GroupVersion, rc.NegotiatedSerializer = "/api", &corev1.SchemeGroupVersion, podCodecs.WithoutConversion()
	c, err := rest.RESTClientFor(rc)
	if err != nil {
		return nil, fmt.Errorf("API server: %w", err)
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	k := &Kubernetes{cfg: cfg, client: c, selector: sel.String(), log: log,
		changed: make(chan struct{}, 1), badLog: map[string]string{},
		mUp: prometheus.NewGauge(prometheus.GaugeOpts{Name: "gorping_members_kubernetes_up",
			Help: "1 while the Kubernetes API server answers the agent's pod list and watch, 0 while the agent probes the members it had."}),
		mMembers: prometheus.NewGauge(prometheus.GaugeOpts{Name: "gorping_members_kubernetes",
			Help: "Agents (Running pods of --agents.kubernetes) the API server lists."}),
		mErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "gorping_members_kubernetes_errors_total",
			Help: "Pod lists and watches that failed or did not start within their bound."}),
	}
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{k.mUp, k.mMembers, k.mErrors} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, err
			}
		}
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = k.selector
			ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
			defer cancel()
			l := &corev1.PodList{}
			err := k.client.Get().Namespace(cfg.Namespace).Resource("pods").VersionedParams(&o, podParams).Do(ctx).Into(l)
			k.answer("list", err)
			if err != nil {
				return nil, err
			}
			return l, nil
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = k.selector
			return k.watch(ctx, o)
		},
	}
	k.informer = cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{})
	// Keep of each pod only what a member needs: 100,000 full pods would be hundreds of MB.
	if err := k.informer.SetTransform(k.strip); err != nil {
		return nil, err
	}
	if err := k.informer.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		k.answer("watch", err)
	}); err != nil {
		return nil, err
	}
	mark := func(any) { k.touch() }
	if _, err := k.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: mark,
		UpdateFunc: func(_, _ any) { k.touch() }, DeleteFunc: mark}); err != nil {
		return nil, err
	}
	return k, nil
}

// watch starts a watch; one that has not started within the bound is said to be an
// outage, and it goes on waiting (the informer's own backoff decides retries).
func (k *Kubernetes) watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	type res struct {
		w   watch.Interface
		err error
	}
	ch := make(chan res, 1)
	go func() {
		o.Watch = true
		w, err := k.client.Get().Namespace(k.cfg.Namespace).Resource("pods").VersionedParams(&o, podParams).Watch(ctx)
		ch <- res{w, err}
	}()
	t := time.NewTimer(k.cfg.Timeout)
	defer t.Stop()
	select {
	case r := <-ch:
		k.answer("watch", r.err)
		return r.w, r.err
	case <-t.C:
		k.answer("watch", fmt.Errorf("no answer within %s", k.cfg.Timeout))
	}
	r := <-ch
	k.answer("watch", r.err)
	return r.w, r.err
}

// answer records how the API server answered: a failure is logged once per outage, and
// the end of an outage once.
func (k *Kubernetes) answer(what string, err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if err == nil || errors.Is(err, context.Canceled) {
		if err == nil && !k.up {
			k.up = true
			k.mUp.Set(1)
			if k.down {
				k.log.Info("the Kubernetes API server answers again", "namespace", k.cfg.Namespace, "selector", k.selector)
			}
			k.down, k.lastErr = false, ""
		}
		return
	}
	k.mErrors.Inc()
	k.up = false
	k.mUp.Set(0)
	if !k.down {
		k.down, k.lastErr = true, err.Error()
		k.log.Warn("the Kubernetes API server does not answer: probing the agents it listed last",
			"request", what, "namespace", k.cfg.Namespace, "selector", k.selector, "agents", len(k.informer.GetStore().ListKeys()), "err", err)
	}
}

// podMember is what the informer keeps of a pod: its key, and what a member needs. A
// *corev1.Pod, even emptied, is 1.8 KB a pod (18 MB at 10,000 agents, 180 MB at 100,000).
type podMember struct {
	metav1.ObjectMeta // Name, Namespace and DeletionTimestamp only: the store's key
	node, ip, group   string
	running           bool
}

func (p *podMember) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

func (p *podMember) DeepCopyObject() runtime.Object {
	c := *p
	p.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	return &c
}

// strip keeps of a pod what a member needs.
func (k *Kubernetes) strip(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil // a tombstone: the informer's own
	}
	s := &podMember{node: p.Spec.NodeName, ip: p.Status.PodIP, group: p.Labels[k.cfg.GroupLabel],
		running: p.Status.Phase == corev1.PodRunning}
	s.Name, s.Namespace, s.DeletionTimestamp = p.Name, p.Namespace, p.DeletionTimestamp
	return s, nil
}

func (k *Kubernetes) touch() {
	k.mu.Lock()
	k.dirty = true
	k.mu.Unlock()
	select {
	case k.changed <- struct{}{}:
	default:
	}
}

// Run reads the API server until ctx ends.
func (k *Kubernetes) Run(ctx context.Context) {
	// client-go's own lines would repeat every retry; this package says things once.
	ctx = klog.NewContext(ctx, logr.Discard())
	k.informer.RunWithContext(ctx)
}

// Synced reports whether the first list has been read.
func (k *Kubernetes) Synced() bool { return k.informer.HasSynced() }

// Up reports whether the last list or watch started.
func (k *Kubernetes) Up() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.up
}

// Changed has a value when the members may have changed since Members was last called.
func (k *Kubernetes) Changed() <-chan struct{} { return k.changed }

// Members are the agents, by name: one per node (the oldest pod's, by name, when a node
// briefly has two), at most pinglist.MaxMembers. A pod that cannot be a member (no IP
// yet, not Running, a name or group the pinglist refuses) is left out; a bad name or
// group is logged once. The slice is shared until the next change: do not modify it.
func (k *Kubernetes) Members() []Member {
	k.mu.Lock()
	if !k.dirty && k.snap != nil {
		s := k.snap
		k.mu.Unlock()
		return s
	}
	k.dirty = false
	k.mu.Unlock()
	objs := k.informer.GetStore().List()
	type cand struct {
		pod string
		m   Member
	}
	cs := make([]cand, 0, len(objs))
	port := strconv.Itoa(int(k.cfg.Port))
	var bad []string
	for _, o := range objs {
		p, ok := o.(*podMember)
		if !ok || p.DeletionTimestamp != nil || !p.running || p.ip == "" || p.node == "" {
			continue
		}
		m := Member{Name: p.node, Group: p.group, Addr: net.JoinHostPort(p.ip, port)}
		if err := errors.Join(pinglist.CheckHost(m.Name), pinglist.CheckGroup(m.Group)); err != nil {
			bad = append(bad, p.Name, err.Error())
			continue
		}
		cs = append(cs, cand{p.Name, m})
	}
	slices.SortFunc(cs, func(a, b cand) int {
		if a.m.Name != b.m.Name {
			return strings.Compare(a.m.Name, b.m.Name)
		}
		return strings.Compare(a.pod, b.pod)
	})
	out := make([]Member, 0, len(cs))
	for i, c := range cs {
		if i > 0 && cs[i-1].m.Name == c.m.Name {
			continue
		}
		if len(out) == pinglist.MaxMembers {
			bad = append(bad, "", fmt.Sprintf("more than %d agents: the rest are left out", pinglist.MaxMembers))
			break
		}
		out = append(out, c.m)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	seen := map[string]string{}
	for i := 0; i < len(bad); i += 2 {
		seen[bad[i]] = bad[i+1]
		if k.badLog[bad[i]] != bad[i+1] {
			k.log.Warn("a pod of --agents.kubernetes cannot be a member", "pod", bad[i], "err", bad[i+1])
		}
	}
	k.badLog = seen
	k.snap = out
	k.mMembers.Set(float64(len(out)))
	return out
}

// CheckSelector says why s cannot select the agents' pods, or nil.
func CheckSelector(s string) error {
	sel, err := labels.Parse(s)
	if err != nil {
		return fmt.Errorf("not a label selector: %w", err)
	}
	if sel.Empty() {
		return errors.New("selects every pod: name the agents' label (app.kubernetes.io/name=gorping-mesh)")
	}
	return nil
}

// serviceAccountNamespace is where a pod's service account's namespace is mounted.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// InCluster is the API server and credentials of the pod this runs in, and its namespace.
func InCluster() (*rest.Config, string, error) {
	c, err := rest.InClusterConfig()
	if err != nil {
		return nil, "", fmt.Errorf("not in a Kubernetes pod with a service account: %w", err)
	}
	ns, err := os.ReadFile(serviceAccountNamespace)
	if err != nil {
		return nil, "", fmt.Errorf("the pod's namespace: %w", err)
	}
	return c, strings.TrimSpace(string(ns)), nil
}
