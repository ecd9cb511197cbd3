package rping

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gorping/gorping/rdmacm"
	"github.com/gorping/gorping/rping/explain"
)

// The client's path. Run's client (runClient) and the prober (DialProbe) take the same
// one, dialClient: resolve the address (with librdmacm's check that the device opens)
// and the route, set the connection up (setupConn) and connect (up with connectClient).
// Run then runs the ping loop over it (converse); the prober pings one ping at a time.

func runClient(ctx context.Context, cfg *Config, out *printer, id cmID) int {
	c, _, st := dialClient(ctx, cfg, out, id, time.Time{})
	if c == nil {
		return st
	}
	defer c.close()
	return c.converse(cfg, runPingClient)
}

// dialStep is where a dial failed.
type dialStep uint8

const (
	stepAddr    dialStep = iota + 1 // address resolution, or the device check after it
	stepRoute                       // route resolution
	stepSetup                       // the verbs objects, buffers, the first RECV
	stepConnect                     // the connection
)

// dialClient is rping_bind_client, rping_setup_qp, rping_setup_buffers and
// rping_connect_client: from a new ID to a connection ready to ping. by, if not zero,
// bounds all of it (the prober's connect timeout); the connection's own wait is also
// bounded by --timeout's stall policy. On failure it has printed rping's lines and
// released everything, id included, and returns nil, the step that failed and the exit
// status.
func dialClient(ctx context.Context, cfg *Config, out *printer, id cmID, by time.Time) (*verbsConn, dialStep, int) {
	if step, st := resolve(ctx, cfg, out, id, by); st != 0 {
		return nil, step, st
	}
	c, st := setupConn(id, cfg, out, false)
	if st != 0 {
		return nil, stepSetup, st
	}
	peer := netip.AddrPortFrom(cfg.Addr, cfg.Port).String()
	if st := c.up(ctx, cfg, func(ctx context.Context) int {
		return connectClient(ctx, c, out, stateRouteResolved, connPolicy(cfg.Timeout), peer, by)
	}); st != 0 {
		c.close()
		return nil, stepConnect, st
	}
	return c, 0, 0
}

// resolve is rping_bind_client up to the route: resolve the server's address and the
// route to it, by by if not zero. On failure it has printed rping's lines and destroyed
// id, and returns the step that failed and the exit status.
func resolve(ctx context.Context, cfg *Config, out *printer, id cmID, by time.Time) (dialStep, int) {
	destroy := func(state testState, st int) (dialStep, int) {
		out.debugf("destroy cm_id %p\n", id)
		id.Destroy()
		if state >= stateAddrResolved {
			return stepRoute, st
		}
		return stepAddr, st
	}
	var src netip.AddrPort
	if cfg.HasSrcAddr() {
		src = netip.AddrPortFrom(cfg.SrcAddr, 0)
	}
	dst := netip.AddrPortFrom(cfg.Addr, cfg.Port)
	if err := id.ResolveAddr(src, dst, resolveTimeout); err != nil {
		perror(out.stderr, "rdma_resolve_addr", err)
		switch {
		case errors.Is(err, unix.ENODEV):
			out.hint(explain.HostNet(cfg.host).NoDevice(cfg.Addr, cfg.SrcAddr))
		case errors.Is(err, unix.ENETUNREACH):
			out.hint(explain.HostNet(cfg.host).Unreachable(cfg.Addr))
		}
		return destroy(stateIdle, exitFailure)
	}
	start := time.Now()
	r := &resolution{cfg: cfg, out: out, id: id, state: stateIdle}
	res := waitCM(ctx, out, id, cmWait{label: "parent", deadline: by, onError: r.errorHint, step: r.step,
		timeout: func() {
			out.errorf("rping client: the address and route of %s were not resolved within %s\n", dst, secs(by.Sub(start)))
		}})
	state := r.state // an error event leaves it: rping's main thread then finds it unchanged
	switch {
	case res == cmBroken:
		return destroy(state, exitFailure)
	case res == cmTimedOut:
		return destroy(state, exitTimeout)
	case res == cmStopped || ctx.Err() != nil: // a signal, -w, a device removal
		return destroy(state, exitInterrupted)
	case state != stateRouteResolved:
		out.errorf("waiting for addr/route resolution state %d\n", int(state))
		return destroy(state, exitFailure)
	}
	out.debugLine("rdma_resolve_addr - rdma_resolve_route successful\n")
	return 0, 0
}

// resolution is the client's wait for its address and route.
type resolution struct {
	cfg   *Config
	out   *printer
	id    cmID
	state testState
}

