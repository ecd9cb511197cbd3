// Package discovery finds the mesh agent's peer agents (--agents, --agents.file,
// --agents.dns, --agents.kubernetes), reads their descriptions (/agent), chooses the
// peers to probe (pinglists, --max-peers) and pairs this agent's rails with theirs. It
// hands the resulting rail targets on (Deps.Hand) and writes into nothing else but its
// own metrics.
package discovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/config"
	"go.yaml.in/yaml/v2"
	"k8s.io/client-go/rest"

	"github.com/gorping/gorping/mesh/agentdesc"
	"github.com/gorping/gorping/mesh/members"
	"github.com/gorping/gorping/mesh/pinglist"
	"github.com/gorping/gorping/mesh/source"
	"github.com/gorping/gorping/mesh/target"
)

// DefaultAgentPort is a peer agent's default port: the listener's (defaultListen).
const DefaultAgentPort = 10174

// Discovery's bounds: one /agent request takes at most agentFetchTimeout, and at most
// agentFetchParallel run at once.
const (
	agentFetchTimeout  = 5 * time.Second
	agentFetchParallel = 8
	MinRefresh         = 100 * time.Millisecond // --agents.refresh's least
	MinRotate          = time.Second            // --rotate's least
	MaxMaxPeers        = pinglist.MaxMembers    // --max-peers' most
)

// --rails values.
const (
	RailsSameSubnet = "same-subnet"
	RailsAll        = "all"
)

// Reasons of gorping_agent_fetch_failures_total.
const (
	fetchUnreachable   = "unreachable"     // no connection (refused, no route, TLS handshake)
	fetchTimeout       = "timeout"         // no answer within agentFetchTimeout
	fetchUnauthorized  = "unauthorized"    // 401 or 403: the credentials of --agents.http-config
	fetchHTTPStatus    = "http_status"     // any other status than 200
	fetchBadDescripton = "bad_description" // the answer is not a description this gorping reads
)

// FetchReasons are gorping_agent_fetch_failures_total's reasons.
var FetchReasons = []string{fetchUnreachable, fetchTimeout, fetchUnauthorized, fetchHTTPStatus, fetchBadDescripton}

// HTTP is --agents.http-config: the scheme and Prometheus' HTTP client config.
type HTTP struct {
	Scheme string
	Client config.HTTPClientConfig
}

// maxHTTPConfigBytes bounds the --agents.http-config file.
const maxHTTPConfigBytes = 1 << 20

// LoadHTTP reads --agents.http-config: a Prometheus HTTP client configuration
// (tls_config, basic_auth, authorization, proxy_url, ...), as in a scrape config, with
// the scrape config's `scheme` (http, the default, or https) beside it.
func LoadHTTP(path string) (HTTP, error) {
	h := HTTP{Scheme: "http", Client: config.DefaultHTTPClientConfig}
	if path == "" {
		return h, nil
	}
	data, err := source.ReadRegularFile(path, maxHTTPConfigBytes)
	if err != nil {
		return h, err
	}
	var top map[string]any
	if err := yaml.Unmarshal(data, &top); err != nil {
		return h, fmt.Errorf("%s: %w", path, err)
	}
	if v, ok := top["scheme"]; ok {
		s, _ := v.(string)
		if s != "http" && s != "https" {
			return h, fmt.Errorf("%s: scheme %v: want http or https", path, v)
		}
		h.Scheme = s
		delete(top, "scheme")
	}
	rest, err := yaml.Marshal(top)
	if err != nil {
		return h, fmt.Errorf("%s: %w", path, err)
	}
	c, err := config.LoadHTTPConfig(string(rest))
	if err != nil {
		return h, fmt.Errorf("%s: %w", path, err)
	}
	c.SetDirectory(filepath.Dir(path))
	if err := c.Validate(); err != nil {
		return h, fmt.Errorf("%s: %w", path, err)
	}
	h.Client = *c
	return h, nil
}

// peerState is what the agent knows of one agent address.
type peerState struct {
	addr    string                 // the agent's address, host:port
	desc    *agentdesc.Description // its last description; nil: none yet, or forgotten
	lastOK  time.Time
	up      bool
	lastErr string // the last failure, logged; "" while it answers
	self    bool   // it answered as this agent
}

