package vm

import (
	"strings"
	"testing"
)

func TestFailureLogKeepsWhatFailed(t *testing.T) {
	f := failureLog{marker: "@@gr-abc "}
	console := []string{
		"=== RUN   TestA",
		"--- PASS: TestA (0.01s)",
		"=== RUN   TestB",
		"--- FAIL: TestB (1.00s)",
		"    --- FAIL: TestB/IPv4 (0.50s)",
		"        interop_test.go:12: server said: boom",
		"    --- PASS: TestB/IPv6 (0.50s)",
		"        a log line of a passing subtest",
		"=== RUN   TestC",
		"unrelated line",
		"FAIL",
		"@@gr-abc test-end test_guest 1",
		"@@gr-abc test-end rping 0",
	}
	for _, l := range console {
		f.add(l)
	}
	got := strings.Join(f.lines, "\n")
	want := strings.Join([]string{
		"--- FAIL: TestB (1.00s)",
		"    --- FAIL: TestB/IPv4 (0.50s)",
		"        interop_test.go:12: server said: boom",
		"test binary test_guest exited 1",
	}, "\n")
	if got != want {
		t.Fatalf("kept:\n%s\nwant:\n%s", got, want)
	}
}

func TestFailureLogIsBounded(t *testing.T) {
	var f failureLog
	for i := 0; i < 500; i++ {
		f.add("--- FAIL: TestX (0.00s)")
	}
	if len(f.lines) != failureMax+1 || !strings.HasPrefix(f.lines[failureMax], "(more") {
		t.Fatalf("kept %d lines, last %q", len(f.lines), f.lines[len(f.lines)-1])
	}
}
