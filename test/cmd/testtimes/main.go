// Command testtimes records where `make test`'s time goes and prints it at the end:
// each make target's wall time and the slowest tests. Test-only tooling, never in the
// product; the Makefile builds it into bin/testtimes.
//
//	testtimes tier -dir DIR NAME -- make unit     # time one target, append it to DIR/tiers.tsv
//	testtimes run [-v] -log FILE [-label L] -- go test -json ./...
//	testtimes report [-n 10] DIR                  # the table: targets, then the slowest tests
//
// run shows a `go test -json` stream as go test prints it without -json (with -v: as
// go test -v does), passes other lines through (the guests' -test.v consoles) and keeps
// every line in FILE for report. Both tier and run exit with their command's status, so
// make sees what it would have seen without them.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var code int
	switch os.Args[1] {
	case "tier":
		code = tierCmd(os.Args[2:])
	case "run":
		code = runCmd(os.Args[2:])
	case "report":
		code = reportCmd(os.Args[2:], os.Stdout)
	default:
		usage()
	}
	os.Exit(code)
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: testtimes tier -dir DIR NAME -- cmd... | run [-v] -log FILE [-label L] -- cmd... | report [-n N] DIR")
	os.Exit(2)
}

// splitCmd returns the arguments before and the command after "--".
func splitCmd(args []string) ([]string, []string) {
	for i, a := range args {
		if a == "--" {
			return args[:i], args[i+1:]
		}
	}
	return args, nil
}

// start runs cmd with its stdout given, forwarding SIGINT, SIGTERM and SIGHUP to it
// (the shell's interrupt reaches the child anyway; a kill of this process alone must
// not leave it running).
func start(argv []string, stdout io.Writer) (*exec.Cmd, func() int, error) {
	c := exec.Command(argv[0], argv[1:]...)
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, stdout, os.Stderr
	if err := c.Start(); err != nil {
		return nil, nil, err
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		for s := range sigs {
			c.Process.Signal(s)
		}
	}()
	wait := func() int {
		err := c.Wait()
		signal.Stop(sigs)
		close(sigs)
		return exitCode(err)
	}
	return c, wait, nil
}

// exitCode is the status a shell would report: the exit status, 128+n for signal n.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	fmt.Fprintf(os.Stderr, "testtimes: %v\n", err)
	return 1
}

func tierCmd(args []string) int {
	fs := flag.NewFlagSet("tier", flag.ExitOnError)
	dir := fs.String("dir", "bin/times", "directory of tiers.tsv and the logs")
	opts, argv := splitCmd(args)
	fs.Parse(opts)
	if fs.NArg() != 1 || len(argv) == 0 {
		usage()
	}
	name := fs.Arg(0)
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		fmt.Fprintf(os.Stderr, "testtimes: %v\n", err)
		return 1
	}
	// A target's logs are this run's only (run appends, for targets with several commands).
	os.Remove(filepath.Join(*dir, name+".log"))
	t0 := time.Now()
	_, wait, err := start(argv, os.Stdout)
	code := 127
	if err == nil {
		code = wait()
	} else {
		fmt.Fprintf(os.Stderr, "testtimes: %v\n", err)
	}
	f, err := os.OpenFile(filepath.Join(*dir, "tiers.tsv"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err == nil {
		fmt.Fprintf(f, "%s\t%.1f\t%d\n", name, time.Since(t0).Seconds(), code)
		f.Close()
	}
	return code
}

func runCmd(args []string) int {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	logFile := fs.String("log", "", "append every line of the command's stdout to this file")
	label := fs.String("label", "", "what this command ran on (e.g. the fabric tier's target), for the report")
	verbose := fs.Bool("v", false, "show every test's output, as go test -v")
	opts, argv := splitCmd(args)
	fs.Parse(opts)
	if *logFile == "" || len(argv) == 0 {
		usage()
	}
	if err := os.MkdirAll(filepath.Dir(*logFile), 0o755); err != nil {
		fmt.Fprintf(os.Stderr, "testtimes: %v\n", err)
		return 1
	}
	lf, err := os.OpenFile(*logFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testtimes: %v\n", err)
		return 1
	}
	defer lf.Close()
	fmt.Fprintf(lf, "%s%s\n", labelPrefix, *label)
	pr, pw, err := os.Pipe()
	if err != nil {
		fmt.Fprintf(os.Stderr, "testtimes: %v\n", err)
		return 1
	}
	_, wait, err := start(argv, pw)
	pw.Close()
	if err != nil {
		fmt.Fprintf(os.Stderr, "testtimes: %v\n", err)
		return 127
	}
	out := bufio.NewWriter(os.Stdout)
	v := newViewer(out, *verbose)
	r := bufio.NewReaderSize(pr, 64<<10)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			lf.Write(line)
			v.line(line)
			if r.Buffered() == 0 {
				out.Flush() // show progress as it comes
			}
		}
		if err != nil {
			break
		}
	}
	v.flush()
	out.Flush()
	return wait()
}

