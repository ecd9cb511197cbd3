package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// A go test -json stream: a passing test, a failing one with a failing subtest
// and a passing one, a skip, and the package lines.
const stream = `{"Action":"start","Package":"m/p"}
{"Action":"run","Package":"m/p","Test":"TestOK"}
{"Action":"output","Package":"m/p","Test":"TestOK","Output":"=== RUN   TestOK\n"}
{"Action":"output","Package":"m/p","Test":"TestOK","Output":"    ok_test.go:3: chatter\n"}
{"Action":"output","Package":"m/p","Test":"TestOK","Output":"--- PASS: TestOK (12.50s)\n"}
{"Action":"pass","Package":"m/p","Test":"TestOK","Elapsed":12.5}
{"Action":"run","Package":"m/p","Test":"TestBad"}
{"Action":"output","Package":"m/p","Test":"TestBad","Output":"=== RUN   TestBad\n"}
{"Action":"run","Package":"m/p","Test":"TestBad/a"}
{"Action":"output","Package":"m/p","Test":"TestBad/a","Output":"=== RUN   TestBad/a\n"}
{"Action":"output","Package":"m/p","Test":"TestBad/a","Output":"    bad_test.go:9: want 1, got 2\n"}
{"Action":"run","Package":"m/p","Test":"TestBad/b"}
{"Action":"output","Package":"m/p","Test":"TestBad","Output":"--- FAIL: TestBad (3.00s)\n"}
{"Action":"output","Package":"m/p","Test":"TestBad/a","Output":"    --- FAIL: TestBad/a (2.00s)\n"}
{"Action":"fail","Package":"m/p","Test":"TestBad/a","Elapsed":2}
{"Action":"output","Package":"m/p","Test":"TestBad/b","Output":"    --- PASS: TestBad/b (1.00s)\n"}
{"Action":"pass","Package":"m/p","Test":"TestBad/b","Elapsed":1}
{"Action":"fail","Package":"m/p","Test":"TestBad","Elapsed":3}
{"Action":"output","Package":"m/p","Test":"TestSkip","Output":"--- SKIP: TestSkip (0.00s)\n"}
{"Action":"skip","Package":"m/p","Test":"TestSkip","Elapsed":0}
{"Action":"output","Package":"m/p","Output":"FAIL\n"}
{"Action":"output","Package":"m/p","Output":"FAIL\tm/p\t15.6s\n"}
{"Action":"fail","Package":"m/p","Elapsed":15.6}
`

func TestViewerQuietShowsOnlyFailures(t *testing.T) {
	var out bytes.Buffer
	v := newViewer(&out, false)
	for _, l := range strings.SplitAfter(stream, "\n") {
		v.line([]byte(l))
	}
	v.line([]byte("not json: passed through\n"))
	v.flush()
	// In the order go test -v streamed it: the log line when it was logged.
	want := "    bad_test.go:9: want 1, got 2\n" +
		"--- FAIL: TestBad (3.00s)\n" +
		"    --- FAIL: TestBad/a (2.00s)\n" +
		"    --- PASS: TestBad/b (1.00s)\n" +
		"FAIL\nFAIL\tm/p\t15.6s\nnot json: passed through\n"
	if got := out.String(); got != want {
		t.Errorf("quiet view:\n%s\nwant:\n%s", got, want)
	}
}

func TestViewerShowsTestsThatNeverEnded(t *testing.T) {
	var out bytes.Buffer
	v := newViewer(&out, false)
	for _, l := range []string{
		`{"Action":"output","Package":"m/p","Test":"TestHang","Output":"panic: test timed out after 1m0s\n"}`,
		`{"Action":"output","Package":"m/p","Output":"FAIL\tm/p\t60.0s\n"}`,
		`{"Action":"fail","Package":"m/p","Elapsed":60}`,
	} {
		v.line([]byte(l + "\n"))
	}
	if got, want := out.String(), "FAIL\tm/p\t60.0s\npanic: test timed out after 1m0s\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestViewerVerbose(t *testing.T) {
	var out bytes.Buffer
	v := newViewer(&out, true)
	for _, l := range strings.SplitAfter(stream, "\n") {
		v.line([]byte(l))
	}
	if got := out.String(); !strings.Contains(got, "=== RUN   TestOK\n    ok_test.go:3: chatter\n--- PASS: TestOK (12.50s)\n") {
		t.Errorf("verbose view lost TestOK's output:\n%s", got)
	}
}

