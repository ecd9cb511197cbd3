package main

// `gorping completion bash|zsh|fish`: shell completion scripts, generated from the option
// tables (optstring and longOpts for rping's command line, subcommands for the rest), so a
// new option is completed without touching the scripts. `gorping completion addresses`
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

const completionUsage = `usage: gorping completion bash|zsh|fish
       gorping completion addresses
Print the completion script for bash, zsh or fish on stdout (gorping(1), SHELL COMPLETION,
says where to put it). "addresses" prints the IPv4 and IPv6 addresses of the network
devices of the local RDMA devices, one per line: what the scripts offer after -a and -I.
	-h, --help	this text
`

var (
	completionOptions = []option{{short: 'h', long: "help", help: "print the usage"}}
	completionArgs    = []string{"bash", "zsh", "fish", "addresses"}
)

func isCompletionCommand(args []string) bool {
	return firstWordCommand(args, "completion", completionOptions, completionArgs)
}

// runCompletion runs `gorping completion`; args are the words after "completion",
// already checked by isCompletionCommand.
func runCompletion(args []string, stdout, stderr io.Writer) int {
	if wantsHelp(args) {
		io.WriteString(stdout, completionUsage)
		return 0
	}
	if len(args) != 1 {
		fmt.Fprintf(stderr, "gorping completion: name one of %s\n", strings.Join(completionArgs, ", "))
		return exitUsage
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
	if err := writeCompletion(stdout, args[0]); err != nil {
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
	Args       []string
}

func newCompView() compView {
	v := compView{Version: version()}
	for _, o := range rpingOptions() {
		if !o.hidden {
			v.Main = append(v.Main, o)
		}
	}
	for _, s := range subcommands {
		v.Subs = append(v.Subs, compSub{Name: s.name, Help: s.help, Options: s.options, Args: s.args})
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

func anyOpt(option) bool     { return true }
func addrOpt(o option) bool  { return o.arg != "" && o.addr }
func valueOpt(o option) bool { return o.arg != "" && !o.addr }

// Words are everything that may follow the subcommand's name.
func (s compSub) Words() string {
	return strings.TrimSpace(spellingsOf(s.Options, anyOpt, " ") + " " + strings.Join(s.Args, " "))
}
func (s compSub) ValueOpts() string {
	return spellingsOf(s.Options, func(o option) bool { return o.arg != "" }, " ")
}
func (s compSub) AddrCase() string  { return spellingsOf(s.Options, addrOpt, "|") }
func (s compSub) ValueCase() string { return spellingsOf(s.Options, valueOpt, "|") }

func (v compView) MainWords() string { return spellingsOf(v.Main, anyOpt, " ") }
func (v compView) AddrCase() string  { return spellingsOf(v.Main, addrOpt, "|") }
func (v compView) ValueCase() string { return spellingsOf(v.Main, valueOpt, "|") }
func (v compView) SubNames() string {
	var n []string
	for _, s := range v.Subs {
		n = append(n, s.Name)
	}
	return strings.Join(n, " ")
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
		switch {
		case o.addr:
			s += ":" + o.arg + ":_gorping_addresses"
		case o.arg != "":
			s += ":" + o.arg + ": "
		}
		specs = append(specs, "'"+s+"'")
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
	switch {
	case o.addr:
		s += " -x -a '(__gorping_addresses)'"
	case o.arg != "":
		s += " -x"
	}
	if o.help != "" {
		s += " -d " + shellQuote(o.help)
	}
	return s
}

// onlyFunc is the subcommand rule as a bash or zsh function, over the shell's array of
// words (words from index first on, up to the one being completed, index cword).
func onlyFunc(words string, first int, cword string) string {
	return fmt.Sprintf(`# _gorping_only WORDS VALUEOPTS: every word between the subcommand and the one being
# completed is one of WORDS, or the value after one of VALUEOPTS (the subcommand rule:
# otherwise the command line is rping's).
_gorping_only() {
	local i
	for ((i = %[2]d; i < %[3]s; i++)); do
		if [[ " $2 " == *" ${%[1]s[i]} "* ]]; then
			((i++))
			continue
		fi
		[[ " $1 " == *" ${%[1]s[i]} "* ]] || return 1
	done
}
`, words, first, cword)
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// fishQuote double-quotes a fish condition, which holds single-quoted words.
func fishQuote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, `$`, `\$`).Replace(s) + `"`
}

var compTmpl = template.Must(template.New("").Funcs(template.FuncMap{
	"zsh": zshSpec, "fish": fishLine, "fq": fishQuote, "only": onlyFunc, "q": shellQuote, "join": strings.Join,
}).Parse(`
{{define "bashprev"}}{{if or .AddrCase .ValueCase}}
	# the value of an option: addresses, or nothing to offer
	case $prev in
{{- with .AddrCase}}
	{{.}}) COMPREPLY=($(compgen -W "$(_gorping_addresses "${COMP_WORDS[0]}")" -- "$cur")); return ;;{{end}}
{{- with .ValueCase}}
	{{.}}) return ;;{{end}}
	esac
{{- end}}{{end}}

{{define "bash"}}# bash completion for gorping(1), printed by ` + "`gorping completion bash`" + ` ({{.Version}}).
# Install it as /usr/share/bash-completion/completions/gorping, or: source <(gorping completion bash)

_gorping_addresses() {
	command "$1" completion addresses 2>/dev/null
}

{{only "COMP_WORDS" 2 "COMP_CWORD"}}
_gorping() {
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
	COMPREPLY=()
	if ((COMP_CWORD >= 2)); then
		case ${COMP_WORDS[1]} in
{{- range .Subs}}
		{{.Name}})
			if _gorping_only {{q .Words}} {{q .ValueOpts}}; then
				{{- template "bashprev" .}}
				COMPREPLY=($(compgen -W {{q .Words}} -- "$cur"))
				return
			fi
			;;
{{- end}}
		esac
	fi
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

{{only "words" 3 "CURRENT"}}
_gorping() {
	if ((CURRENT > 2)); then
		case ${words[2]} in
{{- range .Subs}}
		{{.Name}})
			if _gorping_only {{q .Words}} {{q .ValueOpts}}; then
				_arguments -S{{range .Options}}{{range zsh .}} \
					{{.}}{{end}}{{end}}{{if .Args}} \
					'*:argument:({{join .Args " "}})'{{end}}
				return
			fi
			;;
{{- end}}
		esac
	fi
	if ((CURRENT == 2)) && [[ ${words[CURRENT]} != -* ]]; then
		local -a subs
		subs=({{range .Subs}}{{q (print .Name ":" .Help)}} {{end}})
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
# gorping(1): its name first, then only its own words).
function __gorping_only -a name words valueopts
	set -l t (commandline -opc)
	test (count $t) -ge 2; and test "$t[2]" = $name; or return 1
	set -l w (string split ' ' -- $words)
	set -l v (string split ' ' -- $valueopts)
	set -e t[1..2]
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
	__gorping_only {{.Name}} {{q .Words}} {{q .ValueOpts}}; and return 1
{{- end}}
	return 0
end

complete -c gorping -f
{{- range .Subs}}
complete -c gorping -n 'test (count (commandline -opc)) -eq 1' -a {{.Name}} -d {{q .Help}}
{{- end}}
{{- range .Main}}
{{fish . "__gorping_rping"}}
{{- end}}
{{- range $s := .Subs}}{{$cond := print "__gorping_only " $s.Name " " (q $s.Words) " " (q $s.ValueOpts)}}
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
func writeCompletion(w io.Writer, shell string) error {
	return compTmpl.ExecuteTemplate(w, shell, newCompView())
}
