package mesh

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/gorping/gorping/mesh/members"
	"github.com/gorping/gorping/mesh/probe"
	"github.com/gorping/gorping/mesh/target"
)

// maxProbeCount bounds /probe's count; maxProbesInFlight how many run at once.
const (
	maxProbeCount     = 100
	maxProbesInFlight = 4
	maxProbeTime      = 10 * time.Second
)

// httpLimits bound what a client of the metrics listener can hold: every connection
// ends within the timeouts (reading a request, writing its answer, idling between
// requests), a request's header is small, and the listener accepts at most maxConns
// connections at once (the others wait in the kernel's backlog, costing the agent
// nothing), all before any authentication.
type httpLimits struct {
	readHeader, read, write, idle time.Duration
	maxHeaderBytes, maxConns      int
}

var defaultHTTPLimits = httpLimits{
	readHeader: 5 * time.Second,
	read:       10 * time.Second,             // the whole request: no endpoint takes a body
	write:      maxProbeTime + 5*time.Second, // above /probe's budget, so a probe's answer is written
	idle:       time.Minute,                  // above the usual scrape intervals: Prometheus keeps its connection
	// 8 KiB: Prometheus' scrape requests (URL, Accept, Authorization, the timeout header)
	// take a few hundred bytes; net/http adds its own 4 KiB of slack.
	maxHeaderBytes: 8 << 10,
	maxConns:       64,
}

// server is the agent's HTTP server on ln, bounded by lim.
func (a *Agent) server(h http.Handler, lim httpLimits) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: lim.readHeader, ReadTimeout: lim.read, WriteTimeout: lim.write,
		IdleTimeout: lim.idle, MaxHeaderBytes: lim.maxHeaderBytes,
		ErrorLog: slog.NewLogLogger(a.log.Handler(), slog.LevelWarn)}
}

// handler serves /metrics, /-/healthy, /-/ready, /probe, /agent and the landing page
// (exporter-toolkit's, with the agent's state: landing.go).
func (a *Agent) handler() (http.Handler, error) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(a.m.reg, promhttp.HandlerOpts{
		ErrorLog: slogPrinter{a.log}, Registry: a.m.reg, MaxRequestsInFlight: 8}))
	// Liveness: the process answers. Readiness: it also serves the rping protocol its
	// peers probe (with --no-responder, probing is all it does: ready at once). Neither
	// says more than that.
	mux.HandleFunc("/-/healthy", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "Healthy")
	})
	mux.HandleFunc("/-/ready", func(w http.ResponseWriter, _ *http.Request) {
		if !a.cfg.NoResponder && !a.responding.Load() {
			http.Error(w, "Not ready: the rping responder does not listen yet (gorping_responder_up, and the logs, say why)",
				http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "Ready")
	})
	mux.HandleFunc("/probe", a.probeHandler)
	mux.HandleFunc("/agent", a.agentHandler)
	landing, err := a.newLanding(web.LandingConfig{
		Name:        "gorping mesh",
		Description: "RDMA ping mesh agent: probes its peers over RC connections (rping protocol) and exports to Prometheus",
		Version:     a.cfg.Version,
		Profiling:   "false", // the agent serves no /debug/pprof
		Links: []web.LandingLinks{
			{Address: "/metrics", Text: "Metrics"},
			{Address: "/-/healthy", Text: "Health"},
			{Address: "/-/ready", Text: "Readiness"},
			{Address: "/probe?target=HOST:PORT&count=3", Text: "Probe a target once (blackbox style)"},
			{Address: "/agent", Text: "This agent's description (its rails, for its peers)"},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("landing page: %w", err)
	}
	mux.Handle("/", landing)
	return mux, nil
}

// agentHandler is /agent: this agent's description, the document its peers read to
// learn its rails (agentdesc; docs/mesh.md). It is behind the listener's TLS and basic
// auth like every path.
func (a *Agent) agentHandler(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "/agent takes GET or HEAD", http.StatusMethodNotAllowed)
		return
	}
	self := a.self.Load()
	if self == nil {
		http.Error(w, "this agent has not described itself yet", http.StatusServiceUnavailable)
		return
	}
	// An ETag: a peer that read this document asks If-None-Match, and while it has not
	// changed gets a 304 without a body (ServeContent answers it, HEAD too).
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("ETag", members.ETag(self.doc))
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(self.doc))
}

// slogPrinter adapts the agent's logger to promhttp's ErrorLog.
type slogPrinter struct {
	log interface{ Error(string, ...any) }
}

func (p slogPrinter) Println(v ...any) { p.log.Error("metrics handler", "err", fmt.Sprint(v...)) }

