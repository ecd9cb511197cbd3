package rping

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gorping/gorping/rdmacm"
	"github.com/gorping/gorping/uverbs"
)

// Exit statuses of Run besides the ping loops'.
const (
	exitNoDevice = 19 // ENODEV: rping returns rdma_create_event_channel's errno
)

// rping's rdma_cm timeouts and listen backlog.
const (
	resolveTimeout = 2000 * time.Millisecond
	listenBacklog  = 3
)

// countDevices reports how many RDMA devices with a uverbs node h has.
func countDevices(h uverbs.Host) (int, error) {
	devs, err := h.Devices()
	return len(devs), err
}

// Run executes one rping invocation described by cfg and returns the process
// exit status (0..255), printing what rping prints.
func Run(ctx context.Context, cfg Config) int { return reported(ctx, cfg, run) }

// reported runs body with the reporting cfg's options ask for (--stats, --json,
// --trace, the diagnostics) and reports how it ended.
func reported(ctx context.Context, cfg Config, body func(context.Context, Config) int) int {
	cfg.rep = newReporter(&cfg)
	cfg.tr = newTracer(&cfg)
	cfg.dg = newDiagnostics(&cfg)
	cfg.rep.config(&cfg)
	st := body(ctx, cfg)
	cfg.rep.exit(st)
	return st
}

func run(ctx context.Context, cfg Config) int {
	if cfg.Deadline > 0 && !cfg.Server {
		// -w bounds the whole client run, connection setup included.
		dctx, cancel := context.WithTimeout(ctx, cfg.Deadline)
		defer cancel()
		st := runRDMA(dctx, cfg)
		if st == exitInterrupted && ctx.Err() == nil {
			// Cut short before the ping loop, which reports its own end.
			fmt.Fprintf(cfg.Stderr, "rping client: deadline reached before the connection was up\n")
			return exitNoReply
		}
		return st
	}
	return runRDMA(ctx, cfg)
}

func runRDMA(ctx context.Context, cfg Config) int {
	out := &printer{stdout: cfg.Stdout, stderr: cfg.Stderr, debug: cfg.Debug}
	// rping's first step after option parsing: the event channel, which
	// librdmacm refuses (ENODEV) when no verbs device exists.
	n, err := countDevices(cfg.host)
	if err != nil {
		perror(out.stderr, "failed to create RDMA CM event channel", err)
		return statusOf(errnoOf(err))
	}
	if n == 0 {
		out.errorf("No RDMA devices were detected\n")
		return exitNoDevice
	}
	cm, err := rdmacm.Open(rdmacm.WithTracer(cfg.tr), rdmacm.WithHost(cfg.host))
	if err != nil {
		perror(out.stderr, "failed to create RDMA CM event channel", err)
		out.hint(cmOpenHint(err))
		return statusOf(errnoOf(err))
	}
	defer cm.Close()
	// A device removal ends the whole run (rping's CM thread exits), whoever
	// is or is not reading the events of the IDs it hits.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	out.removal = &removal{stderr: out.stderr, cancel: cancel, gone: cm.Removed()}
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-cm.Removed():
			out.deviceRemoved()
		case <-ctx.Done():
		}
	}()
	st := runWith(ctx, &cfg, out, cm)
	cm.Close()
	select {
	case <-cm.Removed(): // during the teardown
		out.deviceRemoved()
	default:
	}
	cancel(nil)
	<-watched
	if removed(ctx) {
		return exitFailure
	}
	return st
}

// runWith is the server or client on an open event channel.
func runWith(ctx context.Context, cfg *Config, out *printer, cm *rdmacm.Channel) int {
	id, err := cm.CreateID()
	if err != nil {
		perror(out.stderr, "rdma_create_id", err)
		return exitFailure
	}
	out.debugf("created cm_id %p\n", id)
	if cfg.Server {
		return runServer(ctx, cfg, out, id)
	}
	return runClient(ctx, cfg, out, id)
}

// statusOf is the exit status for rping's int return value.
func statusOf(ret int) int { return ret & 0xff }

// quit reports how a wait for a CM event ended when it did not get one.
func quit(ctx context.Context, out *printer, err error) int {
	if ctx.Err() != nil {
		return exitInterrupted
	}
	out.errorf("rdma_get_cm_event: %s\n", Strerror(err))
	return exitFailure
}

