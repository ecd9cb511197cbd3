package rping

// The prober: rping's client kept connected for a long-running agent (gorping mesh), which
// asks for one ping at a time. It is runClient and converse taken apart at the seams the
// agent needs: the connection setup (newVerbsConn, setupBuffers, connectClient) and the
// ping (pinger.clientPing) are rping's own; only the waits around them differ.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/gorping/gorping/rdmacm"
	"github.com/gorping/gorping/uverbs"
)

// Probe failure reasons (ProbeError.Reason). A failed work completion reports its status
// name in lower case instead ("retry_exc_err", "rem_access_err", ...; uverbs.WCStatus).
const (
	ReasonNoDevice       = "no_device"       // no RDMA device, or rdma_cm cannot be opened
	ReasonAddrError      = "addr_error"      // address resolution failed (no RDMA device for the route, ...)
	ReasonRouteError     = "route_error"     // route resolution failed
	ReasonConnectRefused = "connect_refused" // the peer rejected the connection (nothing listens on the port)
	ReasonUnreachable    = "unreachable"     // the peer did not answer the connection request
	ReasonConnectError   = "connect_error"   // another connection failure
	ReasonConnectTimeout = "connect_timeout" // resolution and connection did not finish within ConnectTimeout
	ReasonSetupError     = "setup_error"     // creating the verbs objects failed (device, memlock, ...)
	ReasonTimeout        = "timeout"         // the ping did not complete within its timeout
	ReasonDisconnected   = "disconnected"    // the peer left
	ReasonDeviceRemoved  = "device_removed"  // the local RDMA device went away
	ReasonAsyncError     = "async_error"     // a fatal asynchronous event (QP/CQ error, port down, device fatal)
	ReasonDataMismatch   = "data_mismatch"   // the echo differs from what was sent
	ReasonCQError        = "cq_error"        // polling or arming the completion queue failed
	ReasonPostError      = "post_error"      // posting a work request failed
	ReasonProtocolError  = "protocol_error"  // the peer answered out of turn
	ReasonCanceled       = "canceled"        // the prober's context ended (shutdown) or it was closed
)

// ProbeError is why a dial or a ping failed: Reason is one of the Reason constants or a
// work completion status name, short and fit for a metric label; Err says more.
type ProbeError struct {
	Reason string
	Err    error
}

func (e *ProbeError) Error() string {
	if e.Err == nil {
		return e.Reason
	}
	return e.Reason + ": " + e.Err.Error()
}

func (e *ProbeError) Unwrap() error { return e.Err }

// ProbeConfig describes the connection of a Prober.
type ProbeConfig struct {
	Target netip.AddrPort // the rping server (any: gorping -s -P, stock rping -s -P, a mesh responder)
	Source netip.Addr     // source address (rping -I); zero: the route's
	Size   int            // ping size (rping -S); 0: DefaultSize
	// ConnectTimeout bounds address and route resolution and the connection; 0: 5 s.
	ConnectTimeout time.Duration
	// Log receives rping's lines about the connection (its error lines, e.g. "cq
	// completion failed status 12"), one line per Write; nil discards them.
	Log io.Writer
}

const defaultConnectTimeout = 5 * time.Second

var (
	errProbeTimeout = errors.New("ping timed out")
	errProbeClosed  = errors.New("prober closed")
)

// Prober is one rping client connection kept open for single pings. Ping and Close are
// not safe for concurrent use with each other; Done, Device and Port are.
type Prober struct {
	cm      *rdmacm.Channel
	id      *rdmacm.ID // until the verbs connection owns it
	c       *verbsConn
	pg      *pinger
	sub     *uverbs.AsyncEvents
	aw      *asyncWatch
	out     *printer
	ctx     context.Context // the prober's life; its cause says why it ended
	cancel  context.CancelCauseFunc
	timer   *time.Timer // the ping in flight's deadline; firing ends ctx
	watched chan struct{}
	seq     int
	err     *ProbeError // set once a ping failed: the connection is unusable
	once    sync.Once
}

