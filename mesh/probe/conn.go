package probe

import (
	"context"
	"errors"
	"io"
	"net/netip"
	"time"

	"github.com/gorping/gorping/rping"
)

// Conn is one probing connection: *rping.Prober, a fake in host tests, a simulated one
// in test/campaign.
type Conn interface {
	Ping(timeout time.Duration) (time.Duration, error)
	// LastSplit is the last successful ping's RTT split by the NIC's completion
	// timestamps (ok false where there is none); TSSource is where the connection's
	// split comes from, "nic" or "sw" (rping.Prober's).
	LastSplit() (nic, host time.Duration, ok bool)
	TSSource() string
	Done() <-chan struct{}
	Device() string
	Port() int
	Flow() rping.Flow
	Close() error
}

// Dial opens a Conn to addr from src (zero: the dialer's default, --source or the
// route's) for the target's path (its index; /probe's is 0). ctx is the connection's
// life; the dial is bounded by the dialer itself. log receives rping's lines about the
// connection. Errors carry a reason as *rping.ProbeError.
type Dial func(ctx context.Context, src netip.Addr, addr netip.AddrPort, path int, log io.Writer) (Conn, error)

// RPing dials with rping.DialProbe; defaultSrc is --source.
func RPing(defaultSrc netip.Addr, size int, connectTimeout time.Duration) Dial {
	// The path needs nothing of its own: each dial is a new cm_id, QP and so flow.
	return func(ctx context.Context, src netip.Addr, addr netip.AddrPort, _ int, log io.Writer) (Conn, error) {
		if !src.IsValid() {
			src = defaultSrc
		}
		p, err := rping.DialProbe(ctx, rping.ProbeConfig{Target: addr, Source: src, Size: size,
			ConnectTimeout: connectTimeout, Log: log})
		if err != nil {
			return nil, err
		}
		return p, nil
	}
}

// Reason is the failure reason of err.
func Reason(err error) string {
	var pe *rping.ProbeError
	if errors.As(err, &pe) {
		return pe.Reason
	}
	return rping.ReasonConnectError
}

// ReasonResolve is the failure reason the agent itself adds to rping's: the target's
// name did not resolve.
const ReasonResolve = "resolve_error"

// Reasons lists what a probe or a slot can fail with, for the docs and tests.
var Reasons = []string{rping.ReasonNoDevice, rping.ReasonAddrError, rping.ReasonRouteError,
	rping.ReasonConnectRefused, rping.ReasonUnreachable, rping.ReasonConnectError, rping.ReasonConnectTimeout,
	rping.ReasonSetupError, rping.ReasonTimeout, rping.ReasonDisconnected, rping.ReasonDeviceRemoved,
	rping.ReasonAsyncError, rping.ReasonDataMismatch, rping.ReasonCQError, rping.ReasonPostError,
	rping.ReasonProtocolError, ReasonResolve}