const labelPrefix = "#testtimes label="

// event is one record of `go test -json` (cmd/test2json).
type event struct {
	Action     string
	Package    string
	ImportPath string // build-output events
	Test       string
	Elapsed    float64
	Output     string
}

func parseEvent(line []byte) (event, bool) {
	var e event
	if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil || e.Action == "" {
		return e, false
	}
	return e, true
}

// viewer turns test2json events back into go test's own output. Quiet (go test
// without -v): package lines and the output of failed tests, whole; a top-level
// test's output is held until it ends, and shown if it failed or never ended.
type viewer struct {
	w       io.Writer
	verbose bool
	held    map[string][]string // package + "\x00" + top-level test -> output
	order   []string
}

func newViewer(w io.Writer, verbose bool) *viewer {
	return &viewer{w: w, verbose: verbose, held: map[string][]string{}}
}

func top(test string) string {
	if i := strings.IndexByte(test, '/'); i >= 0 {
		return test[:i]
	}
	return test
}

func (v *viewer) line(line []byte) {
	e, ok := parseEvent(line)
	if !ok {
		v.w.Write(line)
		return
	}
	if v.verbose {
		io.WriteString(v.w, e.Output)
		return
	}
	if e.Test == "" {
		switch {
		case e.Output == "PASS\n":
		case e.Output != "":
			io.WriteString(v.w, e.Output)
		case e.Action == "pass" || e.Action == "fail":
			v.flushPackage(e.Package)
		}
		return
	}
	key := e.Package + "\x00" + top(e.Test)
	if _, ok := v.held[key]; !ok {
		v.order = append(v.order, key)
		v.held[key] = nil
	}
	if e.Output != "" && !isMarker(e.Output) {
		v.held[key] = append(v.held[key], e.Output)
	}
	if e.Test == top(e.Test) {
		switch e.Action {
		case "fail":
			v.show(key)
		case "pass", "skip":
			delete(v.held, key)
		}
	}
}