// DialProbe connects to cfg.Target as rping -c does (the same resolution, verbs objects,
// buffers and connection) and returns the prober, or a *ProbeError. ctx is the prober's
// life: when it ends, a ping in flight fails (ReasonCanceled) and the prober is spent.
// Resolution and connection are bounded by cfg.ConnectTimeout.
func DialProbe(ctx context.Context, cfg ProbeConfig) (*Prober, error) {
	if cfg.Size == 0 {
		cfg.Size = DefaultSize
	}
	if cfg.Size < MinSize || cfg.Size > MaxSize {
		return nil, &ProbeError{ReasonSetupError, fmt.Errorf("size %d outside %d..%d", cfg.Size, MinSize, MaxSize)}
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = defaultConnectTimeout
	}
	log := cfg.Log
	if log == nil {
		log = io.Discard
	}
	n, err := countDevices(uverbs.Host{})
	if err != nil {
		return nil, &ProbeError{ReasonNoDevice, err}
	}
	if n == 0 {
		return nil, &ProbeError{ReasonNoDevice, errors.New("no RDMA devices were detected")}
	}
	cm, err := rdmacm.Open()
	if err != nil {
		return nil, &ProbeError{ReasonNoDevice, err}
	}
	rc := Config{Addr: cfg.Target.Addr(), SrcAddr: cfg.Source, Port: cfg.Target.Port(), Size: cfg.Size,
		Validate: true, Stdout: io.Discard, Stderr: log}
	p := &Prober{cm: cm, watched: make(chan struct{})}
	p.ctx, p.cancel = context.WithCancelCause(ctx)
	// As in runRDMA: a device removal ends the prober, whoever is reading events.
	p.out = &printer{stdout: io.Discard, stderr: log}
	p.out.removal = &removal{stderr: log, cancel: p.cancel, gone: cm.Removed()}
	go func() {
		defer close(p.watched)
		select {
		case <-cm.Removed():
			p.out.deviceRemoved()
		case <-p.ctx.Done():
		}
	}()
	if err := p.dial(&rc, cfg.ConnectTimeout); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

func (p *Prober) dial(rc *Config, timeout time.Duration) *ProbeError {
	dctx, cancel := context.WithTimeout(p.ctx, timeout)
	defer cancel()
	id, err := p.cm.CreateID()
	if err != nil {
		return &ProbeError{ReasonSetupError, err}
	}
	p.id = id
	if perr := resolveRoute(dctx, id, rc); perr != nil {
		return p.ctxReason(dctx, perr)
	}
	c, ret := newVerbsConn(id, rc, p.out, false)
	if ret != 0 {
		return &ProbeError{ReasonSetupError, fmt.Errorf("setup_qp failed: %d", ret)}
	}
	p.c, p.id = c, nil // c.close destroys the id from now on
	if ret := c.setupBuffers(rc.Size, true); ret != 0 {
		return &ProbeError{ReasonSetupError, fmt.Errorf("rping_setup_buffers failed: %d", ret)}
	}
	if err := c.PostRecv(); err != nil {
		return &ProbeError{ReasonSetupError, fmt.Errorf("ibv_post_recv: %w", err)}
	}
	// As in converse: fatal asynchronous events of the QP, CQ or port end the prober.
	p.sub = c.vctx.SubscribeAsync()
	p.aw = watchAsync(p.ctx, p.sub.Next, c.dev.Name, c.qp, c.cq, c.port, p.out, p.cancel)
	c.start(p.ctx)
	// The dial deadline (dctx) bounds the connection, not the stall policy.
	if ret := connectClient(dctx, c, p.out, StateRouteResolved, stallPolicy{}, netip.AddrPortFrom(rc.Addr, rc.Port).String()); ret != 0 {
		perr := &ProbeError{ReasonConnectError, fmt.Errorf("rdma_connect to %s: status %d", netip.AddrPortFrom(rc.Addr, rc.Port), ret)}
		if ev := p.out.cmErr; p.out.sawCMErr {
			perr = &ProbeError{cmEventReason(ev.Type), fmt.Errorf("rdma_connect to %s: cma event %s, error %d",
				netip.AddrPortFrom(rc.Addr, rc.Port), ev.Type, ev.Status)}
		}
		return p.ctxReason(dctx, perr)
	}
	c.watchCM()
	p.pg = newPinger(c, rc, false)
	p.pg.out.line = nil // only -v prints ping data; no 64 KiB line buffer per target
	p.timer = time.AfterFunc(time.Hour, func() { p.cancel(errProbeTimeout) })
	p.timer.Stop()
	return nil
}

// ctxReason replaces perr by what ended the dial's context, if it ended: the prober's end
// (removal, close) or the connect timeout.
func (p *Prober) ctxReason(dctx context.Context, perr *ProbeError) *ProbeError {
	if r := p.endReason(); r != "" {
		return &ProbeError{r, context.Cause(p.ctx)}
	}
	if dctx.Err() != nil {
		return &ProbeError{ReasonConnectTimeout, perr}
	}
	return perr
}

// endReason is why the prober's context ended, "" while it has not.
func (p *Prober) endReason() string {
	if p.ctx.Err() == nil {
		return ""
	}
	cause := context.Cause(p.ctx)
	var af *asyncFatal
	switch {
	case errors.Is(cause, errProbeTimeout):
		return ReasonTimeout
	case errors.Is(cause, errDeviceRemoved):
		return ReasonDeviceRemoved
	case errors.As(cause, &af):
		return ReasonAsyncError
	}
	return ReasonCanceled
}

// resolveRoute is the resolution half of runClient, reporting failures as reasons.
func resolveRoute(ctx context.Context, id *rdmacm.ID, rc *Config) *ProbeError {
	var src netip.AddrPort
	if rc.HasSrcAddr() {
		src = netip.AddrPortFrom(rc.SrcAddr, 0)
	}
	if err := id.ResolveAddr(src, netip.AddrPortFrom(rc.Addr, rc.Port), resolveTimeout); err != nil {
		return &ProbeError{ReasonAddrError, fmt.Errorf("rdma_resolve_addr: %s", Strerror(err))}
	}
	for {
		ev, err := id.Event(ctx)
		if err != nil {
			return &ProbeError{ReasonCanceled, err}
		}
		switch ev.Type {
		case rdmacm.EventAddrResolved:
			if err := id.ResolveRoute(resolveTimeout); err != nil {
				return &ProbeError{ReasonRouteError, fmt.Errorf("rdma_resolve_route: %s", Strerror(err))}
			}
		case rdmacm.EventRouteResolved:
			return nil
		case rdmacm.EventDeviceRemoval:
			return &ProbeError{ReasonDeviceRemoved, errDeviceRemoved}
		case rdmacm.EventAddrError, rdmacm.EventRouteError:
			return &ProbeError{cmEventReason(ev.Type), fmt.Errorf("cma event %s, error %d", ev.Type, ev.Status)}
		}
	}
}

// cmEventReason names an error CM event.
func cmEventReason(t rdmacm.EventType) string {
	switch t {
	case rdmacm.EventAddrError:
		return ReasonAddrError
	case rdmacm.EventRouteError:
		return ReasonRouteError
	case rdmacm.EventRejected:
		return ReasonConnectRefused
	case rdmacm.EventUnreachable:
		return ReasonUnreachable
	case rdmacm.EventDeviceRemoval:
		return ReasonDeviceRemoved
	}
	return ReasonConnectError
}

// Ping runs one rping ping (advert, RDMA READ, go-ahead, advert, RDMA WRITE, go-ahead,
// the echo compared) and returns its round-trip time, timed from just before the
// payload is filled to the echo's check (the fill and check of the 64-byte default
// payload add tens of nanoseconds to what --stats reports). A ping that does not finish
// within timeout fails with ReasonTimeout. After a failure the prober is spent: every
// later Ping returns the same *ProbeError, and the caller closes it and dials anew.
// In steady state Ping allocates nothing.
func (p *Prober) Ping(timeout time.Duration) (time.Duration, error) {
	if p.err != nil {
		return 0, p.err
	}
	if r := p.endReason(); r != "" {
		p.err = &ProbeError{r, context.Cause(p.ctx)}
		return 0, p.err
	}
	p.timer.Reset(timeout)
	t0 := time.Now()
	ret := p.pg.clientPing(p.ctx, p.seq)
	rtt := time.Since(t0)
	fired := !p.timer.Stop()
	p.seq++
	if ret == 0 && !fired {
		return rtt, nil
	}
	p.err = p.failure(ret)
	return 0, p.err
}

// failure says why clientPing returned ret.
func (p *Prober) failure(ret int) *ProbeError {
	if r := p.endReason(); r != "" {
		return &ProbeError{r, context.Cause(p.ctx)}
	}
	w := p.c.wait
	switch {
	case w.firstErr != uverbs.WCSuccess:
		return &ProbeError{strings.ToLower(w.firstErr.String()), errors.New(w.firstErr.Cause())}
	case p.pg.state == StateDisconnected:
		return &ProbeError{ReasonDisconnected, errors.New("the peer disconnected")}
	case w.failed:
		return &ProbeError{ReasonCQError, errors.New("the completion queue failed")}
	case ret > 0:
		return &ProbeError{ReasonPostError, fmt.Errorf("post send error %d", ret)}
	case p.pg.state == StateRDMAWriteComplete:
		return &ProbeError{ReasonDataMismatch, errors.New("the echo differs from the payload")}
	}
	return &ProbeError{ReasonProtocolError, fmt.Errorf("ping ended in state %s", p.pg.state)}
}

// Done is closed when the prober can no longer ping: its device went away, a fatal
// asynchronous event hit it, a ping timed out, its context ended or it was closed.
func (p *Prober) Done() <-chan struct{} { return p.ctx.Done() }

// Device is the local RDMA device of the connection ("rxe0").
func (p *Prober) Device() string { return p.c.dev.Name }

// Port is the local port of the connection.
func (p *Prober) Port() int { return int(p.c.port) }

// Close disconnects and releases everything the prober holds (QP, CQ, MRs, buffers,
// cm_id, event channel), as rping's client does at its end. It may be called more than
// once.
func (p *Prober) Close() error {
	p.once.Do(func() {
		if p.timer != nil {
			p.timer.Stop()
		}
		if c := p.c; c != nil {
			if c.cancel != nil {
				c.disconnect()
			}
			if p.aw != nil {
				p.aw.stop()
				p.sub.Close()
			}
			c.close()
		} else if p.id != nil {
			p.id.Destroy()
		}
		p.cancel(errProbeClosed)
		p.cm.Close()
		<-p.watched
		if p.err == nil {
			p.err = &ProbeError{ReasonCanceled, errProbeClosed}
		}
	})
	return nil
}
