package cli

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/gorping/gorping/rping"
)

// Codes of the long-only options of rping's command line (not letters, so no short
// option can ever produce them): what getopt returns for them.
const (
	optPoll    byte = 1 // --poll
	optStats   byte = 2 // --stats
	optJSON    byte = 3 // --json
	optTrace   byte = 4 // --trace
	optTimeout byte = 5 // --timeout
	optHelp    byte = 6 // --help
	optVersion byte = 7 // --version
)

// rpingSynopsis is the start of rping's usage (program name always "rping"); each of
// rping's options adds its usage line.
const rpingSynopsis = "rping -s [-vVd] [-S size] [-C count] [-a addr] [-p port]\n" +
	"rping -c [-vVd] [-S size] [-C count] [-I addr] -a addr [-p port]\n"

// rpingLine is rping's command line: rping's options in its usage's order (usage: their
// lines there, byte for byte), -t, then gorping's additions. -i and -w use letters rping
// does not have; the others are long options only.
var rpingLine = []option{
	{short: 'c', help: "client side", usage: "\t-c\t\tclient side\n", man: "Client side."},
	{short: 'I', arg: "addr", value: valueAddr, help: "Source address to bind to for client",
		usage: "\t-I\t\tSource address to bind to for client.\n", man: "Source address the client binds to."},
	{short: 's', help: "server side", usage: "\t-s\t\tserver side.  To bind to any address with IPv6 use -a ::0\n",
		man: "Server side. It serves one client and exits 0 when that client disconnects (see **-P**)."},
	{short: 'v', help: "display ping data to stdout", usage: "\t-v\t\tdisplay ping data to stdout\n",
		man: "Display ping data to stdout: **ping data: rdma-ping-N: ...** per ping."},
	{short: 'V', help: "validate ping data", usage: "\t-V\t\tvalidate ping data\n",
		man: "Validate ping data: the client compares the echo with what it sent."},
	{short: 'd', help: "debug printfs", usage: "\t-d\t\tdebug printfs\n",
		man: "Debug output: rping's debug lines in rping's order, and gorping's view of the\n" +
			"connection (see **PATH DIAGNOSTICS**) and of the provider."},
	{short: 'S', arg: "size", help: "ping data size", usage: "\t-S size \tping data size\n",
		man: "Ping data size in bytes, 23 to 65535 (default 64)."},
	{short: 'C', arg: "count", help: "ping count times", usage: "\t-C count\tping count times\n",
		man: "Ping count: the client stops after *count* pings; 0, the default, is forever."},
	{short: 'a', arg: "addr", value: valueAddr, help: "address", usage: "\t-a addr\t\taddress\n",
		man: "Address: the server binds to it (default: any IPv4 address; **-a ::0** for any IPv6\n" +
			"address); the client connects to it. A host name or a numeric IPv4 or IPv6 address,\n" +
			"resolved as getaddrinfo(3) would."},
	{short: 'p', arg: "port", help: "port", usage: "\t-p port\t\tport\n",
		man: "Port (default 7174). As in rping, the value is cut to 16 bits."},
	{short: 'P', help: "persistent server mode allowing multiple connections",
		usage: "\t-P\t\tpersistent server mode allowing multiple connections\n",
		man:   "Persistent server: it serves any number of clients, concurrently, until it is killed."},
	{short: 'q', help: "use self-created, self-modified QP", usage: "\t-q\t\tuse self-created, self-modified QP\n",
		man: "Use a self-created, self-modified QP (rping's **-q**): the QP is created with the verbs\n" +
			"and moved through its states by the application, not by the connection manager."},
	{short: 't', arg: "arg", hidden: true,
		man: "Accepted as rping's option string has it, without a use: it prints the usage and exits\n22, as rping does."},

	// gorping's additions (GORPING OPTIONS in gorping(1)).
	{short: 'i', long: "interval", arg: "sec", help: "client: start a ping every SEC (0.2, 200ms; 0: back to back)",
		man: "Client: start a ping every *sec* seconds: a decimal number (**0.2**) or a duration with\n" +
			"its unit (**200ms**, **1s**); 0, the default, is back to back. The server ignores it."},
	{short: 'w', long: "deadline", arg: "sec", help: "client: end the run after SEC (10, 1m)",
		man: "Client: end the run *sec* seconds (or a duration: **1m**) after it started, connection\n" +
			"setup included. The server ignores it."},
	{long: "timeout", code: optTimeout, arg: "sec", help: "give up after SEC without progress (0: wait for ever)",
		man: "Both sides: how long a ping, or a connection phase, may make no progress before gorping\n" +
			"gives up with exit 110 and one line saying what it waited for and the likely cause (see\n" +
			"**STALLS**); seconds or a duration. Default: the connection's RC retry budget, (retry_cnt + 2) local ACK\n" +
			"timeouts of 4.096 µs × 2^timeout from the QP's attributes (19.3 s with rdma_cm's RoCE\n" +
			"defaults). **0** waits for ever, as rping does."},
	{long: "poll", code: optPoll, help: "busy-poll the completion queue",
		man: "Busy-poll the completion queue instead of sleeping on the completion channel, on both\n" +
			"sides: the lowest latency, at the cost of a whole CPU per connection for as long as it\n" +
			"lives (also between a client's pings; an idle listening server still sleeps). For\n" +
			"measurements, not for a shared machine."},
	{long: "stats", code: optStats, help: "round-trip time per ping and a summary",
		man: "Client: after each ping a line with its round-trip time, at the end ping(8)'s summary\n" +
			"(count, loss, errors, min/avg/max/mdev, p50/p99). Server: one line per finished session,\n" +
			"**rping server: N pings served to ADDR:PORT in Tms**."},
	{long: "json", code: optJSON, help: "JSON lines on stdout",
		man: "JSON lines on stdout (see **JSON OUTPUT**); rping's own stdout lines (**-v**, **-d**) move\n" +
			"to stderr."},
	{long: "trace", code: optTrace, help: "trace kernel commands and data-path steps on stderr",
		man: "Every rdma_cm and uverbs command, event, mmap, QP transition and data-path step on\n" +
			"stderr (with **--json**: **trace** records in the JSON stream), and the path\n" +
			"diagnostics. See **TRACE**."},
	{long: "help", code: optHelp, help: "print this usage, then gorping's own options and commands",
		man: "Print rping's usage, then gorping's own options and commands, and exit 0 (rping: the\n" +
			"usage alone, exit 22)."},
	{long: "version", code: optVersion, help: "print the version",
		man: "Print the version, and on a second line **commit** and the source revision when it is\n" +
			"known, and exit 0."},
}

