package rping

import (
	"context"
	"time"

	"github.com/gorping/gorping/rdmacm"
)

// cmWait is one of rping's waits for the CM events of an ID before the ping loop: the
// client's address and route resolution, its connection, the server's accept. They
// share how events are read, printed and given up on; they differ in what an event does
// to the wait (step), the hint after an error event, and the deadline.
type cmWait struct {
	label    string    // "parent" or "child", for the cma_event debug line
	deadline time.Time // zero: none
	// timeout prints why the deadline ran out.
	timeout func()
	// onError runs after an error event's line (cmError), before the context is
	// looked at; it prints the event's hint, if any.
	onError func(ev rdmacm.Event)
	// step handles any other event.
	step func(ev rdmacm.Event) cmStep
}

// cmStep is what one event did to a wait.
type cmStep uint8

const (
	cmUnhandled cmStep = iota // not for this wait: "unhandled event: ..., ignoring"
	cmWaiting                 // handled; the wait goes on
	cmEnd                     // the wait is over; its state says how
)

// cmResult is how a wait ended.
type cmResult uint8

const (
	cmOver     cmResult = iota // step ended it
	cmFailed                   // an error event (its line is out)
	cmStopped                  // the context ended: a signal, -w, a device removal; silent
	cmTimedOut                 // the deadline ran out (timeout has said why)
	cmBroken                   // reading the events failed (rping's line is out)
)

// waitCM reads id's events until w's step ends the wait, an error event arrives, ctx
// ends, the deadline passes or reading fails.
func waitCM(ctx context.Context, out *printer, id cmID, w cmWait) cmResult {
	wctx := ctx
	if !w.deadline.IsZero() {
		var cancel context.CancelFunc
		wctx, cancel = context.WithDeadline(ctx, w.deadline)
		defer cancel()
	}
	for {
		ev, err := id.Event(wctx)
		if err != nil {
			if ctx.Err() == nil && wctx.Err() != nil {
				w.timeout()
				return cmTimedOut
			}
			if quit(ctx, out, err) == exitInterrupted {
				return cmStopped
			}
			return cmBroken
		}
		if out.deviceGone() {
			return cmStopped
		}
		out.debugf("cma_event type %s cma_id %p (%s)\n", ev.Type, id, w.label)
		if cmError(out, ev) {
			if w.onError != nil {
				w.onError(ev)
			}
			if ctx.Err() != nil { // a device removal
				return cmStopped
			}
			return cmFailed
		}
		switch w.step(ev) {
		case cmEnd:
			return cmOver
		case cmUnhandled:
			out.errorf("unhandled event: %s, ignoring\n", ev.Type)
		}
	}
}

// stallDeadline is when a connection phase that starts now gives up under pol (zero:
// never).
func stallDeadline(pol stallPolicy) time.Time {
	if pol.bound <= 0 {
		return time.Time{}
	}
	return time.Now().Add(pol.bound)
}
