package mesh

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/common/promslog"
	"github.com/prometheus/exporter-toolkit/web"
	"golang.org/x/net/netutil"
	"k8s.io/client-go/rest"

	"github.com/gorping/gorping/mesh/agentdesc"
	"github.com/gorping/gorping/mesh/discovery"
	"github.com/gorping/gorping/mesh/probe"
	"github.com/gorping/gorping/mesh/source"
	"github.com/gorping/gorping/mesh/target"
	"github.com/gorping/gorping/rping"
)

// Agent is one `gorping mesh`: New checks its configuration, Run runs it.
type Agent struct {
	cfg        *agentConfig
	log        *slog.Logger
	m          *metrics
	mgr        *probe.Manager
	src        *sources
	d          deps
	probeSlots chan struct{}
	// probing ends when the agent shuts down: /probe requests in flight are cancelled
	// and answered instead of waiting out the listener's shutdown.
	probing    context.Context
	stopProbes context.CancelFunc
	targetKeys atomic.Pointer[map[string]bool] // the current targets' keys (isTarget)
	responding atomic.Bool                     // the responder listens (/-/ready)
	self       atomic.Pointer[selfDesc]        // this agent's description (/agent)
	instance   string                          // its instance ID, drawn at start (agentdesc.NewInstance)

	rq          *reloadRequests
	agentsHup   chan struct{}   // SIGHUP, for discovery (the agents file)
	listenPorts map[uint16]bool // the listeners' ports: an agent address of this host on one is this agent
	rails       *railHandoff    // discovery's rail targets, for the reloader
}

