package mesh

import (
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	buildinfo "github.com/prometheus/client_golang/prometheus/collectors/version"

	"github.com/gorping/gorping/mesh/discovery"
	"github.com/gorping/gorping/mesh/probe"
	"github.com/gorping/gorping/mesh/target"
	"github.com/gorping/gorping/rping"
)

const namespace = "gorping"

// rttBuckets are the classic buckets of the RTT histograms: 1 µs to 262 ms in steps of
// ×4. RDMA round trips are microseconds (smokeping's 50 µs start is too coarse for
// them); the native histogram beside them resolves ~9 % steps (factor 1.1) without a
// series per bucket.
var rttBuckets = prometheus.ExponentialBuckets(1e-6, 4, 10)

func rttHistogramOpts(help string) prometheus.HistogramOpts {
	return histogramOpts("probe_rtt_seconds", help)
}

// histogramOpts are the options of the RTT histograms and of the NIC split's parts:
// the same buckets, so that they compare bucket by bucket.
func histogramOpts(name, help string) prometheus.HistogramOpts {
	return prometheus.HistogramOpts{
		Namespace: namespace, Name: name, Help: help,
		Buckets:                         rttBuckets,
		NativeHistogramBucketFactor:     1.1,
		NativeHistogramMaxBucketNumber:  160,
		NativeHistogramMinResetDuration: time.Hour,
	}
}

// metrics are the agent's collectors, registered on its own registry. Per target (label
// target="host:port"): the RTT histogram, probes, failures by reason, up, connections,
// the path (local device and port, node_exporter's infiniband labels) and ts_source (from
// the first connection on) — 6 series plus one per failure reason seen, a histogram
// counted as one native histogram; a target whose connection has NIC completion
// timestamps (ts_source="nic", mlx5) has 2 more, the histograms of its RTT's NIC-timed
// and host parts. With --paths K of 2 or more, one more per target (paths up) and per path
// (label path="0".."K-1"): up, probes, info (its QPs and UDP source port), plus one per
// failure reason it has had.
type metrics struct {
	reg         *prometheus.Registry
	rtt         *prometheus.HistogramVec
	probes      *prometheus.CounterVec
	failures    *prometheus.CounterVec
	up          *prometheus.GaugeVec
	connections *prometheus.CounterVec
	deadConns   *prometheus.CounterVec
	path        *prometheus.GaugeVec
	tsSource    *prometheus.GaugeVec
	networkRTT  *prometheus.HistogramVec // ts_source="nic" only
	hostRTT     *prometheus.HistogramVec

	targetPathsUp *prometheus.GaugeVec
	pathUp        *prometheus.GaugeVec
	pathProbes    *prometheus.CounterVec
	pathFailures  *prometheus.CounterVec
	pathInfo      *prometheus.GaugeVec

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
	nameConflicts   prometheus.Gauge

	// byID are the running targets' records, by target.ID: the landing page reads their
	// paths' reasons and RTT histograms.
	mu   sync.Mutex
	byID map[string]*targetMetrics
}

