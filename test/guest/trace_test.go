//go:build guest

package guest

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorping/gorping/rdmacm"
	"github.com/gorping/gorping/uverbs"
)

// Tests of --trace and the path diagnostics (issue 8), against the guest's rxe0.

// traceRun runs a gorping server and client with extra options on a fresh port.
func traceRun(t *testing.T, srvArgs, cliArgs []string) (srv, cli Result) {
	t.Helper()
	g := gorpingImpl(t)
	return pingOnce(t, g, srvArgs, g, cliArgs, 60*time.Second)
}

// linesWith returns the lines of s that contain all of words.
func linesWith(s string, words ...string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		ok := true
		for _, w := range words {
			if !strings.Contains(l, w) {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, l)
		}
	}
	return out
}

// mustHave fails unless some line of s contains all of words.
func mustHave(t *testing.T, who, s string, words ...string) string {
	t.Helper()
	l := linesWith(s, words...)
	if len(l) == 0 {
		t.Errorf("%s: no line with %q in:\n%s", who, words, tailText(s))
		return ""
	}
	return l[0]
}

// The trace shows the whole connection: rdma_cm commands and events, the uverbs commands,
// the rings mmap'd, the RESET→INIT→RTR→RTS walk with its attributes, and per ping the WRs,
// doorbells and completions; rping's stdout is unchanged.
func TestTraceText(t *testing.T) {
	const pings = 3
	srv, cli := traceRun(t, []string{"--trace"}, []string{"-C", strconv.Itoa(pings), "-V", "-v", "--trace"})
	if cli.Code != 0 || srv.Code != 0 {
		t.Fatalf("exit client %d server %d\nclient stderr:\n%s\nserver stderr:\n%s", cli.Code, srv.Code, tailText(cli.Stderr), tailText(srv.Stderr))
	}
	// stdout is rping's (ping data only); the trace is on stderr.
	if n := len(linesWith(cli.Stdout, "ping data: ")); n != pings || strings.Contains(cli.Stdout, "trace") {
		t.Errorf("client stdout has %d ping lines (want %d) or trace lines:\n%s", n, pings, cli.Stdout)
	}
	for _, side := range []struct {
		who, out, role string
	}{{"client", cli.Stderr, "client"}, {"server", srv.Stderr, "server"}} {
		s := side.out
		mustHave(t, side.who, s, "rdmacm", "CREATE_ID", "=> id=")
		mustHave(t, side.who, s, "uverbs", "GET_CONTEXT", "async_fd=")
		mustHave(t, side.who, s, "uverbs", "CREATE_QP", "max_send_wr=16", "=> qp_handle=", "qpn=")
		mustHave(t, side.who, s, "uverbs", "REG_MR", "=> mr_handle=", "lkey=")
		for _, ring := range []string{"completion queue", "send queue", "receive queue"} {
			mustHave(t, side.who, s, "mmap", "rxe "+ring+" ring", "offset=0x", "length=")
		}
		// The state walk, in order, with the attributes that matter.
		walk := []struct {
			name  string
			attrs []string
		}{
			{"RESET->INIT", []string{"port=1", "pkey_index=0", "access="}},
			{"INIT->RTR", []string{"path_mtu=", "dest_qpn=", "rq_psn=", "ah.sgid_index=", "ah.dgid="}},
			{"RTR->RTS", []string{"sq_psn=", "timeout=", "retry_cnt=7", "rnr_retry=7"}},
		}
		last := -1
		for _, w := range walk {
			l := mustHave(t, side.who, s, "qp ", w.name)
			for _, a := range w.attrs {
				if !strings.Contains(l, a) {
					t.Errorf("%s: %s line lacks %q: %s", side.who, w.name, a, l)
				}
			}
			i := strings.Index(s, " "+w.name+" ")
			if i < last {
				t.Errorf("%s: %s traced before the previous transition", side.who, w.name)
			}
			last = i
		}
		mustHave(t, side.who, s, "cm_event", "RDMA_CM_EVENT_")
		mustHave(t, side.who, s, "post", "send WR", "opcode=")
		mustHave(t, side.who, s, "post", "recv WR", "lkey=")
		mustHave(t, side.who, s, "POST_SEND (send doorbell)")
		mustHave(t, side.who, s, "poll", "completion", "status=SUCCESS")
		// One "ping done" record per ping, with counts that fit the protocol.
		re := regexp.MustCompile(`ping +done role=` + side.role + ` seq=(\d+) syscalls=(\d+) wrs_send=(\d+) wrs_recv=(\d+) doorbells=(\d+) arms=(\d+) completions=(\d+) wakeups=(\d+)`)
		m := re.FindAllStringSubmatch(s, -1)
		if len(m) != pings {
			t.Errorf("%s: %d ping records, want %d:\n%s", side.who, len(m), pings, strings.Join(linesWith(s, "ping "), "\n"))
			continue
		}
		for i, r := range m {
			n := func(k int) int { v, _ := strconv.Atoi(r[k]); return v }
			// client: 2 SENDs (adverts), 2 RECVs (go-aheads); server: READ, SEND, WRITE, SEND.
			wantSend := 2
			if side.role == "server" {
				wantSend = 4
			}
			if n(1) != i || n(3) != wantSend || n(4) != 2 || n(5) != wantSend {
				t.Errorf("%s ping %d: %s (want %d send WRs and doorbells, 2 recv WRs)", side.who, i, r[0], wantSend)
			}
			// Every doorbell, arm and wake-up is a system call; polling and receives are not.
			if n(2) != n(5)+n(6)+n(8) {
				t.Errorf("%s ping %d: syscalls %d != doorbells+arms+wakeups: %s", side.who, i, n(2), r[0])
			}
		}
		// The path diagnostics.
		mustHave(t, side.who, s, "gorping: path: "+side.role+" rxe0 port 1", "netdev", "GID index", "(RoCE v2)")
		mustHave(t, side.who, s, "gorping: path: MTU: path ", "port active ", "netdev ")
		mustHave(t, side.who, s, "gorping: counters moved on rxe0 port 1:", "sent_pkts +")
	}
}

