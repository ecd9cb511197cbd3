package cli

import (
	"bytes"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The usage texts, gorping(1)'s option lists and the three completion scripts name the
// same options, with the same help in the usage and the completions: each read back from
// what it prints, not from the table that made it.
func TestUsageManCompletionsAgree(t *testing.T) {
	md, err := os.ReadFile("../docs/gorping.1.md")
	if err != nil {
		t.Fatal(err)
	}
	scripts := map[string]string{}
	for _, sh := range completionShells {
		var b bytes.Buffer
		if err := writeCompletion(&b, sh, "v0"); err != nil {
			t.Fatal(err)
		}
		scripts[sh] = b.String()
	}
	_, help, _ := runCLI(false, "--help")
	type cmd struct {
		name    string // "" is rping's command line
		usage   string
		man     []string // man blocks
		optsMin int
	}
	cmds := []cmd{{"", help, []string{"rping", "gorping"}, 20}}
	for _, sc := range subcommands {
		cmds = append(cmds, cmd{sc.name, sc.usage(), []string{sc.name}, 1})
	}
	for _, c := range cmds {
		label := "gorping " + c.name
		usage := usageOptions(c.usage)
		var man []string
		for _, b := range c.man {
			man = append(man, manOptions(t, string(md), b)...)
		}
		bash := bashOptions(t, scripts["bash"], c.name)
		zsh := zshOptions(t, scripts["zsh"], c.name)
		fish, fishHelp := fishOptions(scripts["fish"], c.name)
		slices.Sort(usage)
		slices.Sort(man)
		if len(usage) < c.optsMin {
			t.Errorf("%s: the usage names %d options: %q", label, len(usage), usage)
		}
		for what, got := range map[string][]string{"gorping(1)": man, "bash": bash, "zsh": zsh, "fish": fish} {
			slices.Sort(got)
			if !slices.Equal(got, usage) {
				t.Errorf("%s: %s has options %q, the usage %q", label, what, got, usage)
			}
		}
		// The completions describe an option as the usage does.
		for sp, h := range fishHelp {
			if !strings.Contains(c.usage, "  "+h+"\n") && !strings.Contains(c.usage, "\t"+h) && !strings.Contains(c.usage, "\t"+h+".") {
				t.Errorf("%s: fish describes %s as %q, which the usage does not say", label, sp, h)
			}
		}
	}
}

// usageOptions are the spellings a usage lists, one option per line ("\t-S size \t...",
// "  -i, --interval SEC  ...", "      --json  ...").
func usageOptions(usage string) []string {
	var s []string
	line := regexp.MustCompile(`(?m)^(?:\t|  +)(-[A-Za-z])?(?:, )?(--[a-z][a-z.-]*)?`)
	for _, m := range line.FindAllStringSubmatch(usage, -1) {
		for _, sp := range m[1:] {
			if sp != "" {
				s = append(s, sp)
			}
		}
	}
	return s
}

// manOptions are the spellings of the option list in docs/gorping.1.md's block name
// (hidden options, rping's -t, left out: the usage does not show them).
func manOptions(t *testing.T, md, name string) []string {
	t.Helper()
	_, rest, ok := strings.Cut(md, "<!-- options "+name+" -->\n")
	block, _, ok2 := strings.Cut(rest, "<!-- end options -->")
	if !ok || !ok2 {
		t.Fatalf("gorping(1) has no options block %s", name)
	}
	var s []string
	for _, l := range strings.Split(block, "\n") {
		if !strings.HasPrefix(l, "**-") || l == "**-t** *arg*" {
			continue
		}
		for _, m := range regexp.MustCompile(`\*\*(-[^*]+)\*\*`).FindAllStringSubmatch(l, -1) {
			s = append(s, strings.ReplaceAll(m[1], `\_`, "_"))
		}
	}
	return s
}

// bashOptions are the option words bash offers for the command line (its subcommand's
// case, or the main command's compgen -W).
func bashOptions(t *testing.T, script, name string) []string {
	t.Helper()
	var words string
	if name == "" {
		m := regexp.MustCompile(`if \[\[ \$cur == -\* \]\]; then\n\s+COMPREPLY=\(\$\(compgen -W '([^']*)'`).FindStringSubmatch(script)
		if m == nil {
			t.Fatal("bash: no main option words")
		}
		words = m[1]
	} else {
		m := regexp.MustCompile(`\n\tif _gorping_is '` + regexp.QuoteMeta(name) + `' && _gorping_only '([^']*)'`).FindStringSubmatch(script)
		if m == nil {
			t.Fatalf("bash: no case for %s", name)
		}
		words = m[1]
	}
	var s []string
	for _, w := range strings.Fields(words) {
		if strings.HasPrefix(w, "-") {
			s = append(s, w)
		}
	}
	return s
}

// zshOptions are the spellings of the _arguments specs for the command line.
func zshOptions(t *testing.T, script, name string) []string {
	t.Helper()
	var part string
	if name == "" {
		_, part, _ = strings.Cut(script, "_arguments -s -S")
		part, _, _ = strings.Cut(part, "\n}\n")
	} else {
		_, rest, ok := strings.Cut(script, "\n\tif _gorping_is '"+name+"' && ")
		if !ok {
			t.Fatalf("zsh: no case for %s", name)
		}
		part, _, _ = strings.Cut(rest, "return")
	}
	var s []string
	for _, m := range regexp.MustCompile(`(?m)^\s+'(?:\([^)]*\))?(-[A-Za-z]|--[a-z][a-z.-]*)[=+]?\[`).FindAllStringSubmatch(part, -1) {
		s = append(s, m[1])
	}
	return s
}

// fishOptions are the spellings fish completes for the command line, with their
// descriptions.
func fishOptions(script, name string) ([]string, map[string]string) {
	cond := `"__gorping_rping"`
	if name != "" {
		cond = `"__gorping_only '` + name + `' `
	}
	var s []string
	help := map[string]string{}
	opt := regexp.MustCompile(` -([sl]) (\S+)`)
	desc := regexp.MustCompile(` -d '([^']*)'$`)
	for _, l := range strings.Split(script, "\n") {
		if !strings.HasPrefix(l, "complete -c gorping -n "+cond) {
			continue
		}
		d := ""
		if m := desc.FindStringSubmatch(l); m != nil {
			d = m[1]
		}
		for _, m := range opt.FindAllStringSubmatch(l, -1) {
			sp := "-" + m[2]
			if m[1] == "l" {
				sp = "--" + m[2]
			}
			s = append(s, sp)
			if d != "" {
				help[sp] = d
			}
		}
	}
	return s, help
}
