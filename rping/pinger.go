package rping

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gorping/gorping/internal/trace"
	"github.com/gorping/gorping/rping/explain"
)

// Exit statuses the ping loops produce besides rping's own values.
const (
	exitFailure     = 255 // rping's "ret = -1"
	exitInterrupted = 130 // ctx cancelled (SIGINT); main re-raises the signal anyway
	exitNoReply     = 1   // ping(8)'s status when -w ends the run short of its pings
)

// pinger runs rping's per-connection ping loop (rping_test_client /
// rping_test_server plus the completion handling of rping's CQ thread) over a
// conn. rping splits this over two threads and a semaphore; here one goroutine
// handles completions in order until one that would have posted the semaphore,
// then checks the state as rping's main thread does.
type pinger struct {
	c        conn
	out      printer
	server   bool
	size     int
	count    int
	verbose  bool
	validate bool
	interval time.Duration // -i: between the starts of two pings
	deadline bool          // -w: ctx carries the run's deadline
	timer    *time.Timer   // -i, reused so waiting allocates nothing per ping
	rep      *pingReport   // --stats/--json (client); nil otherwise
	ts       *nicClock     // client with --stats/--json/--trace: the NIC's part of each ping (nicts.go)
	tr       *trace.Tracer // --trace: per-ping counts; nil otherwise
	diag     *diagnostics  // --trace/-d/--json: explains error completions; nil otherwise
	served   int           // server: pings served

	// Bounded stalls (stall.go).
	policy    stallPolicy
	tick      time.Duration // half the bound: when a stalled wait posts a keepalive
	waitStart time.Time     // when the current wait (or idle period) began
	clock     time.Time     // waits are timed from it: now() reads only the monotonic clock
	kaSent    time.Time     // the outstanding keepalive's post; zero if none
	kaAcked   bool          // a keepalive was acknowledged during this wait
	kaKeyed   bool          // the transport needs a valid rkey for a keepalive (iWARP)
	peer      string        // "the server" / "client 10.0.3.1:40000", for stall messages
	stalled   bool          // the loop ended on a stall; its message is out
	posted    time.Time     // the post of our oldest request not completed yet; zero if none
	postedOp  string        // what that request is, for the disconnect explanation
	oneWay    string        // client: why the server's disconnect likely came (explainDisconnect)

	state       testState
	remote      advert // last advert received (server)
	echoLen     int    // server: bytes of the last READ that the echo WRITE sends back
	interrupted bool   // ctx was cancelled: fail quietly
}

func newPinger(c conn, cfg *Config, server bool) *pinger {
	p := &pinger{
		c:        c,
		out:      newPrinter(cfg),
		server:   server,
		size:     cfg.Size,
		count:    cfg.Count,
		verbose:  cfg.Verbose,
		validate: cfg.Validate,
		interval: cfg.Interval,
		deadline: cfg.Deadline > 0,
		tr:       cfg.tr,
		diag:     cfg.dg,
		state:    stateConnected,
		clock:    time.Now(),
	}
	if server {
		// The server's go-ahead is its never-written send buffer: 16 zero bytes.
		clear(c.Region(bufSend).b[:advertLen])
	}
	p.peer = "the server"
	if server {
		p.peer = "the client"
	}
	if r, ok := c.(interface{ remote() string }); ok && server {
		if a := r.remote(); a != "" {
			p.peer = "client " + a
		}
	}
	if sp, ok := c.(interface{ stallPolicy() stallPolicy }); ok {
		p.policy = sp.stallPolicy()
		p.tick = p.policy.bound / 2
	}
	if t, ok := c.(interface{ iwarp() bool }); ok {
		p.kaKeyed = t.iwarp()
	}
	return p
}

// runPingClient runs the client's ping loop on an established connection and
// returns the process exit status, having printed rping's failure lines.
func runPingClient(ctx context.Context, c conn, cfg *Config) int {
	p := newPinger(c, cfg, false)
	p.rep = cfg.rep.newPingReport(cfg.Addr.String(), cfg.Size)
	p.ts = newNICClock(c, &p.out, p.rep, p.tr)
	ret, done := p.clientLoop(ctx)
	st := p.clientStatus(ctx, ret, done)
	if p.rep != nil {
		p.rep.summary()
	}
	return st
}