// With --json, the trace records are JSON lines on the same stream as the other records
// and every line parses.
func TestTraceJSON(t *testing.T) {
	srv, cli := traceRun(t, []string{"--trace", "--json"}, []string{"-C", "2", "--trace", "--json"})
	if cli.Code != 0 || srv.Code != 0 {
		t.Fatalf("exit client %d server %d\nclient stderr:\n%s\nserver stderr:\n%s", cli.Code, srv.Code, cli.Stderr, srv.Stderr)
	}
	for _, side := range []struct{ who, out string }{{"client", cli.Stdout}, {"server", srv.Stdout}} {
		kinds := map[string]int{}
		types := map[string]int{}
		var conn map[string]any
		sc := bufio.NewScanner(strings.NewReader(side.out))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Fatalf("%s: line does not parse: %v\n%s", side.who, err, sc.Text())
			}
			ty, _ := m["type"].(string)
			types[ty]++
			if ty == "trace" {
				k, _ := m["kind"].(string)
				kinds[k]++
				if _, ok := m["t_us"].(float64); !ok {
					t.Errorf("%s: trace record without t_us: %s", side.who, sc.Text())
				}
				if k == "qp" && m["name"] == "INIT->RTR" {
					req, _ := m["req"].(map[string]any)
					if _, ok := req["path_mtu"].(float64); !ok {
						t.Errorf("%s: INIT->RTR without path_mtu: %s", side.who, sc.Text())
					}
				}
			}
			if ty == "connection" {
				conn = m
			}
		}
		for _, k := range []string{"rdmacm", "cm_event", "uverbs", "mmap", "qp", "post", "poll", "ping"} {
			if kinds[k] == 0 {
				t.Errorf("%s: no %q trace records (have %v)", side.who, k, kinds)
			}
		}
		for _, ty := range []string{"config", "connection", "diagnostics", "exit"} {
			if types[ty] != 1 {
				t.Errorf("%s: %d %q records, want 1 (have %v)", side.who, types[ty], ty, types)
			}
		}
		if conn != nil {
			if conn["netdev"] == "" || conn["path_mtu"].(float64) <= 0 || conn["active_mtu"].(float64) <= 0 || conn["netdev_mtu"].(float64) <= 0 {
				t.Errorf("%s: connection record lacks path facts: %v", side.who, conn)
			}
		}
		if strings.Contains(side.who, "client") && kinds["ping"] != 2 {
			t.Errorf("client: %d ping trace records, want 2", kinds["ping"])
		}
	}
}

