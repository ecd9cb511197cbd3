//go:build guest

package guest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Tests of gorping's own options (--poll, --stats, -i, -w, --json) against
// stock rping as the peer where one applies.

// pingOnce runs server and client (full argument lists after the binary)
// on a fresh port and returns both results.
func pingOnce(t *testing.T, server impl, srvArgs []string, client impl, cliArgs []string, timeout time.Duration) (srv, cli Result) {
	t.Helper()
	addr := IPv4(t)
	p := strconv.Itoa(freshPort())
	sp := Start(t, server.bin, append([]string{"-s", "-a", addr, "-p", p}, srvArgs...)...)
	WaitListening(t, sp, addr, atoiT(t, p), 30*time.Second)
	cli = Run(t, timeout, client.bin, append([]string{"-c", "-a", addr, "-p", p}, cliArgs...)...)
	code := sp.Wait(t, 30*time.Second)
	return Result{Stdout: sp.Stdout(), Stderr: sp.Stderr(), Code: code}, cli
}

func atoiT(t *testing.T, s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// clientOK fails unless a gorping client exited 0 with at most the racy
// disconnect line on stderr, and with --stats the line saying rxe's times are
// software time (timestamps_test.go).
func clientOK(t *testing.T, who string, r Result) {
	t.Helper()
	if r.Code != 0 {
		t.Fatalf("%s: exit %d\nstdout:\n%s\nstderr:\n%s", who, r.Code, tailText(r.Stdout), r.Stderr)
	}
	onlyLines(t, who, r.Stderr, clientDisconnect, swTimeNote)
}

func tailText(s string) string {
	if len(s) > 2000 {
		return "…" + s[len(s)-2000:]
	}
	return s
}

// --poll interoperates both ways with stock rping and with itself, and prints
// exactly rping's lines.
func TestPollMode(t *testing.T) {
	const n = 100
	g, st := gorpingImpl(t), stockImpl(t)
	for _, tc := range []struct {
		name             string
		server, client   impl
		srvArgs, cliArgs []string
	}{
		{"GorpingPollClient_StockServer", st, g, []string{"-v"}, []string{"--poll"}},
		{"StockClient_GorpingPollServer", g, st, []string{"-v", "--poll"}, nil},
		{"GorpingPoll_GorpingPoll", g, g, []string{"-v", "--poll"}, []string{"--poll"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, cli := pingOnce(t, tc.server, tc.srvArgs, tc.client,
				append([]string{"-C", strconv.Itoa(n), "-v", "-V"}, tc.cliArgs...), 3*time.Minute)
			sameText(t, "client stdout", cli.Stdout, ExpectedPingLines(n, 64))
			sameText(t, "server stdout", srv.Stdout, expectedServerLines(n, 64))
			if tc.client.isStock() {
				CheckStockExit(t, "client", cli)
			} else {
				clientOK(t, "client", cli)
			}
			if srv.Code != 0 {
				t.Errorf("server exit %d, stderr %q", srv.Code, srv.Stderr)
			}
		})
	}
}

var (
	statsPingRE = regexp.MustCompile(`^64 bytes from (\S+): seq=(\d+) time=(\d+\.\d{3}) ms$`)
	statsSumRE  = regexp.MustCompile(`^(\d+) pings transmitted, (\d+) received, (\d+)% loss, (\d+) errors, time \d+ms$`)
	statsRTTRE  = regexp.MustCompile(`^rtt min/avg/max/mdev = (\d+\.\d{3})/(\d+\.\d{3})/(\d+\.\d{3})/(\d+\.\d{3}) ms, p50/p99 = (\d+\.\d{3})/(\d+\.\d{3}) ms$`)
)

// statsOutput checks --stats output: rping's data lines (if verbose) each
// followed by one time line, then ping(8)'s summary. It returns the number
// of pings and the summary's counts.
func statsOutput(t *testing.T, out string, verbose bool, addr string) (pings int, sent, received, errs int) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	i := 0
	for ; i < len(lines); i++ {
		if lines[i] == "" {
			break
		}
		if verbose {
			if want := "ping data: "; !strings.HasPrefix(lines[i], want) {
				t.Fatalf("line %d %q, want a ping data line\n%s", i, lines[i], tailText(out))
			}
			i++
		}
		m := statsPingRE.FindStringSubmatch(lines[i])
		if m == nil || m[1] != addr || m[2] != strconv.Itoa(pings) {
			t.Fatalf("line %d %q, want ping %d's time from %s\n%s", i, lines[i], pings, addr, tailText(out))
		}
		if ms, _ := strconv.ParseFloat(m[3], 64); ms <= 0 {
			t.Errorf("ping %d: time %s ms", pings, m[3])
		}
		pings++
	}
	rest := lines[i:]
	if len(rest) < 3 || rest[1] != "--- "+addr+" rping statistics ---" {
		t.Fatalf("no summary after %d pings: %q", pings, rest)
	}
	m := statsSumRE.FindStringSubmatch(rest[2])
	if m == nil {
		t.Fatalf("summary line %q", rest[2])
	}
	sent, received, errs = atoiT(t, m[1]), atoiT(t, m[2]), atoiT(t, m[4])
	if received > 0 {
		if len(rest) != 4 {
			t.Fatalf("summary %q: want an rtt line last", rest)
		}
		r := statsRTTRE.FindStringSubmatch(rest[3])
		if r == nil {
			t.Fatalf("rtt line %q", rest[3])
		}
		var f [6]float64
		for k := range f {
			f[k], _ = strconv.ParseFloat(r[k+1], 64)
		}
		if !(0 < f[0] && f[0] <= f[1] && f[1] <= f[2] && f[0] <= f[4] && f[4] <= f[5] && f[5] <= f[2]) {
			t.Errorf("rtt line %q: want 0 < min ≤ avg ≤ max, min ≤ p50 ≤ p99 ≤ max", rest[3])
		}
	}
	return pings, sent, received, errs
}

