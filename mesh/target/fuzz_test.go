package target

import (
	"bytes"
	"strings"
	"testing"
)

// Parsers of what anyone can write (a target file, /probe's query) never panic, keep
// their errors short and give only targets that parse back to themselves.

// maxErrorBytes bounds an error message about input: quote cuts input to 64 bytes, at
// most 4 bytes each once escaped, and a message quotes at most twice (the target and
// its port).
const maxErrorBytes = 2*(4*64+40) + 100

// maxProbeCount is the agent's /probe bound (mesh/http.go), as the fuzzed parser gets it.
const maxProbeCount = 100

func checkTarget(t *testing.T, tg Target) {
	t.Helper()
	if tg.Host == "" || tg.Port == 0 {
		t.Fatalf("target %+v", tg)
	}
	again, err := Parse(tg.Key(), 1)
	if err != nil || again.Key() != tg.Key() {
		t.Fatalf("target %q parses back as %q, %v", tg.Key(), again.Key(), err)
	}
}

func FuzzParseTargetFile(f *testing.F) {
	for _, s := range []string{"192.0.2.1\n", "# c\n\n[2001:db8::1]:7\nnode#1 x\n", "a\r\nb:0\n", strings.Repeat("x", 5000) + "\nh\n",
		"  node-1.example.org:7000   # trailing\n", "\x00\xff\n[::ffff:1.2.3.4]\n", "::\n224.0.0.1\nfe80::1%eth0\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ts, errs := ParseFile(data, 7174)
		lines := bytes.Count(data, []byte("\n")) + 1
		if len(ts)+len(errs) > lines {
			t.Fatalf("%d targets and %d errors from %d lines", len(ts), len(errs), lines)
		}
		seen := map[string]bool{}
		for _, tg := range ts {
			checkTarget(t, tg)
			if seen[tg.Key()] {
				t.Fatalf("%s twice", tg.Key())
			}
			seen[tg.Key()] = true
		}
		last := 0
		for _, e := range errs {
			if e.Line <= last || e.Line > lines {
				t.Fatalf("error line %d after %d, of %d lines", e.Line, last, lines)
			}
			last = e.Line
			if n := len(e.Error()); n > maxErrorBytes {
				t.Fatalf("a %d-byte error: %.100q", n, e.Error())
			}
		}
	})
}

func FuzzProbeQuery(f *testing.F) {
	for _, s := range []string{"target=192.0.2.1", "target=node1:7000&count=3", "target=[2001:db8::1]:9&count=100",
		"target=a&target=b", "count=0&target=x", "target=%zz", "target=%5B%3A%3A1%5D&count=1e2", "module=x&target=y&count=-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		tg, count, err := ParseProbeQuery(raw, 7174, maxProbeCount)
		if err != nil {
			if n := len(err.Error()); n > maxErrorBytes {
				t.Fatalf("a %d-byte error: %.100q", n, err.Error())
			}
			return
		}
		if count < 1 || count > maxProbeCount {
			t.Fatalf("count %d", count)
		}
		checkTarget(t, tg)
	})
}
