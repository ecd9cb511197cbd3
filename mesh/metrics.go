package mesh

import (
	"runtime"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

const namespace = "gorping"

// rttBuckets are the classic buckets of the RTT histograms: 1 µs to 262 ms in steps of
// ×4. RDMA round trips are microseconds (smokeping's 50 µs start is too coarse for
// them); the native histogram beside them resolves ~9 % steps (factor 1.1) without a
// series per bucket.
var rttBuckets = prometheus.ExponentialBuckets(1e-6, 4, 10)

func rttHistogramOpts(help string) prometheus.HistogramOpts {
	return prometheus.HistogramOpts{
		Namespace: namespace, Name: "probe_rtt_seconds", Help: help,
		Buckets:                         rttBuckets,
		NativeHistogramBucketFactor:     1.1,
		NativeHistogramMaxBucketNumber:  160,
		NativeHistogramMinResetDuration: time.Hour,
	}
}

// metrics are the agent's collectors, registered on its own registry. Per target (label
// target="host:port"): the RTT histogram, probes, failures by reason, up, connections and
// the path (local device and port, node_exporter's infiniband labels) — 5 series plus one
// per failure reason seen, the histogram counted as one native histogram.
type metrics struct {
	reg         *prometheus.Registry
	rtt         *prometheus.HistogramVec
	probes      *prometheus.CounterVec
	failures    *prometheus.CounterVec
	up          *prometheus.GaugeVec
	connections *prometheus.CounterVec
	path        *prometheus.GaugeVec

	targets         *prometheus.GaugeVec
	configErrors    *prometheus.CounterVec
	badLines        prometheus.Gauge
	ignored         *prometheus.GaugeVec
	responderUp     prometheus.Gauge
	responderStarts prometheus.Counter
	probeRequests   *prometheus.CounterVec
	slotDelay       prometheus.Histogram
	agentInfo       *prometheus.GaugeVec
	peerUp          *prometheus.GaugeVec
	peerInfo        *prometheus.GaugeVec
	fetches         prometheus.Counter
	fetchFailures   *prometheus.CounterVec
	agentsBadLines  prometheus.Gauge
	railProblems    *prometheus.GaugeVec
}

func newMetrics(version string) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	// Every per-target series has target, and device, port (the local rail) and peer
	// (the peer agent) for the rail targets; those are empty, so absent in Prometheus,
	// for direct targets.
	tl := []string{"target", "device", "port", "peer"}
	m.rtt = prometheus.NewHistogramVec(rttHistogramOpts(
		"Round-trip time of successful rping pings to the target (both adverts, the RDMA READ and WRITE, both go-aheads)."), tl)
	m.probes = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "probes_total",
		Help: "Probe slots of the target, one per interval; each either succeeds (an RTT) or fails (a reason)."}, tl)
	m.failures = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "probe_failures_total",
		Help: "Probe slots of the target that failed, by reason (a completion status name, connect_refused, timeout, ...)."},
		[]string{"target", "device", "port", "peer", "reason"})
	m.up = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "target_up",
		Help: "1 if the target's last probe succeeded, else 0."}, tl)
	m.connections = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "connections_total",
		Help: "RC connections established to the target (the first and every re-establishment)."}, tl)
	m.path = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "target_path_info",
		Help: "The local RDMA device and port of the target's latest connection (labels as node_exporter's infiniband collector); always 1."},
		tl)
	m.targets = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "targets",
		Help: "Targets probed, by the source that names them (file, peers, dns; rails: the peer agents' rails)."}, []string{"source"})
	m.configErrors = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "target_config_errors_total",
		Help: "Problems with the target sources, once per change: a target file that cannot be read or is refused (read), a DNS name that does not resolve (resolve)."},
		[]string{"source", "reason"})
	m.badLines = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: "target_file_bad_lines",
		Help: "Lines of the current target file that do not parse (each logged once when the file changes)."})
	m.ignored = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "targets_ignored",
		Help: "Targets the sources name but the agent does not probe, by reason (max_targets: beyond --max-targets)."}, []string{"reason"})
	m.ignored.WithLabelValues("max_targets")
	m.responderUp = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: "responder_up",
		Help: "1 while the agent's rping responder listens, else 0."})
	m.responderStarts = prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "responder_starts_total",
		Help: "Times the rping responder's listener came up."})
	m.probeRequests = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "probe_requests_total",
		Help: "Requests of /probe, by outcome (ok, refused: target not allowed, busy, bad_request, cancelled: at shutdown)."}, []string{"outcome"})
	m.slotDelay = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Name: "probe_slot_delay_seconds",
		Help:    "How late probe slots start after their due time, all targets together (an overloaded agent's slots run late).",
		Buckets: prometheus.ExponentialBuckets(1e-5, 4, 9), NativeHistogramBucketFactor: 1.1,
		NativeHistogramMaxBucketNumber: 160, NativeHistogramMinResetDuration: time.Hour})
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "build_info",
		Help: "gorping's version and the Go version it was built with; always 1."}, []string{"version", "goversion"})
	build.WithLabelValues(version, runtime.Version()).Set(1)
	m.agentInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "agent_info",
		Help: "This agent's name (agent), pinglist group and version, as its description (/agent) gives them; always 1."},
		[]string{"agent", "group", "version"})
	m.peerUp = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "peer_up",
		Help: "1 if the peer agent's /agent answered the last time it was read, else 0; by the peer's name (its address until it has answered once). A peer that stops answering keeps its rails for --agents-keep."},
		[]string{"peer"})
	m.peerInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "peer_info",
		Help: "A known peer agent's group and version, from its description; always 1."}, []string{"peer", "peer_group", "peer_version"})
	m.fetches = prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "agent_fetches_total",
		Help: "Reads of peer agents' /agent, answered or not."})
	m.fetchFailures = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "agent_fetch_failures_total",
		Help: "Reads of a peer agent's /agent that failed, by reason (unreachable, timeout, unauthorized, http_status, bad_description)."},
		[]string{"reason"})
	m.agentsBadLines = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: "agents_file_bad_lines",
		Help: "Lines of the current --agents-file that do not parse (each logged once when the file changes)."})
	m.railProblems = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "rail_problems",
		Help: "Pairs of a local rail and a probed peer (or its rail) that cannot be probed, by reason (self, no_rail_in_subnet, gid_family, link_layer); each logged once."},
		[]string{"reason"})
	m.reg.MustRegister(m.rtt, m.probes, m.failures, m.up, m.connections, m.path, m.targets, m.configErrors, m.badLines, m.ignored,
		m.responderUp, m.responderStarts, m.probeRequests, m.slotDelay, build, m.agentInfo,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, s := range []string{sourceFile, sourcePeers, sourceDNS, sourceRails} {
		m.targets.WithLabelValues(s)
	}
	for _, o := range []string{"ok", "refused", "busy", "bad_request", "cancelled"} {
		m.probeRequests.WithLabelValues(o)
	}
	return m
}

