package mesh

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/exporter-toolkit/web"

	"github.com/gorping/gorping/mesh/agentdesc"
	"github.com/gorping/gorping/mesh/members"
	"github.com/gorping/gorping/mesh/pinglist"
	"github.com/gorping/gorping/rping"
)

// defaultListen is the metrics listener's default address. Port 10174: the range the
// Prometheus default-port allocations began with (9100-9999) has been full since 2023
// and allocations continue above 10000; 10174 echoes rping's 7174 (docs/mesh.md).
const defaultListen = ":10174"

// Config is one agent's configuration, field by field the options of `gorping mesh`
// (each field's comment names its option). DefaultConfig gives the defaults; New
// checks every field and says which option is wrong.
type Config struct {
	Listen        []string // --web.listen-address (alias --listen): the metrics listeners, [host]:port each
	WebConfigFile string   // --web.config.file (exporter-toolkit: TLS, basic auth)

	Port        int    // --port: the responder's port, and the default port of targets
	Bind        string // --bind: the responder's address (:: serves IPv6 and IPv4)
	NoResponder bool   // --no-responder

	TargetsFile   string        // --targets
	TargetsReload time.Duration // --targets-reload: how often the file is checked; 0: only SIGHUP
	Peers         []string      // --peers: host[:port] each
	TargetsDNS    string        // --targets-dns NAME[:PORT]
	DNSRefresh    time.Duration // --dns-refresh
	MaxTargets    int           // --max-targets: the targets beyond it are not probed

	Interval       time.Duration // --interval
	Paths          int           // --paths: connections to each target, each its own flow
	Jitter         float64       // --jitter, fraction of the interval
	Timeout        time.Duration // --timeout: one ping; 0: the smaller of 1s and the interval
	ConnectTimeout time.Duration // --connect-timeout
	BackoffMax     time.Duration // --backoff-max
	Size           int           // --size
	Source         string        // --source: the probes' source address; "": the route's

	AgentName        string        // --agent-name: this agent's name in its description, pinglists and peers' labels; "": the host name
	Group            string        // --group: its pinglist group (a ToR, a rack, a switch plane)
	Agents           []string      // --agents: peer agents' listeners, host[:port] each
	AgentsFile       string        // --agents-file: one host[:port] per line
	AgentsDNS        string        // --agents-dns NAME[:PORT]
	AgentsKubernetes string        // --agents-kubernetes SELECTOR: the agents are the Running pods it selects in this pod's namespace (API server)
	AgentsHTTPConfig string        // --agents.http-config: the HTTP client of /agent requests (Prometheus' http client config)
	AgentsRefresh    time.Duration // --agents-refresh: how often every peer's /agent is read
	AgentsKeep       time.Duration // --agents-keep: how long a peer that stops answering keeps its rails
	Rails            string        // --rails same-subnet|all
	MaxPeers         int           // --max-peers: pinglist budget (0: every known peer)
	Rotate           time.Duration // --rotate: the pinglist epoch

	ProbeAllow []string // --probe-allow: prefixes or addresses
	ProbeAny   bool     // --probe-any

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
		BackoffMax: 30 * time.Second, Size: rping.DefaultSize, LogFormat: "logfmt", LogLevel: "info",
		AgentsRefresh: 30 * time.Second, AgentsKeep: 5 * time.Minute, Rails: railsSameSubnet, Rotate: 5 * time.Minute}
}