// clientStatus prints how the client's loop ended, if it failed, and returns
// the exit status.
func (p *pinger) clientStatus(ctx context.Context, ret, done int) int {
	switch {
	case ret == 0:
		return 0
	case p.interrupted && p.deadline && errors.Is(ctx.Err(), context.DeadlineExceeded):
		// -w: the end of the run, as in ping(8): a failure only if pings are
		// missing (-C not reached, or none at all).
		switch {
		case p.count > 0:
			p.out.errorf("rping client: deadline reached after %d of %d pings\n", done, p.count)
		case done == 0:
			p.out.errorf("rping client: deadline reached before a ping completed\n")
		default:
			return 0
		}
		return exitNoReply
	case p.interrupted && p.rep != nil:
		// --stats/--json: Ctrl-C ends an endless run with its summary, as in ping(8).
		if done > 0 {
			return 0
		}
		return exitNoReply
	case p.interrupted:
		return exitInterrupted
	case p.stalled:
		return exitTimeout
	case p.state == stateDisconnected:
		// rping exits 0 here (its loop returns 0 whenever the state is
		// DISCONNECTED), so a script cannot tell a cut-short run from a full one.
		if p.count > 0 {
			p.out.errorf("rping client: peer disconnected after %d of %d pings%s\n", done, p.count, p.oneWay)
		} else {
			p.out.errorf("rping client: peer disconnected after %d pings%s\n", done, p.oneWay)
		}
		return exitFailure
	}
	p.out.errorf("rping client failed: %d\n", ret)
	return ret & 0xff
}

// runPingServer serves one client on an accepted connection and returns the
// exit status: 0 when the client disconnected, else rping's failure value.
// Like rping, only the non-persistent server prints "rping server failed".
func runPingServer(ctx context.Context, c conn, cfg *Config) int {
	p := newPinger(c, cfg, true)
	start := time.Now()
	st := p.serverStatus(p.serverLoop(ctx), cfg)
	if cfg.rep != nil {
		remote := ""
		if r, ok := c.(interface{ remote() string }); ok {
			remote = r.remote()
		}
		cfg.rep.session(remote, p.served, time.Since(start), st)
	}
	return st
}

func (p *pinger) serverStatus(ret int, cfg *Config) int {
	switch {
	case ret == 0:
		return 0
	case p.interrupted:
		return exitInterrupted
	case p.stalled:
		return exitTimeout // the stall message said it all
	}
	if !cfg.Persistent {
		p.out.errorf("rping server failed: %d\n", ret)
	}
	return ret & 0xff
}

// clientLoop returns rping's ret and the number of completed pings.
func (p *pinger) clientLoop(ctx context.Context) (ret, done int) {
	// --stats/--json: Ctrl-C ends the run as in ping(8), but the ping in flight
	// may finish first, so the peer sees the connection end between pings
	// (a stock rping server fails with "wait for RDMA_WRITE_COMPLETE" otherwise).
	inFlight := ctx
	if p.rep != nil {
		var stop func()
		inFlight, stop = finishOnInterrupt(ctx, pingGrace)
		defer stop()
	}
	var last time.Time // start of the previous ping
	p.tr.ResetCounts() // the first ping's counts exclude the connection's setup
	for ping := 0; p.count == 0 || ping < p.count; ping++ {
		if ping > 0 && p.interval > 0 && !p.sleepUntil(ctx, last.Add(p.interval)) {
			p.interrupted = true
			return -1, ping
		}
		if ctx.Err() != nil {
			p.interrupted = true
			return -1, ping
		}
		if p.interval > 0 {
			last = time.Now()
		}
		if ret := p.clientPing(inFlight, ping); ret != 0 {
			if p.rep != nil && !p.interrupted {
				p.rep.errors++
			}
			return ret, ping
		}
	}
	return 0, p.count
}

// pingGrace bounds how long Ctrl-C waits for the ping in flight (a dead peer
// must not hold the summary back); a second Ctrl-C kills at once (main).
const pingGrace = time.Second

// finishOnInterrupt returns the context for the ping in flight: it ends grace
// after ctx is cancelled (Ctrl-C), and at once when ctx ends any other way (-w's
// deadline, which stays exact). Made once per run: pinging allocates nothing.
// stop releases it.
func finishOnInterrupt(ctx context.Context, grace time.Duration) (inFlight context.Context, stop func()) {
	fin, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stopAfter := context.AfterFunc(ctx, func() {
		if errors.Is(ctx.Err(), context.Canceled) {
			time.AfterFunc(grace, cancel)
			return
		}
		cancel()
	})
	return fin, func() { stopAfter(); cancel() }
}

