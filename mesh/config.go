package mesh

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/prometheus/exporter-toolkit/web"

	"github.com/gorping/gorping/mesh/agentdesc"
	"github.com/gorping/gorping/mesh/discovery"
	"github.com/gorping/gorping/mesh/members"
	"github.com/gorping/gorping/mesh/pinglist"
	"github.com/gorping/gorping/mesh/source"
	"github.com/gorping/gorping/mesh/target"
	"github.com/gorping/gorping/rping"
)

// defaultListen is the metrics listener's default address. Port 10174: the range the
// Prometheus default-port allocations began with (9100-9999) has been full since 2023
// and allocations continue above 10000; 10174 echoes rping's 7174 (docs/mesh.md).
const defaultListen = ":10174"

// Config is one agent's configuration, field by field the options of `gorping mesh`
// (each field's comment names its option; the command line, package cli, declares
// them). DefaultConfig gives the defaults; New and Run check every field and say which
// option is wrong.
type Config struct {
	Listen        []string // --web.listen-address (alias --listen): the metrics listeners, [host]:port each
	WebConfigFile string   // --web.config.file (exporter-toolkit: TLS, basic auth)

	Port        int    // --port: the responder's port, and the default port of targets
	Bind        string // --bind: the responder's address (:: serves IPv6 and IPv4)
	NoResponder bool   // --no-responder

	TargetsFile   string        // --targets.file
	TargetsReload time.Duration // --targets.reload: how often the file is checked; 0: only SIGHUP
	Peers         []string      // --peers: host[:port] each
	TargetsDNS    string        // --targets.dns NAME[:PORT]
	DNSRefresh    time.Duration // --dns.refresh
	MaxTargets    int           // --max-targets: the targets beyond it are not probed

	Interval       time.Duration // --interval
	Paths          int           // --paths: connections to each target, each its own flow
	Jitter         float64       // --jitter, fraction of the interval
	Timeout        time.Duration // --timeout: one ping; 0: the smaller of 1s and the interval
	ConnectTimeout time.Duration // --connect-timeout
	BackoffMax     time.Duration // --backoff-max
	PathLifetime   time.Duration // --path-lifetime: a path's connection is replaced after about this long; 0: never
	Size           int           // --size
	Source         string        // --source: the probes' source address; "": the route's

	AgentName        string        // --agent-name: this agent's name in its description, pinglists and peers' labels; "": the host name
	Group            string        // --group: its pinglist group (a ToR, a rack, a switch plane)
	Agents           []string      // --agents: peer agents' listeners, host[:port] each
	AgentsFile       string        // --agents.file: one host[:port] per line
	AgentsDNS        string        // --agents.dns NAME[:PORT]
	AgentsKubernetes string        // --agents.kubernetes SELECTOR: the agents are the Running pods it selects in this pod's namespace (API server)
	AgentsHTTPConfig string        // --agents.http-config: the HTTP client of /agent requests (Prometheus' http client config)
	AgentsRefresh    time.Duration // --agents.refresh: how often every peer's /agent is read
	AgentsKeep       time.Duration // --agents.keep: how long a peer that stops answering keeps its rails
	Rails            string        // --rails same-subnet|all
	MaxPeers         int           // --max-peers: pinglist budget (0: every known peer)
	Rotate           time.Duration // --rotate: the pinglist epoch

	ProbeAllow []string // --probe.allow: prefixes or addresses
	ProbeAny   bool     // --probe.any

	LogFormat string // --log.format logfmt|json (text: logfmt)
	LogLevel  string // --log.level debug|info|warn|error

	Version string    // for gorping_build_info and the landing page
	Log     io.Writer // where the logs go; nil: io.Discard
}

// defaultMaxTargets: a full mesh of 4,097 hosts (~0.15 MiB and 2 fds per connected
// target, docs/mesh.md); a list longer than that is more likely a mistake.
const defaultMaxTargets = 4096

