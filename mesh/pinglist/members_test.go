package pinglist

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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

func TestRunPlan(t *testing.T) {
	dir := t.TempDir()
	members := filepath.Join(dir, "members")
	var b strings.Builder
	for g := 0; g < 4; g++ {
		for i := 0; i < 3; i++ {
			fmt.Fprintf(&b, "node%d%d rack%d\n", g, i, g)
		}
	}
	if err := os.WriteFile(members, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if err := RunPlan(PlanOptions{Members: members, Self: "node12", MaxPeers: 4, Epoch: 2}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	// Two group-mates and two of the three other racks.
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "node12 ") || !strings.Contains(out.String(), "node12 node10\n") || !strings.Contains(out.String(), "node12 node11\n") {
		t.Errorf("--self node12:\n%s", out.String())
	}
	if !strings.Contains(errOut.String(), "plan: epoch 2: 12 members in 4 groups, at most 4 targets each") {
		t.Errorf("summary: %s", errOut.String())
	}
	out.Reset()
	if err := RunPlan(PlanOptions{Members: members, All: true, MaxPeers: 4}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), "\n"); n != 12*4 {
		t.Errorf("--all: %d lines, want 48", n)
	}
	// Without --max-peers: a full mesh, and the summary says so and claims no epochs.
	out.Reset()
	errOut.Reset()
	if err := RunPlan(PlanOptions{Members: members, All: true}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), "\n"); n != 12*11 {
		t.Errorf("--all, no --max-peers: %d lines, want 132", n)
	}
	if want := "plan: 12 members in 4 groups, a full mesh: every member probes the other 11 members\n"; errOut.String() != want {
		t.Errorf("--all, no --max-peers: summary %q, want %q", errOut.String(), want)
	}
	if err := os.WriteFile(filepath.Join(dir, "bad1"), []byte("node1 g\nnode2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := RunPlan(PlanOptions{Members: filepath.Join(dir, "bad1"), All: true}, &out, &errOut); err == nil || !strings.HasSuffix(err.Error(), ": 1 bad line") {
		t.Errorf("one bad line: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bad"), []byte("node1 g\nnode2\nnode1 h\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		o     PlanOptions
		usage bool
		want  string
	}{
		{PlanOptions{Members: members}, true, "give one of --self HOST and --all"},
		{PlanOptions{Members: members, Self: "a", All: true}, true, "give one of --self HOST and --all"},
		{PlanOptions{Self: "a"}, true, "--members FILE is required"},
		{PlanOptions{Members: members, All: true, MaxPeers: -2}, true, "--max-peers -2"},
		{PlanOptions{Members: members, Self: "node99"}, false, "--self node99: not in members file"},
		{PlanOptions{Members: filepath.Join(dir, "none"), All: true}, false, "no such file"},
		{PlanOptions{Members: filepath.Join(dir, "bad"), All: true}, false, "2 bad lines"},
	} {
		errOut.Reset()
		err := RunPlan(c.o, &out, &errOut)
		if err == nil || !strings.Contains(err.Error(), c.want) || errors.Is(err, ErrUsage) != c.usage {
			t.Errorf("%+v: %v, want %q (usage %v)", c.o, err, c.want, c.usage)
		}
	}
	if !strings.Contains(errOut.String(), "bad:line 2: \"node2\": want HOST GROUP") || !strings.Contains(errOut.String(), `bad:line 3: host "node1" is already on line 1`) {
		t.Errorf("bad lines on stderr: %q", errOut.String())
	}
}