// sleepUntil waits until t or until ctx ends (false).
func (p *pinger) sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	if p.timer == nil {
		p.timer = time.NewTimer(d)
	} else {
		p.timer.Reset(d)
	}
	select {
	case <-p.timer.C:
		return true
	case <-ctx.Done():
		p.timer.Stop()
		return false
	}
}

// clientPing is one iteration of rping_test_client: advertise start_buf, wait
// for the go-ahead (the server has READ it), advertise rdma_buf, wait for the
// go-ahead (the server has WRITTEN the echo into it), check and print.
func (p *pinger) clientPing(ctx context.Context, ping int) int {
	p.state = stateRDMAReadAdv
	start := p.c.Region(bufStart)
	fillPayload(start.b[:p.size], ping)
	// The round-trip time runs from the first SEND's post to the arrival of
	// the server's second go-ahead: both adverts, the server's READ of the
	// payload and WRITE of the echo, its two go-aheads, and both sides'
	// completion handling. Filling, checking and printing are outside it.
	var t0 time.Time
	if p.rep != nil {
		p.rep.sent++
	}
	if p.ts != nil {
		t0 = time.Now()
	}
	if ret := p.sendAdvert(start); ret != 0 {
		return ret
	}
	if !p.await(ctx, stateRDMAWriteAdv) {
		return -1
	}
	rdma := p.c.Region(bufRDMA)
	if ret := p.sendAdvert(rdma); ret != 0 {
		return ret
	}
	if !p.await(ctx, stateRDMAWriteComplete) {
		return -1
	}
	var rtt time.Duration
	if p.ts != nil {
		rtt = time.Since(t0)
		p.ts.end(rtt)
	}
	if p.validate && !bytes.Equal(start.b[:p.size], rdma.b[:p.size]) {
		p.out.errorf("data mismatch!\n")
		return -1
	}
	if p.verbose {
		p.out.data("ping data: ", rdma.b[:p.size])
	}
	if p.rep != nil {
		p.rep.ping(ping, rtt)
	}
	p.ts.trace(p.tr, ping, rtt)
	p.tr.Ping("client", ping)
	return 0
}

// sendAdvert is rping_format_send plus the post: advertise r to the server.
func (p *pinger) sendAdvert(r region) int {
	a := advert{addr: r.addr, rkey: r.rkey, size: uint32(p.size)}
	a.encode(p.c.Region(bufSend).b)
	if p.out.debug {
		p.out.debugf("RDMA addr %x rkey %x len %d\n", a.addr, a.rkey, p.size)
	}
	return p.posting("advert", p.c.PostSend())
}

// posting is post for a request whose completion says the peer's host acknowledged it:
// until then it is what a disconnect explanation names (explainDisconnect).
func (p *pinger) posting(op string, err error) int {
	if err == nil && p.posted.IsZero() {
		p.posted, p.postedOp = p.now(), op
	}
	return p.post(err)
}

// post reports a failed post like rping ("post send error %d", the provider's
// errno, which also becomes the exit status).
func (p *pinger) post(err error) int {
	if err == nil {
		return 0
	}
	n := errnoOf(err)
	if n < 0 {
		p.out.errorf("post send error %d (%v)\n", n, err)
	} else {
		p.out.errorf("post send error %d\n", n)
	}
	return n
}

// serverLoop is rping_test_server: serve pings until the client disconnects.
func (p *pinger) serverLoop(ctx context.Context) int {
	p.tr.ResetCounts()
	for {
		ret, done := p.serverPing(ctx)
		if done {
			return 0
		}
		if ret != 0 {
			// A client that leaves mid-ping (Ctrl-C of an endless rping -c) is
			// still a normal end for the server, as in rping; the "wait for"
			// line has said where it stopped.
			if p.state == stateDisconnected {
				return 0
			}
			return ret
		}
	}
}

// serverPing serves one ping. done is the normal end: the client disconnected
// between pings (rping prints "wait for RDMA_READ_ADV state 10" there; gorping
// stays silent).
func (p *pinger) serverPing(ctx context.Context) (ret int, done bool) {
	p.awaitWake(ctx)
	if p.state != stateRDMAReadAdv {
		if p.state == stateDisconnected {
			return 0, true
		}
		p.mismatch(stateRDMAReadAdv)
		return -1, false
	}
	p.out.debugLine("server received sink adv\n")
	if ret := p.readPing(ctx); ret != 0 {
		return ret, false
	}
	if ret := p.writeEcho(ctx); ret != 0 {
		return ret, false
	}
	p.tr.Ping("server", p.served)
	p.served++
	return 0, false
}

