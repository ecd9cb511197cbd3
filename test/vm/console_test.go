package vm

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestClassify(t *testing.T) {
	c := NewClassifier("abc123")
	m := MarkerPrefix("abc123")
	cases := []struct {
		line string
		want Event
	}{
		{"plain output", Event{Kind: EvOutput}},
		{m + "init", Event{Kind: EvInit}},
		{m + "kernel 6.1.0-57-amd64", Event{Kind: EvKernel, Msg: "6.1.0-57-amd64"}},
		{m + "module-fail rdma_rxe insmod: can't insert 'x.ko': Unknown symbol in module",
			Event{Kind: EvModuleFail, Name: "rdma_rxe", Msg: "insmod: can't insert 'x.ko': Unknown symbol in module"}},
		{m + "module-warn configfs gone", Event{Kind: EvModuleWarn, Name: "configfs", Msg: "gone"}},
		{m + "rxe-fail port state 1: DOWN", Event{Kind: EvRxeFail, Msg: "port state 1: DOWN"}},
		{m + "setup-fail mount /proc", Event{Kind: EvSetupFail, Msg: "mount /proc"}},
		{m + "ready", Event{Kind: EvReady}},
		{m + "test-start test_guest", Event{Kind: EvTestStart, Name: "test_guest"}},
		{m + "test-end test_guest 1", Event{Kind: EvTestEnd, Name: "test_guest", Status: 1}},
		{m + "exit 0", Event{Kind: EvExit, Status: 0}},
		{m + "exit 255", Event{Kind: EvExit, Status: 255}},
		{m + "exit garbage", Event{Kind: EvExit, Status: -1}},
		// A kernel message sharing the line with a marker.
		{"[   12.3] rdma_rxe: loaded" + m + "exit 3", Event{Kind: EvExit, Status: 3}},
		// Markers of another run (another nonce) are just output.
		{MarkerPrefix("other") + "exit 0", Event{Kind: EvOutput}},
		{"[    1.234567] Kernel panic - not syncing: Attempted to kill init! exitcode=0x00000100",
			Event{Kind: EvPanic, Msg: "[    1.234567] Kernel panic - not syncing: Attempted to kill init! exitcode=0x00000100"}},
	}
	for _, tc := range cases {
		if got := c.Classify(tc.line); got != tc.want {
			t.Errorf("Classify(%q) = %+v, want %+v", tc.line, got, tc.want)
		}
	}
}

// feed returns a channel holding lines, closed (qemu exited) if closed is true.
func feed(lines []string, closed bool) <-chan string {
	ch := make(chan string, len(lines))
	for _, l := range lines {
		ch <- l
	}
	if closed {
		close(ch)
	}
	return ch
}

var quick = Deadlines{Boot: time.Second, Setup: time.Second, Run: time.Second, Shutdown: time.Second}

func TestSuperviseSuccess(t *testing.T) {
	m := MarkerPrefix("n")
	var echoed []string
	res := Supervise(context.Background(), feed([]string{
		"Linux version ...", m + "init", m + "kernel 6.12.1", m + "ready",
		m + "test-start a", "=== RUN TestX", m + "test-end a 0", m + "exit 0", "reboot: Power down",
	}, true), NewClassifier("n"), quick, func(l string) { echoed = append(echoed, l) })
	if res.Err != nil || res.Status != 0 || res.Kernel != "6.12.1" {
		t.Fatalf("got %+v", res)
	}
	if len(res.Tests) != 1 || res.Tests[0].Name != "a" || res.Tests[0].Status != 0 {
		t.Fatalf("tests: %+v", res.Tests)
	}
	if len(echoed) != 9 {
		t.Fatalf("echoed %d lines, want 9", len(echoed))
	}
}