// DefaultConfig is the configuration of `gorping mesh` without options.
func DefaultConfig() Config {
	return Config{Listen: []string{defaultListen}, Port: rping.DefaultPort, Bind: "::", TargetsReload: 2 * time.Second,
		DNSRefresh: 30 * time.Second, MaxTargets: defaultMaxTargets, Interval: time.Second, Paths: 1, Jitter: 0.1, ConnectTimeout: 5 * time.Second,
		BackoffMax: 30 * time.Second, PathLifetime: defaultPathLifetime, Size: rping.DefaultSize, LogFormat: "logfmt", LogLevel: "info",
		AgentsRefresh: 30 * time.Second, AgentsKeep: 5 * time.Minute, Rails: discovery.RailsSameSubnet, Rotate: 5 * time.Minute}
}

// The shortest durations the agent takes: below them it would spend its time on
// timers (an interval of 1ns spun a CPU counting skipped slots).
const (
	minInterval       = 10 * time.Millisecond // also --backoff-max's
	minTimeout        = time.Millisecond
	minConnectTimeout = 100 * time.Millisecond // rdma_cm's address and route resolution take milliseconds
	minReload         = 100 * time.Millisecond
	minDNSRefresh     = time.Second
)

// maxPaths bounds --paths: each path is one more RC QP at both ends of every target, and
// a NIC's QP context cache spills past about 2,000 QPs (docs/mesh.md, "Paths"): 16 paths
// to 128 targets are already 2,048 QPs on each side.
const maxPaths = 16

// defaultPathLifetime and minPathLifetime bound --path-lifetime (docs/mesh.md, "Paths:
// a fault stays visible"): the default costs a host of 2,048 paths 3.4 new connections a
// second; under a minute a fleet would spend more on connecting than on probing.
const defaultPathLifetime = 10 * time.Minute

var minPathLifetime = time.Minute // a variable: host tests rotate in milliseconds

// maxMaxTargets bounds --max-targets (a million connections would exhaust any host).
const maxMaxTargets = 1_000_000