// readPing READs the client's ping (its first advert) into the RDMA buffer, grown
// if the client's is larger, and gives the go-ahead for the second advert.
func (p *pinger) readPing(ctx context.Context) int {
	n := int(p.remote.size)
	rdma, ret := p.sink(n)
	if ret != 0 {
		return ret
	}
	if ret := p.posting("RDMA READ of the ping", p.c.PostRead(n, p.remote.addr, p.remote.rkey)); ret != 0 {
		return ret
	}
	p.out.debugLine("server posted rdma read req \n")
	if !p.await(ctx, stateRDMAReadComplete) {
		return -1
	}
	p.out.debugLine("server received read complete\n")
	// The echo is the C string that was read, NUL included (rping's
	// strlen(rdma_buf)+1), but never more than was read.
	read := rdma.b[:n]
	p.echoLen = min(len(cstring(read))+1, n)
	if p.verbose {
		p.out.data("server ping data: ", read)
	}
	return p.goAhead()
}

// sink is the RDMA buffer to READ n bytes into. rping would READ past its own
// rdma_buf (the NIC fails it with a local length error); gorping serves the
// client with a larger buffer instead.
func (p *pinger) sink(n int) (region, int) {
	rdma := p.c.Region(bufRDMA)
	if n <= len(rdma.b) {
		return rdma, 0
	}
	if err := p.c.Grow(n); err != nil {
		p.out.errorf("rping server: client's ping size %d exceeds this server's %d-byte buffer (-S): %v\n", n, len(rdma.b), err)
		p.state = stateError
		return rdma, -1
	}
	if rdma = p.c.Region(bufRDMA); n > len(rdma.b) {
		p.out.errorf("rping server: client's ping size %d exceeds this server's %d-byte buffer (-S)\n", n, len(rdma.b))
		p.state = stateError
		return rdma, -1
	}
	return rdma, 0
}

// writeEcho waits for the client's second advert, WRITEs the echo there and gives
// the last go-ahead.
func (p *pinger) writeEcho(ctx context.Context) int {
	if !p.await(ctx, stateRDMAWriteAdv) {
		return -1
	}
	p.out.debugLine("server received sink adv\n")
	// Never write more than the client says its sink holds.
	wlen := min(p.echoLen, int(p.remote.size))
	if p.out.debug {
		rdma := p.c.Region(bufRDMA)
		p.out.debugf("rdma write from lkey %x laddr %x len %d\n", rdma.lkey, rdma.addr, wlen)
	}
	if ret := p.posting("RDMA WRITE of the echo", p.c.PostWrite(wlen, p.remote.addr, p.remote.rkey)); ret != 0 {
		return ret
	}
	if !p.await(ctx, stateRDMAWriteComplete) {
		return -1
	}
	p.out.debugLine("server rdma write complete \n")
	return p.goAhead()
}

// goAhead posts the server's go-ahead: its never-written send buffer.
func (p *pinger) goAhead() int {
	if ret := p.posting("go-ahead", p.c.PostSend()); ret != 0 {
		return ret
	}
	p.out.debugLine("server posted go ahead\n")
	return 0
}

// await waits for the next wake-up (awaitWake) and reports whether it left the loop
// in state want; if not, it has complained as rping does.
func (p *pinger) await(ctx context.Context, want testState) bool {
	p.awaitWake(ctx)
	if p.state != want {
		p.mismatch(want)
		return false
	}
	return true
}

// mismatch is rping's complaint after a wake-up in the wrong state.
func (p *pinger) mismatch(want testState) {
	if !p.interrupted && !p.stalled { // a stall has said why
		p.out.errorf("wait for %s state %d\n", want, int(p.state))
	}
}