func TestSuperviseFailures(t *testing.T) {
	m := MarkerPrefix("n")
	cases := []struct {
		name  string
		lines []string
		close bool
		want  string
	}{
		{"panic", []string{"Kernel panic - not syncing: VFS"}, true, "guest kernel panic: Kernel panic - not syncing: VFS"},
		{"module", []string{m + "init", m + "module-fail rdma_rxe insmod: can't insert: Invalid argument"}, true,
			"module rdma_rxe failed to load: insmod: can't insert: Invalid argument"},
		{"rxe", []string{m + "init", m + "rxe-fail no IPv6 GID after 30s"}, true, "rxe link did not come up: no IPv6 GID after 30s"},
		{"qemu died", []string{m + "init", m + "ready"}, true, `qemu exited during step "run" without an exit status from the guest`},
		// A failure reported while the guest never powers off: the shutdown
		// deadline ends the wait, and the reported failure is what counts.
		{"module, no poweroff", []string{m + "init", m + "module-fail ib_core x"}, false, "module ib_core failed to load: x"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := Supervise(context.Background(), feed(tc.lines, tc.close), NewClassifier("n"), quick, func(string) {})
			if res.Err == nil || res.Err.Error() != tc.want {
				t.Fatalf("err = %v, want %q", res.Err, tc.want)
			}
			if tc.name == "panic" && !errors.Is(res.Err, ErrPanic) {
				t.Fatalf("panic error does not wrap ErrPanic: %v", res.Err)
			}
		})
	}
}

func TestSuperviseDeadlines(t *testing.T) {
	m := MarkerPrefix("n")
	d := Deadlines{Boot: 50 * time.Millisecond, Setup: 60 * time.Millisecond, Run: 70 * time.Millisecond, Shutdown: 80 * time.Millisecond}
	cases := []struct {
		lines []string
		step  Step
		limit time.Duration
	}{
		{nil, StepBoot, d.Boot},
		{[]string{m + "init"}, StepSetup, d.Setup},
		{[]string{m + "init", m + "ready"}, StepRun, d.Run},
	}
	for _, tc := range cases {
		start := time.Now()
		res := Supervise(context.Background(), feed(tc.lines, false), NewClassifier("n"), d, func(string) {})
		var te *TimeoutError
		if !errors.As(res.Err, &te) || te.Step != tc.step || te.Limit != tc.limit {
			t.Fatalf("lines %q: err = %v, want timeout in %s", tc.lines, res.Err, tc.step)
		}
		if el := time.Since(start); el < tc.limit {
			t.Fatalf("returned after %s, before the %s deadline", el, tc.limit)
		}
		if !strings.Contains(res.Err.Error(), string(tc.step)) {
			t.Fatalf("message %q does not name the step", res.Err)
		}
	}

	// Exit status seen, but the guest hangs in poweroff: the run still counts.
	res := Supervise(context.Background(), feed([]string{m + "init", m + "ready", m + "exit 7"}, false), NewClassifier("n"), d, func(string) {})
	if res.Err != nil || res.Status != 7 {
		t.Fatalf("hung poweroff after exit: %+v", res)
	}

	// Each step's deadline is its own: a slow boot does not eat into setup.
	// (Wide margins: this runs with -race on a loaded 2-core host.)
	d2 := Deadlines{Boot: 400 * time.Millisecond, Setup: 1500 * time.Millisecond, Run: time.Second, Shutdown: time.Second}
	ch := make(chan string)
	go func() {
		time.Sleep(100 * time.Millisecond) // within Boot
		ch <- m + "init"
		time.Sleep(700 * time.Millisecond) // within Setup, beyond Boot's remaining 300ms
		ch <- m + "ready"
		ch <- m + "exit 0"
		close(ch)
	}()
	if res := Supervise(context.Background(), ch, NewClassifier("n"), d2, func(string) {}); res.Err != nil || res.Status != 0 {
		t.Fatalf("per-step deadlines: %+v", res)
	}
}

func TestSuperviseCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res := Supervise(ctx, feed(nil, false), NewClassifier("n"), quick, func(string) {})
	if res.Err == nil || !errors.Is(res.Err, context.Canceled) || !strings.Contains(res.Err.Error(), "boot") {
		t.Fatalf("err = %v", res.Err)
	}
}

func TestCleanConsoleLine(t *testing.T) {
	for in, want := range map[string]string{
		"\x1bc\x1b[?7l\x1b[2J\x1b[0mSeaBIOS (version 1.16)\r\n": "SeaBIOS (version 1.16)",
		"plain\r\r\n":                        "plain",
		"ping data: rdma-ping-0: ABC[\\]^_`": "ping data: rdma-ping-0: ABC[\\]^_`",
	} {
		if got := CleanConsoleLine(in); got != want {
			t.Errorf("CleanConsoleLine(%q) = %q, want %q", in, got, want)
		}
	}
}