// Config is what discovery is told (the agent's checked options).
type Config struct {
	AgentName, Group, Version string
	Instance                  string // this agent's instance ID (agentdesc.NewInstance)
	Agents                    []target.Target
	File                      string // --agents.file
	DNSName                   string // --agents.dns
	DNSPort                   uint16
	Kubernetes                string // --agents.kubernetes' selector
	HTTP                      HTTP
	RailMode                  agentdesc.Mode
	MaxPeers                  int
	Refresh, Keep, Rotate     time.Duration // --agents.refresh, --agents.keep, --rotate
	DNSRefresh, FileReload    time.Duration // --dns.refresh, --targets.reload
	Interval                  time.Duration // between the pinglist's steps
}

// Metrics are discovery's series (the agent registers them).
type Metrics struct {
	PeerUp, PeerInfo *prometheus.GaugeVec
	Fetches          prometheus.Counter
	FetchFailures    *prometheus.CounterVec
	AgentsBadLines   prometheus.Gauge
	RailProblems     *prometheus.GaugeVec
	NameConflicts    prometheus.Gauge
	ConfigErrors     *prometheus.CounterVec // gorping_target_config_errors_total
	Registerer       prometheus.Registerer  // --agents.kubernetes' own series
}

// Deps are discovery's contacts with the agent and the world.
type Deps struct {
	Log     *slog.Logger
	Metrics Metrics
	// Self is this agent's description; nil before it has described itself.
	Self func() *agentdesc.Description
	// Local are this host's addresses; ListensOn says whether one of the agent's own
	// listeners is on a port (an agent address of this host there is this agent).
	Local     func() map[netip.Addr]bool
	ListensOn func(port uint16) bool
	Resolver  target.Resolver
	// AgentDial, if set, connects the /agent requests.
	AgentDial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Kube is --agents.kubernetes' API server and namespace (nil: members.InCluster);
	// KubePort the port of the agents it lists (0: DefaultAgentPort).
	Kube     func() (*rest.Config, string, error)
	KubePort uint16
	// Hand hands the rail targets on and waits until they are in place (false: ctx
	// ended first).
	Hand func(ctx context.Context, ts []target.Target) bool
}

// Discovery finds the peer agents, reads their descriptions and turns them into rail
// targets.
type Discovery struct {
	cfg    Config
	d      Deps
	log    *slog.Logger
	m      Metrics
	client *http.Client

	file     *source.File        // --agents.file
	dns      *source.DNS         // --agents.dns
	kube     *members.Kubernetes // --agents.kubernetes; nil without
	cond     members.Conditional // the last description and ETag of each agent read: If-None-Match
	kubeWant []string            // with --agents.kubernetes: the peers the pinglist chooses over its members, by name
	planner  members.Planner     // the plan of the last membership --agents.kubernetes gave

	peers      map[string]*peerState // by agent address
	selfSeen   map[string]bool       // addresses skipped as this agent, logged
	nameLogged map[string]bool       // agents of a duplicate name, logged (by their peer name)
	problems   map[string]bool       // rail problems logged (current ones)
	peerUp     map[string]float64    // gorping_peer_up's current series, by peer label
	peerInfo   map[[3]string]bool    // gorping_peer_info's current series
	probing    []string              // the peers probed now, by name (pinglist.Steps moves it)
	lastPlan   string                // the last pinglist problem logged
}

// New makes the discovery cfg describes.
func New(cfg Config, d Deps) (*Discovery, error) {
	var opts []config.HTTPClientOption
	if d.AgentDial != nil {
		opts = append(opts, config.WithDialContextFunc(d.AgentDial))
	}
	client, err := config.NewClientFromConfig(cfg.HTTP.Client, "gorping_mesh_agents", opts...)
	if err != nil {
		return nil, fmt.Errorf("--agents.http-config: %w", err)
	}
	// --agents-dns' resolver: the agent's, watched for cut answers (members.DNS).
	dnsR := d.Resolver
	if dnsR == nil || dnsR == net.DefaultResolver {
		dnsR = members.NewDNS(d.Log, "--agents.dns", "--agents.kubernetes on Kubernetes, else --agents.file", "")
	}
	m := d.Metrics
	dc := &Discovery{cfg: cfg, d: d, log: d.Log, m: m, client: client,
		file: &source.File{Path: cfg.File, DefaultPort: DefaultAgentPort, Kind: source.Agents, Log: d.Log,
			Errors: m.ConfigErrors, Source: target.SourceAgentsFile, BadLines: m.AgentsBadLines},
		dns: &source.DNS{Name: cfg.DNSName, Port: cfg.DNSPort, Option: "--agents-dns", Kind: source.Agents,
			Resolver: dnsR, Log: d.Log, Errors: m.ConfigErrors, Source: target.SourceAgentsDNS},
		peers: map[string]*peerState{}, selfSeen: map[string]bool{}, nameLogged: map[string]bool{}, problems: map[string]bool{},
		peerUp: map[string]float64{}, peerInfo: map[[3]string]bool{}}
	if cfg.Kubernetes != "" {
		if dc.kube, err = newKubeMembers(cfg, d); err != nil {
			return nil, fmt.Errorf("--agents.kubernetes: %w", err)
		}
	}
	return dc, nil
}

