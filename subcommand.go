package main

import (
	"context"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/gorping/gorping/mesh"
)

// gorping's subcommands. Each takes the command line only when its name is the first word
// and every later word is one of its own options or arguments (devices.go says why no
// command line that runs rping changes meaning). The table is also what the man page
// test and the shell completions read: a subcommand's options are listed once, here.

// option is one command-line option as the completions and the man page test see it.
type option struct {
	short  byte   // the letter, 0 for a long-only option
	long   string // the long name without "--", "" for a letter-only option
	arg    string // the value's name ("addr", "sec"), "" for a flag
	help   string // a few words for the completions (zsh, fish show them)
	addr   bool   // the value is a local address: completions offer the RDMA netdevs' addresses
	hidden bool   // left out of the completions (rping's -t vestige)
}

// spellings are the option's command-line forms: "-v", "--verbose".
func (o option) spellings() []string {
	var s []string
	if o.short != 0 {
		s = append(s, "-"+string(o.short))
	}
	if o.long != "" {
		s = append(s, "--"+o.long)
	}
	return s
}

type subcommand struct {
	name    string
	help    string   // a few words for the completions
	options []option // its options, -h/--help included
	args    []string // the other words it takes (completion: bash zsh fish addresses)
	usage   string   // what -h/--help prints
	match   func(args []string) bool
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
	// daemon: a signal ends the run as its normal end (mesh: SIGTERM), and
	// schedule, if set, is its process-wide scheduler choice (main sets it).
	daemon   bool
	schedule func()
}

// subcommands is every subcommand; runCmd tries them in order before rping's parser.
// (Set in init: the completion scripts are generated from this table.)
var subcommands []subcommand

func init() {
	subcommands = []subcommand{
		{name: "devices", help: "list the RDMA devices", options: devicesOptions, usage: devicesUsage,
			match: isDevicesCommand, run: plain(runDevices)},
		{name: "completion", help: "print a shell completion script", options: completionOptions,
			args: completionArgs, usage: completionUsage, match: isCompletionCommand, run: plain(runCompletion)},
		{name: "mesh", help: "ping mesh agent exporting to Prometheus", options: meshOptions(),
			match: isMeshCommand, daemon: true, schedule: mesh.Schedule,
			run: func(ctx context.Context, args []string, stdout, stderr io.Writer) int {
				return mesh.Main(ctx, args, version(), stdout, stderr)
			}},
	}
}

// isMeshCommand is mesh's subcommand rule (mesh.IsCommand: the same as devices').
func isMeshCommand(args []string) bool { return mesh.IsCommand(args) }

// plain adapts a subcommand that needs no context.
func plain(f func(args []string, stdout, stderr io.Writer) int) func(context.Context, []string, io.Writer, io.Writer) int {
	return func(_ context.Context, args []string, stdout, stderr io.Writer) int { return f(args, stdout, stderr) }
}

// meshOptions are mesh's options as the table lists them (mesh parses its own).
func meshOptions() []option {
	var opts []option
	flags := mesh.Flags()
	for _, name := range slices.Sorted(maps.Keys(flags)) {
		o := option{long: name, help: "see gorping mesh --help"}
		if name == "h" {
			o = option{short: 'h', help: "usage"}
		} else if name == "help" {
			o.help = "usage"
		}
		if flags[name] {
			o.arg = "value"
		}
		opts = append(opts, o)
	}
	return opts
}

// firstWordCommand is the subcommand rule: args[0] is name, and every later word is one
// of opts' spellings (with the value after it, for an option that takes one) or one of
// words.
func firstWordCommand(args []string, name string, opts []option, words []string) bool {
	if len(args) == 0 || args[0] != name {
		return false
	}
next:
	for i := 1; i < len(args); i++ {
		for _, o := range opts {
			for _, s := range o.spellings() {
				if args[i] == s {
					if o.arg != "" {
						i++
					}
					continue next
				}
			}
		}
		for _, w := range words {
			if args[i] == w {
				continue next
			}
		}
		return false
	}
	return true
}

// wantsHelp reports whether a subcommand's words ask for its usage.
func wantsHelp(args []string) bool {
	for _, a := range args {
		if a == "-h" || a == "--help" {
			return true
		}
	}
	return false
}

// argNames name the values of rping's and gorping's letter options (rping's usage
// names some of them: "-S size").
var argNames = map[byte]string{'a': "addr", 'I': "addr", 'p': "port", 'S': "size", 'C': "count", 't': "arg", 'i': "sec", 'w': "sec"}

// longHelp describes gorping's own options (rping's are described by its usage text).
var longHelp = map[string]string{
	"help":     "print the usage",
	"version":  "print the version",
	"poll":     "busy-poll the completion queue",
	"stats":    "round-trip time per ping and a summary",
	"json":     "JSON lines on stdout",
	"trace":    "trace kernel commands and data-path steps on stderr",
	"interval": "seconds between the starts of pings",
	"deadline": "end the run after this many seconds",
}

// rpingOptions are the options of the main command line, derived from the parser's own
// tables (optstring, longOpts) and described by rping's usage text where it has them.
func rpingOptions() []option {
	usageHelp := map[byte]string{}
	for _, l := range strings.Split(usageText, "\n") {
		// "\t-S size \tping data size": the letter, then the text after the last TAB,
		// up to its first full stop.
		if len(l) < 3 || !strings.HasPrefix(l, "\t-") {
			continue
		}
		f := strings.Split(l, "\t")
		h, _, _ := strings.Cut(f[len(f)-1], ".")
		usageHelp[l[2]] = strings.TrimSpace(h)
	}
	var opts []option
	for i := 0; i < len(optstring); i++ {
		c := optstring[i]
		if c == ':' {
			continue
		}
		o := option{short: c, help: usageHelp[c], addr: c == 'a' || c == 'I', hidden: c == 't'}
		if i+1 < len(optstring) && optstring[i+1] == ':' {
			o.arg = argNames[c]
			if o.arg == "" {
				o.arg = "value"
			}
		}
		for _, l := range longOpts {
			if l.kind == optShort && l.opt == c {
				o.long = l.name
				o.help = longHelp[l.name]
			}
		}
		opts = append(opts, o)
	}
	for _, l := range longOpts {
		if l.kind == optShort && l.opt >= 'A' {
			continue // the long name of a letter, above
		}
		o := option{long: l.name, help: longHelp[l.name]}
		if l.arg {
			o.arg = "value"
		}
		opts = append(opts, o)
	}
	return opts
}
