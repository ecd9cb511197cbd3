package rping

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorping/gorping/rdmacm"
	"github.com/gorping/gorping/uverbs"
)

// However many IDs report the removal, and from however many goroutines, the
// run prints rping's line once and its context ends with the removal cause.
func TestDeviceRemovedOncePerRun(t *testing.T) {
	var stderr syncBuffer
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	out := &printer{stdout: &bytes.Buffer{}, stderr: &stderr}
	out.removal = &removal{stderr: &stderr, cancel: cancel}
	if removed(ctx) {
		t.Fatal("removed before any removal")
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(out.deviceRemoved)
	}
	wg.Wait()
	if got := stderr.String(); got != removalLine {
		t.Fatalf("stderr %q, want %q once", got, removalLine)
	}
	if ctx.Err() == nil || !removed(ctx) {
		t.Fatalf("run context: err %v cause %v, want cancelled by the removal", ctx.Err(), context.Cause(ctx))
	}
	// cmError, the helper of every CM wait, reports a removal the same way.
	if !cmError(out, rdmacmRemoval()) || stderr.String() != removalLine {
		t.Fatalf("cmError on DEVICE_REMOVAL: stderr %q", stderr.String())
	}
}

// A cancellation that is no removal (SIGINT) is not taken for one.
func TestRemovedOnlyForRemoval(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(nil)
	if removed(ctx) {
		t.Fatal("a plain cancellation counts as a removal")
	}
}

func TestFatalAsync(t *testing.T) {
	qp, otherQP := &uverbs.QP{}, &uverbs.QP{}
	cq, otherCQ := &uverbs.CQ{}, &uverbs.CQ{}
	for _, tc := range []struct {
		ev   uverbs.AsyncEvent
		want string // "" = not fatal for this connection
	}{
		{uverbs.AsyncEvent{Type: uverbs.EventQPFatal, QP: qp}, "gorping: async event IBV_EVENT_QP_FATAL on QP 0 of rxe0: connection ended"},
		{uverbs.AsyncEvent{Type: uverbs.EventQPAccessErr, QP: qp}, "gorping: async event IBV_EVENT_QP_ACCESS_ERR on QP 0 of rxe0: connection ended"},
		{uverbs.AsyncEvent{Type: uverbs.EventQPReqErr, QP: qp}, "gorping: async event IBV_EVENT_QP_REQ_ERR on QP 0 of rxe0: connection ended"},
		{uverbs.AsyncEvent{Type: uverbs.EventQPFatal, QP: otherQP}, ""},
		{uverbs.AsyncEvent{Type: uverbs.EventQPFatal}, ""}, // a QP no longer alive
		{uverbs.AsyncEvent{Type: uverbs.EventCQErr, CQ: cq}, "gorping: async event IBV_EVENT_CQ_ERR on the completion queue of rxe0: connection ended"},
		{uverbs.AsyncEvent{Type: uverbs.EventCQErr, CQ: otherCQ}, ""},
		{uverbs.AsyncEvent{Type: uverbs.EventPortErr, Element: 1}, "gorping: async event IBV_EVENT_PORT_ERR on rxe0 port 1: connection ended"},
		{uverbs.AsyncEvent{Type: uverbs.EventPortErr, Element: 2}, ""},
		{uverbs.AsyncEvent{Type: uverbs.EventDeviceFatal, Element: 1}, "gorping: async event IBV_EVENT_DEVICE_FATAL on rxe0: connection ended"},
		{uverbs.AsyncEvent{Type: uverbs.EventPortActive, Element: 1}, ""},
		{uverbs.AsyncEvent{Type: uverbs.EventCommEst, QP: qp}, ""},
		{uverbs.AsyncEvent{Type: uverbs.EventGIDChange, Element: 1}, ""},
	} {
		msg, fatal := fatalAsync(tc.ev, "rxe0", qp, cq, 1)
		if msg != tc.want || fatal != (tc.want != "") {
			t.Errorf("%v (element %d): got %q %v, want %q", tc.ev.Type, tc.ev.Element, msg, fatal, tc.want)
		}
	}
}

// asyncFeed scripts a verbs context's async events.
type asyncFeed struct {
	evs  chan uverbs.AsyncEvent
	errs chan error
}

func (f *asyncFeed) next(ctx context.Context) (uverbs.AsyncEvent, error) {
	select {
	case ev := <-f.evs:
		return ev, nil
	case err := <-f.errs:
		return uverbs.AsyncEvent{}, err
	case <-ctx.Done():
		return uverbs.AsyncEvent{}, ctx.Err()
	}
}

func newAsyncFeed() *asyncFeed {
	return &asyncFeed{evs: make(chan uverbs.AsyncEvent, 8), errs: make(chan error, 1)}
}

// Harmless events pass; the first fatal one is printed once and ends the
// connection's context with a cause converse turns into status 255.
func TestWatchAsyncEndsConnection(t *testing.T) {
	qp := &uverbs.QP{}
	f := newAsyncFeed()
	var stderr syncBuffer
	out := &printer{stdout: &bytes.Buffer{}, stderr: &stderr}
	ctx, end := context.WithCancelCause(context.Background())
	defer end(nil)
	w := watchAsync(ctx, f.next, "rxe0", qp, nil, 1, out, end)
	defer w.stop()
	f.evs <- uverbs.AsyncEvent{Type: uverbs.EventPortActive, Element: 1}
	f.evs <- uverbs.AsyncEvent{Type: uverbs.EventQPFatal, QP: &uverbs.QP{}} // another connection's
	f.evs <- uverbs.AsyncEvent{Type: uverbs.EventPortErr, Element: 1}
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("PORT_ERR did not end the connection")
	}
	want := "gorping: async event IBV_EVENT_PORT_ERR on rxe0 port 1: connection ended\n"
	if got := stderr.String(); got != want {
		t.Fatalf("stderr %q, want %q", got, want)
	}
	if st := asyncStatus(ctx, exitInterrupted); st != exitFailure {
		t.Fatalf("status %d, want %d", st, exitFailure)
	}
}