// parseAllow parses one --probe.allow entry: a prefix or an address. Addresses are
// matched unmapped (a probe of ::ffff:192.0.2.1 is a probe of 192.0.2.1), so an
// IPv4-mapped prefix is taken as its IPv4 prefix.
func parseAllow(s string) (netip.Prefix, error) {
	pf, err := netip.ParsePrefix(s)
	if err != nil {
		a, aerr := netip.ParseAddr(s)
		if aerr != nil {
			return netip.Prefix{}, errors.New("neither a prefix nor an address")
		}
		if a.Zone() != "" {
			return netip.Prefix{}, errors.New("zoned addresses are not supported")
		}
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	if a := pf.Addr(); a.Is4In6() {
		if pf.Bits() < 96 {
			return netip.Prefix{}, errors.New("an IPv4-mapped prefix shorter than /96 matches no address: write the IPv4 prefix")
		}
		pf = netip.PrefixFrom(a.Unmap(), pf.Bits()-96)
	}
	return pf.Masked(), nil
}

// parseDNSOption parses NAME[:PORT] (--targets.dns, --agents.dns).
func parseDNSOption(opt, v string, defaultPort uint16) (string, uint16, error) {
	name, port := v, defaultPort
	if h, p, err := net.SplitHostPort(v); err == nil {
		pp, perr := target.ParsePort(p)
		if perr != nil {
			return "", 0, usageErrorf("%s %s: %v", opt, target.Quote(v), perr)
		}
		name, port = h, pp
	}
	if _, err := netip.ParseAddr(name); err != nil && !target.ValidHostname(name) {
		return "", 0, usageErrorf("%s %s: not a host name", opt, target.Quote(v))
	}
	return name, port, nil
}

func checkMin(opt string, d, least time.Duration) error {
	if d < least {
		return usageErrorf("%s %s: want at least %s", opt, d, least)
	}
	return nil
}

// agentConfig is a Config checked and parsed.
type agentConfig struct {
	Config
	port       uint16
	bind       netip.Addr
	source     netip.Addr
	peers      []target.Target
	probeAllow []netip.Prefix
	dnsName    string
	dnsPort    uint16

	agents        []target.Target
	agentsDNSName string
	agentsDNSPort uint16
	agentsHTTP    discovery.HTTP
	railMode      agentdesc.Mode
}

// ErrUsage is what errors.Is finds in the error of a Config that New or Run refuses
// for a bad option (the command line's exit status 2); its message names the option.
var ErrUsage = errors.New("bad option")

// usageError is a Config that New refuses: a bad option.
type usageError struct{ err error }

func (e usageError) Error() string        { return e.err.Error() }
func (e usageError) Unwrap() error        { return e.err }
func (e usageError) Is(target error) bool { return target == ErrUsage }

func usageErrorf(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// check checks cfg and parses its addresses and targets. A bad option is a usageError;
// a web configuration that cannot be used is a plain error (exit status 1).
func (cfg Config) check() (*agentConfig, error) {
	c := &agentConfig{Config: cfg}
	if cfg.Port < 1 || cfg.Port > 65535 {
		return nil, usageErrorf("--port %d: want 1..65535", cfg.Port)
	}
	c.port = uint16(cfg.Port)
	if cfg.Size < rping.MinSize || cfg.Size > rping.MaxSize {
		return nil, usageErrorf("--size %d: want %d..%d", cfg.Size, rping.MinSize, rping.MaxSize)
	}
	var err error
	if c.bind, err = netip.ParseAddr(cfg.Bind); err != nil {
		return nil, usageErrorf("--bind: %w", err)
	}
	if cfg.Source != "" {
		if c.source, err = netip.ParseAddr(cfg.Source); err != nil {
			return nil, usageErrorf("--source: %w", err)
		}
	}
	if len(cfg.Peers) > 0 {
		if c.peers, err = target.ParseList(strings.Join(cfg.Peers, ","), c.port); err != nil {
			return nil, usageErrorf("--peers: %w", err)
		}
	}
	for _, p := range cfg.ProbeAllow {
		pf, err := parseAllow(p)
		if err != nil {
			return nil, usageErrorf("--probe.allow %s: %v", target.Quote(p), err)
		}
		c.probeAllow = append(c.probeAllow, pf)
	}
	if len(cfg.Listen) == 0 {
		return nil, usageErrorf("--web.listen-address: no address")
	}
	for _, l := range cfg.Listen {
		if _, _, err := net.SplitHostPort(l); err != nil {
			return nil, usageErrorf("--web.listen-address %s: want [HOST]:PORT", target.Quote(l))
		}
	}
	if cfg.MaxTargets < 1 || cfg.MaxTargets > maxMaxTargets {
		return nil, usageErrorf("--max-targets %d: want 1..%d", cfg.MaxTargets, maxMaxTargets)
	}
	if err := checkMin("--interval", cfg.Interval, minInterval); err != nil {
		return nil, err
	}
	if cfg.Paths < 1 || cfg.Paths > maxPaths {
		return nil, usageErrorf("--paths %d: want 1..%d", cfg.Paths, maxPaths)
	}
	if cfg.Timeout == 0 {
		c.Timeout = min(time.Second, cfg.Interval)
	}
	if err := checkMin("--timeout", c.Timeout, minTimeout); err != nil {
		return nil, err
	}
	if err := checkMin("--connect-timeout", cfg.ConnectTimeout, minConnectTimeout); err != nil {
		return nil, err
	}
	if err := checkMin("--backoff-max", cfg.BackoffMax, minInterval); err != nil {
		return nil, err
	}
	if cfg.PathLifetime != 0 {
		if err := checkMin("--path-lifetime", cfg.PathLifetime, minPathLifetime); err != nil {
			return nil, usageErrorf("%v (or 0: never)", err)
		}
	}
	if cfg.TargetsReload != 0 {
		if err := checkMin("--targets.reload", cfg.TargetsReload, minReload); err != nil {
			return nil, usageErrorf("%v (or 0: only on SIGHUP)", err)
		}
	}
	if err := checkMin("--dns.refresh", cfg.DNSRefresh, minDNSRefresh); err != nil {
		return nil, err
	}
	if cfg.Jitter < 0 || cfg.Jitter >= 0.5 {
		return nil, usageErrorf("--jitter %g: want 0 <= F < 0.5", cfg.Jitter)
	}
	if _, err := logFormat(cfg.LogFormat); err != nil {
		return nil, usageError{err}
	}
	if _, err := logLevel(cfg.LogLevel); err != nil {
		return nil, usageError{err}
	}
	if cfg.TargetsDNS != "" {
		if c.dnsName, c.dnsPort, err = parseDNSOption("--targets.dns", cfg.TargetsDNS, c.port); err != nil {
			return nil, err
		}
	}
	if err := c.checkAgents(); err != nil {
		return nil, err
	}
	if c.AgentName == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("--agent-name: no default: the host name: %w", err)
		}
		if pinglist.CheckHost(h) != nil {
			return nil, usageErrorf("--agent-name: the host name %s cannot be an agent's name: give --agent-name", target.Quote(h))
		}
		c.AgentName = h
	} else if err := pinglist.CheckHost(c.AgentName); err != nil {
		return nil, usageErrorf("--agent-name %s: %v", target.Quote(c.AgentName), err)
	}
	if err := pinglist.CheckGroup(cfg.Group); err != nil {
		return nil, usageErrorf("--group %s: %v", target.Quote(cfg.Group), err)
	}
	if cfg.WebConfigFile != "" {
		// Regular files only (exporter-toolkit would block on a FIFO at every request).
		if _, err := source.ReadRegularFile(cfg.WebConfigFile, maxWebConfigBytes); err != nil {
			return nil, fmt.Errorf("--web.config.file: %w", err)
		}
		if err := web.Validate(cfg.WebConfigFile); err != nil {
			return nil, fmt.Errorf("--web.config.file %s: %w", cfg.WebConfigFile, err)
		}
	}
	return c, nil
}

