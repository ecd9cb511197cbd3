package mesh

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/gorping/gorping/rping"
)

// DefaultListen is the metrics listener's default address. Port 10174: the range the
// Prometheus default-port allocations began with (9100-9999) has been full since 2023
// and allocations continue above 10000; 10174 echoes rping's 7174 (docs/mesh.md).
const DefaultListen = ":10174"

// Config is one `gorping mesh` invocation.
type Config struct {
	Listen        string // --listen
	WebConfigFile string // --web.config.file (exporter-toolkit: TLS, basic auth)

	Port        uint16     // --port: the responder's port, and the default port of targets
	Bind        netip.Addr // --bind: the responder's address (:: serves IPv6 and IPv4)
	NoResponder bool       // --no-responder

	TargetsFile   string        // --targets
	TargetsReload time.Duration // --targets-reload: how often the file is checked; 0: only SIGHUP
	Peers         []Target      // --peers
	TargetsDNS    string        // --targets-dns NAME[:PORT]
	DNSRefresh    time.Duration // --dns-refresh

	Interval       time.Duration // --interval
	Jitter         float64       // --jitter, fraction of the interval
	Timeout        time.Duration // --timeout: one ping
	ConnectTimeout time.Duration // --connect-timeout
	BackoffMax     time.Duration // --backoff-max
	Size           int           // --size
	Source         netip.Addr    // --source

	ProbeAllow []netip.Prefix // --probe-allow
	ProbeAny   bool           // --probe-any

	LogFormat string // --log.format text|json
	LogLevel  string // --log.level debug|info|warn|error

	Version string // for gorping_build_info and the landing page
}