// A read failure that is not the watch's own end (a disassociated device's
// event file says EIO) also ends the connection; ErrClosed and the watch's
// cancellation end only the watch.
func TestWatchAsyncReadErrors(t *testing.T) {
	for _, tc := range []struct {
		err   error
		ended bool
	}{
		{fmt.Errorf("uverbs: read async events: %w", errors.New("input/output error")), true},
		{uverbs.ErrClosed, false},
	} {
		f := newAsyncFeed()
		var stderr syncBuffer
		out := &printer{stdout: &bytes.Buffer{}, stderr: &stderr}
		ctx, end := context.WithCancelCause(context.Background())
		w := watchAsync(ctx, f.next, "rxe0", nil, nil, 1, out, end)
		f.errs <- tc.err
		if tc.ended {
			<-ctx.Done()
			if !strings.HasPrefix(stderr.String(), "gorping: async events of rxe0: ") || asyncStatus(ctx, 0) != exitFailure {
				t.Errorf("%v: stderr %q status %d", tc.err, stderr.String(), asyncStatus(ctx, 0))
			}
		}
		w.stop() // returns: the watch has ended
		if !tc.ended && (ctx.Err() != nil || stderr.String() != "") {
			t.Errorf("%v ended the connection (stderr %q)", tc.err, stderr.String())
		}
		end(nil)
	}
	// Cancelling the connection ends the watch quietly, with no cause of its own.
	f := newAsyncFeed()
	var stderr syncBuffer
	ctx, end := context.WithCancelCause(context.Background())
	w := watchAsync(ctx, f.next, "rxe0", nil, nil, 1, &printer{stderr: &stderr}, end)
	end(nil)
	w.stop()
	if stderr.String() != "" || asyncStatus(ctx, 0) != 0 {
		t.Fatalf("cancelled watch: stderr %q status %d", stderr.String(), asyncStatus(ctx, 0))
	}
}

func rdmacmRemoval() rdmacm.Event { return rdmacm.Event{Type: rdmacm.EventDeviceRemoval} }

// A connection that failed by itself on a port that is not ACTIVE gets one
// line saying so, unless an asynchronous event explained it already; explain
// never ends the connection (its status stays the failure's own).
func TestAsyncWatchExplain(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fatal  bool // PORT_ERR read before the failure
		state  uverbs.PortState
		err    error
		stderr string
	}{
		{"down", false, uverbs.PortDown, nil, "gorping: rxe0 port 1 is DOWN: connection ended\n"},
		{"active", false, uverbs.PortActive, nil, ""},
		{"query failed", false, 0, errors.New("EIO"), ""},
		{"after PORT_ERR", true, uverbs.PortDown, nil, "gorping: async event IBV_EVENT_PORT_ERR on rxe0 port 1: connection ended\n"},
	} {
		f := newAsyncFeed()
		var stderr syncBuffer
		ctx, end := context.WithCancelCause(context.Background())
		w := watchAsync(ctx, f.next, "rxe0", nil, nil, 1, &printer{stderr: &stderr}, end)
		if tc.fatal {
			f.evs <- uverbs.AsyncEvent{Type: uverbs.EventPortErr, Element: 1}
			<-ctx.Done()
		}
		w.explain("rxe0", 1, tc.state, tc.err)
		w.stop()
		if got := stderr.String(); got != tc.stderr {
			t.Errorf("%s: stderr %q, want %q", tc.name, got, tc.stderr)
		}
		if !tc.fatal && ctx.Err() != nil {
			t.Errorf("%s: explain ended the connection", tc.name)
		}
		end(nil)
	}
}

// Once the run's channel has seen a removal, every event loop that asks
// deviceGone first reports it (one line) instead of acting on the event.
func TestDeviceGone(t *testing.T) {
	gone := make(chan struct{})
	var stderr syncBuffer
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	out := &printer{stdout: &bytes.Buffer{}, stderr: &stderr}
	out.removal = &removal{stderr: &stderr, cancel: cancel, gone: gone}
	disc := rdmacm.Event{Type: rdmacm.EventDisconnected}
	if comp, ok := cmCompletion(out, disc, "server"); !ok || comp.kind != compDisconnected || stderr.String() != "server DISCONNECT EVENT...\n" {
		t.Fatalf("before the removal: %v %v, stderr %q", comp, ok, stderr.String())
	}
	close(gone)
	for range 2 {
		if comp, ok := cmCompletion(out, disc, "server"); ok {
			t.Fatalf("after the removal the loop got %v", comp)
		}
	}
	if want := "server DISCONNECT EVENT...\n" + removalLine; stderr.String() != want || !removed(ctx) {
		t.Fatalf("stderr %q (want %q), removed %v", stderr.String(), want, removed(ctx))
	}
	if (&printer{stderr: &stderr}).deviceGone() {
		t.Fatal("a printer outside a run reports a removal")
	}
}