// usage is `gorping mesh --help`.
const usage = `usage: gorping mesh [options]
An RDMA ping mesh agent: serves the rping protocol (a persistent server), keeps one rping
connection to every target, pings each once per interval and exports the results to
Prometheus (/metrics; /probe?target=HOST[:PORT]&count=N probes once; /-/healthy, /-/ready).

Targets (any rping server: gorping mesh, gorping -s -P, rping -s -P):
	--targets FILE		one host[:port] per line, # comments; re-read when it changes and on SIGHUP
	--targets-reload DUR	how often the file is checked for changes (default 2s; 0: only on SIGHUP)
	--peers a,b,c		targets on the command line
	--targets-dns NAME[:PORT]	every A/AAAA address of NAME (e.g. a Kubernetes headless Service)
	--dns-refresh DUR	how often NAME is resolved again (default 30s)
	--max-targets N		probe at most N targets (default 4096): the file's first, then
				--peers, then --targets-dns (by address); the rest are logged and counted
	A target on this agent's responder port at one of this host's addresses is skipped.

Probing:
	--interval DUR		one ping per target per interval (default 1s)
	--paths K		K connections to each target, 1..16 (default 1), each its own flow
				(QPs, RoCEv2 UDP source port: its own ECMP path) pinging once per
				interval in its own slot; with 2 or more, gorping_path_* per path
	--jitter F		each slot moves by up to F·interval (default 0.1)
	--timeout DUR		a ping that takes longer fails with reason timeout (default 1s or the
				interval if shorter; a longer timeout than the interval lets a slow
				ping outlast slots, which are skipped)
	--connect-timeout DUR	bound of resolution and connection (default 5s)
	--backoff-max DUR	reconnection backoff cap (default 30s)
	--size N		ping size in bytes, 23..65535 (default 64)
	--source ADDR		source address of the probes (rping -I)

Responder:
	--port N		responder port, also the default port of targets (default 7174)
	--bind ADDR		responder address (default ::, which serves IPv6 and IPv4)
	--no-responder		probe only

HTTP:
	--web.listen-address ADDR	metrics listener (default :10174; --listen is the same)
	--web.config.file FILE	TLS and basic auth (Prometheus exporter-toolkit web configuration)
	--probe-allow CIDRS	/probe may also probe addresses in these prefixes (comma-separated)
	--probe-any		/probe may probe any target

Agents (peers found by the address of their listener; docs/mesh.md):
	--agent-name NAME	this agent's name in its description (/agent) and its peers' labels
				(default: the host name)
	--group NAME		its pinglist group: a ToR, a rack, a switch plane
	--agents a,b,c		peer agents by their listener's host[:port] (default port 10174);
				each one's rails are read from its /agent and probed
	--agents-file FILE	one agent host[:port] per line; re-read like --targets
	--agents-dns NAME[:PORT]	every A/AAAA address of NAME is an agent (resolved every --dns-refresh)
	--agents-kubernetes SELECTOR	the agents are the Running pods SELECTOR selects in this
				pod's namespace (the API server, read as the pod's service account):
				named by their node, grouped by their topology.kubernetes.io/zone
				label, at their pod IP; with --max-peers only the chosen peers' /agent
				is read
	--agents.http-config FILE	the client of /agent: scheme, tls_config, basic_auth, ... (YAML,
				as in a Prometheus scrape config)
	--agents-refresh DUR	how often every peer's /agent is read (default 30s)
	--agents-keep DUR	a peer that stops answering keeps its rails this long (default 5m)
	--rails same-subnet|all	which peer rails each local rail probes (default same-subnet)
	--max-peers K		probe at most K peers, chosen by the pinglist (default 0: every peer)
	--rotate DUR		the pinglist's epoch: its inter-group peers rotate (default 5m)

Logs:
	--log.format logfmt|json	(default logfmt, on stderr; text is logfmt)
	--log.level LEVEL	debug, info, warn, error (default info)

DUR is a Go duration (500ms, 2s, 1m) or seconds (0.5). --web.listen-address, --peers,
--agents and --probe-allow may be repeated and add up (--peers a --peers b,c probes all three);
every other option is taken once, and an empty value is an error (but for --group: an
empty group is none).
`

// IsCommand reports whether args (rping's argv without the program name) is a mesh
// command line: "mesh" first and every later word one of its options or an option's
// value (valid or not: a bad value is mesh's error to report). Every rping run needs -s
// or -c, which are not mesh options, so no command line that runs rping changes meaning
// (the same rule as `gorping devices`).
func IsCommand(args []string) bool {
	if len(args) == 0 || args[0] != "mesh" {
		return false
	}
	fs, _ := newFlagSet(io.Discard)
	for i := 1; i < len(args); i++ {
		a := args[i]
		name := strings.TrimLeft(a, "-")
		if name == a || len(a)-len(name) > 2 || name == "" {
			return false // not an option
		}
		name, _, hasValue := strings.Cut(name, "=")
		f := fs.Lookup(name)
		if f == nil {
			return false
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() || hasValue {
			continue
		}
		i++ // the option's value
		if i >= len(args) {
			return false
		}
	}
	return true
}

// Flags lists mesh's options for the shell completions and the man page test (package
// main's subcommand table): each name without dashes, and whether it takes a value.
func Flags() map[string]bool {
	fs, _ := newFlagSet(io.Discard)
	out := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) {
		b, ok := f.Value.(interface{ IsBoolFlag() bool })
		out[f.Name] = !ok || !b.IsBoolFlag()
	})
	return out
}

