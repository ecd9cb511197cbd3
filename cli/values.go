package cli

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	urfave "github.com/urfave/cli/v2"
)

// The values of gorping's own commands' options (urfave/cli GenericFlags): each is bound
// to its field of the command's configuration when the flag is declared, so a flag's
// declaration is all there is to an option. A bad value does not fail flag's Set (whose
// message would name "-interval" and be wrapped in flag's words): the first one is kept
// in the command line's parseState and reported as one line naming the option.

// parseState is one command line's parse: the first bad value's error.
type parseState struct{ err error }

func (p *parseState) fail(err error) {
	if p.err == nil {
		p.err = parseError{err}
	}
}

// value is an option's value of type T, parsed by conv into *dst.
type value[T any] struct {
	dst     *T
	conv    func(string) (T, error)
	show    func(T) string
	p       *parseState
	name    string // the option's name, for its errors (set by bind)
	set     bool
	emptyOK bool     // "" is a value (--group: no group)
	list    bool     // comma-separated; every use adds to the list (the first replaces the default)
	words   []string // the values there are (completion), if a fixed set
	isBool  bool
}

func (v *value[T]) String() string {
	if v == nil || v.dst == nil {
		return ""
	}
	return v.show(*v.dst)
}

func (v *value[T]) IsBoolFlag() bool { return v != nil && v.isBool }

func (v *value[T]) Set(s string) error { return v.setAs(v.name, s) }

// setAs sets the value given under name (the option's name or an alias: its errors
// name the spelling the user wrote).
func (v *value[T]) setAs(name, s string) error {
	switch {
	case v.set && !v.list:
		v.p.fail(fmt.Errorf("--%s %q: given twice (only %s add up)", name, s, listOptions))
	case s == "" && !v.emptyOK:
		v.p.fail(fmt.Errorf("--%s: empty value", name))
	default:
		x, err := v.conv(s)
		if err != nil {
			if s == "" {
				v.p.fail(fmt.Errorf("--%s: %w", name, err))
			} else {
				v.p.fail(fmt.Errorf("--%s %q: %w", name, s, err))
			}
			break
		}
		if v.list && !v.set {
			var zero T
			*v.dst = zero // the first use replaces the default (--web.listen-address)
		}
		*v.dst = v.append(*v.dst, x)
	}
	v.set = true
	return nil
}

// append is the list's concatenation (lists are []string), or the new value.
func (v *value[T]) append(old, x T) T {
	if !v.list {
		return x
	}
	o, n := any(old).([]string), any(x).([]string)
	return any(append(o, n...)).(T)
}

// listOptions are the options that may be repeated (their values add up).
const listOptions = "--web.listen-address, --peers, --agents and --probe.allow"

// bind makes f's value report errors in p under f's name.
func bind(f urfave.Flag, p *parseState) {
	g, ok := f.(*urfave.GenericFlag)
	if !ok {
		return
	}
	if b, ok := g.Value.(interface{ bindTo(string, *parseState) }); ok {
		b.bindTo(g.Name, p)
	}
}

func (v *value[T]) bindTo(name string, p *parseState) { v.name, v.p = name, p }

// Values of the kinds the commands take.

func str(dst *string) *value[string] {
	return &value[string]{dst: dst, conv: func(s string) (string, error) { return s, nil }, show: func(s string) string { return s }}
}

// oneOf is a string from words (what the completions offer; the command checks it).
func oneOf(dst *string, words ...string) *value[string] {
	v := str(dst)
	v.words = words
	return v
}

func boolean(dst *bool) *value[bool] {
	return &value[bool]{dst: dst, isBool: true, show: strconv.FormatBool, conv: func(s string) (bool, error) {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return false, errors.New("want true or false")
		}
		return b, nil
	}}
}

func integer(dst *int) *value[int] {
	return &value[int]{dst: dst, show: strconv.Itoa, conv: func(s string) (int, error) {
		n, err := strconv.Atoi(s)
		if err != nil {
			return 0, errors.New("not an integer")
		}
		return n, nil
	}}
}

func uinteger(dst *uint64) *value[uint64] {
	return &value[uint64]{dst: dst, show: func(n uint64) string { return strconv.FormatUint(n, 10) },
		conv: func(s string) (uint64, error) {
			n, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return 0, errors.New("want a number, 0 or more")
			}
			return n, nil
		}}
}

func float(dst *float64) *value[float64] {
	return &value[float64]{dst: dst, show: func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) },
		conv: func(s string) (float64, error) {
			x, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return 0, errors.New("not a number")
			}
			return x, nil
		}}
}