// --stats against stock rping, in both waiting modes.
func TestStats(t *testing.T) {
	addr := IPv4(t)
	for _, mode := range [][]string{nil, {"--poll"}} {
		t.Run(fmt.Sprintf("mode%v", mode), func(t *testing.T) {
			srv, cli := pingOnce(t, stockImpl(t), nil, gorpingImpl(t),
				append([]string{"-C", "20", "-v", "-V", "--stats"}, mode...), 2*time.Minute)
			clientOK(t, "client", cli)
			CheckStockExit(t, "stock server", srv)
			pings, sent, received, errs := statsOutput(t, cli.Stdout, true, addr)
			if pings != 20 || sent != 20 || received != 20 || errs != 0 {
				t.Errorf("pings %d, summary %d sent %d received %d errors; want 20/20/20/0", pings, sent, received, errs)
			}
		})
	}
}

// -i spaces the starts of the pings by the interval (so the run lasts at
// least (count-1) intervals); the RTTs themselves do not include it.
func TestInterval(t *testing.T) {
	addr := IPv4(t)
	start := time.Now()
	srv, cli := pingOnce(t, stockImpl(t), nil, gorpingImpl(t), []string{"-C", "4", "-i", "0.8", "--stats"}, 2*time.Minute)
	elapsed := time.Since(start)
	clientOK(t, "client", cli)
	CheckStockExit(t, "stock server", srv)
	pings, _, received, _ := statsOutput(t, cli.Stdout, false, addr)
	if pings != 4 || received != 4 {
		t.Errorf("%d pings, %d received; want 4", pings, received)
	}
	if elapsed < 2400*time.Millisecond {
		t.Errorf("4 pings with -i 0.8 took %v, less than 3 intervals", elapsed)
	}
	// Were the interval counted in, every RTT would be at least 800 ms. (Any
	// single ping may take that long on a loaded TCG guest; not all of them.)
	minMS := -1.0
	for _, l := range strings.Split(cli.Stdout, "\n") {
		if m := statsPingRE.FindStringSubmatch(l); m != nil {
			if ms, _ := strconv.ParseFloat(m[3], 64); minMS < 0 || ms < minMS {
				minMS = ms
			}
		}
	}
	if minMS >= 800 {
		t.Errorf("the fastest ping took %.3f ms: the RTTs include the interval", minMS)
	}
}