// A forced MTU mismatch: connections made while d0 has a 9000-byte MTU get a 4096-byte path
// MTU; d0 then goes down to 1400 mid-run (rxe's active MTU follows to 1024). Both sides
// must warn at the end of their run, and not at its start.
func TestTraceMTUMismatch(t *testing.T) {
	p0 := rxePort1(t, gorpingDevices(t))
	netdev, orig, origActive := p0.Netdev, p0.NetdevMTU, p0.ActiveMTU
	if netdev == "" || orig == 0 {
		t.Fatalf("rxe0 port 1: %+v", p0)
	}
	t.Cleanup(func() {
		setMTU(t, netdev, orig)
		activeMTU(t, origActive)
	})
	setMTU(t, netdev, 9000)
	activeMTU(t, 4096)

	addr := IPv4(t)
	port := freshPort()
	g := GorpingBin(t)
	sp := Start(t, g, "-s", "-a", addr, "-p", strconv.Itoa(port), "-d")
	WaitListening(t, sp, addr, port, 30*time.Second)
	cp := Start(t, g, "-c", "-a", addr, "-p", strconv.Itoa(port), "-C", "0", "-i", "0.05", "--stats", "--trace")
	waitProc(t, cp, 30*time.Second, func() bool { return len(linesWith(cp.Stderr(), "ping", "done role=client")) >= 3 })
	setMTU(t, netdev, 1400)
	activeMTU(t, 1024)
	n := len(linesWith(cp.Stderr(), "ping", "done role=client"))
	waitProc(t, cp, 30*time.Second, func() bool { return len(linesWith(cp.Stderr(), "ping", "done role=client")) >= n+2 })
	syscall.Kill(cp.cmd.Process.Pid, syscall.SIGINT)
	if code := cp.Wait(t, 30*time.Second); code != 0 {
		t.Errorf("client exit %d\nstderr:\n%s", code, tailText(cp.Stderr()))
	}
	code := sp.Wait(t, 30*time.Second)
	if code != 0 {
		t.Errorf("server exit %d\nstderr:\n%s", code, sp.Stderr())
	}
	for _, side := range []struct{ who, out string }{{"client", cp.Stderr()}, {"server", sp.Stderr()}} {
		s := side.out
		mustHave(t, side.who, s, "gorping: path: MTU: path 4096, port active 4096, netdev 9000")
		mustHave(t, side.who, s, "gorping: path: MTU now: path 4096, port active 1024, netdev 1400")
		w := mustHave(t, side.who, s, "gorping: warning: ")
		for _, want := range []string{"path MTU 4096 exceeds the port's active MTU 1024", netdev + "'s MTU 1400", "will not get through"} {
			if !strings.Contains(w, want) {
				t.Errorf("%s: warning %q lacks %q", side.who, w, want)
			}
		}
		if i, j := strings.Index(s, "gorping: warning: "), strings.Index(s, "MTU now"); i < j {
			t.Errorf("%s: a warning before the MTU changed:\n%s", side.who, tailText(s))
		}
	}
}