// rejStaleConn is the InfiniBand CM's reject reason "stale connection"
// (IB_CM_REJ_STALE_CONN), which a REJECTED event carries as its status on
// InfiniBand and RoCE.
const rejStaleConn = 10

const staleConnHint = "gorping: the server's host rejected the request as a stale connection: it still holds a connection from this host's QP number, one whose end it never saw (the device was created anew, or the host restarted, while connected); it disconnects that one now, so the next try connects"

// cmError prints an error CM event as rping's CM thread does and reports
// whether ev is one (rping then exits 255). A device removal also ends the
// run (its context), so callers that find ctx done stay quiet.
func cmError(out *printer, ev rdmacm.Event) bool {
	switch ev.Type {
	case rdmacm.EventAddrError, rdmacm.EventRouteError, rdmacm.EventConnectError,
		rdmacm.EventUnreachable, rdmacm.EventRejected:
		out.cmErr, out.sawCMErr = ev, true
		out.errorf("cma event %s, error %d\n", ev.Type, ev.Status)
		if ev.Type == rdmacm.EventRejected && ev.Status == rejStaleConn {
			out.hint(staleConnHint)
		}
		return true
	case rdmacm.EventDeviceRemoval:
		out.deviceRemoved()
		return true
	}
	return false
}

func runClient(ctx context.Context, cfg *Config, out *printer, id cmID) int {
	if ret := resolve(ctx, cfg, out, id); ret != 0 {
		return ret
	}
	c, ret := setupConn(id, cfg, out, false)
	if ret != 0 {
		return ret
	}
	defer c.close()
	peer := netip.AddrPortFrom(cfg.Addr, cfg.Port).String()
	return converse(ctx, c, cfg, out, func(ctx context.Context) int {
		return connectClient(ctx, c, out, StateRouteResolved, connPolicy(cfg.Timeout), peer)
	}, runPingClient)
}

// resolve is rping_bind_client up to the route: resolve the server's address and the
// route to it. On failure it has printed rping's lines and destroyed id, and returns
// the exit status.
func resolve(ctx context.Context, cfg *Config, out *printer, id cmID) int {
	destroy := func(st int) int {
		out.debugf("destroy cm_id %p\n", id)
		id.Destroy()
		return st
	}
	var src netip.AddrPort
	if cfg.HasSrcAddr() {
		src = netip.AddrPortFrom(cfg.SrcAddr, 0)
	}
	if err := id.ResolveAddr(src, netip.AddrPortFrom(cfg.Addr, cfg.Port), resolveTimeout); err != nil {
		perror(out.stderr, "rdma_resolve_addr", err)
		switch {
		case errors.Is(err, unix.ENODEV):
			out.hint(hostNet(cfg.host).noDeviceHint(cfg.Addr, cfg.SrcAddr))
		case errors.Is(err, unix.ENETUNREACH):
			out.hint(hostNet(cfg.host).unreachableHint(cfg.Addr))
		}
		return destroy(exitFailure)
	}
	r := &resolution{cfg: cfg, out: out, id: id, state: StateIdle}
	res := waitCM(ctx, out, id, cmWait{label: "parent", onError: r.errorHint, step: r.step})
	state := r.state // an error event leaves it: rping's main thread then finds it unchanged
	switch {
	case res == cmBroken:
		return destroy(exitFailure)
	case res == cmStopped || ctx.Err() != nil: // a signal, -w, a device removal
		return destroy(exitInterrupted)
	case state != StateRouteResolved:
		out.errorf("waiting for addr/route resolution state %d\n", int(state))
		return destroy(exitFailure)
	}
	out.debugLine("rdma_resolve_addr - rdma_resolve_route successful\n")
	return 0
}

// resolution is the client's wait for its address and route.
type resolution struct {
	cfg   *Config
	out   *printer
	id    cmID
	state State
}

