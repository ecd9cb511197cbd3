package cli

// `gorping completion bash|zsh|fish`: shell completion scripts, generated from the option
// tables (rpingLine for rping's command line, subcommands for the rest), so a new option
// is completed without touching the scripts. `gorping completion addresses`
// lists what the scripts offer after -a and -I.

import (
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"text/template"

	"github.com/gorping/gorping/uverbs"
)

// completionShells are the scripts `gorping completion` prints.
var completionShells = []string{"bash", "zsh", "fish"}

// command is the subcommand named name (its table entry).
func command(name string) *subcommand {
	for _, sc := range subcommands {
		if sc.name == name {
			return sc
		}
	}
	panic("no subcommand " + name)
}

// runCompletion runs `gorping completion`; args are its words, each one of its arguments.
func runCompletion(args []string, env Env) int {
	stdout, stderr := env.Stdout, env.Stderr
	if len(args) != 1 {
		sc := command("completion")
		fmt.Fprint(stderr, sc.usageError("name one of %s", strings.Join(sc.args, ", ")))
		return exitCommandUsage
	}
	if args[0] == "addresses" {
		addrs, err := rdmaAddresses()
		if err != nil {
			fmt.Fprintf(stderr, "gorping completion: %v\n", err)
			return 1
		}
		for _, a := range addrs {
			fmt.Fprintln(stdout, a)
		}
		return 0
	}
	if err := writeCompletion(stdout, args[0], env.Version); err != nil {
		fmt.Fprintf(stderr, "gorping completion: %v\n", err)
		return 1
	}
	return 0
}

// rdmaAddresses are the addresses of the netdevs under the local RDMA devices, as
// `gorping devices` finds them (RDMA netlink, sysfs), in device order. IPv6 link-local
// addresses are left out: they need a zone to be used.
func rdmaAddresses() ([]string, error) {
	devs, err := uverbs.Host{}.Devices()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, d := range devs {
		for _, nd := range d.Netdevs() {
			ifi, err := net.InterfaceByName(nd)
			if err != nil {
				continue // gone, or in another network namespace
			}
			addrs, err := ifi.Addrs()
			if err != nil {
				return nil, fmt.Errorf("addresses of %s: %w", nd, err)
			}
			for _, a := range addrs {
				ipn, ok := a.(*net.IPNet)
				if !ok || ipn.IP.IsLinkLocalUnicast() && ipn.IP.To4() == nil {
					continue
				}
				if s := ipn.IP.String(); !slices.Contains(out, s) {
					out = append(out, s)
				}
			}
		}
	}
	return out, nil
}

// compView is what the script templates see.
type compView struct {
	Version string
	Main    []option // rping's command line, hidden options left out
	Subs    []compSub
}

type compSub struct {
	Name, Help string
	Options    []option
	Args       []string // its arguments, and the next word of a longer subcommand (mesh: plan)
	N          int      // the words of its name
}

// First is the index of the first word after the name in a shell's array of words whose
// index base holds the first word after "gorping".
func (s compSub) First(base int) int { return base + s.N }

func newCompView(version string) compView {
	v := compView{Version: version}
	for _, o := range rpingOptions() {
		if !o.hidden {
			v.Main = append(v.Main, o)
		}
	}
	for _, s := range subcommands {
		cs := compSub{Name: s.name, Help: s.help, Options: s.options, Args: slices.Clone(s.args), N: len(s.nameWords())}
		for _, l := range subcommands {
			if next, ok := strings.CutPrefix(l.name, s.name+" "); ok {
				cs.Args = append(cs.Args, strings.Fields(next)[0])
			}
		}
		v.Subs = append(v.Subs, cs)
	}
	return v
}

// spellings of opts selected by keep, joined by sep.
func spellingsOf(opts []option, keep func(option) bool, sep string) string {
	var s []string
	for _, o := range opts {
		if keep(o) {
			s = append(s, o.spellings()...)
		}
	}
	return strings.Join(s, sep)
}

func anyOpt(option) bool { return true }

// Words are everything that may follow the subcommand's name.
func (s compSub) Words() string {
	return strings.TrimSpace(spellingsOf(s.Options, anyOpt, " ") + " " + strings.Join(s.Args, " "))
}
func (s compSub) ValueOpts() string {
	return spellingsOf(s.Options, func(o option) bool { return o.arg != "" }, " ")
}
func (s compSub) BashValues() string { return bashValues(s.Options) }

func (v compView) MainWords() string  { return spellingsOf(v.Main, anyOpt, " ") }
func (v compView) BashValues() string { return bashValues(v.Main) }

// SubNames are the one-word subcommands (what follows "gorping").
func (v compView) SubNames() string { return strings.Join(v.topNames(), " ") }