// deps are the agent's seams to the world, replaced by host tests.
type deps struct {
	dial     probe.Dial
	resolver target.Resolver
	respond  func(ctx context.Context, cfg rping.ResponderConfig) error
	hup      <-chan os.Signal                     // nil: the process's SIGHUP
	local    func() map[netip.Addr]bool           // this host's addresses; nil: the interfaces'
	limits   *httpLimits                          // nil: defaultHTTPLimits
	rails    *hostRails                           // where this agent's rails are read; nil: this host
	kube     func() (*rest.Config, string, error) // --agents.kubernetes' API server and namespace; nil: members.InCluster
	kubePort uint16                               // the port of the agents it lists; 0: discovery.DefaultAgentPort
	hot      probe.Hot                            // how a hot target samples; zero: the defaults
	// webConfigPoll is how often the web configuration is checked; 0: webConfigPoll.
	webConfigPoll time.Duration
	// listener, if set, is the one HTTP listener in place of --web.listen-address's
	// (NewIn); agentDial, if set, connects discovery's /agent requests.
	listener  net.Listener
	agentDial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Run checks cfg and runs the agent it describes until ctx ends (SIGTERM, SIGINT). hup
// is the process's SIGHUP (the command line takes it before anything that takes time:
// its default action ends the process); nil: Run takes it. A bad option is an error
// that errors.Is finds ErrUsage in, and names the option.
func Run(ctx context.Context, cfg Config, hup <-chan os.Signal) error {
	a, err := newAgent(cfg, deps{hup: hup})
	if err != nil {
		return err
	}
	return a.Run(ctx)
}

// Schedule makes the process-wide scheduler choice of an agent process (main calls it;
// tests that run agents in-process do not): one P (GOMAXPROCS=1) unless the environment
// sets GOMAXPROCS. The agent spends its time waking from the netpoller for completion
// events and timers; with more Ps the runtime also wakes and spins other threads looking
// for work (docs/mesh.md, Operations, has the measurement).
func Schedule() {
	if _, set := os.LookupEnv("GOMAXPROCS"); !set {
		runtime.GOMAXPROCS(1)
	}
}

// New checks cfg and returns the agent it describes. A bad field is one error line
// naming its option.
func New(cfg Config) (*Agent, error) { return newAgent(cfg, deps{}) }

func newAgent(cfg Config, d deps) (*Agent, error) {
	c, err := cfg.check()
	if err != nil {
		return nil, err
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	if d.resolver == nil {
		d.resolver = net.DefaultResolver
	}
	if d.dial == nil {
		d.dial = probe.RPing(c.source, c.Size, c.ConnectTimeout)
	}
	if d.respond == nil {
		d.respond = rping.Respond
	}
	if d.local == nil {
		d.local = localAddrs
	}
	if d.rails == nil {
		r := defaultHostRails()
		d.rails = &r
	}
	probing, stopProbes := context.WithCancel(context.Background())
	rq := &reloadRequests{kick: make(chan struct{}, 1)}
	return &Agent{cfg: c, log: newLogger(c.Config, c.Log), m: newMetrics(c.Version), d: d, instance: agentdesc.NewInstance(),
		probeSlots: make(chan struct{}, maxProbesInFlight), probing: probing, stopProbes: stopProbes,
		rq: rq, agentsHup: make(chan struct{}, 1), listenPorts: map[uint16]bool{},
		rails: newRailHandoff(func() { rq.ask(reloadRails) })}, nil
}

// Run runs the agent until ctx ends, then releases every connection and closes the
// listener. It returns an error if the agent could not start or its listener failed.
// An Agent runs once.
func (a *Agent) Run(ctx context.Context) error {
	cfg, log, d := a.cfg, a.log, a.d
	lim := defaultHTTPLimits
	if d.limits != nil {
		lim = *d.limits
	}
	var lns []net.Listener
	closeAll := func() {
		for _, ln := range lns {
			ln.Close()
		}
	}
	var addrs []string
	listen := cfg.Listen
	if d.listener != nil {
		listen = []string{d.listener.Addr().String()}
	}
	for _, addr := range listen {
		ln := d.listener
		if ln == nil {
			var err error
			if ln, err = net.Listen("tcp", addr); err != nil {
				closeAll()
				return fmt.Errorf("--web.listen-address %s: %w", addr, err)
			}
		}
		lns = append(lns, netutil.LimitListener(ln, lim.maxConns))
		addrs = append(addrs, ln.Addr().String())
		if ap, err := netip.ParseAddrPort(ln.Addr().String()); err == nil {
			a.listenPorts[ap.Port()] = true
		}
	}
	h, err := a.handler()
	if err != nil {
		closeAll()
		return err
	}
	var dc *discovery.Discovery
	if cfg.discovers() {
		if dc, err = newDiscovery(a); err != nil {
			closeAll()
			return err
		}
	}
	a.m.agentInfo.WithLabelValues(cfg.AgentName, cfg.Group, cfg.Version).Set(1)
	var railNotes []string
	a.describeSelf(&railNotes) // before the listeners serve /agent
	// Probers and the responder get their own context, ended only after the listener is
	// told nothing: the last scrapes see the teardown.
	work, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWork()
	a.mgr = probe.NewManager(work, probe.Settings{Interval: cfg.Interval, Timeout: cfg.Timeout, ConnectTimeout: cfg.ConnectTimeout,
		BackoffMax: cfg.BackoffMax, Jitter: cfg.Jitter, Paths: cfg.Paths, Lifetime: cfg.PathLifetime, Hot: d.hot,
		Dial: d.dial, Resolver: d.resolver, Log: log}, a.m)
	selfPort := cfg.port
	if cfg.NoResponder {
		selfPort = 0
	}
	a.src = &sources{peers: cfg.peers, selfPort: selfPort, local: d.local, log: log, m: a.m,
		skipped: map[string]bool{}, selfNames: map[string]bool{}, maxTargets: cfg.MaxTargets,
		file: &source.File{Path: cfg.TargetsFile, DefaultPort: cfg.port, Kind: source.Targets, Log: log,
			Errors: a.m.configErrors, Source: target.SourceFile, BadLines: a.m.badLines},
		dns: &source.DNS{Name: cfg.dnsName, Port: cfg.dnsPort, Option: "--targets-dns", Kind: source.Targets,
			Resolver: d.resolver, Log: log, Errors: a.m.configErrors, Source: target.SourceDNS}}

	// One server per listener: web.Serve wraps its server's handler, so two listeners
	// on one server would race on it.
	served := make(chan error, len(lns))
	webCfg := cfg.WebConfigFile
	noSystemd := false
	toolkitLog := slog.New(newDedupHandler(log.Handler()))
	var srvs []*http.Server
	for i, ln := range lns {
		srv := a.server(h, lim)
		srvs = append(srvs, srv)
		go func() {
			served <- web.Serve(ln, srv, &web.FlagConfig{WebListenAddresses: &[]string{addrs[i]},
				WebSystemdSocket: &noSystemd, WebConfigFile: &webCfg}, toolkitLog)
		}()
	}
	log.Info("gorping mesh started", "version", cfg.Version, "listen", strings.Join(addrs, ","),
		"responder", responderDesc(cfg), "interval", cfg.Interval, "paths", cfg.Paths, "timeout", cfg.Timeout)

	var wg sync.WaitGroup
	if !cfg.NoResponder {
		wg.Go(func() { a.respond(work, d.respond) })
	}
	hup := d.hup
	if hup == nil {
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGHUP)
		defer signal.Stop(c)
		hup = c
	}
	wg.Go(func() { a.watchSources(work, hup) })
	wg.Go(func() { a.watchRails(work, railNotes) })
	if dc != nil {
		wg.Go(func() { dc.Run(work, a.agentsHup) })
	}
	if cfg.WebConfigFile != "" {
		every := d.webConfigPoll
		if every == 0 {
			every = webConfigPoll
		}
		wg.Go(func() { a.watchWebConfig(work, every) })
	}

	var runErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case err := <-served:
		log.Error("metrics listener failed", "err", err)
		runErr = fmt.Errorf("metrics listener: %w", err)
	}
	a.stopProbes()
	stopWork()
	wg.Wait()
	a.mgr.StopAll()
	log.Info("every connection released; closing the metrics listener")
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var sg sync.WaitGroup
	for _, srv := range srvs {
		sg.Go(func() {
			if err := srv.Shutdown(sctx); err != nil {
				srv.Close()
			}
		})
	}
	sg.Wait()
	return runErr
}