// errorHint explains an address or route error event.
func (r *resolution) errorHint(ev rdmacm.Event) {
	switch {
	case ev.Type == rdmacm.EventAddrError && ev.Status == -int32(unix.ENODEV):
		r.out.hint(explain.HostNet(r.cfg.host).NoDevice(r.cfg.Addr, r.cfg.SrcAddr))
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
		r.state = stateAddrResolved
		if err := r.id.ResolveRoute(resolveTimeout); err != nil {
			perror(r.out.stderr, "rdma_resolve_route", err)
			if errors.Is(err, unix.ENODEV) {
				r.out.hint(explain.HostNet(r.cfg.host).NoDevice(r.cfg.Addr, r.cfg.SrcAddr))
			}
			r.state = stateError
			return cmEnd
		}
		return cmWaiting
	case rdmacm.EventRouteResolved:
		r.state = stateRouteResolved
		return cmEnd
	}
	return cmUnhandled
}

// setupConn is what rping's client and server do with their connection's ID before

// connection (ESTABLISHED with an rdma_cm-driven QP; CONNECT_RESPONSE in -q
// mode, after which the application moves its QP and sends the RTU). The
// wait is bounded by pol (stall.go) and by by if not zero: without an answer it
// ends with exitTimeout and one line saying why, where the kernel's CM would retry
// its request for about 100 s.
func connectClient(ctx context.Context, c *verbsConn, out *printer, state testState, pol stallPolicy, peer string, by time.Time) int {
	probe := explain.NewCMProbe(c.host, c.dev, c.port)
	connected := time.Now()
	deadline := stallDeadline(pol)
	if !by.IsZero() && (deadline.IsZero() || by.Before(deadline)) {
		deadline = by
	}
	p := rdmacm.ConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: sendRetry, RNRRetryCount: sendRetry,
		QPNum:                 c.qp.Num(),
		MaxResponderResources: uint8(min(c.devAttr.MaxQPRdAtom, 255)),
		MaxInitiatorDepth:     uint8(min(c.devAttr.MaxQPInitRdAtom, 255))}
	if err := c.id.Connect(p); err != nil {
		perror(out.stderr, "rdma_connect", err)
		return -1
	}
	step := connectStep(out, "client", &state)
	res := waitCM(ctx, out, c.id, cmWait{label: "parent", deadline: deadline,
		timeout: func() {
			waited := deadline.Sub(connected)
			out.errorf("rping client: no answer to the connection request from %s for %s: %s\n",
				peer, secs(waited), probe.Cause("the server", waited))
		},
		onError: func(ev rdmacm.Event) {
			if ctx.Err() == nil && ev.Type == rdmacm.EventUnreachable && ev.Status == -int32(unix.ETIMEDOUT) {
				out.hint("gorping: the connection manager gave up: " + probe.Cause("the server", time.Since(connected)))
			}
		},
		step: func(ev rdmacm.Event) cmStep {
			if ev.Type == rdmacm.EventEstablished || ev.Type == rdmacm.EventConnectResponse {
				c.peerQPN = ev.Param.QPNum // the REP's QPN (IB, RoCE); iWARP's CM has none
			}
			return step(ev)
		}})
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
				out.hint(explain.IWARPSelfQP(c.dev.Name))
			}
			return -1
		}
	}
	out.debugLine("rdma_connect successful\n")
	return 0
}

// connectStep is the step of connectClient's and accept's waits: ESTABLISHED (for a
// client in -q mode CONNECT_RESPONSE) connects, DISCONNECTED ends the wait.
func connectStep(out *printer, role string, state *testState) func(rdmacm.Event) cmStep {
	return func(ev rdmacm.Event) cmStep {
		switch {
		case ev.Type == rdmacm.EventEstablished:
			out.debugLine("ESTABLISHED\n")
			*state = stateConnected
		case ev.Type == rdmacm.EventConnectResponse && role == "client":
			out.debugLine("CONNECT_RESPONSE\n")
			*state = stateConnected
		case ev.Type == rdmacm.EventDisconnected:
			out.errorf("%s DISCONNECT EVENT...\n", role)
			*state = stateDisconnected
		default:
			return cmUnhandled
		}
		return cmEnd
	}
}

// connectStatus is how connectClient and accept end a wait for the connection that
// ended in state: 0 once connected, exitInterrupted or exitTimeout (quietly; what
// needed saying is out), else rping's -1 after "wait for CONNECTED state".
func connectStatus(res cmResult, state testState, out *printer) int {
	switch res {
	case cmStopped:
		return exitInterrupted
	case cmTimedOut:
		return exitTimeout
	case cmBroken:
		return -1
	}
	if state != stateConnected {
		out.errorf("wait for CONNECTED state %d\n", int(state))
		return -1
	}
	return 0
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
		return explain.VerbsOpen(dev, err)
	}
	vctx.Close()
	return ""
}
