// Command mangen turns docs/gorping.1.md into the roff man page gorping.1 with go-md2man
// (what cobra and docker use), so the page is written once, in Markdown.
//
//	go run ./internal/mangen -version v1.2.3 -in docs/gorping.1.md -out bin/gorping.1
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"

	"github.com/cpuguy83/go-md2man/v2/md2man"
)

func main() {
	in := flag.String("in", "docs/gorping.1.md", "the Markdown source")
	out := flag.String("out", "", "the roff page to write (default stdout)")
	version := flag.String("version", "", "the version the page's header names (@VERSION@)")
	flag.Parse()
	md, err := os.ReadFile(*in)
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