// errorHint explains an address or route error event.
func (r *resolution) errorHint(ev rdmacm.Event) {
	switch {
	case ev.Type == rdmacm.EventAddrError && ev.Status == -int32(unix.ENODEV):
		r.out.hint(hostNet(r.cfg.host).noDeviceHint(r.cfg.Addr, r.cfg.SrcAddr))
	case (ev.Type == rdmacm.EventAddrError || ev.Type == rdmacm.EventRouteError) && ev.Status == -int32(unix.ETIMEDOUT):
		r.out.hint(fmt.Sprintf("gorping: %s did not answer ARP or neighbour discovery within %s: it is down, its link is down, or it is not on this network",
			r.cfg.Addr, secs(resolveTimeout)))
	}
}

// step resolves the route once the address is, and ends the wait at the route (or at
// a failure, leaving the state where it failed).
func (r *resolution) step(ev rdmacm.Event) cmStep {
	switch ev.Type {
	case rdmacm.EventAddrResolved:
		// librdmacm opens the ID's verbs device here and turns a failure
		// into ADDR_ERROR with status -1.
		if hint := probeDevice(r.id, r.cfg); hint != "" {
			r.out.errorf("cma event %s, error %d\n", rdmacm.EventAddrError, -1)
			r.out.hint(hint)
			return cmEnd
		}
		r.state = StateAddrResolved
		if err := r.id.ResolveRoute(resolveTimeout); err != nil {
			perror(r.out.stderr, "rdma_resolve_route", err)
			if errors.Is(err, unix.ENODEV) {
				r.out.hint(hostNet(r.cfg.host).noDeviceHint(r.cfg.Addr, r.cfg.SrcAddr))
			}
			r.state = StateError
			return cmEnd
		}
		return cmWaiting
	case rdmacm.EventRouteResolved:
		r.state = StateRouteResolved
		return cmEnd
	}
	return cmUnhandled
}

// setupConn is what rping's client and server do with their connection's ID before
// connecting: rping_setup_qp, rping_setup_buffers and the first RECV (posted before
// connect or accept, as rping does). On failure it has printed rping's line, rejected a
// server's connection request, released everything including id, and returns the exit
// status.
func setupConn(id cmID, cfg *Config, out *printer, server bool) (*verbsConn, int) {
	c, ret := newVerbsConn(id, cfg, out, server)
	if ret != 0 {
		out.errorf("setup_qp failed: %d\n", ret)
		if server {
			id.Reject()
		} else {
			out.debugf("destroy cm_id %p\n", id)
		}
		id.Destroy()
		return nil, statusOf(ret)
	}
	fail := func(ret int) (*verbsConn, int) {
		if server {
			id.Reject()
		}
		c.close()
		return nil, statusOf(ret)
	}
	if ret := c.setupBuffers(cfg.Size, !server); ret != 0 {
		out.errorf("rping_setup_buffers failed: %d\n", ret)
		return fail(ret)
	}
	if err := c.PostRecv(); err != nil {
		out.errorf("ibv_post_recv failed: %d\n", errnoOf(err))
		return fail(errnoOf(err))
	}
	return c, 0
}

// converse is what rping's client and server share once the first RECV is
// posted: start the completion goroutine, connect (or accept), run the ping
// loop, disconnect. Meanwhile a fatal asynchronous event of the connection's
// verbs context (QP or CQ error, port error, device fatal) ends it with its
// message and status 255.
func converse(ctx context.Context, c *verbsConn, cfg *Config, out *printer,
	connect func(context.Context) int, ping func(context.Context, conn, *Config) int) int {
	ctx, end := context.WithCancelCause(ctx)
	defer end(nil)
	// Subscribed before connecting, so no event of this QP can be missed; the
	// context may be shared with other connections, which see it too.
	sub := c.vctx.SubscribeAsync()
	defer sub.Close()
	aw := watchAsync(ctx, sub.Next, c.vctx.Device().Name, c.qp, c.cq, c.port, out, end)
	defer aw.stop()
	c.start(ctx)
	if ret := connect(ctx); ret != 0 {
		if ret == exitInterrupted || ret == exitTimeout {
			return asyncStatus(ctx, ret)
		}
		out.errorf("connect error %d\n", ret)
		c.explain(aw)
		return statusOf(ret)
	}
	c.watchCM()
	c.policy = qpPolicy(c.qp, cfg.Timeout)
	c.checkPathMTU(cfg)
	rd := c.beginDiag(cfg.dg, cfg.rep)
	st := ping(ctx, c, cfg)
	c.endDiag(rd)
	c.disconnect()
	if st != 0 && ctx.Err() == nil {
		c.explain(aw)
	}
	return asyncStatus(ctx, st)
}