// Usage is `gorping mesh --help`.
const Usage = `usage: gorping mesh [options]
An RDMA ping mesh agent: serves the rping protocol (a persistent server), keeps one rping
connection to every target, pings each once per interval and exports the results to
Prometheus (/metrics; /probe?target=HOST[:PORT]&count=N probes once, /-/healthy).

Targets (any rping server: gorping mesh, gorping -s -P, rping -s -P):
	--targets FILE		one host[:port] per line, # comments; re-read when it changes and on SIGHUP
	--targets-reload DUR	how often the file is checked for changes (default 2s; 0: only on SIGHUP)
	--peers a,b,c		targets on the command line
	--targets-dns NAME[:PORT]	every A/AAAA address of NAME (e.g. a Kubernetes headless Service)
	--dns-refresh DUR	how often NAME is resolved again (default 30s)
	A target on this agent's responder port at one of this host's addresses is skipped.

Probing:
	--interval DUR		one ping per target per interval (default 1s)
	--jitter F		each slot moves by up to F·interval (default 0.1)
	--timeout DUR		a ping that takes longer fails with reason timeout (default 1s, at most the interval)
	--connect-timeout DUR	bound of resolution and connection (default 5s)
	--backoff-max DUR	reconnection backoff cap (default 30s)
	--size N		ping size in bytes, 23..65535 (default 64)
	--source ADDR		source address of the probes (rping -I)

Responder:
	--port N		responder port, also the default port of targets (default 7174)
	--bind ADDR		responder address (default ::, which serves IPv6 and IPv4)
	--no-responder		probe only

HTTP:
	--listen ADDR		metrics listener (default :10174)
	--web.config.file FILE	TLS and basic auth (Prometheus exporter-toolkit web configuration)
	--probe-allow CIDRS	/probe may also probe addresses in these prefixes (comma-separated)
	--probe-any		/probe may probe any target

Logs:
	--log.format text|json	(default text, on stderr)
	--log.level LEVEL	debug, info, warn, error (default info)

DUR is a Go duration (500ms, 2s, 1m) or seconds (0.5).
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

// ParseArgs parses the words after "mesh". On an error it returns it (the flag package
// has printed nothing to out); for --help it returns flag.ErrHelp.
func ParseArgs(args []string) (Config, error) { return parse(args, io.Discard) }

func parse(args []string, out io.Writer) (Config, error) {
	fs, f := newFlagSet(out)
	cfg := f.cfg
	if err := fs.Parse(args); err != nil {
		return *cfg, err
	}
	return f.finish(fs)
}

// flagVars are the flags' destinations before they are checked.
type flagVars struct {
	cfg                        *Config
	port, size                 uint
	peers, bind, source, allow string
	help                       bool
}

func newFlagSet(out io.Writer) (*flag.FlagSet, *flagVars) {
	cfg := &Config{Listen: DefaultListen, Port: rping.DefaultPort, TargetsReload: 2 * time.Second,
		DNSRefresh: 30 * time.Second, Interval: time.Second, Jitter: 0.1, ConnectTimeout: 5 * time.Second,
		BackoffMax: 30 * time.Second, Size: rping.DefaultSize, LogFormat: "text", LogLevel: "info"}
	v := &flagVars{cfg: cfg}
	fs := flag.NewFlagSet("gorping mesh", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {}
	fs.StringVar(&cfg.Listen, "listen", cfg.Listen, "")
	fs.StringVar(&cfg.WebConfigFile, "web.config.file", "", "")
	fs.UintVar(&v.port, "port", uint(cfg.Port), "")
	fs.StringVar(&v.bind, "bind", "::", "")
	fs.BoolVar(&cfg.NoResponder, "no-responder", false, "")
	fs.StringVar(&cfg.TargetsFile, "targets", "", "")
	fs.Var(&durationFlag{&cfg.TargetsReload}, "targets-reload", "")
	fs.StringVar(&v.peers, "peers", "", "")
	fs.StringVar(&cfg.TargetsDNS, "targets-dns", "", "")
	fs.Var(&durationFlag{&cfg.DNSRefresh}, "dns-refresh", "")
	fs.Var(&durationFlag{&cfg.Interval}, "interval", "")
	fs.Float64Var(&cfg.Jitter, "jitter", cfg.Jitter, "")
	fs.Var(&durationFlag{&cfg.Timeout}, "timeout", "")
	fs.Var(&durationFlag{&cfg.ConnectTimeout}, "connect-timeout", "")
	fs.Var(&durationFlag{&cfg.BackoffMax}, "backoff-max", "")
	fs.UintVar(&v.size, "size", uint(cfg.Size), "")
	fs.StringVar(&v.source, "source", "", "")
	fs.StringVar(&v.allow, "probe-allow", "", "")
	fs.BoolVar(&cfg.ProbeAny, "probe-any", false, "")
	fs.StringVar(&cfg.LogFormat, "log.format", cfg.LogFormat, "")
	fs.StringVar(&cfg.LogLevel, "log.level", cfg.LogLevel, "")
	fs.BoolVar(&v.help, "help", false, "")
	fs.BoolVar(&v.help, "h", false, "")
	return fs, v
}

// finish checks the parsed flags and completes the Config.
func (v *flagVars) finish(fs *flag.FlagSet) (Config, error) {
	cfg := *v.cfg
	port, size, peers, bind, source, allow := v.port, v.size, v.peers, v.bind, v.source, v.allow
	help := &v.help
	if *help {
		return cfg, flag.ErrHelp
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if port == 0 || port > 65535 {
		return cfg, fmt.Errorf("--port %d: want 1..65535", port)
	}
	cfg.Port = uint16(port)
	if size < rping.MinSize || size > rping.MaxSize {
		return cfg, fmt.Errorf("--size %d: want %d..%d", size, rping.MinSize, rping.MaxSize)
	}
	cfg.Size = int(size)
	var err error
	if cfg.Bind, err = netip.ParseAddr(bind); err != nil {
		return cfg, fmt.Errorf("--bind: %w", err)
	}
	if source != "" {
		if cfg.Source, err = netip.ParseAddr(source); err != nil {
			return cfg, fmt.Errorf("--source: %w", err)
		}
	}
	if peers != "" {
		if cfg.Peers, err = ParsePeers(peers, cfg.Port); err != nil {
			return cfg, fmt.Errorf("--peers: %w", err)
		}
	}
	for _, p := range strings.Split(allow, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		pf, err := netip.ParsePrefix(p)
		if err != nil {
			a, aerr := netip.ParseAddr(p)
			if aerr != nil {
				return cfg, fmt.Errorf("--probe-allow: %q is neither a prefix nor an address", p)
			}
			pf = netip.PrefixFrom(a, a.BitLen())
		}
		cfg.ProbeAllow = append(cfg.ProbeAllow, pf.Masked())
	}
	if cfg.Interval <= 0 {
		return cfg, errors.New("--interval must be positive")
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = min(time.Second, cfg.Interval)
	}
	if cfg.Timeout <= 0 || cfg.ConnectTimeout <= 0 || cfg.DNSRefresh <= 0 || cfg.BackoffMax <= 0 || cfg.TargetsReload < 0 {
		return cfg, errors.New("--timeout, --connect-timeout, --dns-refresh and --backoff-max must be positive")
	}
	if cfg.Jitter < 0 || cfg.Jitter >= 0.5 {
		return cfg, fmt.Errorf("--jitter %g: want 0 <= F < 0.5", cfg.Jitter)
	}
	if cfg.LogFormat != "text" && cfg.LogFormat != "json" {
		return cfg, fmt.Errorf("--log.format %q: want text or json", cfg.LogFormat)
	}
	if _, err := parseLevel(cfg.LogLevel); err != nil {
		return cfg, err
	}
	return cfg, nil
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
		return fmt.Errorf("%q is not a duration (500ms, 2s) or a number of seconds", s)
	}
	*f.d = time.Duration(sec * float64(time.Second))
	return nil
}

// Flag is one of mesh's options, for the shell completions and the man page
// test (package main's subcommand table).
type Flag struct {
	Name  string // without dashes
	Value bool   // takes a value
}

// Flags lists mesh's options in name order.
func Flags() []Flag {
	fs, _ := newFlagSet(io.Discard)
	var out []Flag
	fs.VisitAll(func(f *flag.Flag) {
		b, ok := f.Value.(interface{ IsBoolFlag() bool })
		out = append(out, Flag{Name: f.Name, Value: !ok || !b.IsBoolFlag()})
	})
	return out
}