func newMetrics(version string) *metrics {
	m := &metrics{reg: prometheus.NewRegistry(), byID: map[string]*targetMetrics{}}
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
	m.deadConns = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "dead_connections_total",
		Help: "Connections to the target that were established but whose first ping (bounded by --connect-timeout) failed: the CM's handshake crossed the fabric, the connection's own flow (QPs, UDP source port) did not, as on a black-holed ECMP member."}, tl)
	m.path = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "target_path_info",
		Help: "The local RDMA device and port of the target's latest connection (labels as node_exporter's infiniband collector); always 1."},
		tl)
	// The NIC split (rping.Prober.LastSplit): vectors without children export nothing, so
	// an agent whose targets are all software-timed (rxe, siw) has none of its histograms.
	sl := append(tl[:len(tl):len(tl)], "ts_source")
	m.tsSource = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "target_ts_source",
		Help: "Where the target's RTT split comes from, by its latest connection: ts_source=\"nic\" where its CQ has NIC completion timestamps (mlx5), \"sw\" where it has none (rxe, siw; software RTT only); always 1."},
		sl)
	m.networkRTT = prometheus.NewHistogramVec(histogramOpts("probe_network_rtt_seconds",
		"The NIC-timed part of successful pings' RTT (ts_source=nic): the prober NIC's time from the first SEND's completion to the last go-ahead's arrival, both stamped by the NIC: the wire, the responder's processing and the prober's turnaround between the ping's two exchanges, not the prober's posting and polling at its ends."), sl)
	m.hostRTT = prometheus.NewHistogramVec(histogramOpts("probe_host_rtt_seconds",
		"The rest of successful pings' RTT (ts_source=nic): gorping_probe_rtt_seconds less gorping_probe_network_rtt_seconds; the prober host's posting, waking and polling, and the first SEND's trip to the responder's NIC and back."), sl)
	// --paths: vectors without children export nothing, so with one path there are none.
	pl := append(tl[:len(tl):len(tl)], "path")
	m.targetPathsUp = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "target_paths_up",
		Help: "Paths (--paths connections) to the target whose last probe succeeded."}, tl)
	m.pathUp = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "path_up",
		Help: "1 if the path's last probe succeeded, else 0 (--paths: one series per connection to the target)."}, pl)
	m.pathProbes = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "path_probes_total",
		Help: "Probe slots of the path, one per interval; the target's gorping_probes_total is their sum."}, pl)
	m.pathFailures = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "path_failures_total",
		Help: "Probe slots of the path that failed, by reason."}, append(pl[:len(pl):len(pl)], "reason"))
	m.pathInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "path_info",
		Help: "The path's current connection: its local and remote QP numbers and the RoCEv2 UDP source port its packets should carry (\"\" where it cannot be predicted); always 1."},
		append(pl[:len(pl):len(pl)], "local_qpn", "remote_qpn", "udp_sport"))
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
	// gorping_build_info as node_exporter's and blackbox_exporter's: prometheus/common's
	// collector, labels version, revision (the Makefile links the commit into
	// prometheus/common/version.Revision, else the Go command's VCS stamp), branch (where
	// the build knew one), goversion, goos, goarch, tags; version is the binary's own.
	build := buildinfo.NewCollector(namespace, buildinfo.WithExtraConstLabels(prometheus.Labels{"version": version}))
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
	m.nameConflicts = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: "peer_name_conflicts",
		Help: "Peer agents that answer with this agent's name or another peer's, with another instance ID (cloned hosts, an unset host name): each is probed as NAME~INSTANCE; give every agent its own --agent-name."})
	m.reg.MustRegister(m.rtt, m.probes, m.failures, m.up, m.connections, m.deadConns, m.path, m.tsSource, m.networkRTT, m.hostRTT,
		m.targetPathsUp, m.pathUp, m.pathProbes, m.pathFailures, m.pathInfo, m.targets, m.configErrors, m.badLines, m.ignored,
		m.responderUp, m.responderStarts, m.probeRequests, m.slotDelay, build, m.agentInfo,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, s := range []string{target.SourceFile, target.SourcePeers, target.SourceDNS, target.SourceRails} {
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
	for _, r := range discovery.FetchReasons {
		m.fetchFailures.WithLabelValues(r)
	}
	for _, r := range discovery.RailProblemReasons {
		m.railProblems.WithLabelValues(r)
	}
	m.reg.MustRegister(m.peerUp, m.peerInfo, m.fetches, m.fetchFailures, m.agentsBadLines, m.railProblems, m.nameConflicts)
}

// targetMetrics are one target's children, looked up once so that recording a probe
// allocates nothing. The target's paths (pathMetrics, one loop each) record into them
// concurrently: mu guards what they share.
type targetMetrics struct {
	m           *metrics
	labels      []string // target, device, port, peer
	key         string
	rtt         prometheus.Observer
	probes      prometheus.Counter
	up          prometheus.Gauge
	connections prometheus.Counter
	// deadConnections counts the connections whose first ping failed (probe's loop).
	deadConnections prometheus.Counter
	pathsUp         prometheus.Gauge // nil with one path
	paths           []*pathMetrics
	id              string // target.ID

	mu       sync.Mutex
	failures map[string]prometheus.Counter // by reason: the ones the target has had
	working  int                           // paths whose last slot succeeded
	device   string
	port     string
	// ts is the ts_source of the latest connection ("" before the first); with "nic" the
	// split's histograms, nil otherwise.
	ts                  string
	networkRTT, hostRTT prometheus.Observer
}

// pathMetrics are one path's: its own series (with --paths 2 or more) and the target's
// it adds to. Only the path's loop records into them.
type pathMetrics struct {
	tm       *targetMetrics
	index    string // "0", "1", ...; "" with one path: no path series
	up       prometheus.Gauge
	probes   prometheus.Counter
	failures map[string]prometheus.Counter
	working  bool     // guarded by tm.mu
	reason   string   // why the path is down, "" while it works; guarded by tm.mu (the landing page reads it)
	info     []string // the current gorping_path_info's labels; nil before the first connection
}

// Target is forTarget for the probers (probe.Recorder): it also keeps the record for the
// landing page until Remove.
func (m *metrics) Target(t target.Target, k int) probe.TargetRecorder {
	tm := m.forTarget(t, k)
	m.mu.Lock()
	m.byID[tm.id] = tm
	m.mu.Unlock()
	return tm
}

// lookup is the running target id's record, or nil.
func (m *metrics) lookup(id string) *targetMetrics {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.byID[id]
}

// SlotDelay records how late a probe slot started.
func (m *metrics) SlotDelay(late time.Duration) { m.slotDelay.Observe(late.Seconds()) }

// forTarget makes the children of t and of its k paths.
func (m *metrics) forTarget(t target.Target, k int) *targetMetrics {
	port := ""
	if t.Device != "" {
		port = strconv.Itoa(t.DevPort)
	}
	l := []string{t.Key(), t.Device, port, t.Peer}
	tm := &targetMetrics{m: m, labels: l, key: l[0], id: t.ID(), rtt: m.rtt.WithLabelValues(l...), probes: m.probes.WithLabelValues(l...),
		up: m.up.WithLabelValues(l...), connections: m.connections.WithLabelValues(l...),
		deadConnections: m.deadConns.WithLabelValues(l...), failures: map[string]prometheus.Counter{}}
	tm.up.Set(0)
	if k > 1 {
		tm.pathsUp = m.targetPathsUp.WithLabelValues(l...)
		tm.pathsUp.Set(0)
	}
	for i := range max(k, 1) {
		pm := &pathMetrics{tm: tm}
		if k > 1 {
			pm.index = strconv.Itoa(i)
			pl := append(l[:len(l):len(l)], pm.index)
			pm.up, pm.probes = m.pathUp.WithLabelValues(pl...), m.pathProbes.WithLabelValues(pl...)
			pm.failures = map[string]prometheus.Counter{}
			pm.up.Set(0)
		}
		tm.paths = append(tm.paths, pm)
	}
	return tm
}

// Path is the record of path i.
func (tm *targetMetrics) Path(i int) probe.PathRecorder { return tm.paths[i] }

// Success records a successful slot: its RTT and, where split (ok), its NIC-timed and
// host parts, into the target's histograms while its latest connection is NIC-timed.
func (pm *pathMetrics) Success(rtt, nic, host time.Duration, ok bool) {
	tm := pm.tm
	tm.probes.Inc()
	tm.rtt.Observe(rtt.Seconds())
	if ok {
		tm.mu.Lock()
		n, h := tm.networkRTT, tm.hostRTT
		tm.mu.Unlock()
		if n != nil {
			n.Observe(nic.Seconds())
			h.Observe(host.Seconds())
		}
	}
	if pm.index != "" {
		pm.probes.Inc()
		pm.up.Set(1)
	}
	tm.setWorking(pm, true, "")
}

// Failed records n failed slots of the path with reason, on the path and the target.
func (pm *pathMetrics) Failed(reason string, n int) {
	tm := pm.tm
	tm.mu.Lock()
	c, ok := tm.failures[reason]
	if !ok {
		c = tm.m.failures.WithLabelValues(tm.labels[0], tm.labels[1], tm.labels[2], tm.labels[3], reason)
		tm.failures[reason] = c
	}
	tm.mu.Unlock()
	tm.probes.Add(float64(n))
	c.Add(float64(n))
	if pm.index != "" {
		pc, ok := pm.failures[reason]
		if !ok {
			l := tm.labels
			pc = tm.m.pathFailures.WithLabelValues(l[0], l[1], l[2], l[3], pm.index, reason)
			pm.failures[reason] = pc
		}
		pm.probes.Add(float64(n))
		pc.Add(float64(n))
	}
	pm.Down(reason)
}

// Down records that the path does not work (a failed slot, a connection that died),
// and why.
func (pm *pathMetrics) Down(reason string) {
	if pm.index != "" {
		pm.up.Set(0)
	}
	pm.tm.setWorking(pm, false, reason)
}

// setWorking sets whether pm works (and if not, why) and the target's series that
// follow: up while at least one path works, and how many do.
func (tm *targetMetrics) setWorking(pm *pathMetrics, w bool, reason string) {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	pm.reason = reason
	if pm.working != w {
		pm.working = w
		if w {
			tm.working++
		} else {
			tm.working--
		}
		if tm.pathsUp != nil {
			tm.pathsUp.Set(float64(tm.working))
		}
	}
	if tm.working > 0 {
		tm.up.Set(1)
	} else {
		tm.up.Set(0)
	}
}

// DeadConnection counts a connection whose first ping failed (a connection, and a dead
// one).
func (pm *pathMetrics) DeadConnection() {
	pm.tm.connections.Inc()
	pm.tm.deadConnections.Inc()
}

// Connected records a new connection of the path: its local device and port and its
// ts_source (the target's), and the path's flow, whose series replaces the last
// connection's.
func (pm *pathMetrics) Connected(device, port string, f rping.Flow, ts string) {
	pm.tm.connected(device, port, ts)
	if pm.index == "" {
		return
	}
	qpn := func(n uint32) string {
		if n == 0 {
			return ""
		}
		return strconv.FormatUint(uint64(n), 10)
	}
	sport := ""
	if f.UDPSourcePort != 0 {
		sport = strconv.Itoa(int(f.UDPSourcePort))
	}
	l := pm.tm.labels
	info := []string{l[0], l[1], l[2], l[3], pm.index, qpn(f.LocalQPN), qpn(f.RemoteQPN), sport}
	if pm.info != nil {
		if slices.Equal(info, pm.info) {
			return
		}
		pm.tm.m.pathInfo.DeleteLabelValues(pm.info...)
	}
	pm.info = info
	pm.tm.m.pathInfo.WithLabelValues(info...).Set(1)
}

// connected records a new connection, its local device and port and its ts_source.
func (tm *targetMetrics) connected(device, port, ts string) {
	tm.connections.Inc()
	tm.mu.Lock()
	defer tm.mu.Unlock()
	tm.setTSSource(ts)
	if device == tm.device && port == tm.port {
		return
	}
	if tm.device != "" {
		tm.m.path.DeleteLabelValues(tm.key, tm.device, tm.port, tm.labels[3])
	}
	tm.device, tm.port = device, port
	tm.m.path.WithLabelValues(tm.key, device, port, tm.labels[3]).Set(1)
}

// setTSSource makes ts the target's ts_source: its gauge's one series, and the split's
// histograms only while it is "nic" (a stale pair of them would stop the rules from
// falling back to the software RTT). Called with tm.mu held.
func (tm *targetMetrics) setTSSource(ts string) {
	if ts == tm.ts {
		return
	}
	l := tm.labels
	if tm.ts != "" {
		tm.m.tsSource.DeleteLabelValues(l[0], l[1], l[2], l[3], tm.ts)
	}
	tm.ts = ts
	tm.m.tsSource.WithLabelValues(l[0], l[1], l[2], l[3], ts).Set(1)
	switch {
	case ts == "nic":
		tm.networkRTT = tm.m.networkRTT.WithLabelValues(l[0], l[1], l[2], l[3], ts)
		tm.hostRTT = tm.m.hostRTT.WithLabelValues(l[0], l[1], l[2], l[3], ts)
	case tm.networkRTT != nil:
		tm.deleteSplit()
	}
}

// deleteSplit deletes the split's histograms. Called with tm.mu held.
func (tm *targetMetrics) deleteSplit() {
	l := tm.labels
	tm.m.networkRTT.DeleteLabelValues(l[0], l[1], l[2], l[3], "nic")
	tm.m.hostRTT.DeleteLabelValues(l[0], l[1], l[2], l[3], "nic")
	tm.networkRTT, tm.hostRTT = nil, nil
}

// Remove deletes the target's series (remove) and forgets its record.
func (tm *targetMetrics) Remove() {
	tm.remove()
	tm.m.mu.Lock()
	if tm.m.byID[tm.id] == tm {
		delete(tm.m.byID, tm.id)
	}
	tm.m.mu.Unlock()
}

// remove deletes every series of the target and its paths (it left the target list),
// each by its exact labels: DeletePartialMatch scans every series of a vector, which
// made removing n targets O(n²) (10,000 targets: minutes, holding the vectors' locks
// against scrapes). The target's loops have ended: nothing records for it any more.
func (tm *targetMetrics) remove() {
	l := tm.labels
	tm.m.rtt.DeleteLabelValues(l...)
	tm.m.probes.DeleteLabelValues(l...)
	tm.m.up.DeleteLabelValues(l...)
	tm.m.connections.DeleteLabelValues(l...)
	tm.m.deadConns.DeleteLabelValues(l...)
	for reason := range tm.failures {
		tm.m.failures.DeleteLabelValues(l[0], l[1], l[2], l[3], reason)
	}
	if tm.device != "" {
		tm.m.path.DeleteLabelValues(tm.key, tm.device, tm.port, l[3])
	}
	if tm.ts != "" {
		tm.m.tsSource.DeleteLabelValues(l[0], l[1], l[2], l[3], tm.ts)
	}
	if tm.networkRTT != nil {
		tm.deleteSplit()
	}
	if tm.pathsUp != nil {
		tm.m.targetPathsUp.DeleteLabelValues(l...)
	}
	for _, pm := range tm.paths {
		if pm.index == "" {
			continue
		}
		pl := append(l[:len(l):len(l)], pm.index)
		tm.m.pathUp.DeleteLabelValues(pl...)
		tm.m.pathProbes.DeleteLabelValues(pl...)
		for reason := range pm.failures {
			tm.m.pathFailures.DeleteLabelValues(append(pl[:len(pl):len(pl)], reason)...)
		}
		if pm.info != nil {
			tm.m.pathInfo.DeleteLabelValues(pm.info...)
		}
	}
}

// reasons returns why each of the target's paths is down ("" for a path that works), by
// path index: what the landing page shows beside the series.
func (tm *targetMetrics) reasons() []string {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	out := make([]string, len(tm.paths))
	for i, pm := range tm.paths {
		out[i] = pm.reason
	}
	return out
}