// awaitWake handles completions until one that rping's CQ or CM thread would
// have answered with sem_post, leaving the resulting state in p.state. A wait
// that makes no progress ends after the stall bound (stall.go).
func (p *pinger) awaitWake(ctx context.Context) {
	if p.tick > 0 {
		p.waitStart, p.kaAcked = p.now(), false
		p.c.Stall(p.waitStart, p.tick)
		defer p.c.Stall(time.Time{}, 0)
	}
	for {
		c, err := p.c.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				p.interrupted = true
			} else {
				p.out.errorf("%v\n", err)
			}
			p.state = stateError
			return
		}
		switch {
		case c.kind == compStall:
			if p.tick > 0 && p.onStall() {
				p.stalled = true
				p.state = stateError
				return
			}
			continue
		case c.kind == compKeepalive && c.status == wcSuccess:
			p.kaSent, p.kaAcked = time.Time{}, true
			continue
		}
		if p.handle(c) {
			return
		}
	}
}

// now is the time for waits: time.Now costs two clock reads (wall and
// monotonic), this one, and every wait of the ping loop reads it.
func (p *pinger) now() time.Time { return p.clock.Add(time.Since(p.clock)) }

// onStall handles the stall watch running out during a wait (every half
// bound): it posts a keepalive, or ends the wait (true) with one line that
// says what the wait was for and the likely cause.
func (p *pinger) onStall() (end bool) {
	now := time.Now()
	elapsed := now.Sub(p.waitStart)
	if elapsed < p.tick*9/10 {
		p.c.Stall(now, p.tick-elapsed) // a tick of an earlier wait
		return false
	}
	// A server between pings waits as long as its client likes, as long as
	// the client's host acknowledges a keepalive every half bound.
	if p.server && (p.state == stateConnected || p.state == stateRDMAWriteComplete) {
		if !p.kaSent.IsZero() {
			p.out.errorf("rping server: %s acknowledged nothing for %s (a keepalive went unanswered): "+
				"its host is down, its link is down, or the network between is partitioned; connection dropped\n",
				p.peer, secs(now.Sub(p.kaSent)))
			return true
		}
		p.keepalive()
		p.waitStart = now
		p.c.Stall(now, p.tick)
		return false
	}
	if elapsed >= p.policy.bound-p.tick/10 {
		side := "client"
		if p.server {
			side = "server"
		}
		cause := explain.Stall(p.peer, p.kaAcked, !p.kaSent.IsZero())
		if m, ok := p.c.(interface{ mtuProblem() string }); ok && m.mtuProblem() != "" {
			cause = "this host cannot send packets of the connection's path MTU: " + m.mtuProblem()
		} else if !p.server && p.size > minPathMTU {
			cause += "; or it cannot send packets of this connection's path MTU (its netdev's MTU is smaller than this host's, which chose it)"
		}
		p.out.errorf("rping %s: no progress for %s waiting for %s: %s\n", side, secs(elapsed), waitingFor(p.state, p.server), cause)
		return true
	}
	if p.kaSent.IsZero() && !p.kaAcked {
		p.keepalive()
	}
	p.c.Stall(now, p.policy.bound-elapsed)
	return false
}

// minPathMTU is the smallest RoCE path MTU rdma_cm chooses (a netdev of
// 1500 bytes): pings no larger always fit one packet.
const minPathMTU = 1024

// keepalive posts a zero-length RDMA WRITE to the peer: its acknowledgement
// proves the peer's host still answers. iWARP checks the STag even of an
// empty write, so there it needs the client's last advert (server only).
func (p *pinger) keepalive() {
	var raddr uint64
	var rkey uint32
	if p.server && p.remote.rkey != 0 {
		raddr, rkey = p.remote.addr, p.remote.rkey
	}
	if p.kaKeyed && rkey == 0 {
		return
	}
	if p.c.PostKeepalive(raddr, rkey) == nil {
		p.kaSent = time.Now()
	}
}

