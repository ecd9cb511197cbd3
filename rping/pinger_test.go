package rping

import (
	"context"
	"errors"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// run runs a client against a server over a fake pair and returns both sides.
func runPair(t *testing.T, cl, sv *side, clSize, svSize int, tweak func(cl, sv *fakeConn)) (*fakeNet, *fakeConn, *fakeConn) {
	t.Helper()
	n := newFakeNet()
	c, s := n.pair(clSize, svSize)
	if tweak != nil {
		tweak(c, s)
	}
	ctx := context.Background()
	sv.startServer(ctx, s)
	cl.startClient(ctx, c)
	return n, c, s
}

func TestPingPong1000(t *testing.T) {
	cl, sv := newSide(false, 64, 1000), newSide(true, 64, 0)
	cl.cfg.Verbose, cl.cfg.Validate, sv.cfg.Verbose = true, true, true
	n, _, _ := runPair(t, cl, sv, 64, 64, nil)
	if st := cl.wait(t); st != 0 {
		t.Fatalf("client exit %d, stderr %q", st, cl.stderr)
	}
	if st := sv.wait(t); st != 0 {
		t.Fatalf("server exit %d, stderr %q", st, sv.stderr)
	}
	if got, want := cl.stdout.String(), pingLines("ping data: ", 1000, 64); got != want {
		t.Errorf("client stdout differs: got %d bytes, want %d", len(got), len(want))
	}
	if got, want := sv.stdout.String(), pingLines("server ping data: ", 1000, 64); got != want {
		t.Errorf("server stdout differs: got %d bytes, want %d", len(got), len(want))
	}
	// A normal end is silent on both sides: no "wait for RDMA_READ_ADV state 10".
	if cl.stderr.String() != "" || sv.stderr.String() != "" {
		t.Errorf("stderr: client %q server %q", cl.stderr, sv.stderr)
	}
	if v := n.violationCount(); v != 0 {
		t.Errorf("%d RDMA operations out of bounds", v)
	}
	if !strings.HasPrefix(cl.stdout.String(), "ping data: rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqr\n") {
		t.Errorf("first line %q", strings.SplitN(cl.stdout.String(), "\n", 2)[0])
	}
}

func TestPingSizes(t *testing.T) {
	for _, size := range []int{MinSize, DefaultSize, 4096, MaxSize} {
		cl, sv := newSide(false, size, 3), newSide(true, size, 0)
		cl.cfg.Verbose, cl.cfg.Validate = true, true
		n, _, _ := runPair(t, cl, sv, size, size, nil)
		if st := cl.wait(t); st != 0 {
			t.Fatalf("size %d: client exit %d, stderr %q", size, st, cl.stderr)
		}
		if st := sv.wait(t); st != 0 {
			t.Fatalf("size %d: server exit %d, stderr %q", size, st, sv.stderr)
		}
		if got, want := cl.stdout.String(), pingLines("ping data: ", 3, size); got != want {
			t.Errorf("size %d: client output differs", size)
		}
		if v := n.violationCount(); v != 0 {
			t.Errorf("size %d: %d RDMA operations out of bounds", size, v)
		}
	}
}

// rping's server READs the client's size into its own smaller buffer and fails;
// gorping grows its buffer.
func TestServerGrowsForLargerClient(t *testing.T) {
	cl, sv := newSide(false, 4096, 5), newSide(true, 64, 0)
	cl.cfg.Validate, sv.cfg.Verbose = true, true
	n, _, s := runPair(t, cl, sv, 4096, 64, nil)
	if st := cl.wait(t); st != 0 {
		t.Fatalf("client exit %d, stderr %q", st, cl.stderr)
	}
	if st := sv.wait(t); st != 0 {
		t.Fatalf("server exit %d, stderr %q", st, sv.stderr)
	}
	if got := len(s.Region(bufRDMA).b); got != 4096 {
		t.Errorf("server buffer %d bytes after growing, want 4096", got)
	}
	if got, want := sv.stdout.String(), pingLines("server ping data: ", 5, 4096); got != want {
		t.Errorf("server output differs")
	}
	if v := n.violationCount(); v != 0 {
		t.Errorf("%d RDMA operations out of bounds", v)
	}
}

func TestServerRefusesWhenGrowFails(t *testing.T) {
	for _, persistent := range []bool{false, true} {
		cl, sv := newSide(false, 4096, 5), newSide(true, 64, 0)
		sv.cfg.Persistent = persistent
		n := newFakeNet()
		c, s := n.pair(4096, 64)
		s.growErr = errors.New("reg_mr: Cannot allocate memory")
		ctx := context.Background()
		sv.startServer(ctx, s)
		go func() { cl.status <- runPingClient(ctx, c, &cl.cfg) }()
		st := sv.wait(t)
		s.disconnect() // the glue disconnects the refused client
		want := "rping server: client's ping size 4096 exceeds this server's 64-byte buffer (-S): reg_mr: Cannot allocate memory\n"
		if !persistent {
			want += "rping server failed: -1\n"
		}
		if st != 255 || sv.stderr.String() != want {
			t.Errorf("persistent=%v: server exit %d stderr %q, want 255 %q", persistent, st, sv.stderr, want)
		}
		if st := cl.wait(t); st != 255 {
			t.Errorf("client exit %d, want 255", st)
		}
		if got, want := cl.stderr.String(), "wait for RDMA_WRITE_ADV state 10\nrping client: peer disconnected after 0 of 5 pings\n"; got != want {
			t.Errorf("client stderr %q, want %q", got, want)
		}
		if v := n.violationCount(); v != 0 {
			t.Errorf("%d RDMA operations out of bounds", v)
		}
	}
}

// A persistent server's per-connection loops are independent: a refused client
// does not stop the next one from being served.
func TestPersistentServesNextClient(t *testing.T) {
	n := newFakeNet()
	ctx := context.Background()
	for i, clSize := range []int{4096, 64} {
		cl, sv := newSide(false, clSize, 2), newSide(true, 64, 0)
		sv.cfg.Persistent = true
		c, s := n.pair(clSize, 64)
		s.growErr = errors.New("no memory")
		sv.startServer(ctx, s)
		cl.startClient(ctx, c)
		svSt := sv.wait(t)
		s.disconnect()
		clSt := cl.wait(t)
		if i == 0 && (svSt != 255 || clSt != 255) {
			t.Errorf("oversized client: server %d client %d, want 255 255", svSt, clSt)
		}
		if i == 1 && (svSt != 0 || clSt != 0) {
			t.Errorf("next client: server %d client %d (stderr %q %q), want 0 0", svSt, clSt, sv.stderr, cl.stderr)
		}
	}
}

func TestClientPeerDisconnect(t *testing.T) {
	for _, tc := range []struct {
		count int
		want  string
	}{
		{10, "wait for RDMA_WRITE_ADV state 10\nrping client: peer disconnected after 3 of 10 pings\n"},
		{0, "wait for RDMA_WRITE_ADV state 10\nrping client: peer disconnected after 3 pings\n"},
	} {
		cl := newSide(false, 64, tc.count)
		svCfg := newSide(true, 64, 0).cfg
		n := newFakeNet()
		c, s := n.pair(64, 64)
		ctx := context.Background()
		go func() { cl.status <- runPingClient(ctx, c, &cl.cfg) }()
		p := newPinger(s, &svCfg, true)
		for i := range 3 {
			if ret, done := p.serverPing(ctx); ret != 0 || done {
				t.Fatalf("server ping %d: ret %d done %v", i, ret, done)
			}
		}
		s.disconnect()
		if st := cl.wait(t); st != 255 {
			t.Errorf("count %d: client exit %d, want 255", tc.count, st)
		}
		if got := cl.stderr.String(); got != tc.want {
			t.Errorf("count %d: client stderr %q, want %q", tc.count, got, tc.want)
		}
	}
}

// serverWith runs runPingServer on a fresh server conn after script prepared
// it, and returns exit status and stderr.
func serverWith(t *testing.T, script func(c, s *fakeConn)) (int, string) {
	t.Helper()
	sv := newSide(true, 64, 0)
	_, c, s := func() (*fakeNet, *fakeConn, *fakeConn) {
		n := newFakeNet()
		c, s := n.pair(64, 64)
		return n, c, s
	}()
	script(c, s)
	sv.startServer(context.Background(), s)
	return sv.wait(t), sv.stderr.String()
}

func TestServerErrors(t *testing.T) {
	advertFrom := func(c *fakeConn, a advert) {
		a.encode(c.Region(bufSend).b)
		if err := c.PostSend(); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name   string
		script func(c, s *fakeConn)
		status int
		stderr string
	}{
		{"bogus size", func(c, s *fakeConn) { s.inject(completion{kind: compRecv, byteLen: 7}) }, 255,
			"Received bogus data, size 7\nrecv wc error: -1\nwait for RDMA_READ_ADV state 11\nrping server failed: -1\n"},
		{"advert size 0", func(c, s *fakeConn) { advertFrom(c, advert{addr: 0x1000, rkey: 1, size: 0}) }, 255,
			"Received bogus advert: size 0 (valid range is 23 to 65535)\nrecv wc error: -1\nwait for RDMA_READ_ADV state 11\nrping server failed: -1\n"},
		{"advert size 22", func(c, s *fakeConn) { advertFrom(c, advert{addr: 0x1000, rkey: 1, size: 22}) }, 255,
			"Received bogus advert: size 22 (valid range is 23 to 65535)\nrecv wc error: -1\nwait for RDMA_READ_ADV state 11\nrping server failed: -1\n"},
		{"advert size 65536", func(c, s *fakeConn) { advertFrom(c, advert{addr: 0x1000, rkey: 1, size: 65536}) }, 255,
			"Received bogus advert: size 65536 (valid range is 23 to 65535)\nrecv wc error: -1\nwait for RDMA_READ_ADV state 11\nrping server failed: -1\n"},
		{"advert size -1", func(c, s *fakeConn) { advertFrom(c, advert{addr: 0x1000, rkey: 1, size: 0xffffffff}) }, 255,
			"Received bogus advert: size -1 (valid range is 23 to 65535)\nrecv wc error: -1\nwait for RDMA_READ_ADV state 11\nrping server failed: -1\n"},
		{"advert addr 0", func(c, s *fakeConn) { advertFrom(c, advert{addr: 0, rkey: 1, size: 64}) }, 255,
			"Received bogus advert: buffer address 0x0 with size 64\nrecv wc error: -1\nwait for RDMA_READ_ADV state 11\nrping server failed: -1\n"},
		{"advert addr wraps", func(c, s *fakeConn) { advertFrom(c, advert{addr: 1<<64 - 10, rkey: 1, size: 64}) }, 255,
			"Received bogus advert: buffer address 0xfffffffffffffff6 with size 64\nrecv wc error: -1\nwait for RDMA_READ_ADV state 11\nrping server failed: -1\n"},
		{"wrong state", func(c, s *fakeConn) { s.inject(completion{kind: compRead}) }, 255,
			"wait for RDMA_READ_ADV state 7\nrping server failed: -1\n"},
		{"cq error", func(c, s *fakeConn) { s.inject(completion{kind: compRecv, status: 12}) }, 255,
			"cq completion failed status 12\nwait for RDMA_READ_ADV state 11\nrping server failed: -1\n"},
		{"unknown completion", func(c, s *fakeConn) { s.inject(completion{kind: 99}) }, 255,
			"wait for RDMA_READ_ADV state 11\nrping server failed: -1\n"},
		{"transport error event", func(c, s *fakeConn) { s.inject(completion{kind: compError}) }, 255,
			"wait for RDMA_READ_ADV state 11\nrping server failed: -1\n"},
		{"unreadable advert", func(c, s *fakeConn) { advertFrom(c, advert{addr: 0x1000, rkey: 1, size: 64}) }, 255,
			"cq completion failed status 10\nwait for RDMA_READ_COMPLETE state 11\nrping server failed: -1\n"},
		{"disconnect between pings is silent", func(c, s *fakeConn) { c.disconnect() }, 0, ""},
		{"disconnect mid-ping", func(c, s *fakeConn) {
			r := c.Region(bufStart)
			fillPayload(r.b, 0)
			advertFrom(c, advert{addr: r.addr, rkey: r.rkey, size: 64})
			c.disconnect()
		}, 0, "wait for RDMA_READ_COMPLETE state 10\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, stderr := serverWith(t, tc.script)
			if st != tc.status || stderr != tc.stderr {
				t.Errorf("exit %d stderr %q, want %d %q", st, stderr, tc.status, tc.stderr)
			}
		})
	}
}

