package rping

import (
	"context"
	"errors"
	"net/netip"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/gorping/gorping/rdmacm"
	"github.com/gorping/gorping/rping/explain"
)

// The server's path: bind, listen, and per connection request setupConn and up with
// accept (the client's setupConn and up with connectClient), then the ping loop.

func runServer(ctx context.Context, cfg *Config, out *printer, listener cmID) int {
	defer func() {
		out.debugf("destroy cm_id %p\n", listener)
		listener.Destroy()
	}()
	if err := listener.Bind(netip.AddrPortFrom(cfg.Addr, cfg.Port)); err != nil {
		perror(out.stderr, "rdma_bind_addr", err)
		if errors.Is(err, unix.ENODEV) {
			out.hint(explain.HostNet(cfg.host).NoDevice(netip.Addr{}, cfg.Addr))
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
			out.errorf("wait for CONNECT_REQUEST state %d\n", int(stateIdle))
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

// wildcard or its device opens, else the hint. The kernel binds a loopback
// address without a device; only InfiniBand loopback reaches such a listener
// (rping then listens in vain on RoCE and iWARP).
func boundDevice(listener cmID, cfg *Config) string {
	addr, net := cfg.Addr, explain.HostNet(cfg.host)
	if addr.IsUnspecified() {
		return ""
	}
	ai, err := listener.Query()
	if err != nil {
		return "" // the first connection will tell
	}
	if ai.NodeGUID == 0 {
		return net.Unbound(addr)
	}
	return probeDevice(listener, cfg)
}

// nextRequest waits for the next CONNECT_REQUEST on the listener. Other events
// are printed and skipped (error events on a listener concern no session).
func nextRequest(ctx context.Context, out *printer, listener cmID) (cmID, int) {
	for {
		ev, err := listener.Event(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil, exitInterrupted
			}
			out.errorf("rdma_get_cm_event: %s\n", strerror(err))
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
func servePersistent(ctx context.Context, cfg *Config, out *printer, listener cmID) int {
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
	if st := c.up(ctx, cfg, func(ctx context.Context) int { return accept(ctx, c, out, connPolicy(cfg.Timeout)) }); st != 0 {
		return st
	}
	return c.converse(cfg, runPingServer)
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
	state := stateConnectRequest
	res := waitCM(ctx, out, c.id, cmWait{label: "child", deadline: deadline,
		timeout: func() {
			out.errorf("rping server: client %s did not complete the connection for %s: "+
				"its host went down or the network between is partitioned\n", c.remote(), secs(pol.bound))
		},
		step: connectStep(out, "server", &state)})
	if res == cmFailed {
		state = stateError
	}
	return connectStatus(res, state, out)
}