// rpingUsage is rping's usage, byte for byte: its synopsis and its options' lines.
var rpingUsage = func() string {
	s := rpingSynopsis
	for _, o := range rpingLine {
		s += o.usage
	}
	return s
}()

// optstring is rping's getopt option string plus gorping's letters, from rpingLine:
// "cI:svVdS:C:a:p:Pqt:i:w:". -t takes an argument but has no handler: a vestige that
// makes rping print its usage.
var optstring = func() string {
	var s string
	for _, o := range rpingLine {
		if o.short != 0 {
			s += string(o.short)
			if o.arg != "" {
				s += ":"
			}
		}
	}
	return s
}()

// longOpt is a long option of rping's command line as getopt sees it: the code it
// returns (the letter, for one that has one) and whether a value follows
// (--name=value or --name value, as getopt_long takes a required argument).
type longOpt struct {
	name string
	code byte
	arg  bool
}

// longOpts are the long options of rpingLine (all gorping's).
var longOpts = func() []longOpt {
	var l []longOpt
	for _, o := range rpingLine {
		if o.long == "" {
			continue
		}
		code := o.code
		if o.short != 0 {
			code = o.short
		}
		l = append(l, longOpt{o.long, code, o.arg != ""})
	}
	return l
}()

// exitUsage is rping's status for usage errors and invalid -S/-C (EINVAL).
const exitUsage = 22

