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
