package main

import (
	"bytes"
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/gorping/gorping/cli"
)

// docs/gorping.1.md carries the option lists the tables make (so the Markdown reads
// right on its own too); after a change to an option, make man-update rewrites them.
func TestManSourceCurrent(t *testing.T) {
	md, err := os.ReadFile("../../docs/gorping.1.md")
	if err != nil {
		t.Fatal(err)
	}
	got, err := expand(md)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, md) {
		t.Errorf("docs/gorping.1.md's option lists are not what the option tables (cli) make: run make man-update")
	}
	// Every table has its block.
	var names []string
	for _, m := range regexp.MustCompile(`<!-- options ([a-z][a-z ]*) -->`).FindAllSubmatch(md, -1) {
		names = append(names, string(m[1]))
	}
	slices.Sort(names)
	if want := cli.ManSections(); !slices.Equal(names, want) {
		t.Errorf("docs/gorping.1.md has option blocks %q, the tables are %q", names, want)
	}
}

// A block is rewritten whole, and an unknown table is an error.
func TestExpand(t *testing.T) {
	out, err := expand([]byte("a\n<!-- options devices -->\nstale\n<!-- end options -->\nb\n"))
	if err != nil || !bytes.Contains(out, []byte("**--json**\n:   ")) || bytes.Contains(out, []byte("stale")) {
		t.Errorf("expand: %v\n%s", err, out)
	}
	if _, err := expand([]byte("<!-- options nosuch -->\n<!-- end options -->\n")); err == nil {
		t.Error("an unknown table expanded")
	}
}