// optKind classifies what getopt.next found.
type optKind int

const (
	optEnd   optKind = iota // no more options
	optShort                // an option (its letter or code), with its argument if it takes one
	optBad                  // unknown option or missing argument: getopt's '?'
)

// getopt is glibc's getopt(argc, argv, optstring) with opterr = 0: clusters
// (-dvS100), attached or separate arguments (an argument is taken from the next
// word even if it starts with '-'), non-option words skipped anywhere (GNU
// permutation; they are never used, so they are simply passed over) unless
// POSIXLY_CORRECT is set, which stops at the first one, and "--" ending the
// options. On top of that it knows the long options --help and --version,
// abbreviated as getopt_long allows, and gorping's other long options.
type getopt struct {
	argv  []string
	posix bool
	ind   int // argv word being scanned
	pos   int // offset in argv[ind] of the next clustered letter; 0 = word not started
}

func (g *getopt) next() (kind optKind, opt byte, arg string) {
	if g.pos == 0 {
		for {
			if g.ind >= len(g.argv) {
				return optEnd, 0, ""
			}
			w := g.argv[g.ind]
			if w == "--" {
				g.ind = len(g.argv)
				return optEnd, 0, ""
			}
			if len(w) >= 2 && w[0] == '-' {
				break
			}
			if g.posix {
				return optEnd, 0, ""
			}
			g.ind++
		}
		w := g.argv[g.ind]
		if strings.HasPrefix(w, "--") {
			g.ind++
			return g.long(w[2:])
		}
		g.pos = 1
	}
	w := g.argv[g.ind]
	c := w[g.pos]
	g.pos++
	last := g.pos == len(w)
	if last {
		g.ind++
		g.pos = 0
	}
	i := strings.IndexByte(optstring, c)
	if i < 0 || c == ':' {
		return optBad, c, ""
	}
	if i+1 == len(optstring) || optstring[i+1] != ':' {
		return optShort, c, ""
	}
	if !last {
		arg = w[g.pos:]
		g.ind++
		g.pos = 0
		return optShort, c, arg
	}
	if g.ind >= len(g.argv) {
		return optBad, c, ""
	}
	arg = g.argv[g.ind]
	g.ind++
	return optShort, c, arg
}

// long matches "--name[=value]" against longOpts, accepting an unambiguous
// prefix like getopt_long; an option that takes a value without "=" takes the
// next word.
func (g *getopt) long(w string) (kind optKind, opt byte, arg string) {
	name, val, hasVal := strings.Cut(w, "=")
	if name == "" {
		return optBad, 0, ""
	}
	match := -1
	for i, o := range longOpts {
		if o.name == name {
			match = i
			break
		}
		if strings.HasPrefix(o.name, name) {
			if match >= 0 {
				return optBad, 0, "" // ambiguous
			}
			match = i
		}
	}
	if match < 0 {
		return optBad, 0, ""
	}
	o := longOpts[match]
	switch {
	case !o.arg && hasVal:
		return optBad, 0, ""
	case !o.arg:
		return optShort, o.code, ""
	case hasVal:
		return optShort, o.code, val
	case g.ind >= len(g.argv):
		return optBad, 0, ""
	}
	arg = g.argv[g.ind]
	g.ind++
	return optShort, o.code, arg
}

// action is what the command line asks main to do.
type action int

const (
	actRun     action = iota // run rping with the parsed Config
	actUsage                 // print usage, exit 22
	actHelp                  // print usage, exit 0
	actVersion               // print version, exit 0
	actExit                  // exit with the given status (messages already printed)
)