// parseArgs parses the words after "mesh" into a Config (New checks it). For --help it
// returns flag.ErrHelp.
func parseArgs(args []string) (Config, error) {
	fs, v := newFlagSet(io.Discard)
	if err := fs.Parse(args); err != nil {
		return *v.cfg, errors.New(flagMessage(err.Error()))
	}
	if v.help {
		return *v.cfg, flag.ErrHelp
	}
	if fs.NArg() > 0 {
		return *v.cfg, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return *v.cfg, nil
}

// flagMessages rewrite the flag package's errors to name the option as mesh's help
// writes it: "--interval \"x\": ...", "--peers: empty value".
var flagMessages = []struct {
	re   *regexp.Regexp
	repl string
}{
	{regexp.MustCompile(`^invalid value "" for flag -(\S+): (.*)$`), "--$1: $2"},
	{regexp.MustCompile(`^invalid value (".*") for flag -(\S+): (.*)$`), "--$2 $1: $3"},
	{regexp.MustCompile(`^invalid boolean flag (\S+): (.*)$`), "--$1: $2"},
	{regexp.MustCompile(`^flag needs an argument: -(\S+)$`), "--$1: needs a value"},
	{regexp.MustCompile(`^flag provided but not defined: -(\S+)$`), "--$1: no such option"},
}

func flagMessage(msg string) string {
	for _, m := range flagMessages {
		if m.re.MatchString(msg) {
			return m.re.ReplaceAllString(msg, m.repl)
		}
	}
	return msg
}

// flagVars are the flags' destinations.
type flagVars struct {
	cfg  *Config
	help bool
}

// newFlagSet declares mesh's options: every option is here, once. The lists may be
// repeated and add up; every other option may be given once; no value may be empty.
func newFlagSet(out io.Writer) (*flag.FlagSet, *flagVars) {
	cfg := DefaultConfig()
	v := &flagVars{cfg: &cfg}
	fs := flag.NewFlagSet("gorping mesh", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {}
	one := func(p flag.Value, name string) { fs.Var(&onceFlag{v: p}, name, "") }
	str := func(p *string, name string) { one((*stringFlag)(p), name) }
	listen := &listFlag{l: &cfg.Listen, replace: true}
	fs.Var(listen, "web.listen-address", "")
	fs.Var(listen, "listen", "") // gorping's first name for it
	str(&cfg.WebConfigFile, "web.config.file")
	one((*intFlag)(&cfg.Port), "port")
	str(&cfg.Bind, "bind")
	one((*boolFlag)(&cfg.NoResponder), "no-responder")
	str(&cfg.TargetsFile, "targets")
	one(&durationFlag{&cfg.TargetsReload}, "targets-reload")
	fs.Var(&listFlag{l: &cfg.Peers}, "peers", "")
	str(&cfg.TargetsDNS, "targets-dns")
	one(&durationFlag{&cfg.DNSRefresh}, "dns-refresh")
	one((*intFlag)(&cfg.MaxTargets), "max-targets")
	one(&durationFlag{&cfg.Interval}, "interval")
	one((*intFlag)(&cfg.Paths), "paths")
	one((*floatFlag)(&cfg.Jitter), "jitter")
	one(&durationFlag{&cfg.Timeout}, "timeout")
	one(&durationFlag{&cfg.ConnectTimeout}, "connect-timeout")
	one(&durationFlag{&cfg.BackoffMax}, "backoff-max")
	one((*intFlag)(&cfg.Size), "size")
	str(&cfg.Source, "source")
	str(&cfg.AgentName, "agent-name")
	// An empty --group is no group: what a manifest's --group=$(NODE_LABEL) gives on a
	// node without the label, which must not stop the agent.
	fs.Var(&onceFlag{v: (*stringFlag)(&cfg.Group), emptyOK: true}, "group", "")
	fs.Var(&listFlag{l: &cfg.Agents}, "agents", "")
	str(&cfg.AgentsFile, "agents-file")
	str(&cfg.AgentsDNS, "agents-dns")
	str(&cfg.AgentsKubernetes, "agents-kubernetes")
	str(&cfg.AgentsHTTPConfig, "agents.http-config")
	one(&durationFlag{&cfg.AgentsRefresh}, "agents-refresh")
	one(&durationFlag{&cfg.AgentsKeep}, "agents-keep")
	str(&cfg.Rails, "rails")
	one((*intFlag)(&cfg.MaxPeers), "max-peers")
	one(&durationFlag{&cfg.Rotate}, "rotate")
	fs.Var(&listFlag{l: &cfg.ProbeAllow}, "probe-allow", "")
	one((*boolFlag)(&cfg.ProbeAny), "probe-any")
	str(&cfg.LogFormat, "log.format")
	str(&cfg.LogLevel, "log.level")
	fs.BoolVar(&v.help, "help", false, "")
	fs.BoolVar(&v.help, "h", false, "")
	return fs, v
}

// onceFlag refuses a second use of its option and, unless emptyOK, an empty value.
type onceFlag struct {
	v       flag.Value
	set     bool
	emptyOK bool
}

func (f *onceFlag) String() string {
	if f == nil || f.v == nil {
		return ""
	}
	return f.v.String()
}

func (f *onceFlag) Set(s string) error {
	if f.set {
		return errors.New("given twice (only --web.listen-address, --peers, --agents and --probe-allow add up)")
	}
	if s == "" && !f.emptyOK {
		return errors.New("empty value")
	}
	f.set = true
	return f.v.Set(s)
}

func (f *onceFlag) IsBoolFlag() bool {
	b, ok := f.v.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

type stringFlag string

func (f *stringFlag) String() string { return string(*f) }
func (f *stringFlag) Set(s string) error {
	*f = stringFlag(s)
	return nil
}

type boolFlag bool

func (f *boolFlag) String() string   { return strconv.FormatBool(bool(*f)) }
func (f *boolFlag) IsBoolFlag() bool { return true }
func (f *boolFlag) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return errors.New("want true or false")
	}
	*f = boolFlag(b)
	return nil
}

type intFlag int

func (f *intFlag) String() string { return strconv.Itoa(int(*f)) }
func (f *intFlag) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return errors.New("not an integer")
	}
	*f = intFlag(n)
	return nil
}