// The echo WRITE never exceeds what the client's sink advert allows, even if
// the client advertised a smaller sink than its payload.
func TestServerWriteCappedToSink(t *testing.T) {
	svCfg := newSide(true, 64, 0).cfg
	n := newFakeNet()
	c, s := n.pair(64, 64)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan int, 1)
	p := newPinger(s, &svCfg, true)
	go func() { ret, _ := p.serverPing(ctx); done <- ret }()

	send := func(a advert) {
		a.encode(c.Region(bufSend).b)
		if err := c.PostSend(); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(kind compKind) {
		t.Helper()
		comp, err := c.Next(ctx)
		for err == nil && comp.kind == compSend {
			comp, err = c.Next(ctx)
		}
		if err != nil || comp.kind != kind || comp.status != 0 {
			t.Fatalf("client got %+v %v, want kind %d", comp, err, kind)
		}
		c.PostRecv()
	}
	start, sink := c.Region(bufStart), c.Region(bufRDMA)
	fillPayload(start.b, 0)
	send(advert{addr: start.addr, rkey: start.rkey, size: 64})
	expect(compRecv)
	// Sink: the last 23 bytes of the client's RDMA buffer.
	send(advert{addr: sink.addr + 64 - 23, rkey: sink.rkey, size: 23})
	expect(compRecv)
	if ret := <-done; ret != 0 {
		t.Fatalf("serverPing ret %d", ret)
	}
	if v := n.violationCount(); v != 0 {
		t.Errorf("%d RDMA operations out of bounds", v)
	}
	if got, want := string(sink.b[64-23:]), string(start.b[:23]); got != want {
		t.Errorf("sink holds %q, want %q", got, want)
	}
}