// probeHandler is /probe?target=HOST[:PORT]&count=N: N pings over a new connection, now,
// and that probe's metrics (blackbox exporter style). It opens RDMA connections for
// whoever reaches the listener, so by default it probes only the agent's own targets
// and addresses in --probe-allow; --probe-any lifts that.
func (a *Agent) probeHandler(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		a.m.probeRequests.WithLabelValues("bad_request").Inc()
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "/probe takes GET or HEAD", http.StatusMethodNotAllowed)
		return
	}
	t, count, err := target.ParseProbeQuery(r.URL.RawQuery, a.cfg.port, maxProbeCount)
	if err != nil {
		a.m.probeRequests.WithLabelValues("bad_request").Inc()
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	// A request refused on what it says alone (no DNS could admit it) costs nothing and
	// needs no slot; every other one takes its slot first, so whatever it costs (DNS
	// included) is bounded by the slots.
	if a.refusedOnSight(t) {
		a.refuseProbe(w, t)
		return
	}
	select {
	case a.probeSlots <- struct{}{}:
		defer func() { <-a.probeSlots }()
	default:
		a.m.probeRequests.WithLabelValues("busy").Inc()
		http.Error(w, "too many probes in flight", http.StatusServiceUnavailable)
		return
	}
	budget := maxProbeTime
	if s := r.Header.Get("X-Prometheus-Scrape-Timeout-Seconds"); s != "" {
		if f, err := strconv.ParseFloat(s, 64); err == nil && f > 0 {
			budget = min(budget, time.Duration(f*float64(time.Second))-200*time.Millisecond)
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), max(budget, 500*time.Millisecond))
	defer cancel()
	defer context.AfterFunc(a.probing, cancel)()
	addr, allowed, err := a.probeTarget(ctx, t)
	if !allowed {
		a.refuseProbe(w, t)
		return
	}
	reg := prometheus.NewRegistry()
	a.probeOnce(ctx, reg, t, addr, err, count)
	if a.probing.Err() != nil {
		a.m.probeRequests.WithLabelValues("cancelled").Inc()
		http.Error(w, "gorping mesh is shutting down: the probe was cancelled", http.StatusServiceUnavailable)
		return
	}
	a.m.probeRequests.WithLabelValues("ok").Inc()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(w, r)
}

// probeTarget applies /probe's allow-list to t and returns the address to probe (or
// the error resolving it). It resolves a name only when the answer could be admitted:
// the agent's own targets and --probe-any resolve as any probe does; otherwise an
// address literal is checked as it is, and a name is resolved only if --probe-allow
// has prefixes its address could fall in.
func (a *Agent) probeTarget(ctx context.Context, t target.Target) (addr netip.Addr, allowed bool, resolveErr error) {
	if a.cfg.ProbeAny || a.isTarget(t.Key()) {
		addr, err := target.Resolve(ctx, a.d.resolver, t)
		return addr, true, err
	}
	if lit, ok := t.Addr(); ok {
		return lit, a.inProbeAllow(lit), nil
	}
	if len(a.cfg.probeAllow) == 0 {
		return netip.Addr{}, false, nil
	}
	addr, err := target.Resolve(ctx, a.d.resolver, t)
	if err != nil {
		return netip.Addr{}, false, nil // a name that does not resolve is in no prefix
	}
	return addr, a.inProbeAllow(addr), nil
}

// refusedOnSight reports whether t is refused without a lookup: not --probe-any, not a
// target, and an address outside --probe-allow or a name with no --probe-allow at all.
func (a *Agent) refusedOnSight(t target.Target) bool {
	if a.cfg.ProbeAny || a.isTarget(t.Key()) {
		return false
	}
	if lit, ok := t.Addr(); ok {
		return !a.inProbeAllow(lit)
	}
	return len(a.cfg.probeAllow) == 0
}

func (a *Agent) refuseProbe(w http.ResponseWriter, t target.Target) {
	a.m.probeRequests.WithLabelValues("refused").Inc()
	http.Error(w, fmt.Sprintf("target %s is not allowed: it is not one of this agent's targets and not in --probe-allow (--probe-any lifts this)", t.Key()),
		http.StatusForbidden)
}

func (a *Agent) inProbeAllow(addr netip.Addr) bool {
	for _, p := range a.cfg.probeAllow {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// probeOnce runs count pings to t and registers their metrics on reg.
func (a *Agent) probeOnce(ctx context.Context, reg *prometheus.Registry, t target.Target, addr netip.Addr, resolveErr error, count int) {
	// blackbox_exporter's names, so its users' probe_success alerts and dashboards work.
	success := prometheus.NewGauge(prometheus.GaugeOpts{Name: "probe_success",
		Help: "1 if every ping of this probe succeeded, else 0 (as blackbox_exporter's)."})
	duration := prometheus.NewGauge(prometheus.GaugeOpts{Name: "probe_duration_seconds",
		Help: "How long the whole probe took: resolution, connection, pings and teardown (as blackbox_exporter's)."})
	rtt := prometheus.NewHistogram(rttHistogramOpts("Round-trip time of this probe's successful pings."))
	probes := prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "probes_total",
		Help: "Pings this probe attempted."})
	failures := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "probe_failures_total",
		Help: "Pings of this probe that failed, by reason."}, []string{"reason"})
	path := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "probe_path_info",
		Help: "The local RDMA device and port the probe's connection used; always 1."}, []string{"device", "port"})
	reg.MustRegister(success, duration, rtt, probes, failures, path)

	start := time.Now()
	defer func() { duration.Set(time.Since(start).Seconds()) }()
	log := a.log.With("probe", t.Key())
	fail := func(n int, reason string, err error) {
		probes.Add(float64(n))
		failures.WithLabelValues(reason).Add(float64(n))
		log.Info("probe failed", "reason", reason, "err", err)
	}
	if resolveErr != nil {
		fail(count, probe.ReasonResolve, resolveErr)
		return
	}
	conn, err := a.d.dial(ctx, netip.Addr{}, netip.AddrPortFrom(addr, t.Port), 0, probe.LineLog{Log: log})
	if err != nil {
		fail(count, probe.Reason(err), err)
		return
	}
	defer conn.Close()
	path.WithLabelValues(conn.Device(), strconv.Itoa(conn.Port())).Set(1)
	ok := 0
	for i := range count {
		timeout := a.cfg.Timeout
		if dl, has := ctx.Deadline(); has {
			timeout = min(timeout, time.Until(dl))
		}
		d, err := conn.Ping(max(timeout, time.Millisecond))
		if err != nil {
			fail(count-i, probe.Reason(err), err) // the connection is spent: the rest fail with it
			break
		}
		probes.Inc()
		rtt.Observe(d.Seconds())
		ok++
	}
	if ok == count {
		success.Set(1)
	}
}