// explain says, after a failure, what the connection's port and asynchronous events
// tell about it (aw prints at most one line per connection).
func (c *verbsConn) explain(aw *asyncWatch) {
	pa, err := c.vctx.QueryPort(c.port)
	// A link that went down fails the QP's work requests at once, a
	// moment before rxe marks the port DOWN and queues PORT_ERR: for a
	// failure a lost link can cause, give the port's state (or the
	// watcher's event) a bounded moment to catch up.
	if c.wait != nil && linkLossStatus(c.wait.firstErr) {
		for deadline := time.Now().Add(time.Second); err == nil && pa.State == uverbs.PortActive &&
			!aw.said.Load() && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
			pa, err = c.vctx.QueryPort(c.port)
		}
	}
	aw.explain(c.vctx.Device().Name, c.port, pa.State, err)
}

// linkLossStatus reports whether a failed completion's status is one a link
// going down produces (the local QP's send failed, or the peer never answered).
func linkLossStatus(st uverbs.WCStatus) bool {
	return st == uverbs.WCLocQPOpErr || st == uverbs.WCRetryExcErr
}

// asyncStatus is 255 if a fatal asynchronous event ended the connection (its
// message is out), else st.
func asyncStatus(ctx context.Context, st int) int {
	var af *asyncFatal
	if errors.As(context.Cause(ctx), &af) {
		return exitFailure
	}
	return st
}

// connectClient is rping_connect_client: CONNECT, then wait for the
// connection (ESTABLISHED with an rdma_cm-driven QP; CONNECT_RESPONSE in -q
// mode, after which the application moves its QP and sends the RTU). The
// wait is bounded by pol (stall.go): without an answer it ends with
// exitTimeout and one line saying why, where the kernel's CM would retry its
// request for about 100 s.
func connectClient(ctx context.Context, c *verbsConn, out *printer, state State, pol stallPolicy, peer string) int {
	probe := newCMProbe(c.dev, c.port)
	connected := time.Now()
	deadline := stallDeadline(pol)
	p := rdmacm.ConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: sendRetry, RNRRetryCount: sendRetry,
		QPNum:                 c.qp.Num(),
		MaxResponderResources: uint8(min(c.devAttr.MaxQPRdAtom, 255)),
		MaxInitiatorDepth:     uint8(min(c.devAttr.MaxQPInitRdAtom, 255))}
	if err := c.id.Connect(p); err != nil {
		perror(out.stderr, "rdma_connect", err)
		return -1
	}
	res := waitCM(ctx, out, c.id, cmWait{label: "parent", deadline: deadline,
		timeout: func() {
			out.errorf("rping client: no answer to the connection request from %s for %s: %s\n",
				peer, secs(pol.bound), probe.cause("the server", pol.bound))
		},
		onError: func(ev rdmacm.Event) {
			if ctx.Err() == nil && ev.Type == rdmacm.EventUnreachable && ev.Status == -int32(unix.ETIMEDOUT) {
				out.hint("gorping: the connection manager gave up: " + probe.cause("the server", time.Since(connected)))
			}
		},
		step: connectStep(out, "client", &state)})
	// An error event leaves the state: rping's main thread then finds it unchanged.
	if ret := connectStatus(res, state, out); ret != 0 {
		return ret
	}
	if c.selfQP {
		if err := c.selfModify(); err != nil {
			perror(out.stderr, "rping_modify_qp", err)
			return -1
		}
		if err := c.id.Establish(); err != nil {
			perror(out.stderr, "rdma_establish", err)
			if c.iwarp() {
				out.hint(iwarpSelfQPHint(c.dev.Name))
			}
			return -1
		}
	}
	out.debugLine("rdma_connect successful\n")
	return 0
}