func TestClientErrors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		validate bool
		script   func(c, s *fakeConn)
		status   int
		stderr   string
	}{
		{"wrong state", false, func(c, s *fakeConn) { c.inject(completion{kind: compWrite}) }, 255,
			"wait for RDMA_WRITE_ADV state 9\nrping client failed: -1\n"},
		{"bogus size", false, func(c, s *fakeConn) { c.inject(completion{kind: compRecv, byteLen: 17}) }, 255,
			"Received bogus data, size 17\nrecv wc error: -1\nwait for RDMA_WRITE_ADV state 11\nrping client failed: -1\n"},
		{"post send error", false, func(c, s *fakeConn) { c.postSendErr = syscall.ENOMEM }, 12,
			"post send error 12\nrping client failed: 12\n"},
		{"post send error without errno", false, func(c, s *fakeConn) { c.postSendErr = errors.New("queue full") }, 255,
			"post send error -1 (queue full)\nrping client failed: -1\n"},
		{"data mismatch", true, func(c, s *fakeConn) { s.onWrite = func(b []byte) { b[20] ^= 1 } }, 255,
			"data mismatch!\nrping client failed: -1\n"},
		{"corruption unnoticed without -V", false, func(c, s *fakeConn) { s.onWrite = func(b []byte) { b[20] ^= 1 } }, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl, sv := newSide(false, 64, 3), newSide(true, 64, 0)
			cl.cfg.Validate = tc.validate
			runPair(t, cl, sv, 64, 64, tc.script)
			st := cl.wait(t)
			if st != tc.status || cl.stderr.String() != tc.stderr {
				t.Errorf("exit %d stderr %q, want %d %q", st, cl.stderr, tc.status, tc.stderr)
			}
			if st := sv.wait(t); st != 0 {
				t.Errorf("server exit %d (stderr %q), want 0", st, sv.stderr)
			}
		})
	}
}