type floatFlag float64

func (f *floatFlag) String() string { return strconv.FormatFloat(float64(*f), 'g', -1, 64) }
func (f *floatFlag) Set(s string) error {
	x, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return errors.New("not a number")
	}
	*f = floatFlag(x)
	return nil
}

// listFlag is a comma-separated list; each use of the option adds to it (replace: the
// first use replaces the default).
type listFlag struct {
	l       *[]string
	replace bool
	used    bool
}

func (f *listFlag) String() string {
	if f == nil || f.l == nil {
		return ""
	}
	return strings.Join(*f.l, ",")
}

func (f *listFlag) Set(s string) error {
	var l []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			l = append(l, e)
		}
	}
	if len(l) == 0 {
		return errors.New("empty value")
	}
	if f.replace && !f.used {
		*f.l = nil
	}
	f.used = true
	*f.l = append(*f.l, l...)
	return nil
}

// durationFlag takes a Go duration or a number of seconds.
type durationFlag struct{ d *time.Duration }

func (f *durationFlag) String() string {
	if f == nil || f.d == nil {
		return ""
	}
	return f.d.String()
}

func (f *durationFlag) Set(s string) error {
	if d, err := time.ParseDuration(s); err == nil {
		*f.d = d
		return nil
	}
	sec, err := strconv.ParseFloat(s, 64)
	if err != nil || sec < 0 || sec > 1e6 {
		return errors.New("not a duration (500ms, 2s) or a number of seconds")
	}
	*f.d = time.Duration(sec * float64(time.Second))
	return nil
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

// maxMaxTargets bounds --max-targets (a million connections would exhaust any host).
const maxMaxTargets = 1_000_000

// parseAllow parses one --probe-allow entry: a prefix or an address. Addresses are
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

// parseDNSOption parses NAME[:PORT] (--targets-dns, --agents-dns).
func parseDNSOption(opt, v string, defaultPort uint16) (string, uint16, error) {
	name, port := v, defaultPort
	if h, p, err := net.SplitHostPort(v); err == nil {
		pp, perr := parsePort(p)
		if perr != nil {
			return "", 0, usageErrorf("%s %s: %v", opt, quote(v), perr)
		}
		name, port = h, pp
	}
	if _, err := netip.ParseAddr(name); err != nil && !validHostname(name) {
		return "", 0, usageErrorf("%s %s: not a host name", opt, quote(v))
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
	peers      []target
	probeAllow []netip.Prefix
	dnsName    string
	dnsPort    uint16

	agents        []target
	agentsDNSName string
	agentsDNSPort uint16
	agentsHTTP    agentsHTTP
	railMode      agentdesc.Mode
}

// usageError is a Config that New refuses: a bad option (exit status 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

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
		if c.peers, err = parsePeers(strings.Join(cfg.Peers, ","), c.port); err != nil {
			return nil, usageErrorf("--peers: %w", err)
		}
	}
	for _, p := range cfg.ProbeAllow {
		pf, err := parseAllow(p)
		if err != nil {
			return nil, usageErrorf("--probe-allow %s: %v", quote(p), err)
		}
		c.probeAllow = append(c.probeAllow, pf)
	}
	if len(cfg.Listen) == 0 {
		return nil, usageErrorf("--web.listen-address: no address")
	}
	for _, l := range cfg.Listen {
		if _, _, err := net.SplitHostPort(l); err != nil {
			return nil, usageErrorf("--web.listen-address %s: want [HOST]:PORT", quote(l))
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
	if cfg.TargetsReload != 0 {
		if err := checkMin("--targets-reload", cfg.TargetsReload, minReload); err != nil {
			return nil, usageErrorf("%v (or 0: only on SIGHUP)", err)
		}
	}
	if err := checkMin("--dns-refresh", cfg.DNSRefresh, minDNSRefresh); err != nil {
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
		if c.dnsName, c.dnsPort, err = parseDNSOption("--targets-dns", cfg.TargetsDNS, c.port); err != nil {
			return nil, err
		}
	}
	if err := c.checkAgents(); err != nil {
		return nil, err
	}
	if cfg.AgentsKubernetes != "" {
		if err := members.CheckSelector(cfg.AgentsKubernetes); err != nil {
			return nil, usageErrorf("--agents-kubernetes %s: %v", quote(cfg.AgentsKubernetes), err)
		}
	}
	if c.AgentName == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("--agent-name: no default: the host name: %w", err)
		}
		if pinglist.CheckHost(h) != nil {
			return nil, usageErrorf("--agent-name: the host name %s cannot be an agent's name: give --agent-name", quote(h))
		}
		c.AgentName = h
	} else if err := pinglist.CheckHost(c.AgentName); err != nil {
		return nil, usageErrorf("--agent-name %s: %v", quote(c.AgentName), err)
	}
	if err := pinglist.CheckGroup(cfg.Group); err != nil {
		return nil, usageErrorf("--group %s: %v", quote(cfg.Group), err)
	}
	if cfg.WebConfigFile != "" {
		// Regular files only (exporter-toolkit would block on a FIFO at every request).
		if _, err := readRegularFile(cfg.WebConfigFile, maxWebConfigBytes); err != nil {
			return nil, fmt.Errorf("--web.config.file: %w", err)
		}
		if err := web.Validate(cfg.WebConfigFile); err != nil {
			return nil, fmt.Errorf("--web.config.file %s: %w", cfg.WebConfigFile, err)
		}
	}
	return c, nil
}

// errHelp is what parseArgs returns for --help.
var errHelp = flag.ErrHelp
