package rping

import (
	"context"
	"fmt"
	"io"
	"net/netip"
)

// ResponderConfig describes the persistent server Respond runs.
type ResponderConfig struct {
	Addr netip.Addr // bind address; zero: :: (IPv6 and IPv4)
	Port uint16     // 0: DefaultPort
	Size int        // the server's buffer (rping -S); 0: DefaultSize. Larger clients are served too.
	// Log receives rping's lines (one per Write, from concurrent sessions).
	Log io.Writer
	// Listening, if set, is called once the listener is up.
	Listening func()
}

// ResponderError is why Respond stopped before its context ended. Status is the exit
// status rping -s -P would have had (19: no RDMA device, 255: the device went away or
// the address could not be bound); rping's lines on Log say more.
type ResponderError struct{ Status int }

func (e *ResponderError) Error() string {
	if e.Status == exitNoDevice {
		return "no RDMA devices were detected"
	}
	return fmt.Sprintf("persistent rping server stopped (status %d)", e.Status)
}

// Respond runs rping's persistent server (-s -P) until ctx ends, and then returns nil once
// every session has ended and everything is released. It is Run with a server's
// Config, so every guarantee of -P holds: each client is served by its own connection,
// hostile clients (bogus adverts, oversized pings, leaving mid-ping) end only their own
// session. If the server stops by itself (no device, bind failure, device removal) it
// returns a *ResponderError; the caller may start it again.
func Respond(ctx context.Context, cfg ResponderConfig) error {
	rc := DefaultConfig()
	rc.Server, rc.Persistent = true, true
	rc.Addr = cfg.Addr
	if !rc.Addr.IsValid() {
		rc.Addr = netip.IPv6Unspecified()
	}
	if cfg.Port != 0 {
		rc.Port = cfg.Port
	}
	if cfg.Size != 0 {
		rc.Size = cfg.Size
	}
	rc.Stdout = io.Discard
	rc.Stderr = cfg.Log
	if rc.Stderr == nil {
		rc.Stderr = io.Discard
	}
	rc.listening = cfg.Listening
	st := Run(ctx, rc)
	if ctx.Err() != nil {
		return nil
	}
	return &ResponderError{Status: st}
}