func TestNegativeCountRunsNoPings(t *testing.T) {
	cl, sv := newSide(false, 64, -3), newSide(true, 64, 0)
	cl.cfg.Verbose = true
	runPair(t, cl, sv, 64, 64, nil)
	if st := cl.wait(t); st != 0 || cl.stdout.String() != "" {
		t.Errorf("client exit %d stdout %q, want 0 and nothing", st, cl.stdout)
	}
	if st := sv.wait(t); st != 0 {
		t.Errorf("server exit %d", st)
	}
}

func TestCancelIsQuiet(t *testing.T) {
	n := newFakeNet()
	c, s := n.pair(64, 64)
	pinging := make(chan struct{})
	var once sync.Once
	s.onWrite = func([]byte) { once.Do(func() { close(pinging) }) }
	ctx, cancel := context.WithCancel(context.Background())
	cl, sv := newSide(false, 64, 0), newSide(true, 64, 0)
	go func() { cl.status <- runPingClient(ctx, c, &cl.cfg) }()
	sv.startServer(ctx, s)
	select {
	case <-pinging:
	case <-time.After(30 * time.Second):
		t.Fatal("no ping within 30s")
	}
	cancel()
	if st := cl.wait(t); st != exitInterrupted {
		t.Errorf("client exit %d, want %d", st, exitInterrupted)
	}
	if st := sv.wait(t); st != exitInterrupted {
		t.Errorf("server exit %d, want %d", st, exitInterrupted)
	}
	if cl.stderr.String() != "" || sv.stderr.String() != "" {
		t.Errorf("stderr: client %q server %q, want quiet", cl.stderr, sv.stderr)
	}
}