func responderDesc(cfg *agentConfig) string {
	if cfg.NoResponder {
		return "off"
	}
	return netip.AddrPortFrom(cfg.bind, cfg.port).String()
}

// watchSources loads the targets, then has them reloaded when the file changes, on
// SIGHUP and when the DNS name is due for resolution, until ctx ends. It only asks: the
// reloads run in a goroutine of their own (reloader), so that whatever a reload waits
// for (a file, DNS, stopping thousands of loops) never delays a signal.
func (a *Agent) watchSources(ctx context.Context, hup <-chan os.Signal) {
	rq := a.rq
	rq.ask(reloadFile | reloadForce | reloadDNS) // the first load
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.reloader(ctx, rq)
	}()
	var fileTick <-chan time.Time
	if a.cfg.TargetsFile != "" && a.cfg.TargetsReload > 0 {
		t := time.NewTicker(a.cfg.TargetsReload)
		defer t.Stop()
		fileTick = t.C
	}
	// Names in the file and --peers are checked against this host's addresses again
	// at the DNS pace too (addresses move).
	dt := time.NewTicker(a.cfg.DNSRefresh)
	defer dt.Stop()
	for {
		select {
		case <-ctx.Done():
			// A reload ends with ctx (DNS and reconcile are bounded by it); only a read
			// stuck in the kernel (a hung NFS mount) could outlast it.
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				a.log.Error("the target reload is still stuck (reading the target file?); shutting down without it")
			}
			return
		case <-hup:
			a.log.Info("SIGHUP: reloading the targets")
			rq.ask(reloadFile | reloadForce | reloadDNS)
			select {
			case a.agentsHup <- struct{}{}:
			default: // one is pending already
			}
		case <-fileTick:
			rq.ask(reloadFile)
		case <-dt.C:
			rq.ask(reloadDNS)
		}
	}
}

// What a reload does: re-read the file if it changed, re-read it whatever it holds
// (SIGHUP), resolve the DNS name and check names against this host's addresses.
const (
	reloadFile = 1 << iota
	reloadForce
	reloadDNS
	reloadRails // discovery has new rail targets
)

// reloadRequests merges the requests that arrive while a reload runs into the next one.
type reloadRequests struct {
	mu      sync.Mutex
	pending int
	kick    chan struct{} // one buffered wake-up
}

func (r *reloadRequests) ask(what int) {
	r.mu.Lock()
	r.pending |= what
	r.mu.Unlock()
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

func (r *reloadRequests) take() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	what := r.pending
	r.pending = 0
	return what
}