func TestReport(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("tiers.tsv", "lint\t61.0\t0\nunit\t330.4\t1\nguest-matrix\t900.0\t0\nfabric\t400.0\t0\n")
	write("unit.log", labelPrefix+"\n"+stream)
	write("guest-matrix.log", "[bookworm/amd64] @@gr-abc123 test-start test_guest\n"+
		"[bookworm/amd64] --- PASS: TestInterop (95.20s)\n"+
		"[bookworm/amd64]     --- PASS: TestInterop/sub (90.00s)\n"+
		"[bookworm/amd64] @@gr-abc123 test-start mesh\n"+
		"[bookworm/amd64] --- FAIL: TestGuestProbe (7.00s)\n"+
		"guest bookworm/amd64 kernel 6.1.0-41-amd64: PASS (boot 9.0s, setup 2.0s, tests 300.0s)\n"+
		"  guest bookworm/amd64 kernel 6.1.0-41-amd64: PASS (boot 9.0s, setup 2.0s, tests 300.0s)\n")
	write("fabric.log", labelPrefix+"trixie/amd64\n"+
		`{"Action":"pass","Package":"github.com/gorping/gorping/test/fabric","Test":"TestMesh","Elapsed":150.5}`+"\n"+
		`{"Action":"pass","Package":"github.com/gorping/gorping/test/fabric","Elapsed":390}`+"\n")
	var out bytes.Buffer
	if err := report(&out, dir, 4); err != nil {
		t.Fatal(err)
	}
	// Columns are padded: compare with runs of spaces as one.
	squash := func(s string) string { return regexp.MustCompile(` +`).ReplaceAllString(s, " ") }
	got := squash(out.String())
	for _, want := range []string{
		"unit                5:30  FAIL (exit 1)\n",
		"guest-matrix       15:00  ok\n",
		"guest bookworm/amd64 kernel 6.1.0-41-amd64: PASS (boot 9.0s, setup 2.0s, tests 300.0s)\n",
		"trixie/amd64 test/fabric: pass 390.0s\n",
		"total              28:11  FAILED: unit\n",
		"== the 4 slowest tests",
		"  150.5s  fabric         trixie/amd64 test/fabric         TestMesh\n",
		"   95.2s  guest-matrix   bookworm/amd64 test_guest        TestInterop\n",
		"   12.5s  unit           m/p                              TestOK\n",
		"    7.0s  guest-matrix   bookworm/amd64 mesh              TestGuestProbe (fail)\n",
	} {
		if !strings.Contains(got, squash(want)) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Count(got, "tests 300.0s") != 1 {
		t.Errorf("a guest's verdict is shown once:\n%s", got)
	}
	if strings.Contains(got, "TestInterop/sub") || strings.Contains(got, "TestBad ") {
		t.Errorf("subtests or tests past the fourth in the list:\n%s", got)
	}
}

func TestRunKeepsStatusAndLog(t *testing.T) {
	log := filepath.Join(t.TempDir(), "x.log")
	code := runCmd([]string{"-log", log, "-label", "L", "--", "sh", "-c", `echo '{"Action":"pass","Package":"m/p","Test":"TestA","Elapsed":1}'; exit 3`})
	if code != 3 {
		t.Errorf("exit status %d, want the command's 3", code)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if want := labelPrefix + "L\n" + `{"Action":"pass","Package":"m/p","Test":"TestA","Elapsed":1}` + "\n"; string(b) != want {
		t.Errorf("log %q, want %q", b, want)
	}
}