// -w ends an endless run at the deadline with status 0 and the summary; with
// a -C it cannot reach, the status is 1 and one line says so. The stock server
// sees a normal disconnect.
func TestDeadline(t *testing.T) {
	addr := IPv4(t)
	t.Run("Endless", func(t *testing.T) {
		start := time.Now()
		srv, cli := pingOnce(t, stockImpl(t), nil, gorpingImpl(t), []string{"-w", "2", "-i", "0.05", "--stats"}, time.Minute)
		elapsed := time.Since(start)
		clientOK(t, "client", cli)
		pings, sent, received, _ := statsOutput(t, cli.Stdout, false, addr)
		if pings == 0 || received != pings || sent < pings || sent > pings+1 {
			t.Errorf("%d pings printed, summary %d sent %d received", pings, sent, received)
		}
		// -w is exact: a ping the deadline cut off (sent = received+1) leaves the
		// stock server mid-ping, where rping's own killed client leaves it too.
		checkStockServerAfterCutOff(t, srv, sent == received+1)
		if elapsed < 2*time.Second {
			t.Errorf("run with -w 2 ended after %v", elapsed)
		}
	})
	t.Run("CountNotReached", func(t *testing.T) {
		srv, cli := pingOnce(t, stockImpl(t), nil, gorpingImpl(t), []string{"-w", "1", "-C", "100000", "-i", "0.2"}, time.Minute)
		CheckStockExit(t, "stock server", srv)
		if cli.Code != 1 || cli.Stdout != "" {
			t.Errorf("exit %d stdout %q, want 1 and nothing", cli.Code, cli.Stdout)
		}
		if !regexp.MustCompile(`(?m)^rping client: deadline reached after \d+ of 100000 pings$`).MatchString(cli.Stderr) {
			t.Errorf("stderr %q lacks the deadline line", cli.Stderr)
		}
		onlyLines(t, "client", regexp.MustCompile(`(?m)^rping client: deadline reached.*\n`).ReplaceAllString(cli.Stderr, ""), clientDisconnect)
	})
}

// midPingServerLine is what a stock rping server prints when its client goes
// away in the middle of a ping (besides DISCONNECT EVENT): the state it waited
// in, a flushed completion, and its failure.
var midPingServerLine = regexp.MustCompile(`^(wait for RDMA_(READ|WRITE)_(ADV|COMPLETE) state \d+|cq completion failed status \d+|rping server failed: -1)$`)

// checkStockServerAfterCutOff is CheckStockExit, except that when the client
// reports a ping cut off the server may also fail the way a mid-ping disconnect
// makes it fail (exit 255, only midPingServerLine lines).
func checkStockServerAfterCutOff(t *testing.T, srv Result, cutOff bool) {
	t.Helper()
	if cutOff && srv.Code == 255 {
		ok := true
		for _, l := range strings.Split(strings.TrimRight(srv.Stderr, "\n"), "\n") {
			if l != "server DISCONNECT EVENT..." && !midPingServerLine.MatchString(l) {
				ok = false
			}
		}
		if ok {
			t.Logf("stock server failed mid-ping after the client's cut-off ping, accepted:\n%s", srv.Stderr)
			return
		}
	}
	CheckStockExit(t, "stock server", srv)
}

// jsonLines parses every line of out as one JSON object (stdlib parser, numbers
// kept exact) and fails on anything else.
func jsonLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var objs []map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		dec := json.NewDecoder(strings.NewReader(sc.Text()))
		dec.UseNumber()
		var m map[string]any
		if err := dec.Decode(&m); err != nil || dec.More() {
			t.Fatalf("stdout line %q is not one JSON object (%v)\nstdout:\n%s", sc.Text(), err, tailText(out))
		}
		objs = append(objs, m)
	}
	return objs
}