// reloader runs the reloads asked for, one at a time, until ctx ends. After a reload
// it checks the names on the responder's port against this host's addresses in the
// background (one check at a time, again at the DNS pace), and reconciles again when
// the answers come.
func (a *Agent) reloader(ctx context.Context, rq *reloadRequests) {
	checked := make(chan map[string]bool, 1)
	checking, recheck := false, false
	var railGen uint64 // the rail targets' generation in a.src.rails
	for {
		changed := false
		select {
		case <-ctx.Done():
			return
		case <-rq.kick:
			what := rq.take()
			if what&(reloadFile|reloadForce) != 0 {
				changed = a.src.file.Load(what&reloadForce != 0)
			}
			if what&reloadDNS != 0 {
				a.src.dns.Refresh(ctx)
				changed, recheck = true, true
			}
			if what&reloadRails != 0 {
				a.src.rails, railGen = a.rails.take()
				changed = true
			}
		case res := <-checked:
			checking = false
			a.src.selfNames = res
			changed = true
		}
		if !changed || ctx.Err() != nil {
			continue
		}
		l := a.src.targets()
		a.targetKeys.Store(&l.keys)
		a.mgr.Reconcile(ctx, l.probe)
		a.rails.done(railGen)
		if !checking && len(l.names) > 0 && (recheck || l.unchecked > 0) {
			checking, recheck = true, false
			names, local := l.names, a.d.local()
			go func() {
				res := checkSelf(ctx, a.d.resolver, local, names)
				select {
				case checked <- res:
				case <-ctx.Done():
				}
			}()
		}
	}
}

// listensOn reports whether one of the agent's listeners is on port.
func (a *Agent) listensOn(port uint16) bool { return a.listenPorts[port] }

// isTarget reports whether key is one of the agent's targets (for /probe).
func (a *Agent) isTarget(key string) bool {
	keys := a.targetKeys.Load()
	return keys != nil && (*keys)[key]
}

// respond runs the responder, starting it again (with backoff) whenever it stops by
// itself: no device yet, the device went away, the port was taken.
func (a *Agent) respond(ctx context.Context, respond func(context.Context, rping.ResponderConfig) error) {
	log := a.log.With("component", "responder")
	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	bo := probe.Backoff{Base: time.Second, Max: 30 * time.Second, Rnd: rnd}
	w := &dedupLog{log: log, level: slog.LevelWarn}
	var last string
	for {
		started := time.Now()
		err := respond(ctx, rping.ResponderConfig{Addr: a.cfg.bind, Port: a.cfg.port, Size: a.cfg.Size, Log: w,
			Listening: func() {
				a.responding.Store(true)
				a.m.responderUp.Set(1)
				a.m.responderStarts.Inc()
				last = ""
				log.Info("responder listening", "address", netip.AddrPortFrom(a.cfg.bind, a.cfg.port).String())
			}})
		a.responding.Store(false)
		a.m.responderUp.Set(0)
		if ctx.Err() != nil {
			return
		}
		if time.Since(started) > time.Minute {
			bo.Reset()
		}
		wait := bo.Next()
		if msg := err.Error(); msg != last {
			log.Warn("responder stopped; starting it again with backoff", "err", err, "retry_in", wait.Round(time.Millisecond))
			last = msg
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// dedupLog logs rping's lines, one per Write, dropping a line equal to the previous one
// (a responder that keeps finding no device would repeat itself every retry).
type dedupLog struct {
	log   *slog.Logger
	level slog.Level
	mu    sync.Mutex
	last  string
}

func (w *dedupLog) Write(p []byte) (int, error) {
	s := strings.TrimRight(string(p), "\r\n")
	w.mu.Lock()
	dup := s == w.last
	w.last = s
	w.mu.Unlock()
	if !dup {
		w.log.Log(context.Background(), w.level, "rping", "line", s)
	}
	return len(p), nil
}

// newLogger is promslog's logger (Prometheus' own format, key names and levels; a
// duration logs as "1s").
func newLogger(cfg Config, w io.Writer) *slog.Logger {
	f, _ := logFormat(cfg.LogFormat)
	l, _ := logLevel(cfg.LogLevel)
	return promslog.New(&promslog.Config{Level: l, Format: f, Writer: w})
}

// logFormat is --log.format: promslog's logfmt or json, and text for logfmt (gorping's
// first name for it).
func logFormat(s string) (*promslog.Format, error) {
	f := promslog.NewFormat()
	if s == "text" {
		s = "logfmt"
	}
	if f.Set(s) != nil {
		return nil, fmt.Errorf("--log.format %s: want %s", target.Quote(s), strings.Join(promslog.FormatFlagOptions, " or "))
	}
	return f, nil
}

func logLevel(s string) (*promslog.Level, error) {
	l := promslog.NewLevel()
	if l.Set(s) != nil {
		return nil, fmt.Errorf("--log.level %s: want %s", target.Quote(s), strings.Join(promslog.LevelFlagOptions, ", "))
	}
	return l, nil
}
