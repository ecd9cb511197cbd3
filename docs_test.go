//go:build !guest

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gorping/gorping/cli"
	"github.com/gorping/gorping/uverbs"
)

// Every relative link of the README and docs/*.md resolves: the file exists, and a
// #fragment names a heading of it (as GitHub makes anchors of headings).
func TestDocLinks(t *testing.T) {
	files, _ := filepath.Glob("docs/*.md")
	files = append(files, "README.md")
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	checked := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(stripCode(string(data)), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, frag, _ := strings.Cut(target, "#")
			dest := f
			if path != "" {
				dest = filepath.Join(filepath.Dir(f), path)
			}
			fi, err := os.Stat(dest)
			if err != nil {
				t.Errorf("%s: link %s: %v", f, target, err)
				continue
			}
			checked++
			if frag == "" {
				continue
			}
			if fi.IsDir() || !strings.HasSuffix(dest, ".md") {
				t.Errorf("%s: link %s: a fragment into a non-Markdown file", f, target)
				continue
			}
			if !anchors(t, dest)[frag] {
				t.Errorf("%s: link %s: %s has no heading with anchor #%s", f, target, dest, frag)
			}
		}
	}
	if checked < 30 {
		t.Errorf("checked only %d links: is the pattern still right?", checked)
	}
}

// stripCode drops fenced code blocks, whose brackets are not links.
func stripCode(s string) string {
	var out []string
	in := false
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			in = !in
			continue
		}
		if !in {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// anchors are the fragment names of a Markdown file's headings, as GitHub makes them:
// lower case, punctuation dropped, spaces to hyphens, a -N suffix for repeats.
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	out := map[string]bool{}
	for _, l := range strings.Split(stripCode(string(data)), "\n") {
		if !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(l, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127 && !strings.ContainsRune("→×—–·’", r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// The README's usage block is what gorping --help prints now.
func TestReadmeShowsHelp(t *testing.T) {
	var out, errOut bytes.Buffer
	st, _ := cli.Run(context.Background(), []string{"--help"}, cli.Env{Stdout: &out, Stderr: &errOut})
	if st != 0 || out.Len() == 0 {
		t.Fatalf("--help: exit %d, stderr %q", st, errOut.String())
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(readme, []byte("```\n"+out.String()+"```\n")) {
		t.Errorf("README.md has no code block with gorping --help's output:\n%s", out.String())
	}
}

// Every prose list of drivers names every provider gorping ships. A list is an
// enumeration of three or more registered drivers joined by commas, "and" or "or" (each
// name may carry a parenthesis of its own: "rxe (Soft-RoCE), siw (Soft-iWARP) and mlx5"),
// in the README, docs/*.md (code spans and blocks are not prose) or the packages'
// Description: a reader of a list of three concludes the fourth driver is unsupported.
func TestDriverListsNameEveryProvider(t *testing.T) {
	drivers := uverbs.SupportedDrivers()
	if len(drivers) < 6 {
		t.Fatalf("registered providers %q: is uverbs/providers imported?", drivers)
	}
	quoted := make([]string, len(drivers))
	for i, d := range drivers {
		quoted[i] = regexp.QuoteMeta(d)
	}
	// A driver name as a word (mlx5, not libmlx5, mlx5_ib or mlx5_0), then what joins it
	// to the next one.
	name := `(?:^|[^A-Za-z0-9_/])(` + strings.Join(quoted, "|") + `)(?:$|[^A-Za-z0-9_/])`
	driver := regexp.MustCompile(name)
	joiner := regexp.MustCompile(`^\s*(,|,?\s+and|,?\s+or)\s*$`)
	texts := map[string]string{}
	files, _ := filepath.Glob("docs/*.md")
	for _, f := range append(files, "README.md") {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		texts[f] = proseOf(stripCode(string(data)))
	}
	// The .deb's and .rpm's Description: the string constant in tools/release.
	src, err := os.ReadFile("tools/release/main.go")
	if err != nil {
		t.Fatal(err)
	}
	desc := regexp.MustCompile(`(?s)description = (".*?")\n\)`).FindSubmatch(src)
	if desc == nil {
		t.Fatal("tools/release/main.go: no description constant")
	}
	texts["tools/release/main.go (the packages' Description)"] = proseOf(strings.NewReplacer(`\n" +`, " ", `"`, "").Replace(string(desc[1])))
	lists := 0
	for file, text := range texts {
		ms := driver.FindAllStringSubmatchIndex(text, -1)
		for i := 0; i < len(ms); {
			// The run of names from ms[i] joined by commas and "and"/"or".
			j := i
			for j+1 < len(ms) && joiner.MatchString(text[ms[j][3]:ms[j+1][2]]) {
				j++
			}
			if j-i+1 >= 3 {
				lists++
				named := map[string]bool{}
				for k := i; k <= j; k++ {
					named[text[ms[k][2]:ms[k][3]]] = true
				}
				var missing []string
				for _, d := range drivers {
					if !named[d] {
						missing = append(missing, d)
					}
				}
				if len(missing) > 0 {
					t.Errorf("%s: a list of drivers without %q (registered: %q): %q", file, missing, drivers, text[ms[i][2]:ms[j][3]])
				}
			}
			i = j + 1
		}
	}
	if lists < 3 {
		t.Errorf("found only %d driver lists: is the pattern still right?", lists)
	}
}

// proseOf is Markdown as a list reads: headings and code spans dropped (a heading may
// name a subset: "What three more providers taught (bnxt_re, irdma, hns)"), emphasis marks
// and parentheses that name no driver removed, lines joined.
func proseOf(md string) string {
	md = regexp.MustCompile(`(?m)^#.*$`).ReplaceAllString(md, "")
	md = regexp.MustCompile("`[^`\n]*`").ReplaceAllString(md, "")
	md = strings.NewReplacer("**", "", "\n", " ").Replace(md)
	return regexp.MustCompile(`\s*\([^()]*\)`).ReplaceAllStringFunc(md, func(p string) string {
		for _, d := range uverbs.SupportedDrivers() {
			if strings.Contains(p, d) {
				return p
			}
		}
		return ""
	})
}

// The README stays a README: at most 400 lines (the tables live in docs/), and it names
// every alert the shipped rules define.
func TestReadmeShortAndAlerts(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(readme), "\n"); n > 400 {
		t.Errorf("README.md has %d lines, more than 400: move detail to docs/", n)
	}
	rules, err := os.ReadFile("deploy/prometheus/gorping-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	alerts := regexp.MustCompile(`(?m)^\s*- alert: (\w+)`).FindAllSubmatch(rules, -1)
	if len(alerts) < 10 {
		t.Fatalf("only %d alerts in gorping-rules.yml: is the pattern still right?", len(alerts))
	}
	for _, a := range alerts {
		if !bytes.Contains(readme, []byte("* `"+string(a[1])+"`: ")) {
			t.Errorf("README.md has no line \"* `%s`: …\" for the shipped alert", a[1])
		}
	}
}
