package rping

import (
	"context"
	"fmt"
	"time"

	"github.com/gorping/gorping/rdmacm"
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
