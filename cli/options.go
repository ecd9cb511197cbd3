package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"
)

// The option tables: rping's command line's options are declared once, in rpingLine
// (args.go), with their help; each of gorping's own commands' table is generated from
// its urfave/cli Flags (optionsOf). The usage texts (rping's byte for byte, from its
// options' usage lines), gorping(1)'s option lists (ManOptions, which cli/mangen writes
// into docs/gorping.1.md) and the shell completions are generated from these tables;
// parity_test.go checks that the three agree.

// option is one command-line option.
type option struct {
	short byte   // the letter, 0 for a long-only option
	long  string // the long name without "--", "" for a letter-only option
	// aliases are other long names it answers to (old names kept for users' scripts);
	// the usage, gorping(1) and the completions give the long name only.
	aliases []string
	arg     string // the value's name ("addr", "sec", "file"), "" for a flag
	help    string // one line: gorping's usage texts and the completions (zsh, fish show it)
	// man is gorping(1)'s description of the option (Markdown, may span lines); "" uses
	// help, with a capital and a full stop.
	man string
	// usage is the option's line in rping's usage text, verbatim (rping's own options;
	// rpingUsage is their concatenation).
	usage  string
	value  valueKind // what the completions offer for the value
	words  []string  // valueWords: the values there are
	hidden bool      // left out of the completions and gorping's usage (rping's -t vestige)
	group  string    // the heading it is listed under in the usage (mesh's groups)
	// code is what rping's getopt returns for a long-only option of rping's command line
	// (optPoll, ...); a letter option returns its letter.
	code byte
}

// valueKind says what the completions offer after an option that takes a value.
type valueKind int

const (
	valueAny   valueKind = iota // nothing: the user types it
	valueAddr                   // the addresses of the local RDMA netdevs (completion addresses)
	valueFile                   // file names
	valueWords                  // one of option.words
)

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

// names are the spellings it answers to: its spellings and its aliases.
func (o option) names() []string {
	s := o.spellings()
	for _, a := range o.aliases {
		s = append(s, "--"+a)
	}
	return s
}

// key names the option in a parsed command line: its long name, else its letter.
func (o option) key() string {
	if o.long != "" {
		return o.long
	}
	return string(o.short)
}

// usageForm is the option as a usage text lists it: "-i, --interval SEC", "    --json".
func (o option) usageForm() string {
	var s string
	switch {
	case o.short != 0 && o.long != "":
		s = "-" + string(o.short) + ", --" + o.long
	case o.short != 0:
		s = "-" + string(o.short)
	default:
		s = "    --" + o.long
	}
	if o.arg != "" {
		s += " " + strings.ToUpper(o.arg)
	}
	return s
}

// manForm is the option as gorping(1) lists it: "**-i** *sec*, **--interval** *sec*".
func (o option) manForm() string {
	var forms []string
	for _, sp := range o.spellings() {
		f := "**" + manEscape(sp) + "**"
		if o.arg != "" {
			f += " *" + manEscape(o.arg) + "*"
		}
		forms = append(forms, f)
	}
	return strings.Join(forms, ", ")
}

// manText is the option's description in gorping(1).
func (o option) manText() string {
	if o.man != "" {
		return o.man
	}
	h := o.help
	if h == "" {
		return ""
	}
	return strings.ToUpper(h[:1]) + h[1:] + "."
}

// manEscape keeps Markdown from reading a word's characters as emphasis.
func manEscape(s string) string { return strings.ReplaceAll(s, "_", `\_`) }

// manList is opts as the Markdown definition list gorping(1) has: each option's forms in
// bold, its description indented below (groups, when the options have them, as bold
// lines of their own).
func manList(opts []option) string {
	var b strings.Builder
	group := ""
	for _, o := range opts {
		if o.group != group && o.group != "" {
			fmt.Fprintf(&b, "*%s*\n\n", o.group)
		}
		group = o.group
		fmt.Fprintf(&b, "%s\n:   %s\n\n", o.manForm(), strings.ReplaceAll(strings.TrimSpace(o.manText()), "\n", "\n    "))
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// usageList is opts as a usage text lists them, aligned, under their groups' headings.
func usageList(opts []option) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
	group := ""
	for _, o := range opts {
		if o.hidden {
			continue
		}
		if o.group != group {
			tw.Flush()
			if b.Len() > 0 {
				b.WriteString("\n")
			}
			if o.group != "" {
				fmt.Fprintf(&b, "%s:\n", o.group)
			}
			group = o.group
		}
		fmt.Fprintf(tw, "  %s\t%s\n", o.usageForm(), o.help)
	}
	tw.Flush()
	return b.String()
}