func TestDebugTranscript(t *testing.T) {
	cl, sv := newSide(false, 64, 1), newSide(true, 64, 0)
	cl.cfg.Debug, sv.cfg.Debug = true, true
	n := newFakeNet()
	c, s := n.pair(64, 64)
	ctx := context.Background()
	sv.startServer(ctx, s)
	cl.startClient(ctx, c)
	if st := cl.wait(t); st != 0 {
		t.Fatalf("client exit %d", st)
	}
	if st := sv.wait(t); st != 0 {
		t.Fatalf("server exit %d", st)
	}
	cs, cr := c.Region(bufStart), c.Region(bufRDMA)
	sr := s.Region(bufRDMA)
	wantClient := sprintf("RDMA addr %x rkey %x len 64\n", cs.addr, cs.rkey) +
		"send completion\nrecv completion\n" +
		sprintf("RDMA addr %x rkey %x len 64\n", cr.addr, cr.rkey) +
		"send completion\nrecv completion\n"
	if got := cl.stdout.String(); got != wantClient {
		t.Errorf("client debug:\n%s\nwant:\n%s", got, wantClient)
	}
	wantServer := "recv completion\n" +
		sprintf("Received rkey %x addr %x len 64 from peer\n", cs.rkey, cs.addr) +
		"server received sink adv\n" +
		"server posted rdma read req \n" +
		"rdma read completion\n" +
		"server received read complete\n" +
		"server posted go ahead\n" +
		"send completion\n" +
		"recv completion\n" +
		sprintf("Received rkey %x addr %x len 64 from peer\n", cr.rkey, cr.addr) +
		"server received sink adv\n" +
		sprintf("rdma write from lkey %x laddr %x len 64\n", sr.lkey, sr.addr) +
		"rdma write completion\n" +
		"server rdma write complete \n" +
		"server posted go ahead\n" +
		"send completion\n"
	if got := sv.stdout.String(); got != wantServer {
		t.Errorf("server debug:\n%s\nwant:\n%s", got, wantServer)
	}
}

// One ping iteration allocates nothing, on either side, with -v and -V on.
func TestPingAllocsZero(t *testing.T) {
	n := newFakeNet()
	c, s := n.pair(64, 64)
	cfg := DefaultConfig()
	cfg.Size, cfg.Verbose, cfg.Validate = 64, true, true
	cfg.Stdout, cfg.Stderr = discard{}, discard{}
	ctx := context.Background()
	svCfg := cfg
	svCfg.Server = true
	sp := newPinger(s, &svCfg, true)
	served := make(chan struct{})
	go func() {
		defer close(served)
		for {
			if ret, done := sp.serverPing(ctx); ret != 0 || done {
				return
			}
		}
	}()
	cp := newPinger(c, &cfg, false)
	ping := 0
	allocs := testing.AllocsPerRun(500, func() {
		if ret := cp.clientPing(ctx, ping); ret != 0 {
			t.Fatalf("ping %d: ret %d", ping, ret)
		}
		ping++
	})
	c.disconnect()
	<-served
	if allocs != 0 {
		t.Errorf("%v allocations per ping, want 0", allocs)
	}
	if ping < 500 {
		t.Errorf("only %d pings ran", ping)
	}
}

// discard is a writer that keeps nothing.
type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