// connectStep is the step of connectClient's and accept's waits: ESTABLISHED (for a
// client in -q mode CONNECT_RESPONSE) connects, DISCONNECTED ends the wait.
func connectStep(out *printer, role string, state *State) func(rdmacm.Event) cmStep {
	return func(ev rdmacm.Event) cmStep {
		switch {
		case ev.Type == rdmacm.EventEstablished:
			out.debugLine("ESTABLISHED\n")
			*state = StateConnected
		case ev.Type == rdmacm.EventConnectResponse && role == "client":
			out.debugLine("CONNECT_RESPONSE\n")
			*state = StateConnected
		case ev.Type == rdmacm.EventDisconnected:
			out.errorf("%s DISCONNECT EVENT...\n", role)
			*state = StateDisconnected
		default:
			return cmUnhandled
		}
		return cmEnd
	}
}

// connectStatus is how connectClient and accept end a wait for the connection that
// ended in state: 0 once connected, exitInterrupted or exitTimeout (quietly; what
// needed saying is out), else rping's -1 after "wait for CONNECTED state".
func connectStatus(res cmResult, state State, out *printer) int {
	switch res {
	case cmStopped:
		return exitInterrupted
	case cmTimedOut:
		return exitTimeout
	case cmBroken:
		return -1
	}
	if state != StateConnected {
		out.errorf("wait for CONNECTED state %d\n", int(state))
		return -1
	}
	return 0
}

func runServer(ctx context.Context, cfg *Config, out *printer, listener *rdmacm.ID) int {
	defer func() {
		out.debugf("destroy cm_id %p\n", listener)
		listener.Destroy()
	}()
	if err := listener.Bind(netip.AddrPortFrom(cfg.Addr, cfg.Port)); err != nil {
		perror(out.stderr, "rdma_bind_addr", err)
		if errors.Is(err, unix.ENODEV) {
			out.hint(hostNet(cfg.host).noDeviceHint(netip.Addr{}, cfg.Addr))
		}
		return exitFailure
	}
	if hint := boundDevice(listener, cfg); hint != "" {
		// What librdmacm's rdma_bind_addr reports when it cannot open the
		// device of the address.
		perror(out.stderr, "rdma_bind_addr", unix.ENODEV)
		out.hint(hint)
		return exitFailure
	}
	out.debugLine("rdma_bind_addr successful\n")
	out.debugLine("rdma_listen\n")
	if err := listener.Listen(listenBacklog); err != nil {
		perror(out.stderr, "rdma_listen", err)
		return exitFailure
	}
	if cfg.listening != nil {
		cfg.listening()
	}
	if cfg.Persistent {
		return servePersistent(ctx, cfg, out, listener)
	}
	child, ret := nextRequest(ctx, out, listener)
	if child == nil {
		if ret != exitInterrupted {
			out.errorf("wait for CONNECT_REQUEST state %d\n", int(StateIdle))
		}
		return ret
	}
	// rping keeps listening while it serves, and a second client's request
	// clobbers the running session; gorping turns further clients away.
	rctx, stopRejecting := context.WithCancel(ctx)
	rejected := make(chan struct{})
	go func() {
		defer close(rejected)
		for {
			extra, _ := nextRequest(rctx, out, listener)
			if extra == nil {
				return
			}
			extra.Reject()
			extra.Destroy()
		}
	}()
	st := serve(ctx, cfg, out, child)
	stopRejecting()
	<-rejected
	return st
}

// probeDevice opens and closes the verbs device of id, as librdmacm does when
// an ID gets its device (address resolved, bound to an address), so a device
// that cannot be used fails there as with rping. It returns "" or the hint.
func probeDevice(id cmID, cfg *Config) string {
	dev, err := id.Device()
	if err != nil {
		return "gorping: " + err.Error()
	}
	vctx, err := cfg.openVerbs(dev, false)
	if err != nil {
		return verbsOpenHint(dev, err)
	}
	vctx.Close()
	return ""
}

// boundDevice checks the device of a listener bound to addr: "" if addr is a
// wildcard or its device opens, else the hint. The kernel binds a loopback
// address without a device; only InfiniBand loopback reaches such a listener
// (rping then listens in vain on RoCE and iWARP).
func boundDevice(listener *rdmacm.ID, cfg *Config) string {
	addr, net := cfg.Addr, hostNet(cfg.host)
	if addr.IsUnspecified() {
		return ""
	}
	ai, err := listener.Query()
	if err != nil {
		return "" // the first connection will tell
	}
	if ai.NodeGUID == 0 {
		if net.ibPort() {
			return ""
		}
		return net.noDeviceHint(netip.Addr{}, addr)
	}
	return probeDevice(listener, cfg)
}

