package rping

import (
	"context"
	"errors"
	"fmt"
	"time"

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

// runRDMA is one run on its own event channel: the server (runServer) or the client
// (runClient), ended by a device removal as rping's CM thread ends it.
func runRDMA(ctx context.Context, cfg Config) int {
	out := &printer{stdout: cfg.Stdout, stderr: cfg.Stderr, debug: cfg.Debug}
	r, st := openCM(ctx, &cfg, out)
	if r == nil {
		return st
	}
	return r.close(nil, runWith(r.ctx, &cfg, out, r.cm))
}

// runWith is the server or client on an open event channel.
func runWith(ctx context.Context, cfg *Config, out *printer, cm cmChannel) int {
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
	out.errorf("rdma_get_cm_event: %s\n", strerror(err))
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

// up brings a set-up connection up, the same way for rping's client, its server and
// the prober: it watches the verbs context's asynchronous events (subscribed before
// connecting, so no event of this QP is missed; a fatal one, a QP or CQ error, a port
// error, a fatal device, ends the connection's life with its message), starts the
// completion path, connects (connectClient) or accepts (accept), then starts the CM
// goroutine and sets the stall bound from the QP. ctx is the run's; the connection's
// life (c.life) ends with it. On failure it has printed rping's lines and what the port
// and the events tell, and returns the exit status; the caller still closes c.
func (c *verbsConn) up(ctx context.Context, cfg *Config, connect func(context.Context) int) int {
	c.life, c.end = context.WithCancelCause(ctx)
	c.sub = c.vctx.SubscribeAsync() // the context may be shared: other connections see its events too
	c.aw = watchAsync(c.life, c.sub.Next, c.dev.Name, c.qp, c.cq, c.port, c.out, c.end)
	c.start(c.life)
	if ret := connect(c.life); ret != 0 {
		if ret == exitInterrupted || ret == exitTimeout {
			return asyncStatus(c.life, ret)
		}
		c.out.errorf("connect error %d\n", ret)
		c.explain()
		return statusOf(ret)
	}
	c.watchCM()
	c.policy = qpPolicy(c.qp, cfg.Timeout)
	c.checkPathMTU(cfg)
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

// explain says, after a failure, what the connection's port and asynchronous events
// tell about it (the async watch prints at most one line per connection).
func (c *verbsConn) explain() {
	pa, err := c.vctx.QueryPort(c.port)
	// A link that went down fails the QP's work requests at once, a
	// moment before rxe marks the port DOWN and queues PORT_ERR: for a
	// failure a lost link can cause, give the port's state (or the
	// watcher's event) a bounded moment to catch up.
	if c.wait != nil && linkLossStatus(c.wait.firstErr) {
		for deadline := time.Now().Add(time.Second); err == nil && pa.State == uverbs.PortActive &&
			!c.aw.said.Load() && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
			pa, err = c.vctx.QueryPort(c.port)
		}
	}
	c.aw.explain(c.dev.Name, c.port, pa.State, err)
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

// ensure the verbs conn satisfies the ping loops' interface.
var _ conn = (*verbsConn)(nil)
