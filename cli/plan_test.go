package cli

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// (Moved from package pinglist with `gorping mesh plan`.)
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
	if err := runPlan(planOptions{Members: members, Self: "node12", MaxPeers: 4, Epoch: 2}, &out, &errOut); err != nil {
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
	if err := runPlan(planOptions{Members: members, All: true, MaxPeers: 4}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), "\n"); n != 12*4 {
		t.Errorf("--all: %d lines, want 48", n)
	}
	// Without --max-peers: a full mesh, and the summary says so and claims no epochs.
	out.Reset()
	errOut.Reset()
	if err := runPlan(planOptions{Members: members, All: true}, &out, &errOut); err != nil {
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
	if err := runPlan(planOptions{Members: filepath.Join(dir, "bad1"), All: true}, &out, &errOut); err == nil || !strings.HasSuffix(err.Error(), ": 1 bad line") {
		t.Errorf("one bad line: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bad"), []byte("node1 g\nnode2\nnode1 h\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		o     planOptions
		usage bool
		want  string
	}{
		{planOptions{Members: members}, true, "give one of --self HOST and --all"},
		{planOptions{Members: members, Self: "a", All: true}, true, "give one of --self HOST and --all"},
		{planOptions{Self: "a"}, true, "--members FILE is required"},
		{planOptions{Members: members, All: true, MaxPeers: -2}, true, "--max-peers -2"},
		{planOptions{Members: members, Self: "node99"}, false, "--self node99: not in members file"},
		{planOptions{Members: filepath.Join(dir, "none"), All: true}, false, "no such file"},
		{planOptions{Members: filepath.Join(dir, "bad"), All: true}, false, "2 bad lines"},
	} {
		errOut.Reset()
		err := runPlan(c.o, &out, &errOut)
		if err == nil || !strings.Contains(err.Error(), c.want) || errors.Is(err, errPlanUsage) != c.usage {
			t.Errorf("%+v: %v, want %q (usage %v)", c.o, err, c.want, c.usage)
		}
	}
	if !strings.Contains(errOut.String(), "bad:line 2: \"node2\": want HOST GROUP") || !strings.Contains(errOut.String(), `bad:line 3: host "node1" is already on line 1`) {
		t.Errorf("bad lines on stderr: %q", errOut.String())
	}
}