// parseArgs is rping's option loop, processed strictly left to right with its
// side effects (debug lines once -d has been seen, error messages) written as
// they happen. ret follows rping: -a/-I/-S/-C errors set it, a later
// successful -a/-I overwrites it with 0, and a valid -S/-C leaves it alone.
// The returned status is meaningful for actUsage and actExit.
func parseArgs(ctx context.Context, argv []string, posix bool, stdout, stderr io.Writer, resolve resolver) (cfg rping.Config, act action, status int) {
	p := argParser{ctx: ctx, stdout: stdout, stderr: stderr, resolve: resolve, server: -1}
	p.cfg = rping.DefaultConfig()
	p.cfg.Stdout, p.cfg.Stderr = stdout, stderr
	g := getopt{argv: argv, posix: posix}
	for {
		kind, c, arg := g.next()
		switch kind {
		case optEnd:
			act, status := p.end()
			return p.cfg, act, status
		case optBad:
			return p.cfg, actUsage, exitUsage
		}
		switch c {
		case optHelp:
			return p.cfg, actHelp, 0
		case optVersion:
			return p.cfg, actVersion, 0
		}
		if !p.rpingOption(c, arg) && !p.gorpingOption(c, arg) { // -t
			return p.cfg, actUsage, exitUsage
		}
	}
}

// argParser is parseArgs' state between options.
type argParser struct {
	ctx            context.Context
	stdout, stderr io.Writer
	resolve        resolver
	cfg            rping.Config
	server         int // -1 until -s or -c
	ret            int // rping's
	extRet         int // an invalid gorping option: unlike rping's ret, never cleared
}

func (p *argParser) debugf(format string, args ...any) {
	if p.cfg.Debug {
		fmt.Fprintf(p.stdout, format, args...)
	}
}

// end is what the command line asks for once its options are all read.
func (p *argParser) end() (action, int) {
	switch {
	case p.ret != 0:
		return actExit, p.ret & 0xff
	case p.extRet != 0:
		return actExit, p.extRet
	case p.server < 0:
		return actUsage, exitUsage
	}
	p.cfg.Server = p.server == 1
	return actRun, 0
}

// rpingOption handles one of rping's own options; false if c is none of them.
func (p *argParser) rpingOption(c byte, arg string) bool {
	cfg := &p.cfg
	switch c {
	case 'a':
		p.ret = getAddr(p.ctx, arg, &cfg.Addr, p.stdout, p.resolve)
	case 'I':
		p.ret = getAddr(p.ctx, arg, &cfg.SrcAddr, p.stdout, p.resolve)
	case 'P':
		cfg.Persistent = true
	case 'p':
		v := atoi(arg)
		cfg.Port = uint16(v)
		p.debugf("port %d\n", v)
	case 's':
		p.server = 1
		p.debugf("server\n")
	case 'c':
		p.server = 0
		p.debugf("client\n")
	case 'S':
		// rping compares the size against an unsigned minimum, so it takes
		// negative sizes and fails later (exit 244); gorping rejects them
		// here. A rejected size is never used, even if a later -a clears
		// the error and the run goes on with the previous size.
		v := atoi(arg)
		if v < rping.MinSize || v > rping.MaxSize {
			fmt.Fprintf(p.stderr, "Invalid size %d (valid range is %d to %d)\n", v, rping.MinSize, rping.MaxSize+1)
			p.ret = exitUsage
		} else {
			cfg.Size = v
			p.debugf("size %d\n", v)
		}
	case 'C':
		// As in rping the count is taken even when rejected: if a later
		// -a clears the error, a negative count means zero pings.
		cfg.Count = atoi(arg)
		if cfg.Count < 0 {
			fmt.Fprintf(p.stderr, "Invalid count %d\n", cfg.Count)
			p.ret = exitUsage
		} else {
			p.debugf("count %d\n", cfg.Count)
		}
	case 'v':
		cfg.Verbose = true
		p.debugf("verbose\n")
	case 'V':
		cfg.Validate = true
		p.debugf("validate data\n")
	case 'd':
		cfg.Debug = true
	case 'q':
		cfg.SelfCreateQP = true
	default:
		return false
	}
	return true
}