// duration is a Go duration (500ms, 2s, 1m) or a number of seconds (0.5).
func duration(dst *time.Duration) *value[time.Duration] {
	return &value[time.Duration]{dst: dst, show: showDuration, conv: parseDuration}
}

func parseDuration(s string) (time.Duration, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return d, nil
	}
	sec, err := strconv.ParseFloat(s, 64)
	if err != nil || sec < 0 || sec > 1e6 {
		return 0, errors.New("not a duration (500ms, 2s) or a number of seconds")
	}
	return time.Duration(sec * float64(time.Second)), nil
}

// showDuration writes a default as a user would: 5m, not 5m0s.
func showDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// list is a comma-separated list; each use of the option adds to it.
func list(dst *[]string) *value[[]string] {
	return &value[[]string]{dst: dst, list: true, show: func(l []string) string { return strings.Join(l, ",") },
		conv: func(s string) ([]string, error) {
			var l []string
			for _, e := range strings.Split(s, ",") {
				if e = strings.TrimSpace(e); e != "" {
					l = append(l, e)
				}
			}
			if len(l) == 0 {
				return nil, errors.New("empty value")
			}
			return l, nil
		}}
}

// emptyOK makes "" a value of v.
func emptyOK[T any](v *value[T]) *value[T] {
	v.emptyOK = true
	return v
}

// placeholder is the value's name a flag's usage gives in backquotes (urfave/cli's
// convention), and the usage without the backquotes (without the word, when the usage
// ends with it in parentheses: " (`DUR`)").
func placeholder(usage string) (name, text string) {
	if i := strings.LastIndex(usage, " (`"); i >= 0 && strings.HasSuffix(usage, "`)") {
		return usage[i+3 : len(usage)-2], usage[:i]
	}
	_, rest, ok := strings.Cut(usage, "`")
	if !ok {
		return "", usage
	}
	name, _, ok = strings.Cut(rest, "`")
	if !ok {
		return "", usage
	}
	return name, strings.Replace(strings.Replace(usage, "`", "", 1), "`", "", 1)
}

// optionsOf are flags as the option tables list them: what gorping's usage texts,
// gorping(1)'s option lists and the shell completions are generated from. man has the
// longer gorping(1) descriptions, by flag name.
func optionsOf(flags []urfave.Flag, man map[string]string) []option {
	var opts []option
	for _, f := range flags {
		g := f.(*urfave.GenericFlag)
		arg, help := placeholder(g.Usage)
		o := option{long: g.Name, arg: strings.ToLower(arg), group: g.Category, man: man[g.Name]}
		for _, a := range g.Aliases {
			if len(a) == 1 {
				o.short = a[0] // -v
			} else {
				o.aliases = append(o.aliases, a)
			}
		}
		type boolFlag interface{ IsBoolFlag() bool }
		if b, ok := g.Value.(boolFlag); ok && b.IsBoolFlag() {
			o.arg = ""
		}
		if w, ok := g.Value.(interface{ choices() []string }); ok && len(w.choices()) > 0 {
			o.value, o.words = valueWords, w.choices()
		}
		switch {
		case g.TakesFile:
			o.value = valueFile
		case o.arg == "addr":
			o.value = valueAddr
		}
		def := g.DefaultText
		if def == "" && g.Value != nil {
			def = g.Value.String()
		}
		switch def {
		case "", "0", "0s", "false":
		default:
			help += " (default " + def + ")"
		}
		o.help = help
		var old []string
		for _, a := range o.aliases {
			if !strings.Contains(o.man, "**--"+a+"**") {
				old = append(old, "**--"+manEscape(a)+"**")
			}
		}
		if len(old) > 0 {
			o.man = o.manText() + "\n(" + strings.Join(old, ", ") + ", its earlier name, is taken too.)"
		}
		opts = append(opts, o)
	}
	return opts
}

func (v *value[T]) choices() []string { return v.words }

// number is an integer, said as "a number, 0 or more" (the command checks the sign).
func number(dst *int) *value[int] {
	return &value[int]{dst: dst, show: strconv.Itoa, conv: func(s string) (int, error) {
		n, err := strconv.Atoi(s)
		if err != nil {
			return 0, errors.New("want a number, 0 or more")
		}
		return n, nil
	}}
}

// alias is a value under another name: urfave/cli sets it as its own flag.
type alias struct {
	urfave.Generic
	name string
}

func (a alias) Set(s string) error {
	if v, ok := a.Generic.(interface{ setAs(string, string) error }); ok {
		return v.setAs(a.name, s)
	}
	return a.Generic.Set(s)
}

func (a alias) IsBoolFlag() bool {
	b, ok := a.Generic.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}
