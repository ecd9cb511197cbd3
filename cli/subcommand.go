package cli

import (
	"fmt"
	"strings"
)

// gorping's subcommands. rping ignores words that are not options (`rping devices -s` runs
// a server), so a command line is a subcommand's only when its name is the first word and
// no later word is one of rping's options that the subcommand does not have: then it is
// a usage error for rping (no -s or -c) and no command line that runs rping changes
// meaning. Within a subcommand's command line a word it does not take (`gorping devices
// -x`, `gorping mesh --bogus`, a value missing at the end) is its usage error: one line
// naming the word, exit 2. Every other command line, `devices -s` and `-v devices`
// included, is rping's.

// exitCommandUsage is the status of a usage error of gorping's own subcommands (rping's
// command line keeps rping's 22).
const exitCommandUsage = 2

type subcommand struct {
	name     string
	help     string   // a few words: completions, gorping --help's list of commands
	synopsis string   // the usage's first line, after "usage: "
	about    string   // what the usage says after the synopsis
	options  []option // its options, -h/--help included
	args     []string // the other words it takes (completion: bash zsh fish addresses)
	// daemon: a signal ends the run as its normal end (mesh: SIGTERM).
	daemon bool
}

// words are a subcommand's command line, parsed: every option given, by key (option.key)
// with its values in order ("" for a flag), and the other words.
type words struct {
	opts map[string][]string
	args []string
}

func (w words) has(key string) bool { _, ok := w.opts[key]; return ok }

// subcommands is every subcommand, generated from the urfave/cli commands; Run tries
// them in order before rping's parser.
var subcommands []*subcommand

func init() {
	subcommands = subcommandsOf(commands(handlers{}, new(int)))
}

// usage is what `gorping NAME --help` prints.
func (sc *subcommand) usage() string {
	return "usage: gorping " + sc.synopsis + "\n" + sc.about + usageList(sc.options)
}

// usageError is a subcommand's one-line complaint.
func (sc *subcommand) usageError(format string, args ...any) string {
	return fmt.Sprintf("gorping %s: %s (gorping %s --help)\n", sc.name, fmt.Sprintf(format, args...), sc.name)
}

// option finds the option a word spells: "-v", "--json", "--interval=1s" (value: "1s",
// hasValue). nil if the word is none of them.
func (sc *subcommand) option(word string) (o *option, value string, hasValue bool) {
	name, value, hasValue := strings.Cut(word, "=")
	if !strings.HasPrefix(name, "--") || !hasValue {
		name, value, hasValue = word, "", false
	}
	for i := range sc.options {
		for _, sp := range sc.options[i].names() {
			if sp == name {
				return &sc.options[i], value, hasValue
			}
		}
	}
	return nil, "", false
}

// isOption reports whether word is one of the subcommand's options ("--interval",
// "--interval=1s").
func (sc *subcommand) isOption(word string) bool {
	o, _, _ := sc.option(word)
	return o != nil
}

// nameWords are the words of the subcommand's name.
func (sc *subcommand) nameWords() []string { return strings.Fields(sc.name) }

// match applies the subcommand rule to args (rping's argv without the program name):
// ours says the command line is this subcommand's, and then errLine is "" and w its
// words, or errLine its usage error.
func (sc *subcommand) match(args []string) (ours bool, w words, errLine string) {
	n := len(sc.nameWords())
	if len(args) < n || strings.Join(args[:n], " ") != sc.name {
		return false, words{}, ""
	}
	w = words{opts: map[string][]string{}}
	for i := n; i < len(args); i++ {
		a := args[i]
		o, v, hasValue := sc.option(a)
		switch {
		case o == nil && isRpingOption(a):
			return false, words{}, "" // rping's command line (`devices -s`)
		case o == nil && errLine != "":
		case o == nil && strings.HasPrefix(a, "-") && a != "-":
			name, _, _ := strings.Cut(a, "=")
			errLine = sc.usageError("unknown option %s", name)
		case o == nil:
			w.args = append(w.args, a)
		case o.arg == "" && hasValue:
			if errLine == "" {
				errLine = sc.usageError("option --%s takes no value", o.long)
			}
		case o.arg == "":
			w.opts[o.key()] = append(w.opts[o.key()], "")
		case !hasValue && i+1 >= len(args):
			if errLine == "" {
				errLine = sc.usageError("option %s needs a value (%s)", a, strings.ToUpper(o.arg))
			}
		case !hasValue && sc.isOption(args[i+1]):
			// A value left out: the next option is not the value (issue 44).
			if errLine == "" {
				errLine = sc.usageError("option %s needs a value (%s), got the option %s", a, strings.ToUpper(o.arg), args[i+1])
			}
		default:
			if !hasValue {
				i++
				v = args[i]
			}
			w.opts[o.key()] = append(w.opts[o.key()], v)
		}
	}
	if errLine == "" && !w.has("help") {
		errLine = sc.checkArgs(w.args)
	}
	return true, w, errLine
}

// checkArgs complains about a word that is not one of the subcommand's arguments.
func (sc *subcommand) checkArgs(args []string) string {
	for _, a := range args {
		known := false
		for _, k := range sc.args {
			known = known || a == k
		}
		if !known && len(sc.args) > 0 {
			return sc.usageError("%q is not one of %s", a, strings.Join(sc.args, ", "))
		}
		if !known {
			return sc.usageError("unexpected argument %q", a)
		}
	}
	return ""
}

// isRpingOption reports whether a word is one of rping's command line's options as its
// getopt reads the word alone: "--" (the end of the options), a long option or an
// unambiguous prefix of one (--st), or letters of its option string up to the first that
// takes a value (-vs, -C5, -a).
func isRpingOption(word string) bool {
	switch {
	case word == "--":
		return true
	case strings.HasPrefix(word, "--"):
		g := getopt{argv: []string{"x"}} // a value for an option that takes one
		kind, _, _ := g.long(word[2:])
		return kind != optBad
	case len(word) < 2 || word[0] != '-':
		return false
	}
	for i := 1; i < len(word); i++ {
		j := strings.IndexByte(optstring, word[i])
		if j < 0 || word[i] == ':' {
			return false
		}
		if j+1 < len(optstring) && optstring[j+1] == ':' {
			return true // the rest of the word, or the next one, is its value
		}
	}
	return true
}

// helpOption is every subcommand's -h/--help.
var helpOption = option{short: 'h', long: "help", help: "print this usage", man: "Print the usage and exit 0."}

// rpingOptions are the options of rping's command line.
func rpingOptions() []option { return rpingLine }