// handle is rping_cq_event_handler for one entry, plus the two CM events that
// matter to the loops. It reports whether rping would have woken its main thread.
func (p *pinger) handle(c completion) (wake bool) {
	p.ts.completion(c)
	switch c.kind {
	case compDisconnected:
		p.explainDisconnect()
		p.state = stateDisconnected
		return true
	case compError:
		p.state = stateError
		return true
	}
	if c.status != wcSuccess {
		if c.status == wcWRFlushErr {
			// The QP is going to ERR on disconnect; the DISCONNECTED event
			// follows. rping's CQ thread skips these silently too.
			return false
		}
		p.out.errorf("cq completion failed status %d\n", c.status)
		p.diag.completionError(c.status)
		p.state = stateError
		return true
	}
	if c.kind == compSend || c.kind == compRead || c.kind == compWrite {
		p.posted = time.Time{} // acknowledged: one request of ours is outstanding at a time
	}
	switch c.kind {
	case compSend:
		p.out.debugLine("send completion\n")
		return false
	case compWrite:
		p.out.debugLine("rdma write completion\n")
		p.state = stateRDMAWriteComplete
		return true
	case compRead:
		p.out.debugLine("rdma read completion\n")
		p.state = stateRDMAReadComplete
		return true
	case compRecv:
		p.out.debugLine("recv completion\n")
		if ret := p.recv(c); ret != 0 {
			p.out.errorf("recv wc error: %d\n", ret)
			p.state = stateError
			return true
		}
		if err := p.c.PostRecv(); err != nil {
			p.out.errorf("post recv error: %d\n", errnoOf(err))
			p.state = stateError
		}
		return true
	}
	p.out.debugLine("unknown!!!!! completion\n")
	p.state = stateError
	return true
}

// explainDisconnect says what a disconnect means when a request of ours had gone
// unacknowledged for longer than the peer's host takes to answer (one local ACK
// timeout): the peer's packets reach this host (its disconnect came), ours do not
// reach it, and it gave up on the connection before our own bound ran out. rping's
// lines alone say nothing of it. The client says it in its last line, the server at once.
func (p *pinger) explainDisconnect() {
	if p.interrupted {
		return
	}
	t := p.policy.timeout
	if t == 0 {
		t = defaultAckTimeout
	}
	now := p.now()
	var why string
	switch {
	case !p.posted.IsZero():
		waited := now.Sub(p.posted)
		if waited < ackTimeout(t) {
			return // a peer that quit: our request was simply in flight
		}
		why = fmt.Sprintf(" while our %s had gone unacknowledged for %s: what this host sends does not reach %s "+
			"(lost on the way or dropped by its host) while what it sends arrives, a one-way fault toward it",
			p.postedOp, secs(waited), p.peer)
	case !p.server && p.tick > 0 && (p.state == stateRDMAReadAdv || p.state == stateRDMAWriteAdv):
		// Our advert was acknowledged, but the server's RDMA READ or WRITE that follows
		// needs our responses and acknowledgements, which the HCA sends unseen.
		waited := now.Sub(p.waitStart)
		if waited < ackTimeout(t) {
			return
		}
		why = fmt.Sprintf(" while a ping had waited %s for it: what this host sends likely does not reach %s "+
			"(the responses to its RDMA requests lost on the way or dropped by its host) while what it sends arrives, a one-way fault toward it",
			secs(waited), p.peer)
	default:
		return
	}
	if !p.server {
		p.oneWay = why
		return
	}
	p.out.errorf("rping server: %s disconnected%s\n", p.peer, why)
}

// recv is rping's server_recv / client_recv.
func (p *pinger) recv(c completion) int {
	if c.byteLen != advertLen {
		p.out.errorf("Received bogus data, size %d\n", int32(c.byteLen))
		return -1
	}
	if !p.server {
		// The go-ahead's content is meaningless; only its arrival counts.
		if p.state == stateRDMAReadAdv {
			p.state = stateRDMAWriteAdv
		} else {
			p.state = stateRDMAWriteComplete
		}
		return 0
	}
	a := decodeAdvert(p.c.Region(bufRecv).b)
	if p.out.debug {
		p.out.debugf("Received rkey %x addr %x len %d from peer\n", a.rkey, a.addr, int32(a.size))
	}
	if err := a.check(); err != nil {
		p.out.errorf("Received bogus advert: %v\n", err)
		return -1
	}
	p.remote = a
	if p.state <= stateConnected || p.state == stateRDMAWriteComplete {
		p.state = stateRDMAReadAdv
	} else {
		p.state = stateRDMAWriteAdv
	}
	return 0
}

// converse is the rest of what rping's client and server share once up: the ping loop
// (with the path diagnostics around it) and the disconnect. A fatal asynchronous event
// ends it with its message and status 255.
func (c *verbsConn) converse(cfg *Config, ping func(context.Context, conn, *Config) int) int {
	rd := c.beginDiag(cfg.dg, cfg.rep)
	st := ping(c.life, c, cfg)
	c.endDiag(rd)
	c.disconnect()
	if st != 0 && c.life.Err() == nil {
		c.explain()
	}
	return asyncStatus(c.life, st)
}
