// Command mangen turns docs/gorping.1.md into the roff man page gorping.1 with go-md2man
// (what cobra and docker use), so the page is written once, in Markdown. Its option lists
// come from the command line's option tables (cli): each block between
// <!-- options NAME --> and <!-- end options --> is generated, so the page, the usage
// texts and the completions cannot drift apart.
//
//	go run ./cli/mangen -version v1.2.3 -in docs/gorping.1.md -out bin/gorping.1
//	go run ./cli/mangen -update docs/gorping.1.md   (rewrite the blocks in place: make man-update)
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"regexp"

	"github.com/cpuguy83/go-md2man/v2/md2man"

	"github.com/gorping/gorping/cli"
)

func main() {
	in := flag.String("in", "docs/gorping.1.md", "the Markdown source")
	out := flag.String("out", "", "the roff page to write (default stdout)")
	version := flag.String("version", "", "the version the page's header names (@VERSION@)")
	update := flag.String("update", "", "rewrite this Markdown source's generated option lists in place, and render nothing")
	flag.Parse()
	if *update != "" {
		md, err := os.ReadFile(*update)
		if err == nil {
			md, err = expand(md)
		}
		if err == nil {
			err = os.WriteFile(*update, md, 0o644)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "mangen: %v\n", err)
			os.Exit(1)
		}
		return
	}
	md, err := os.ReadFile(*in)
	if err == nil {
		md, err = expand(md)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "mangen: %v\n", err)
		os.Exit(1)
	}
	if *version == "" {
		*version = "(devel)"
	}
	roff := md2man.Render(bytes.ReplaceAll(md, []byte("@VERSION@"), []byte(*version)))
	if *out == "" {
		os.Stdout.Write(roff)
		return
	}
	if err := os.WriteFile(*out, roff, 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "mangen: %v\n", err)
		os.Exit(1)
	}
}

// block is one generated option list: its opening comment names the section.
var block = regexp.MustCompile(`(?s)(<!-- options ([a-z][a-z ]*) -->\n)(?:.*?\n)??(<!-- end options -->)`)

// expand writes every block's option list from the option tables.
func expand(md []byte) ([]byte, error) {
	var err error
	n := 0
	md = block.ReplaceAllFunc(md, func(b []byte) []byte {
		m := block.FindSubmatch(b)
		list, ok := cli.ManOptions(string(m[2]))
		if !ok {
			err = fmt.Errorf("<!-- options %s -->: no such option table (have %v)", m[2], cli.ManSections())
			return b
		}
		n++
		return []byte(string(m[1]) + "\n" + list + "\n" + string(m[3]))
	})
	if err == nil && n == 0 {
		err = fmt.Errorf("no <!-- options NAME --> block")
	}
	return md, err
}