func (v compView) topNames() []string {
	var n []string
	for _, s := range v.Subs {
		if s.N == 1 {
			n = append(n, s.Name)
		}
	}
	return n
}

// Top are the one-word subcommands.
func (v compView) Top() []compSub {
	var t []compSub
	for _, s := range v.Subs {
		if s.N == 1 {
			t = append(t, s)
		}
	}
	return t
}

// bashValues is the bash case statement that completes the value after one of opts'
// options (the previous word): addresses, file names, its words, or nothing to offer.
func bashValues(opts []option) string {
	var cases []string
	for _, o := range opts {
		if o.arg == "" || o.hidden {
			continue
		}
		pat := strings.Join(o.spellings(), "|")
		switch o.value {
		case valueAddr:
			cases = append(cases, pat+`) COMPREPLY=($(compgen -W "$(_gorping_addresses "${COMP_WORDS[0]}")" -- "$cur")); return ;;`)
		case valueFile:
			cases = append(cases, pat+`) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$cur")); return ;;`)
		case valueWords:
			cases = append(cases, pat+`) COMPREPLY=($(compgen -W `+shellQuote(strings.Join(o.words, " "))+` -- "$cur")); return ;;`)
		default:
			cases = append(cases, pat+") return ;;")
		}
	}
	if len(cases) == 0 {
		return ""
	}
	return "\n\t# the value of an option\n\tcase $prev in\n\t" + strings.Join(cases, "\n\t") + "\n\tesac"
}