// Run discovers until ctx ends: every --agents-refresh it reads every peer's
// description, the file is checked every --targets-reload and on SIGHUP, the DNS name
// resolved every --dns-refresh, and the pinglist moves on at every epoch.
func (dc *Discovery) Run(ctx context.Context, hup <-chan struct{}) {
	cfg := dc.cfg
	dc.file.Load(false)
	dc.dns.Refresh(ctx)
	// --agents.kubernetes' changes are read at each round, not as they come: a fleet's
	// pods change often, and a round per change would cost a plan per change.
	if dc.kube != nil {
		go dc.kube.Run(ctx)
		dc.waitKube(ctx)
	}
	dc.round(ctx)
	refresh := time.NewTicker(cfg.Refresh)
	defer refresh.Stop()
	dns := time.NewTicker(cfg.DNSRefresh)
	defer dns.Stop()
	var fileTick <-chan time.Time
	if dc.file.Path != "" && cfg.FileReload > 0 {
		t := time.NewTicker(cfg.FileReload)
		defer t.Stop()
		fileTick = t.C
	}
	epoch := time.NewTimer(time.Hour)
	defer epoch.Stop()
	for {
		epoch.Reset(dc.untilNextEpoch(time.Now()))
		select {
		case <-ctx.Done():
			return
		case <-refresh.C:
		case <-dns.C:
			dc.dns.Refresh(ctx)
		case <-fileTick:
			if !dc.file.Load(false) {
				continue
			}
		case <-hup:
			dc.file.Load(true)
			dc.dns.Refresh(ctx)
		case <-epoch.C:
		}
		dc.round(ctx)
	}
}

// untilNextEpoch is the time to the next epoch (only with --max-peers: without a
// budget, epochs change nothing).
func (dc *Discovery) untilNextEpoch(now time.Time) time.Duration {
	if dc.cfg.MaxPeers == 0 {
		return time.Hour
	}
	r := dc.cfg.Rotate
	next := now.Truncate(r).Add(r)
	return max(time.Until(next), time.Millisecond)
}

func (dc *Discovery) epoch(now time.Time) uint64 {
	return uint64(now.Unix()) / uint64(dc.cfg.Rotate/time.Second)
}

// addresses are the agent addresses to read, each once, without this agent's own
// listeners (an address of this host on a listener's port).
func (dc *Discovery) addresses() []string {
	local := dc.d.Local()
	seen := map[string]bool{}
	var out []string
	for _, list := range [][]target.Target{dc.cfg.Agents, dc.file.List(), dc.dns.List(), dc.kubeAddrs(time.Now())} {
		for _, t := range list {
			k := t.Key()
			if seen[k] {
				continue
			}
			seen[k] = true
			if a, ok := t.Addr(); ok && local[a] && dc.d.ListensOn(t.Port) {
				if !dc.selfSeen[k] {
					dc.selfSeen[k] = true
					dc.log.Info("skipping an agent address that is this agent's listener", "agent", k)
				}
				continue
			}
			out = append(out, k)
		}
	}
	return out
}

