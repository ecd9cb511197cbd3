package pinglist

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestParseMembers(t *testing.T) {
	file := strings.Join([]string{
		"# rack A",
		"node1 tor-a",
		"node2\ttor-a   # trailing comment",
		"",
		"10.0.0.3 tor-b",
		"[2001:db8::4]:10174 tor-b",
		"node5",                              // 7: no group
		"node6 tor-b extra",                  // 8: three fields
		"node1 tor-c",                        // 9: listed before
		"nodé tor-c",                         // 10: not ASCII
		"node#9 tor-c",                       // 11: '#' inside a name
		strings.Repeat("x", 254) + " g",      // 12: host too long
		"node12 " + strings.Repeat("g", 129), // 13: group too long
		"node13 tor-c\r",                     // 14: CRLF file
		strings.Repeat("y", MaxLineLen+1),    // 15: line too long
		"node15 tor-c",
	}, "\n")
	ms, errs := ParseMembers([]byte(file))
	want := []Member{{"node1", "tor-a"}, {"node2", "tor-a"}, {"10.0.0.3", "tor-b"},
		{"[2001:db8::4]:10174", "tor-b"}, {"node13", "tor-c"}, {"node15", "tor-c"}}
	if !slices.Equal(ms, want) {
		t.Errorf("members %v\nwant    %v", ms, want)
	}
	wantErrs := map[int]string{
		7:  `"node5": want HOST GROUP`,
		8:  `"node6 tor-b extra": want HOST GROUP`,
		9:  `host "node1" is already on line 2`,
		10: `host "nodé": byte 4 is 0xc3`,
		11: `host "node#9": byte 5 is '#'`,
		12: "is 254 bytes long (at most 253)",
		13: "is 129 bytes long (at most 128)",
		15: fmt.Sprintf("line is %d bytes long (at most %d)", MaxLineLen+1, MaxLineLen),
	}
	if len(errs) != len(wantErrs) {
		t.Errorf("errors %v, want %d", errs, len(wantErrs))
	}
	for _, e := range errs {
		if w, ok := wantErrs[e.Line]; !ok || !strings.Contains(e.Error(), w) {
			t.Errorf("line %d: %v, want %q", e.Line, e, w)
		}
	}
}

func TestParseMembersLimit(t *testing.T) {
	defer func(n int) { maxMembers = n }(maxMembers)
	maxMembers = 1000
	var b bytes.Buffer
	for i := 0; i <= maxMembers+5; i++ {
		fmt.Fprintf(&b, "h%d g\n", i)
	}
	ms, errs := ParseMembers(b.Bytes())
	if len(ms) != maxMembers || len(errs) != 1 || errs[0].Error() != "line 1001: more than 1000 members" {
		t.Fatalf("%d members, errors %v", len(ms), errs)
	}
}

// FuzzParseMembers: any input parses without a panic into valid, distinct members
// whose lines, written again, parse to the same; every error names a line of the input.
func FuzzParseMembers(f *testing.F) {
	f.Add([]byte("node1 tor-a\nnode2 tor-a # c\n#x\n\n10.0.0.3 b\n"))
	f.Add([]byte("a b c\n\xff g\nx\r\n" + strings.Repeat("z", 1100)))
	f.Fuzz(func(t *testing.T, data []byte) {
		ms, errs := ParseMembers(data)
		lines := bytes.Count(data, []byte("\n")) + 1
		for _, e := range errs {
			if e.Line < 1 || e.Line > lines {
				t.Fatalf("error on line %d of %d: %v", e.Line, lines, e)
			}
		}
		var again bytes.Buffer
		seen := map[string]bool{}
		for _, m := range ms {
			if err := errors.Join(CheckHost(m.Host), CheckGroup(m.Group)); err != nil || m.Group == "" || seen[m.Host] {
				t.Fatalf("member %q: %v (or empty group, or twice)", m, err)
			}
			seen[m.Host] = true
			fmt.Fprintf(&again, "%s %s\n", m.Host, m.Group)
		}
		ms2, errs2 := ParseMembers(again.Bytes())
		if len(errs2) != 0 || !slices.Equal(ms, ms2) {
			t.Fatalf("written again: %v %v, want %v", ms2, errs2, ms)
		}
		if _, err := New(ms, 3); err != nil {
			t.Fatalf("New of parsed members: %v", err)
		}
	})
}

func TestSteps(t *testing.T) {
	for _, c := range []struct {
		old, new []string
		batch    int
		want     []Step[string]
	}{
		{[]string{"a", "b"}, []string{"b", "a"}, 1, nil},
		{nil, []string{"a", "b", "c"}, 2, []Step[string]{{Add: []string{"a", "b"}, Remove: []string{}}, {Add: []string{"c"}, Remove: []string{}}}},
		{[]string{"a", "b", "c"}, []string{"c", "d", "e", "f"}, 2, []Step[string]{
			{Add: []string{"d", "e"}, Remove: []string{"a", "b"}},
			{Add: []string{"f"}, Remove: []string{}}}},
		{[]string{"a", "b", "c", "x"}, []string{"x", "d"}, 0, []Step[string]{{Add: []string{"d"}, Remove: []string{"a", "b", "c"}}}},
		{[]string{"a", "a"}, []string{"b", "b", "c"}, 5, []Step[string]{{Add: []string{"b", "c"}, Remove: []string{"a"}}}},
	} {
		got := Steps(c.old, c.new, c.batch)
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("Steps(%v, %v, %d) = %v, want %v", c.old, c.new, c.batch, got, c.want)
		}
	}
}

// TestStepsRotation applies a real rotation's steps: the set goes from old to new, each
// step adds and removes at most the batch, and the targets never exceed old+batch.
func TestStepsRotation(t *testing.T) {
	p := mustPlan(t, uniform(50, 20), 64)
	old, _ := p.Targets("h3-3", 10)
	new, _ := p.Targets("h3-3", 11)
	cur := map[Member]bool{}
	for _, m := range old {
		cur[m] = true
	}
	steps := Steps(old, new, 8)
	for _, s := range steps {
		if len(s.Add) > 8 || len(s.Remove) > 8 || len(s.Add)+len(s.Remove) == 0 {
			t.Fatalf("step %v", s)
		}
		for _, m := range s.Add {
			cur[m] = true
		}
		if len(cur) > len(old)+8 {
			t.Fatalf("%d targets during the change, budget %d + batch 8", len(cur), len(old))
		}
		for _, m := range s.Remove {
			delete(cur, m)
		}
	}
	if len(cur) != len(new) {
		t.Fatalf("after the steps %d targets, want %d", len(cur), len(new))
	}
	for _, m := range new {
		if !cur[m] {
			t.Fatalf("%v missing after the steps", m)
		}
	}
	t.Logf("figures: a rotation of one agent (50×20, K 64) in batches of 8: %d steps", len(steps))
}