// nextRequest waits for the next CONNECT_REQUEST on the listener. Other events
// are printed and skipped (error events on a listener concern no session).
func nextRequest(ctx context.Context, out *printer, listener *rdmacm.ID) (*rdmacm.ID, int) {
	for {
		ev, err := listener.Event(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil, exitInterrupted
			}
			out.errorf("rdma_get_cm_event: %s\n", Strerror(err))
			return nil, exitFailure
		}
		if out.deviceGone() {
			return nil, exitInterrupted // Close destroys a child ev may carry
		}
		if ev.Type == rdmacm.EventConnectRequest && ev.Child != nil {
			out.debugf("cma_event type %s cma_id %p (child)\n", ev.Type, ev.Child)
			out.debugf("child cma %p\n", ev.Child)
			return ev.Child, 0
		}
		out.debugf("cma_event type %s cma_id %p (parent)\n", ev.Type, listener)
		if !cmError(out, ev) {
			out.errorf("unhandled event: %s, ignoring\n", ev.Type)
		} else if ctx.Err() != nil { // a device removal
			return nil, exitInterrupted
		}
	}
}

// servePersistent is rping -P: every client is served by its own goroutine
// until a signal ends the server. A failing client only ends its own session
// (rping exits on any error CM event of any client).
func servePersistent(ctx context.Context, cfg *Config, out *printer, listener *rdmacm.ID) int {
	var sessions sync.WaitGroup
	for {
		child, ret := nextRequest(ctx, out, listener)
		if child == nil {
			sessions.Wait() // they see ctx too
			return ret
		}
		sessions.Go(func() { serve(ctx, cfg, out, child) })
	}
}

// serve runs one server-side connection: rping's setup_qp, setup_buffers,
// first RECV, cq thread, accept, ping loop and teardown for a child ID.
func serve(ctx context.Context, cfg *Config, out *printer, child cmID) int {
	c, ret := setupConn(child, cfg, out, true)
	if ret != 0 {
		return ret
	}
	defer c.close()
	return converse(ctx, c, cfg, out, func(ctx context.Context) int { return accept(ctx, c, out, connPolicy(cfg.Timeout)) }, runPingServer)
}

// accept is rping_accept: accept the request (in -q mode after moving the
// QP to RTS by hand) and wait for the connection to be established, for at
// most pol's bound.
func accept(ctx context.Context, c *verbsConn, out *printer, pol stallPolicy) int {
	deadline := stallDeadline(pol)
	out.debugLine("accepting client connection request\n")
	p := rdmacm.ConnParam{ResponderResources: rdmacm.MaxRDAtomic, InitiatorDepth: rdmacm.MaxRDAtomic,
		RetryCount: sendRetry, RNRRetryCount: sendRetry,
		MaxResponderResources: uint8(min(c.devAttr.MaxQPRdAtom, 255)),
		MaxInitiatorDepth:     uint8(min(c.devAttr.MaxQPInitRdAtom, 255))}
	if c.selfQP {
		if err := c.selfModify(); err != nil {
			perror(out.stderr, "rping_modify_qp", err)
			return -1
		}
		p.ResponderResources, p.InitiatorDepth, p.QPNum = 1, 1, c.qp.Num()
	}
	if err := c.id.Accept(p); err != nil {
		perror(out.stderr, "rdma_accept", err)
		return -1
	}
	state := StateConnectRequest
	res := waitCM(ctx, out, c.id, cmWait{label: "child", deadline: deadline,
		timeout: func() {
			out.errorf("rping server: client %s did not complete the connection for %s: "+
				"its host went down or the network between is partitioned\n", c.remote(), secs(pol.bound))
		},
		step: connectStep(out, "server", &state)})
	if res == cmFailed {
		state = StateError
	}
	return connectStatus(res, state, out)
}

// ensure the verbs conn satisfies the ping loops' interface.
var _ conn = (*verbsConn)(nil)