// round reads every agent's description, updates what is known of the peers and hands
// the rail targets to the manager.
func (dc *Discovery) round(ctx context.Context) {
	addrs := dc.addresses()
	listed := map[string]bool{}
	for _, k := range addrs {
		listed[k] = true
		if dc.peers[k] == nil {
			dc.peers[k] = &peerState{addr: k}
		}
	}
	for k, p := range dc.peers {
		if !listed[k] {
			if p.desc != nil {
				// With --agents.kubernetes an agent leaves the list when the pinglist
				// rotates it out: that is the plan working, said at debug level.
				lvl := slog.LevelInfo
				if dc.kube != nil {
					lvl = slog.LevelDebug
				}
				dc.log.Log(ctx, lvl, "agent no longer listed: forgetting it", "agent", k, "peer", p.desc.Name)
			}
			delete(dc.peers, k)
		}
	}
	dc.cond.Retain(addrs)
	type result struct {
		desc   agentdesc.Description
		reason string
		err    error
	}
	res := make([]result, len(addrs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, agentFetchParallel)
	for i, k := range addrs {
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			defer func() { <-sem }()
			res[i].desc, res[i].reason, res[i].err = dc.fetch(ctx, k)
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	now := time.Now()
	log := dc.log
	for i, k := range addrs {
		p, r := dc.peers[k], res[i]
		if r.err == nil {
			if dc.isSelf(r.desc) {
				if !p.self {
					log.Info("an agent address answers as this agent: skipping it", "agent", k, "name", r.desc.Name, "instance", r.desc.Instance)
				}
				p.self, p.desc = true, nil
				continue
			}
			p.self = false
			if !p.up {
				log.Info("peer agent up", "agent", k, "peer", r.desc.Name, "group", r.desc.Group, "rails", len(r.desc.Rails))
			}
			d := r.desc
			p.desc, p.lastOK, p.up, p.lastErr = &d, now, true, ""
			continue
		}
		dc.m.FetchFailures.WithLabelValues(r.reason).Inc()
		p.up = false
		if msg := r.err.Error(); msg != p.lastErr {
			p.lastErr = msg
			if p.desc != nil {
				log.Warn("peer agent does not answer; keeping its rails for --agents-keep", "agent", k, "peer", p.desc.Name,
					"reason", r.reason, "err", r.err, "keep", dc.cfg.Keep)
			} else {
				log.Warn("cannot read an agent's description", "agent", k, "reason", r.reason, "err", r.err)
			}
		}
		if p.desc != nil && now.Sub(p.lastOK) > dc.cfg.Keep {
			log.Warn("peer agent silent for longer than --agents-keep: forgetting its rails", "agent", k, "peer", p.desc.Name,
				"silent", now.Sub(p.lastOK).Round(time.Second))
			p.desc = nil
		}
	}
	peers := dc.known()
	dc.export(peers)
	dc.apply(ctx, peers, now)
}

// fetch reads one agent's description.
func (dc *Discovery) fetch(ctx context.Context, addr string) (agentdesc.Description, string, error) {
	dc.m.Fetches.Inc()
	ctx, cancel := context.WithTimeout(ctx, agentFetchTimeout)
	defer cancel()
	url := dc.cfg.HTTP.Scheme + "://" + addr + "/agent"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return agentdesc.Description{}, fetchUnreachable, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "gorping-mesh/"+dc.cfg.Version)
	dc.cond.Ask(req, addr)
	resp, err := dc.client.Do(req)
	if err != nil {
		var ne net.Error
		if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
			return agentdesc.Description{}, fetchTimeout, fmt.Errorf("GET %s: no answer within %s", url, agentFetchTimeout)
		}
		return agentdesc.Description{}, fetchUnreachable, fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return agentdesc.Description{}, fetchUnauthorized, fmt.Errorf("GET %s: %s: check the credentials in --agents.http-config", url, resp.Status)
	case resp.StatusCode == http.StatusNotModified:
		if d, ok := dc.cond.NotModified(addr); ok {
			return d, "", nil // unchanged: no body
		}
		return agentdesc.Description{}, fetchHTTPStatus, fmt.Errorf("GET %s: %s to an unconditional request", url, resp.Status)
	case resp.StatusCode != http.StatusOK:
		return agentdesc.Description{}, fetchHTTPStatus, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	d, err := agentdesc.Decode(resp.Body)
	if err != nil {
		return agentdesc.Description{}, fetchBadDescripton, fmt.Errorf("GET %s: %w", url, err)
	}
	dc.cond.Keep(addr, resp.Header.Get("ETag"), d)
	return d, "", nil
}

// knownPeer is one peer agent: its latest description and whether any of its addresses
// answers.
type knownPeer struct {
	desc   agentdesc.Description
	up     bool
	lastOK time.Time
}

// isSelf says whether d is this agent's own description (its instance; a 1.0 peer's
// by name and GIDs): an agent of the same name elsewhere is a peer.
func (dc *Discovery) isSelf(d agentdesc.Description) bool {
	own := dc.d.Self()
	if own == nil {
		return d.Name == dc.cfg.AgentName && (d.Instance == "" || d.Instance == dc.cfg.Instance)
	}
	return d.SameAgent(*own)
}

// known are the peers with a description, by name: an agent known at several addresses
// (its node IP in --agents and in DNS) is one peer, with its latest description. Agents
// of one name (this agent's, or another peer's, with different instances: cloned hosts,
// an unset host name) are each a peer of their own, named NAME~INSTANCE (the first 8
// digits; a 1.0 peer's agent address), logged once and counted in
// gorping_peer_name_conflicts.
func (dc *Discovery) known() map[string]*knownPeer {
	addrs := make([]string, 0, len(dc.peers))
	for k, p := range dc.peers {
		if p.desc != nil && !p.self {
			addrs = append(addrs, k)
		}
	}
	slices.Sort(addrs)
	type agent struct {
		kp   *knownPeer
		addr string
	}
	var agents []*agent
	names := map[string]int{}
	for _, k := range addrs {
		p := dc.peers[k]
		i := slices.IndexFunc(agents, func(a *agent) bool { return a.kp.desc.SameAgent(*p.desc) })
		if i < 0 {
			agents = append(agents, &agent{kp: &knownPeer{desc: *p.desc, up: p.up, lastOK: p.lastOK}, addr: k})
			names[p.desc.Name]++
			continue
		}
		a := agents[i]
		a.kp.up = a.kp.up || p.up
		if p.lastOK.After(a.kp.lastOK) {
			a.kp.desc, a.kp.lastOK = *p.desc, p.lastOK
		}
	}
	out := make(map[string]*knownPeer, len(agents))
	conflicts := 0
	for _, a := range agents {
		name := a.kp.desc.Name
		if names[name] > 1 || name == dc.cfg.AgentName {
			conflicts++
			suffix := a.kp.desc.Instance
			if len(suffix) > 8 {
				suffix = suffix[:8]
			}
			if suffix == "" {
				suffix = a.addr
			}
			key := name + "~" + suffix
			if pinglist.CheckHost(key) != nil {
				key = suffix
			}
			if !dc.nameLogged[key] {
				dc.nameLogged[key] = true
				what := "another peer agent"
				if name == dc.cfg.AgentName {
					what = "this agent"
				}
				dc.log.Warn("two agents answer with one name: probing both; give every agent its own --agent-name",
					"agent", a.addr, "name", name, "same_name_as", what, "instance", a.kp.desc.Instance, "own_instance", dc.cfg.Instance, "peer", key)
			}
			a.kp.desc.Name = key
			name = key
		}
		out[name] = a.kp
	}
	dc.m.NameConflicts.Set(float64(conflicts))
	return out
}

// export sets gorping_peer_up and gorping_peer_info: per peer by name, and per address
// for an agent that has never answered (its name is not known).
func (dc *Discovery) export(peers map[string]*knownPeer) {
	m := dc.m
	up := map[string]float64{}
	info := map[[3]string]bool{}
	for name, p := range peers {
		up[name] = 0
		if p.up {
			up[name] = 1
		}
		info[[3]string{name, p.desc.Group, p.desc.GorpingVersion}] = true
	}
	for _, p := range dc.peers {
		if p.desc == nil && !p.self {
			up[p.addr] = 0
		}
	}
	for l := range dc.peerUp {
		if _, ok := up[l]; !ok {
			m.PeerUp.DeleteLabelValues(l)
		}
	}
	for l, v := range up {
		m.PeerUp.WithLabelValues(l).Set(v)
	}
	dc.peerUp = up
	for l := range dc.peerInfo {
		if !info[l] {
			m.PeerInfo.DeleteLabelValues(l[0], l[1], l[2])
		}
	}
	for l := range info {
		m.PeerInfo.WithLabelValues(l[0], l[1], l[2]).Set(1)
	}
	dc.peerInfo = info
}

// chosen are the peers to probe in this epoch, by name: every known peer, or with
// --max-peers the pinglist's choice among the members (the known peers and this agent).
func (dc *Discovery) chosen(peers map[string]*knownPeer, now time.Time) []string {
	cfg := dc.cfg
	names := make([]string, 0, len(peers))
	for n := range peers {
		names = append(names, n)
	}
	slices.Sort(names)
	if dc.kube != nil {
		// The plan was made over the whole membership (kubeAddrs): its choice, as far as
		// their descriptions are read.
		return slices.DeleteFunc(slices.Clone(dc.kubeWant), func(n string) bool { return peers[n] == nil })
	}
	if cfg.MaxPeers == 0 {
		return names
	}
	members := []pinglist.Member{{Host: cfg.AgentName, Group: cfg.Group}}
	for _, n := range names {
		members = append(members, peers[n].desc.Member())
	}
	plan, err := pinglist.New(members, cfg.MaxPeers)
	var ts []pinglist.Member
	if err == nil {
		ts, err = plan.Targets(cfg.AgentName, dc.epoch(now))
	}
	if err != nil {
		// Cannot happen with checked descriptions; if it does, every peer is probed
		// rather than none, and it is said once.
		if msg := err.Error(); msg != dc.lastPlan {
			dc.lastPlan = msg
			dc.log.Error("cannot compute the pinglist: probing every known peer", "err", err)
		}
		return names
	}
	dc.lastPlan = ""
	out := make([]string, 0, len(ts))
	for _, t := range ts {
		out = append(out, t.Host)
	}
	return out
}

// pinglistBatch is how many peers a change of the pinglist adds (and removes) at a time.
const pinglistBatch = 8

// apply moves the probed peers to this epoch's choice in batches (pinglist.Steps: each
// step's additions start before its removals stop) and hands the rail targets of the
// probed peers to the manager after each change.
func (dc *Discovery) apply(ctx context.Context, peers map[string]*knownPeer, now time.Time) {
	want := dc.chosen(peers, now)
	// A peer forgotten since goes at once: it has no description to pair with.
	dc.probing = slices.DeleteFunc(dc.probing, func(n string) bool { return peers[n] == nil })
	steps := pinglist.Steps(dc.probing, want, pinglistBatch)
	if len(steps) == 0 {
		dc.d.Hand(ctx, dc.railTargets(peers, dc.probing))
		return
	}
	for i, st := range steps {
		if i > 0 {
			// Let the last step's targets start their first slots before the next.
			select {
			case <-ctx.Done():
				return
			case <-time.After(dc.cfg.Interval):
			}
		}
		dc.probing = append(dc.probing, st.Add...)
		if !dc.d.Hand(ctx, dc.railTargets(peers, dc.probing)) {
			return
		}
		dc.probing = slices.DeleteFunc(dc.probing, func(n string) bool { return slices.Contains(st.Remove, n) })
		if !dc.d.Hand(ctx, dc.railTargets(peers, dc.probing)) {
			return
		}
	}
}

// railTargets pairs this agent's rails with each of names' (agentdesc.Pair), logging
// each problem once while it lasts and setting gorping_rail_problems.
func (dc *Discovery) railTargets(peers map[string]*knownPeer, names []string) []target.Target {
	self := dc.d.Self()
	if self == nil {
		return nil
	}
	local := map[netip.Addr]bool{}
	for _, r := range self.Rails {
		for _, p := range r.Addresses {
			local[p.Addr()] = true
		}
	}
	var out []target.Target
	problems := map[string]bool{}
	byReason := map[string]int{}
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	for _, n := range sorted {
		p := peers[n]
		if p == nil {
			continue
		}
		ts, probs := agentdesc.Pair(*self, p.desc, dc.cfg.RailMode)
		for _, pr := range probs {
			line := pr.Reason + " " + pr.Error()
			problems[line] = true
			byReason[pr.Reason]++
			if !dc.problems[line] {
				dc.log.Warn("a rail pair that cannot be probed", "peer", pr.Peer, "device", pr.Device, "port", pr.Port,
					"reason", pr.Reason, "detail", pr.Detail)
			}
		}
		for _, t := range ts {
			if local[t.Addr.Addr()] {
				continue // never a sibling rail of this agent (Pair says so too)
			}
			out = append(out, target.Target{Host: t.Addr.Addr().String(), Port: t.Addr.Port(), Source: target.SourceRails,
				Src: t.Source, Device: t.Device, DevPort: t.Port, Peer: t.Peer})
		}
	}
	dc.problems = problems
	for _, r := range RailProblemReasons {
		dc.m.RailProblems.WithLabelValues(r).Set(float64(byReason[r]))
	}
	return out
}

// RailProblemReasons are gorping_rail_problems' reasons.
var RailProblemReasons = []string{agentdesc.ReasonSelf, agentdesc.ReasonNoSubnet, agentdesc.ReasonGIDFamily, agentdesc.ReasonLinkLayer}
