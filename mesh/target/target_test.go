package target

import (
	"fmt"
	"strings"
	"testing"
)

func TestParseTarget(t *testing.T) {
	for _, c := range []struct{ in, key string }{
		{"192.0.2.1", "192.0.2.1:7174"},
		{"192.0.2.1:7000", "192.0.2.1:7000"},
		{" node-1.example.org ", "node-1.example.org:7174"},
		{"Node1.:9", "node1:9"},
		{"gorping-mesh.monitoring.svc.cluster.local", "gorping-mesh.monitoring.svc.cluster.local:7174"},
		{"2001:db8::1", "[2001:db8::1]:7174"},
		{"[2001:db8::1]", "[2001:db8::1]:7174"},
		{"[2001:db8::1]:7175", "[2001:db8::1]:7175"},
		{"::ffff:192.0.2.1", "192.0.2.1:7174"},
	} {
		tg, err := Parse(c.in, 7174)
		if err != nil || tg.Key() != c.key {
			t.Errorf("Parse(%q) = %q, %v; want %q", c.in, tg.Key(), err, c.key)
		}
	}
	for _, in := range []string{"", "host:", "host:0", "host:70000", "host:x", "[2001:db8::1", "[192.0.2.1]:7",
		"[2001:db8::1]x", "2001:db8::zz", "-bad.example", "a..b", "under score!", "0.0.0.0", "::", "224.0.0.1",
		"fe80::1%eth0", strings.Repeat("a", 64) + ".org"} {
		if tg, err := Parse(in, 7174); err == nil {
			t.Errorf("Parse(%q) = %q, want an error", in, tg.Key())
		}
	}
}

func TestParseTargetFile(t *testing.T) {
	data := "# comment\n\n192.0.2.1\n  192.0.2.2:7000   # trailing comment\nnode#1\nbad target\n192.0.2.1:7174\n[2001:db8::1]:7\n:7174\n"
	ts, errs := ParseFile([]byte(data), 7174)
	var keys []string
	for _, tg := range ts {
		keys = append(keys, tg.Key())
		if tg.Source != SourceFile {
			t.Errorf("%s: source %q", tg.Key(), tg.Source)
		}
	}
	if got, want := strings.Join(keys, " "), "192.0.2.1:7174 192.0.2.2:7000 [2001:db8::1]:7"; got != want {
		t.Errorf("targets %q, want %q", got, want)
	}
	var lines []int
	for _, e := range errs {
		lines = append(lines, e.Line)
	}
	// "node#1" is one token ('#' starts a comment only at a line's start or after a
	// blank) and not a valid name; line 6 has two words; line 9 has no host.
	if fmt.Sprint(lines) != "[5 6 9]" {
		t.Errorf("bad lines %v (%v), want [5 6 9]", lines, errs)
	}
	if ps, err := ParseList("a, b:7,,[2001:db8::2]", 7174); err != nil || len(ps) != 3 || ps[2].Key() != "[2001:db8::2]:7174" {
		t.Errorf("ParseList: %v %v", ps, err)
	}
	if _, err := ParseList("a,b c", 7174); err == nil {
		t.Error("ParseList accepted \"b c\"")
	}
}