func num(t *testing.T, o map[string]any, k string) int64 {
	t.Helper()
	n, ok := o[k].(json.Number)
	if !ok {
		t.Fatalf("%q is not a number in %v", k, o)
	}
	v, err := n.Int64()
	if err != nil {
		t.Fatalf("%q: %v", k, err)
	}
	return v
}

// checkConnection checks the "connection" object: the guest's rxe device,
// port 1 and the GID of the IPv4 address (RoCE v2, v4-mapped).
func checkConnection(t *testing.T, o map[string]any, role string) {
	t.Helper()
	addr := IPv4(t)
	if o["type"] != "connection" || o["role"] != role || o["device"] != "rxe0" || o["driver"] != "rxe" ||
		num(t, o, "port") != 1 || o["gid"] != "::ffff:"+addr || num(t, o, "gid_index") < 0 || o["gid_type"] != "RoCE v2" {
		t.Errorf("connection %v: want %s on rxe0 port 1 with GID ::ffff:%s (RoCE v2)", o, role, addr)
	}
	if l, _ := o["local"].(string); !strings.HasPrefix(l, addr+":") {
		t.Errorf("connection local %q, want %s:port", l, addr)
	}
}

// checkDiagnostics checks the end-of-connection diagnostics record: the port's packet
// counters moved (by how much is the kernel's business) and the MTUs fit.
func checkDiagnostics(t *testing.T, o map[string]any) {
	t.Helper()
	if o["type"] != "diagnostics" || o["device"] != "rxe0" || num(t, o, "port") != 1 || o["mtu_warning"] != nil {
		t.Errorf("diagnostics %v", o)
	}
	cs, _ := o["counters"].([]any)
	sent := false
	for _, c := range cs {
		m, _ := c.(map[string]any)
		sent = sent || (strings.HasSuffix(m["name"].(string), "/sent_pkts") && num(t, m, "delta") > 0)
	}
	if !sent {
		t.Errorf("diagnostics without a moved sent_pkts counter: %v", o)
	}
}