// registerDiscovery registers the discovery's series: only agents that discover peers
// (--agents, --agents-file, --agents-dns) have them.
func (m *metrics) registerDiscovery() {
	for _, r := range fetchReasons {
		m.fetchFailures.WithLabelValues(r)
	}
	for _, r := range railProblemReasons {
		m.railProblems.WithLabelValues(r)
	}
	m.reg.MustRegister(m.peerUp, m.peerInfo, m.fetches, m.fetchFailures, m.agentsBadLines, m.railProblems)
}

// targetMetrics are one target's children, looked up once so that recording a probe
// allocates nothing.
type targetMetrics struct {
	m           *metrics
	labels      []string // target, device, port, peer
	key         string
	rtt         prometheus.Observer
	probes      prometheus.Counter
	up          prometheus.Gauge
	connections prometheus.Counter
	failures    map[string]prometheus.Counter // by reason: the ones the target has had
	device      string
	port        string
}

func (m *metrics) forTarget(t target) *targetMetrics {
	port := ""
	if t.Device != "" {
		port = strconv.Itoa(t.DevPort)
	}
	l := []string{t.Key(), t.Device, port, t.Peer}
	tm := &targetMetrics{m: m, labels: l, key: l[0], rtt: m.rtt.WithLabelValues(l...), probes: m.probes.WithLabelValues(l...),
		up: m.up.WithLabelValues(l...), connections: m.connections.WithLabelValues(l...),
		failures: map[string]prometheus.Counter{}}
	tm.up.Set(0)
	return tm
}

func (tm *targetMetrics) success(rtt time.Duration) {
	tm.probes.Inc()
	tm.rtt.Observe(rtt.Seconds())
	tm.up.Set(1)
}

func (tm *targetMetrics) failure(reason string) { tm.failed(reason, 1) }

// failed records n failed slots with reason.
func (tm *targetMetrics) failed(reason string, n int) {
	c, ok := tm.failures[reason]
	if !ok {
		c = tm.m.failures.WithLabelValues(tm.labels[0], tm.labels[1], tm.labels[2], tm.labels[3], reason)
		tm.failures[reason] = c
	}
	tm.probes.Add(float64(n))
	c.Add(float64(n))
	tm.up.Set(0)
}

// connected records a new connection and its local device and port.
func (tm *targetMetrics) connected(device, port string) {
	tm.connections.Inc()
	if device == tm.device && port == tm.port {
		return
	}
	if tm.device != "" {
		tm.m.path.DeleteLabelValues(tm.key, tm.device, tm.port, tm.labels[3])
	}
	tm.device, tm.port = device, port
	tm.m.path.WithLabelValues(tm.key, device, port, tm.labels[3]).Set(1)
}

// remove deletes every series of the target (it left the target list), each by its
// exact labels: DeletePartialMatch scans every series of a vector, which made removing
// n targets O(n²) (10,000 targets: minutes, holding the vectors' locks against scrapes).
// The target's loop has ended: nothing records for it any more.
func (tm *targetMetrics) remove() {
	l := tm.labels
	tm.m.rtt.DeleteLabelValues(l...)
	tm.m.probes.DeleteLabelValues(l...)
	tm.m.up.DeleteLabelValues(l...)
	tm.m.connections.DeleteLabelValues(l...)
	for reason := range tm.failures {
		tm.m.failures.DeleteLabelValues(l[0], l[1], l[2], l[3], reason)
	}
	if tm.device != "" {
		tm.m.path.DeleteLabelValues(tm.key, tm.device, tm.port, l[3])
	}
}