// isMarker: the lines go test -v adds and go test does not print.
func isMarker(s string) bool {
	for _, p := range []string{"=== RUN", "=== PAUSE", "=== CONT", "=== NAME"} {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

func (v *viewer) show(key string) {
	for _, s := range v.held[key] {
		io.WriteString(v.w, s)
	}
	delete(v.held, key)
}

// flushPackage shows the tests of a finished package that never ended (a panic,
// a timeout): their output is the failure's story.
func (v *viewer) flushPackage(pkg string) {
	for _, key := range v.order {
		if _, ok := v.held[key]; ok && strings.HasPrefix(key, pkg+"\x00") {
			v.show(key)
		}
	}
}

func (v *viewer) flush() {
	for _, key := range v.order {
		if _, ok := v.held[key]; ok {
			v.show(key)
		}
	}
}

// A tier's wall time, from tiers.tsv.
type tier struct {
	name    string
	seconds float64
	code    int
	notes   []string // per-guest and per-target lines
}

// A finished top-level test.
type testTime struct {
	seconds           float64
	tier, where, name string
	result            string
}

var (
	// "--- PASS: TestX (1.23s)" at the start of a -test.v line (a guest's console,
	// after its "[suite/arch] " prefix); subtests are indented and left out.
	textResult = regexp.MustCompile(`^--- (PASS|FAIL|SKIP): (\S+) \(([0-9.]+)s\)`)
	consolePfx = regexp.MustCompile(`^\[([a-z]+/[a-z0-9]+)\] (.*)$`)
	testStart  = regexp.MustCompile(`^@@gr-[0-9a-f]+ test-start (\S+)`)
	// guestrun's verdict: "guest bookworm/amd64 kernel 6.1.0-41-amd64: PASS (boot …)".
	verdict = regexp.MustCompile(`^guest \S+.*: (PASS|FAIL|ERROR)`)
)

// readLog collects a log's finished top-level tests and its guests' verdicts.
func readLog(r io.Reader, tierName string) (tests []testTime, notes []string) {
	label, pkgOf := "", map[string]string{}
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		raw, err := br.ReadBytes('\n')
		line := strings.TrimRight(string(raw), "\r\n")
		switch e, ok := parseEvent(raw); {
		case strings.HasPrefix(line, labelPrefix):
			label = strings.TrimPrefix(line, labelPrefix)
		case ok:
			if e.Action != "pass" && e.Action != "fail" && e.Action != "skip" {
				break
			}
			where := strings.TrimPrefix(e.Package, "github.com/gorping/gorping/")
			if label != "" {
				where = label + " " + where
			}
			if e.Test == "" {
				if label != "" {
					notes = append(notes, fmt.Sprintf("%s: %s %s", where, e.Action, seconds(e.Elapsed)))
				}
			} else if !strings.Contains(e.Test, "/") {
				tests = append(tests, testTime{e.Elapsed, tierName, where, e.Test, e.Action})
			}
		default:
			where := label
			if m := consolePfx.FindStringSubmatch(line); m != nil {
				where, line = m[1], m[2]
			}
			if m := testStart.FindStringSubmatch(line); m != nil {
				pkgOf[where] = m[1]
			}
			if m := textResult.FindStringSubmatch(line); m != nil {
				s, _ := strconv.ParseFloat(m[3], 64)
				w := strings.TrimSpace(where + " " + pkgOf[where])
				tests = append(tests, testTime{s, tierName, w, m[2], strings.ToLower(m[1])})
			}
			if verdict.MatchString(line) {
				notes = append(notes, line)
			}
		}
		if err != nil {
			return tests, notes
		}
	}
}

func seconds(s float64) string { return strconv.FormatFloat(s, 'f', 1, 64) + "s" }

func clock(s float64) string {
	d := time.Duration(s * float64(time.Second)).Round(time.Second)
	return fmt.Sprintf("%d:%02d", int(d.Minutes()), int(d.Seconds())%60)
}

func reportCmd(args []string, w io.Writer) int {
	fs := flag.NewFlagSet("report", flag.ExitOnError)
	n := fs.Int("n", 10, "how many of the slowest tests")
	fs.Parse(args)
	if fs.NArg() != 1 {
		usage()
	}
	if err := report(w, fs.Arg(0), *n); err != nil {
		fmt.Fprintf(os.Stderr, "testtimes: %v\n", err)
		return 1
	}
	return 0
}

func report(w io.Writer, dir string, n int) error {
	b, err := os.ReadFile(filepath.Join(dir, "tiers.tsv"))
	if err != nil {
		return err
	}
	var tiers []tier
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Split(l, "\t")
		if len(f) != 3 {
			continue
		}
		s, _ := strconv.ParseFloat(f[1], 64)
		c, _ := strconv.Atoi(f[2])
		tiers = append(tiers, tier{name: f[0], seconds: s, code: c})
	}
	var tests []testTime
	for i := range tiers {
		f, err := os.Open(filepath.Join(dir, tiers[i].name+".log"))
		if err != nil {
			continue // a target with no test log (lint, host-deps)
		}
		ts, notes := readLog(f, tiers[i].name)
		f.Close()
		tests = append(tests, ts...)
		tiers[i].notes = notes
	}

	var buf bytes.Buffer
	total, failed := 0.0, []string{}
	fmt.Fprintf(&buf, "\n== make test: wall time per target (logs in %s)\n", dir)
	fmt.Fprintf(&buf, "%-20s %8s  %s\n", "target", "time", "result")
	for _, t := range tiers {
		res := "ok"
		if t.code != 0 {
			res = fmt.Sprintf("FAIL (exit %d)", t.code)
			failed = append(failed, t.name)
		}
		total += t.seconds
		fmt.Fprintf(&buf, "%-20s %8s  %s\n", t.name, clock(t.seconds), res)
		seen := map[string]bool{}
		for _, note := range t.notes {
			if !seen[note] {
				seen[note] = true
				fmt.Fprintf(&buf, "%-20s %8s    %s\n", "", "", note)
			}
		}
	}
	res := "all passed"
	if len(failed) > 0 {
		res = "FAILED: " + strings.Join(failed, " ")
	}
	fmt.Fprintf(&buf, "%-20s %8s  %s\n", "total", clock(total), res)

	sort.SliceStable(tests, func(i, j int) bool { return tests[i].seconds > tests[j].seconds })
	if len(tests) > n {
		tests = tests[:n]
	}
	fmt.Fprintf(&buf, "\n== the %d slowest tests (top-level; go test -json, the guests' -test.v)\n", len(tests))
	fmt.Fprintf(&buf, "%8s  %-20s %-32s %s\n", "time", "target", "where", "test")
	for _, t := range tests {
		name := t.name
		if t.result != "pass" {
			name += " (" + t.result + ")"
		}
		fmt.Fprintf(&buf, "%8s  %-20s %-32s %s\n", seconds(t.seconds), t.tier, t.where, name)
	}
	_, err = w.Write(buf.Bytes())
	return err
}