func TestJSON(t *testing.T) {
	addr := IPv4(t)
	t.Run("GorpingClient_StockServer", func(t *testing.T) {
		srv, cli := pingOnce(t, stockImpl(t), nil, gorpingImpl(t), []string{"-C", "20", "-v", "-V", "--json", "--stats"}, 2*time.Minute)
		CheckStockExit(t, "stock server", srv)
		if cli.Code != 0 {
			t.Fatalf("client exit %d stderr %q", cli.Code, cli.Stderr)
		}
		// -v's lines moved to stderr; stdout is JSON only.
		if !strings.Contains(cli.Stderr, ExpectedPingLines(20, 64)) {
			t.Errorf("stderr lacks the 20 ping data lines: %q", tailText(cli.Stderr))
		}
		objs := jsonLines(t, cli.Stdout)
		if len(objs) != 1+1+20+1+1+1 {
			t.Fatalf("%d JSON lines, want config, connection, 20 pings, summary, diagnostics, exit:\n%s", len(objs), cli.Stdout)
		}
		c := objs[0]
		if c["type"] != "config" || c["mode"] != "client" || c["addr"] != addr || num(t, c, "count") != 20 ||
			num(t, c, "size") != 64 || c["validate"] != true || c["stats"] != true || c["poll"] != false {
			t.Errorf("config %v", c)
		}
		checkConnection(t, objs[1], "client")
		for i, o := range objs[2:22] {
			if o["type"] != "ping" || num(t, o, "seq") != int64(i) || num(t, o, "rtt_ns") <= 0 {
				t.Errorf("ping %d: %v", i, o)
			}
		}
		s := objs[22]
		if s["type"] != "summary" || num(t, s, "transmitted") != 20 || num(t, s, "received") != 20 ||
			num(t, s, "errors") != 0 || num(t, s, "loss_pct") != 0 {
			t.Errorf("summary %v", s)
		}
		rtt, ok := s["rtt_ns"].(map[string]any)
		if !ok {
			t.Fatalf("summary without rtt_ns: %v", s)
		}
		if !(num(t, rtt, "min") <= num(t, rtt, "p50") && num(t, rtt, "p50") <= num(t, rtt, "p99") &&
			num(t, rtt, "p99") <= num(t, rtt, "max") && num(t, rtt, "min") <= num(t, rtt, "avg") && num(t, rtt, "min") > 0) {
			t.Errorf("rtt_ns out of order: %v", rtt)
		}
		checkDiagnostics(t, objs[23])
		if e := objs[24]; e["type"] != "exit" || num(t, e, "status") != 0 {
			t.Errorf("last line %v, want exit status 0", e)
		}
	})
	t.Run("StockClient_GorpingServer", func(t *testing.T) {
		srv, cli := pingOnce(t, gorpingImpl(t), []string{"--json", "--poll"}, stockImpl(t), []string{"-C", "15", "-V"}, 2*time.Minute)
		CheckStockExit(t, "stock client", cli)
		if srv.Code != 0 {
			t.Fatalf("server exit %d stderr %q", srv.Code, srv.Stderr)
		}
		objs := jsonLines(t, srv.Stdout)
		if len(objs) != 5 {
			t.Fatalf("%d JSON lines, want config, connection, session, diagnostics, exit:\n%s", len(objs), srv.Stdout)
		}
		checkDiagnostics(t, objs[3])
		if c := objs[0]; c["type"] != "config" || c["mode"] != "server" || c["poll"] != true {
			t.Errorf("config %v", c)
		}
		checkConnection(t, objs[1], "server")
		if s := objs[2]; s["type"] != "session" || num(t, s, "pings") != 15 || num(t, s, "status") != 0 ||
			!strings.HasPrefix(s["remote"].(string), addr+":") {
			t.Errorf("session %v", s)
		}
		if e := objs[4]; e["type"] != "exit" || num(t, e, "status") != 0 {
			t.Errorf("last line %v, want exit status 0", e)
		}
	})
	t.Run("ErrorStillValid", func(t *testing.T) {
		// No server: rping's error lines on stderr, and stdout is still JSON
		// ending in the exit status.
		r := Run(t, time.Minute, GorpingBin(t), "-c", "-a", addr, "-p", strconv.Itoa(freshPort()), "-C", "1", "--json")
		objs := jsonLines(t, r.Stdout)
		if r.Code != 255 || len(objs) != 2 || objs[0]["type"] != "config" || objs[1]["type"] != "exit" || num(t, objs[1], "status") != 255 {
			t.Errorf("exit %d, JSON %v, stderr %q", r.Code, objs, r.Stderr)
		}
	})
}

// Ctrl-C ends an endless --stats client as ping(8)'s: summary, exit 0.
// -i 0.02 makes it likely that SIGINT lands in the middle of a ping.
func TestStatsInterrupt(t *testing.T) {
	addr := IPv4(t)
	p := freshPort()
	sp := Start(t, StockRping(t), "-s", "-a", addr, "-p", strconv.Itoa(p))
	WaitListening(t, sp, addr, p, 30*time.Second)
	cp := Start(t, GorpingBin(t), "-c", "-a", addr, "-p", strconv.Itoa(p), "--stats", "-i", "0.02")
	waitFor(t, time.Minute, "three pings", func() bool { return strings.Count(cp.Stdout(), " bytes from ") >= 3 })
	syscall.Kill(pidOf(cp), syscall.SIGINT)
	code := cp.Wait(t, 30*time.Second)
	if code != 0 {
		t.Fatalf("exit %d after SIGINT, stderr %q", code, cp.Stderr())
	}
	// The ping in flight when SIGINT came finishes first: none is cut off, and
	// the stock server sees the connection end between pings.
	pings, sent, received, errs := statsOutput(t, cp.Stdout(), false, addr)
	if pings < 3 || received != pings || sent != pings || errs != 0 {
		t.Errorf("%d pings printed, summary %d sent %d received %d errors", pings, sent, received, errs)
	}
	CheckStockExit(t, "stock server", Result{Stdout: sp.Stdout(), Stderr: sp.Stderr(), Code: sp.Wait(t, 30*time.Second)})
}