// checkAgents checks the discovery options.
func (c *agentConfig) checkAgents() error {
	cfg := c.Config
	var err error
	if len(cfg.Agents) > 0 {
		if c.agents, err = target.ParseList(strings.Join(cfg.Agents, ","), discovery.DefaultAgentPort); err != nil {
			return usageErrorf("--agents: %w", err)
		}
	}
	if cfg.AgentsDNS != "" {
		if c.agentsDNSName, c.agentsDNSPort, err = parseDNSOption("--agents.dns", cfg.AgentsDNS, discovery.DefaultAgentPort); err != nil {
			return err
		}
	}
	switch cfg.Rails {
	case discovery.RailsSameSubnet:
		c.railMode = agentdesc.SameSubnet
	case discovery.RailsAll:
		c.railMode = agentdesc.AllRails
	default:
		return usageErrorf("--rails %s: want %s or %s", target.Quote(cfg.Rails), discovery.RailsSameSubnet, discovery.RailsAll)
	}
	if cfg.MaxPeers < 0 || cfg.MaxPeers > discovery.MaxMaxPeers {
		return usageErrorf("--max-peers %d: want 0 (every peer) to %d", cfg.MaxPeers, discovery.MaxMaxPeers)
	}
	if err := checkMin("--agents.refresh", cfg.AgentsRefresh, discovery.MinRefresh); err != nil {
		return err
	}
	if cfg.AgentsKeep < 0 {
		return usageErrorf("--agents.keep %s: want 0 or more", cfg.AgentsKeep)
	}
	if err := checkMin("--rotate", cfg.Rotate, discovery.MinRotate); err != nil {
		return err
	}
	if cfg.AgentsKubernetes != "" {
		if err := members.CheckSelector(cfg.AgentsKubernetes); err != nil {
			return usageErrorf("--agents.kubernetes %s: %v", target.Quote(cfg.AgentsKubernetes), err)
		}
	}
	if c.agentsHTTP, err = discovery.LoadHTTP(cfg.AgentsHTTPConfig); err != nil {
		return fmt.Errorf("--agents.http-config: %w", err)
	}
	return nil
}