// gorpingOption handles one of gorping's additions; false if c is none of them.
func (p *argParser) gorpingOption(c byte, arg string) bool {
	cfg := &p.cfg
	switch c {
	case 'i':
		if d, ok := p.seconds(arg, true, "interval", "seconds or a duration, 0 or more: 0.2, 200ms"); ok {
			cfg.Interval = d
		}
	case 'w':
		if d, ok := p.seconds(arg, false, "deadline", "seconds or a duration, more than 0: 10, 1m"); ok {
			cfg.Deadline = d
		}
	case optTimeout:
		// 0: wait for ever, as rping does; unset: the connection's RC retry budget.
		if d, ok := p.seconds(arg, true, "timeout", "seconds or a duration, 0 or more: 5, 500ms; 0 waits for ever"); ok && d == 0 {
			cfg.Timeout = rping.NoTimeout
		} else if ok {
			cfg.Timeout = d
		}
	case optPoll:
		cfg.Poll = true
	case optStats:
		cfg.Stats = true
	case optJSON:
		cfg.JSON = true
	case optTrace:
		cfg.Trace = true
	default:
		return false
	}
	return true
}

// seconds parses the value of a gorping option that takes seconds (what: its name,
// rule: what it takes), or complains and marks the command line as failed.
func (p *argParser) seconds(arg string, zeroOK bool, what, rule string) (time.Duration, bool) {
	d, ok := seconds(arg, zeroOK)
	if !ok {
		fmt.Fprintf(p.stderr, "gorping: invalid %s %q (%s)\n", what, arg, rule)
		p.extRet = exitUsage
	}
	return d, ok
}

// getAddr is rping's get_addr: resolve into *dst, or print getaddrinfo's
// complaint (on stdout, as rping does) and return its negative EAI code.
func getAddr(ctx context.Context, host string, dst *netip.Addr, stdout io.Writer, resolve resolver) int {
	a, code := resolve(ctx, host)
	if code != 0 {
		fmt.Fprintf(stdout, "getaddrinfo failed (%s) - invalid hostname or IP address\n", gaiStrerror(code))
		return code
	}
	*dst = a
	return 0
}

// maxSeconds bounds the durations of gorping's options: far beyond any use, well
// within a Duration.
const maxSeconds = 1e7

// seconds parses the value of an option that takes a time: a decimal number of seconds
// ("0.2", "10", "1e-3": rping's habit, and what -i, -w and --timeout always took) or a
// Go duration with its unit ("200ms", "1s", "1m30s": what mesh's options take too), so
// both forms mean the same everywhere; zero is allowed only if zeroOK.
func seconds(s string, zeroOK bool) (time.Duration, bool) {
	var d time.Duration
	if v, err := strconv.ParseFloat(s, 64); err == nil {
		if math.IsNaN(v) || v < 0 || v > maxSeconds {
			return 0, false
		}
		d = time.Duration(v * float64(time.Second))
		if d == 0 && v > 0 {
			return 0, false // below a nanosecond
		}
	} else if d, err = time.ParseDuration(s); err != nil || d < 0 || d > maxSeconds*time.Second {
		return 0, false
	}
	if d == 0 && !zeroOK {
		return 0, false
	}
	return d, true
}

// atoi is glibc's atoi, (int)strtol(s, NULL, 10): leading C-locale white space,
// an optional sign, decimal digits up to the first non-digit; out-of-range
// values saturate at the 64-bit long limits and are then truncated to 32 bits.
func atoi(s string) int {
	i := 0
	for i < len(s) && isCSpace(s[i]) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	const limit = 1 << 63 // |LONG_MIN|; anything above saturates
	var v uint64
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		if v > limit/10 {
			v = limit + 1 // saturated; stays so
			continue
		}
		v = v*10 + uint64(s[i]-'0')
	}
	var l int64
	switch {
	case neg && v >= limit:
		l = -1 << 63
	case neg:
		l = -int64(v)
	case v >= limit:
		l = 1<<63 - 1
	default:
		l = int64(v)
	}
	return int(int32(l))
}

func isCSpace(c byte) bool {
	return c == ' ' || (c >= '\t' && c <= '\r')
}
