package rping

// The prober: rping's client kept connected for a long-running agent (gorping mesh),
// which asks for one ping at a time. It dials as Run's client does (openCM, then
// dialClient: resolution with the device check, verbs objects, buffers, the connection,
// the removal and async-event watches) and pings with the client's own ping
// (pinger.clientPing); only what it reports differs: a failure reason instead of an exit
// status, and rping's lines go to a log.

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

// ProbeConfig describes the connection of a Prober. An agent with several local RDMA
// ports (rails) dials one Prober per source address; several connections to one target
// are several Probers.
type ProbeConfig struct {
	Target netip.AddrPort // the rping server (any: gorping -s -P, stock rping -s -P, a mesh responder)
	Source netip.Addr     // source address (rping -I): picks the local port; zero: the route's
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

// Prober is one rping client connection kept open for single pings. Ping, LastSplit, Err
// and Close are not safe for concurrent use with each other; Done, Device, Port, Flow and
// TSSource are.
type Prober struct {
	run   *cmRun     // the event channel and its removal watch
	c     *verbsConn // the connection; its life (c.life) is the prober's
	pg    *pinger
	lines *lineLog
	timer *time.Timer // the ping in flight's deadline; firing ends the connection's life
	seq   int
	flow  Flow
	err   *ProbeError // set once the prober is spent
	once  sync.Once

	// The last ping's NIC split (LastSplit), valid if splitOK; the pinger's nicClock
	// (pg.ts) is set only on a connection whose CQ stamps completions.
	nic, host time.Duration
	splitOK   bool
}

// DialProbe connects to cfg.Target as rping -c does, on the same path (the same
// resolution and device check, verbs objects, buffers and connection), and returns the
// prober, or a *ProbeError. ctx is the prober's life: when it ends, a ping in flight
// fails (ReasonCanceled) and the prober is spent. Resolution and connection are bounded
// by cfg.ConnectTimeout.
func DialProbe(ctx context.Context, cfg ProbeConfig) (*Prober, error) {
	return dialProbe(ctx, cfg, cfg.client())
}

// client is the rping client Config a prober dials with. No stall bound: the connection
// is bounded by ConnectTimeout, each ping by its own timeout.
func (cfg ProbeConfig) client() Config {
	log := cfg.Log
	if log == nil {
		log = io.Discard
	}
	return Config{Addr: cfg.Target.Addr(), SrcAddr: cfg.Source, Port: cfg.Target.Port(), Size: cfg.Size,
		Validate: true, Timeout: NoTimeout, Stdout: io.Discard, Stderr: log, probe: true}
}

// dialProbe is DialProbe with the client Config rc, which host tests give their host,
// fake CM and device model.
func dialProbe(ctx context.Context, cfg ProbeConfig, rc Config) (*Prober, error) {
	if rc.Size == 0 {
		rc.Size = DefaultSize
	}
	if rc.Size < MinSize || rc.Size > MaxSize {
		return nil, &ProbeError{ReasonSetupError, fmt.Errorf("size %d outside %d..%d", rc.Size, MinSize, MaxSize)}
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = defaultConnectTimeout
	}
	by := time.Now().Add(cfg.ConnectTimeout)
	p := &Prober{lines: &lineLog{w: rc.Stderr}}
	rc.Stderr = p.lines
	out := &printer{stdout: io.Discard, stderr: p.lines}
	r, _ := openCM(ctx, &rc, out)
	if r == nil {
		return nil, &ProbeError{ReasonNoDevice, p.lines.first()}
	}
	p.run = r
	id, err := r.cm.CreateID()
	if err != nil {
		r.close(errProbeClosed, 0)
		return nil, &ProbeError{ReasonSetupError, fmt.Errorf("rdma_create_id: %w", err)}
	}
	c, step, st := dialClient(r.ctx, &rc, out, id, by)
	if c == nil {
		perr := p.dialFailure(out, step, st)
		r.close(errProbeClosed, 0)
		return nil, perr
	}
	p.c = c
	p.flow = flowOf(c, kernelVersion())
	p.pg = newPinger(c, &rc, false)
	p.pg.out.line = nil // only -v prints ping data; no 64 KiB line buffer per target
	// The split of each ping where the CQ stamps completions; the CLI's note on stderr
	// is one line in the prober's log instead (what the NIC stamps, or why it does not).
	if c.ts.conv != nil {
		p.pg.ts = &nicClock{ts: c.ts, out: &p.pg.out}
		p.pg.out.errorf("gorping: %s: NIC completion timestamps: each ping's RTT split into the NIC-timed part and the host's (ts_source=nic)\n", c.ts.device)
	} else if c.ts.note != "" {
		p.pg.out.errorf("gorping: %s: no NIC completion timestamps (%s); software round-trip times only (ts_source=sw)\n", c.ts.device, c.ts.note)
	}
	p.timer = time.AfterFunc(time.Hour, func() { c.end(errProbeTimeout) })
	p.timer.Stop()
	return p, nil
}

// dialFailure says why dialClient failed at step with exit status st.
func (p *Prober) dialFailure(out *printer, step dialStep, st int) *ProbeError {
	err := p.lines.first()
	if ctx := p.run.ctx; ctx.Err() != nil {
		return &ProbeError{endReason(ctx), context.Cause(ctx)}
	}
	switch {
	case st == exitTimeout:
		return &ProbeError{ReasonConnectTimeout, err}
	case out.sawCMErr:
		return &ProbeError{cmEventReason(out.cmErr.Type), err}
	}
	switch step {
	case stepAddr:
		return &ProbeError{ReasonAddrError, err}
	case stepRoute:
		return &ProbeError{ReasonRouteError, err}
	case stepSetup:
		return &ProbeError{ReasonSetupError, err}
	}
	return &ProbeError{ReasonConnectError, err}
}

// endReason is why a prober's context ended.
func endReason(ctx context.Context) string {
	cause := context.Cause(ctx)
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
// later Ping returns the same *ProbeError (Err), and the caller closes it and dials
// anew. In steady state Ping allocates nothing.
func (p *Prober) Ping(timeout time.Duration) (time.Duration, error) {
	p.splitOK = false
	if err := p.Err(); err != nil {
		return 0, err
	}
	p.timer.Reset(timeout)
	t0 := time.Now()
	ret := p.pg.clientPing(p.c.life, p.seq)
	rtt := time.Since(t0)
	fired := !p.timer.Stop()
	p.seq++
	if ret == 0 && !fired {
		if k := p.pg.ts; k != nil && k.ok {
			// k timed the ping from the first SEND's post to the last go-ahead, inside
			// rtt (which adds the payload's fill and check): its NIC part, allowed 0.1 %
			// over that for the clocks' rates, is capped at rtt so that nic + host = rtt.
			p.nic = min(k.nic, rtt)
			p.host, p.splitOK = rtt-p.nic, true
		}
		return rtt, nil
	}
	p.err = p.failure(ret)
	return 0, p.err
}

// Err is nil while the prober can ping; once it cannot (Done is closed, or a ping
// failed) it is the *ProbeError that says why, which every later Ping returns too.
func (p *Prober) Err() error {
	if p.err == nil && p.c.life.Err() != nil {
		p.err = &ProbeError{endReason(p.c.life), context.Cause(p.c.life)}
	}
	if p.err == nil {
		return nil
	}
	return p.err
}

// failure says why clientPing returned ret.
func (p *Prober) failure(ret int) *ProbeError {
	if ctx := p.c.life; ctx.Err() != nil {
		return &ProbeError{endReason(ctx), context.Cause(ctx)}
	}
	w := p.c.wait
	switch {
	case w.firstErr != uverbs.WCSuccess:
		return &ProbeError{strings.ToLower(w.firstErr.String()), errors.New(w.firstErr.Cause())}
	case p.pg.state == stateDisconnected:
		return &ProbeError{ReasonDisconnected, errors.New("the peer disconnected")}
	case w.failed:
		return &ProbeError{ReasonCQError, errors.New("the completion queue failed")}
	case ret > 0:
		return &ProbeError{ReasonPostError, fmt.Errorf("post send error %d", ret)}
	case p.pg.state == stateRDMAWriteComplete:
		return &ProbeError{ReasonDataMismatch, errors.New("the echo differs from the payload")}
	}
	return &ProbeError{ReasonProtocolError, fmt.Errorf("ping ended in state %s", p.pg.state)}
}

// Done is closed when the prober can no longer ping: its device went away, a fatal
// asynchronous event hit it, a ping timed out, its context ended or it was closed.
func (p *Prober) Done() <-chan struct{} { return p.c.life.Done() }

// TSSource says where the connection's RTT split comes from: "nic" where its CQ has
// NIC completion timestamps (mlx5: the device reports a timestamp mask and accepted the
// CQ and the QP with them), "sw" where it has none (rxe, siw, a device that refused
// them): software round-trip times only. It is the connection's, fixed at the dial.
func (p *Prober) TSSource() string { return p.c.ts.source() }

// LastSplit is the last successful ping's round trip split by the client NIC's
// completion timestamps (TSSource "nic"), as --stats splits it (nicts.go). nic is the
// NIC's time from the first SEND's send completion (an RC SEND completes when the
// responder's NIC acknowledges it) to the arrival of the last go-ahead, both stamped by
// the NIC: the READ, the WRITE and the messages between on the wire, the responder
// host's processing of both exchanges and this host's turnaround between them. host is
// the rest of what Ping returned (nic + host = rtt): this host's posting, waking and
// polling at the ping's two ends, the payload's fill and check, and the first SEND's
// trip to the responder's NIC and back (its acknowledgement). ok is false after a failed
// ping, on a "sw" connection, and for a ping whose NIC time does not fit in its software
// time (the two clocks disagreeing, said once in the log). It allocates nothing.
func (p *Prober) LastSplit() (nic, host time.Duration, ok bool) {
	if !p.splitOK {
		return 0, 0, false
	}
	return p.nic, p.host, true
}

// Device is the local RDMA device of the connection ("rxe0").
func (p *Prober) Device() string { return p.c.dev.Name }

// Port is the local port of the connection.
func (p *Prober) Port() int { return int(p.c.port) }

// Close disconnects and releases everything the prober holds (QP, CQ, MRs, buffers,
// cm_id, event channel), as rping's client does at its end. It may be called more than
// once.
func (p *Prober) Close() error {
	p.once.Do(func() {
		p.timer.Stop()
		p.c.disconnect()
		p.c.close()
		p.run.close(errProbeClosed, 0)
		if p.err == nil {
			p.err = &ProbeError{ReasonCanceled, errProbeClosed}
		}
	})
	return nil
}

// lineLog passes rping's lines on to the prober's log and keeps the first one since it
// was last asked (first): a dial's failure says what rping said first.
type lineLog struct {
	w    io.Writer
	mu   sync.Mutex
	line string
}

func (l *lineLog) Write(b []byte) (int, error) {
	l.mu.Lock()
	if l.line == "" {
		l.line = strings.TrimRight(string(b), "\n")
	}
	l.mu.Unlock()
	return l.w.Write(b)
}

// first is the first line written since the last call, as an error (nil if none).
func (l *lineLog) first() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.line
	l.line = ""
	if s == "" {
		return nil
	}
	return errors.New(s)
}