// zshSpec is o as _arguments specs, one per spelling.
func zshSpec(o option) []string {
	help := strings.NewReplacer(`\`, `\\`, `[`, `\[`, `]`, `\]`, `:`, `\:`, `'`, `'\''`).Replace(o.help)
	var specs []string
	excl := ""
	if o.short != 0 && o.long != "" {
		excl = "(" + strings.Join(o.spellings(), " ") + ")"
	}
	for _, sp := range o.spellings() {
		s := excl + sp
		if o.arg != "" {
			if strings.HasPrefix(sp, "--") {
				s += "="
			} else {
				s += "+"
			}
		}
		s += "[" + help + "]"
		if o.arg != "" {
			s += ":" + o.arg + ":"
			switch o.value {
			case valueAddr:
				s += "_gorping_addresses"
			case valueFile:
				s += "_files"
			case valueWords:
				s += "(" + strings.Join(o.words, " ") + ")"
			default:
				s += " "
			}
		}
		specs = append(specs, "'"+strings.ReplaceAll(s, "'", `'\''`)+"'")
	}
	return specs
}

// fishLine is o as a fish `complete` command under condition cond.
func fishLine(o option, cond string) string {
	s := "complete -c gorping -n " + fishQuote(cond)
	if o.short != 0 {
		s += " -s " + string(o.short)
	}
	if o.long != "" {
		s += " -l " + o.long
	}
	if o.arg != "" {
		switch o.value {
		case valueAddr:
			s += " -x -a '(__gorping_addresses)'"
		case valueFile:
			s += " -r -F"
		case valueWords:
			s += " -x -a " + shellQuote(strings.Join(o.words, " "))
		default:
			s += " -x"
		}
	}
	if o.help != "" {
		s += " -d " + shellQuote(o.help)
	}
	return s
}

// ruleFuncs are the subcommand rule as bash or zsh functions over the shell's array of
// words arr (the first word after "gorping" at index base; cword: the one being
// completed; split: how the shell splits a parameter into words).
func ruleFuncs(arr string, base int, cword, split string) string {
	return fmt.Sprintf(`# _gorping_is NAME: the words after gorping are NAME's, and the word being completed
# comes after them.
_gorping_is() {
	local w i=%[2]d
	for w in %[4]s; do
		[[ ${%[1]s[i]} == "$w" ]] || return 1
		((i++))
	done
	((%[3]s >= i))
}

# _gorping_only WORDS VALUEOPTS FIRST: every word from index FIRST up to the one being
# completed is one of WORDS, or the value after one of VALUEOPTS (the subcommand rule:
# otherwise the command line is rping's).
_gorping_only() {
	local i
	for ((i = $3; i < %[3]s; i++)); do
		if [[ " $2 " == *" ${%[1]s[i]} "* ]]; then
			((i++))
			continue
		fi
		[[ " $1 " == *" ${%[1]s[i]} "* ]] || return 1
	done
}
`, arr, base, cword, split)
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// fishQuote double-quotes a fish condition, which holds single-quoted words.
func fishQuote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, `$`, `\$`).Replace(s) + `"`
}

var compTmpl = template.Must(template.New("").Funcs(template.FuncMap{
	"zsh": zshSpec, "fish": fishLine, "fq": fishQuote, "rule": ruleFuncs, "q": shellQuote, "join": strings.Join,
}).Parse(`
{{define "bashprev"}}{{.BashValues}}{{end}}

{{define "bash"}}# bash completion for gorping(1), printed by ` + "`gorping completion bash`" + ` ({{.Version}}).
# Install it as /usr/share/bash-completion/completions/gorping, or: source <(gorping completion bash)

_gorping_addresses() {
	command "$1" completion addresses 2>/dev/null
}

{{rule "COMP_WORDS" 1 "COMP_CWORD" "$1"}}
_gorping() {
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
	COMPREPLY=()
{{- range .Subs}}
	if _gorping_is {{q .Name}} && _gorping_only {{q .Words}} {{q .ValueOpts}} {{.First 1}}; then
		{{- template "bashprev" .}}
		COMPREPLY=($(compgen -W {{q .Words}} -- "$cur"))
		return
	fi
{{- end}}
	{{- template "bashprev" .}}
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W {{q .MainWords}} -- "$cur"))
	elif ((COMP_CWORD == 1)); then
		COMPREPLY=($(compgen -W {{q .SubNames}} -- "$cur"))
	fi
}
complete -F _gorping gorping
{{end}}

{{define "zsh"}}#compdef gorping
# zsh completion for gorping(1), printed by ` + "`gorping completion zsh`" + ` ({{.Version}}).
# Install it as _gorping in a directory of $fpath, or: source <(gorping completion zsh)

_gorping_addresses() {
	local -a addrs
	addrs=(${(f)"$(command ${words[1]} completion addresses 2>/dev/null)"})
	compadd -a addrs
}

{{rule "words" 2 "CURRENT" "${=1}"}}
_gorping() {
{{- range .Subs}}
	if _gorping_is {{q .Name}} && _gorping_only {{q .Words}} {{q .ValueOpts}} {{.First 2}}; then
		_arguments -S{{range .Options}}{{range zsh .}} \
			{{.}}{{end}}{{end}}{{if .Args}} \
			'*:argument:({{join .Args " "}})'{{end}}
		return
	fi
{{- end}}
	if ((CURRENT == 2)) && [[ ${words[CURRENT]} != -* ]]; then
		local -a subs
		subs=({{range .Top}}{{q (print .Name ":" .Help)}} {{end}})
		_describe -t commands 'gorping subcommand' subs
		return
	fi
	_arguments -s -S{{range .Main}}{{range zsh .}} \
		{{.}}{{end}}{{end}}
}

if [[ $funcstack[1] == _gorping ]]; then
	_gorping "$@"
else
	compdef _gorping gorping
fi
{{end}}

{{define "fish"}}# fish completion for gorping(1), printed by ` + "`gorping completion fish`" + ` ({{.Version}}).
# Install it as gorping.fish in a fish completions directory, or: gorping completion fish | source

function __gorping_addresses
	set -l t (commandline -opc)
	command $t[1] completion addresses 2>/dev/null
end

# __gorping_only NAME WORDS VALUEOPTS: the command line is subcommand NAME (the rule of
# gorping(1): its name's words first, then only its own words).
function __gorping_only -a name words valueopts
	set -l t (commandline -opc)
	set -l k (math (count (string split ' ' -- $name)) + 1)
	test (count $t) -ge $k; and test "$t[2..$k]" = "$name"; or return 1
	set -l w (string split ' ' -- $words)
	set -l v (string split ' ' -- $valueopts)
	set -e t[1..$k]
	set -l skip 0
	for a in $t
		if test $skip = 1
			set skip 0
			continue
		end
		if contains -- $a $v
			set skip 1
			continue
		end
		contains -- $a $w; or return 1
	end
end

function __gorping_rping
{{- range .Subs}}
	__gorping_only {{q .Name}} {{q .Words}} {{q .ValueOpts}}; and return 1
{{- end}}
	return 0
end

complete -c gorping -f
{{- range .Top}}
complete -c gorping -n 'test (count (commandline -opc)) -eq 1' -a {{.Name}} -d {{q .Help}}
{{- end}}
{{- range .Main}}
{{fish . "__gorping_rping"}}
{{- end}}
{{- range $s := .Subs}}{{$cond := print "__gorping_only " (q $s.Name) " " (q $s.Words) " " (q $s.ValueOpts)}}
{{- range .Options}}
{{fish . $cond}}
{{- end}}
{{- if .Args}}
complete -c gorping -n {{fq $cond}} -a {{q (join .Args " ")}}
{{- end}}
{{- end}}
{{end}}
`))

// writeCompletion writes the completion script for shell.
func writeCompletion(w io.Writer, shell, version string) error {
	return compTmpl.ExecuteTemplate(w, shell, newCompView(version))
}