// waitProc polls cond until it holds, failing after timeout or when p exits.
func waitProc(t *testing.T, p *Proc, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if !p.Running() || time.Now().After(deadline) {
			t.Fatalf("%s: condition not reached (running %v)\nstdout:\n%s\nstderr:\n%s", p.Name, p.Running(), tailText(p.Stdout()), tailText(p.Stderr()))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// badRkeyClient is a hostile rping client built from gorping's packages: it connects to
// the server at dst and advertises its buffer with a wrong rkey, so the server's RDMA READ
// fails with a remote access error. It returns once the advert's SEND completed.
func badRkeyClient(t *testing.T, dst netip.AddrPort) (cleanup func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ch, err := rdmacm.Open()
	if err != nil {
		t.Fatal(err)
	}
	var undo []func()
	cleanup = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
		ch.Close()
	}
	fail := func(format string, args ...any) {
		t.Helper()
		cleanup()
		t.Fatalf(format, args...)
	}
	id, err := ch.CreateID()
	if err != nil {
		fail("create id: %v", err)
	}
	next := func(want rdmacm.EventType) {
		t.Helper()
		ev, err := id.Event(ctx)
		if err != nil || ev.Type != want {
			fail("event %v (%v), want %v", ev.Type, err, want)
		}
	}
	if err := id.ResolveAddr(netip.AddrPort{}, dst, 2*time.Second); err != nil {
		fail("resolve addr: %v", err)
	}
	next(rdmacm.EventAddrResolved)
	if err := id.ResolveRoute(2 * time.Second); err != nil {
		fail("resolve route: %v", err)
	}
	next(rdmacm.EventRouteResolved)
	dev, err := id.Device()
	if err != nil {
		fail("device: %v", err)
	}
	vctx, err := uverbs.Open(dev)
	if err != nil {
		fail("open %s: %v", dev.Name, err)
	}
	undo = append(undo, func() { vctx.Close() })
	attr, err := vctx.QueryDevice()
	if err != nil {
		fail("query device: %v", err)
	}
	pd, err := vctx.AllocPD()
	if err != nil {
		fail("alloc pd: %v", err)
	}
	cq, err := vctx.CreateCQ(16, nil, 0)
	if err != nil {
		fail("create cq: %v", err)
	}
	qp, err := pd.CreateQP(uverbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Type: uverbs.QPTypeRC,
		Cap: uverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		fail("create qp: %v", err)
	}
	if err := id.AttachQP(qp, false); err != nil {
		fail("attach qp: %v", err)
	}
	var mrs [3]*uverbs.MR
	var bufs [3]*uverbs.Buffer
	for i, n := range []int{16, 16, 64} { // recv, send (advert), the advertised buffer
		b, err := uverbs.NewBuffer(n)
		if err != nil {
			fail("buffer: %v", err)
		}
		undo = append(undo, func() { b.Free() })
		mr, err := pd.RegMR(b, uverbs.AccessLocalWrite|uverbs.AccessRemoteRead|uverbs.AccessRemoteWrite)
		if err != nil {
			fail("reg mr: %v", err)
		}
		bufs[i], mrs[i] = b, mr
	}
	if err := qp.PostRecv(&uverbs.RecvWR{SGE: []uverbs.SGE{{Addr: mrs[0].Addr, Length: 16, LKey: mrs[0].LKey}}}); err != nil {
		fail("post recv: %v", err)
	}
	p := rdmacm.ConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7, QPNum: qp.Num(),
		MaxResponderResources: uint8(min(attr.MaxQPRdAtom, 255)), MaxInitiatorDepth: uint8(min(attr.MaxQPInitRdAtom, 255))}
	if err := id.Connect(p); err != nil {
		fail("connect: %v", err)
	}
	if ev, err := id.Event(ctx); err != nil || (ev.Type != rdmacm.EventEstablished && ev.Type != rdmacm.EventConnectResponse) {
		fail("event %v (%v), want ESTABLISHED", ev.Type, err)
	}
	// The advert: be64 address, be32 rkey, be32 size; the rkey is not the buffer's.
	sendBuf := mrs[1]
	adv := bufs[1].Bytes()
	binary.BigEndian.PutUint64(adv[0:], mrs[2].Addr)
	binary.BigEndian.PutUint32(adv[8:], mrs[2].RKey^0x5a5a00)
	binary.BigEndian.PutUint32(adv[12:], 64)
	if err := qp.PostSend(&uverbs.SendWR{Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
		SGE: []uverbs.SGE{{Addr: sendBuf.Addr, Length: 16, LKey: sendBuf.LKey}}}); err != nil {
		fail("post send: %v", err)
	}
	wc := make([]uverbs.WC, 4)
	for deadline := time.Now().Add(10 * time.Second); ; {
		n, err := cq.Poll(wc)
		if err != nil {
			fail("poll: %v", err)
		}
		if n > 0 && wc[0].Opcode == uverbs.WCSend {
			if wc[0].Status != uverbs.WCSuccess {
				fail("advert SEND: %v", wc[0].Status)
			}
			break
		}
		if time.Now().After(deadline) {
			fail("advert SEND did not complete")
		}
		time.Sleep(5 * time.Millisecond)
	}
	undo = append(undo, func() { id.Disconnect() })
	return cleanup
}

// A forced error completion: a client advertising a wrong rkey makes the server's RDMA
// READ fail; the server prints rping's line and, with --trace or -d, the decoded cause.
func TestTraceErrorCompletion(t *testing.T) {
	for _, opt := range []string{"--trace", "-d", "--json"} {
		t.Run(strings.TrimLeft(opt, "-"), func(t *testing.T) {
			addr := IPv4(t)
			port := freshPort()
			sp := Start(t, GorpingBin(t), "-s", "-a", addr, "-p", strconv.Itoa(port), opt)
			WaitListening(t, sp, addr, port, 30*time.Second)
			cleanup := badRkeyClient(t, netip.AddrPortFrom(netip.MustParseAddr(addr), uint16(port)))
			code := sp.Wait(t, 30*time.Second)
			cleanup()
			if code == 0 {
				t.Errorf("server exit 0 after a failed READ")
			}
			s := sp.Stderr()
			mustHave(t, "server", s, "cq completion failed status 10")
			if opt == "--json" {
				var found bool
				for _, l := range linesWith(sp.Stdout(), `"completion_error"`) {
					var m map[string]any
					if err := json.Unmarshal([]byte(l), &m); err != nil {
						t.Fatalf("%v: %s", err, l)
					}
					found = m["status"] == 10.0 && m["name"] == "REM_ACCESS_ERR" && strings.Contains(m["cause"].(string), "rkey")
				}
				if !found {
					t.Errorf("no completion_error record for status 10:\n%s", sp.Stdout())
				}
				return
			}
			l := mustHave(t, "server", s, "gorping: completion error: REM_ACCESS_ERR (10):")
			if !strings.Contains(l, "rkey is wrong or stale") {
				t.Errorf("cause line %q does not name the rkey", l)
			}
			if opt == "--trace" {
				l := mustHave(t, "server", s, "poll", "status=REM_ACCESS_ERR", "cause=")
				t.Logf("trace: %s", l)
			}
		})
	}
}
