package rping

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/gorping/gorping/uverbs"
)

// removalLine is what rping's CM thread prints on RDMA_CM_EVENT_DEVICE_REMOVAL
// before it exits 255.
const removalLine = "cma detected device removal!!!!\n"

// errDeviceRemoved is the cause with which a run's context ends when its
// RDMA device goes away.
var errDeviceRemoved = errors.New("rping: RDMA device removed")

// removal ends a whole run on device removal, as rping's CM thread does with
// exit(-1): it prints rping's line once, however many IDs report the removal
// (listener, every connection), and cancels the run's context. Everything the
// run holds then unwinds through the paths a cancellation takes (quietly), and
// Run turns the cause into status 255. Unwinding is what the kernel needs: its
// removal waits until every rdma_cm id and (for rxe) every verbs context on
// the device is released.
type removal struct {
	once   sync.Once
	stderr io.Writer
	cancel context.CancelCauseFunc
	gone   <-chan struct{} // the event channel's Removed
}

func (r *removal) report() {
	r.once.Do(func() {
		io.WriteString(r.stderr, removalLine)
		r.cancel(errDeviceRemoved)
	})
}

// deviceRemoved reports a DEVICE_REMOVAL event: the line (once per run) and
// the end of the run. A printer outside a run only prints.
func (o *printer) deviceRemoved() {
	if o.removal == nil {
		io.WriteString(o.stderr, removalLine)
		return
	}
	o.removal.report()
}

// deviceGone reports whether the run's event channel has seen a device
// removal, and if so reports it (deviceRemoved). The channel signals a removal
// before it queues the event, so an event loop that asks this first never acts
// on an event that trails the removal (a DISCONNECTED of a connection the
// removal tore down).
func (o *printer) deviceGone() bool {
	if o.removal == nil || o.removal.gone == nil {
		return false
	}
	select {
	case <-o.removal.gone:
		o.removal.report()
		return true
	default:
		return false
	}
}

// removed reports whether the run's context ended because of a removal.
func removed(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), errDeviceRemoved)
}

// asyncFatal is the cause with which a connection's context ends on a fatal
// asynchronous event of its verbs context.
type asyncFatal struct{ msg string }

func (e *asyncFatal) Error() string { return e.msg }

// fatalAsync says whether ev ends the connection whose QP, CQ and port are
// given, and with which message. QP and CQ events concern only the object
// they name; port events only the connection's port.
func fatalAsync(ev uverbs.AsyncEvent, dev string, qp *uverbs.QP, cq *uverbs.CQ, port uint8) (string, bool) {
	name := "IBV_EVENT_" + ev.Type.String()
	switch ev.Type {
	case uverbs.EventQPFatal, uverbs.EventQPReqErr, uverbs.EventQPAccessErr, uverbs.EventPathMigErr:
		if ev.QP == nil || ev.QP != qp {
			return "", false
		}
		return fmt.Sprintf("gorping: async event %s on QP %d of %s: connection ended", name, qp.Num(), dev), true
	case uverbs.EventCQErr:
		if ev.CQ == nil || ev.CQ != cq {
			return "", false
		}
		return fmt.Sprintf("gorping: async event %s on the completion queue of %s: connection ended", name, dev), true
	case uverbs.EventPortErr:
		if ev.Element != uint64(port) {
			return "", false
		}
		return fmt.Sprintf("gorping: async event %s on %s port %d: connection ended", name, dev, port), true
	case uverbs.EventDeviceFatal:
		return fmt.Sprintf("gorping: async event %s on %s: connection ended", name, dev), true
	}
	return "", false
}

// asyncWatch reads a connection's asynchronous events while it runs.
type asyncWatch struct {
	out    *printer
	end    context.CancelCauseFunc
	once   sync.Once   // one explanatory line per connection
	said   atomic.Bool // the line is out
	cancel context.CancelFunc
	done   chan struct{}
}

// watchAsync reads a connection's asynchronous events (next is its
// subscription's Next) until ctx ends or stop is called. A fatal one
// (fatalAsync), or a failing read, is printed and ends the connection through
// end.
func watchAsync(ctx context.Context, next func(context.Context) (uverbs.AsyncEvent, error),
	dev string, qp *uverbs.QP, cq *uverbs.CQ, port uint8, out *printer, end context.CancelCauseFunc) *asyncWatch {
	wctx, cancel := context.WithCancel(ctx)
	w := &asyncWatch{out: out, end: end, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			ev, err := next(wctx)
			if err != nil {
				if wctx.Err() != nil || errors.Is(err, uverbs.ErrClosed) {
					return
				}
				// A device that went away under a driver that can
				// disassociate contexts: its event file fails (EIO).
				w.fatal(fmt.Sprintf("gorping: async events of %s: %v: connection ended", dev, err))
				return
			}
			if msg, fatal := fatalAsync(ev, dev, qp, cq, port); fatal {
				w.fatal(msg)
				return
			}
		}
	}()
	return w
}

// fatal prints msg (unless the connection has its explanation already) and
// ends the connection.
func (w *asyncWatch) fatal(msg string) {
	w.once.Do(func() {
		w.out.errorf("%s\n", msg)
		w.said.Store(true)
		w.end(&asyncFatal{msg})
	})
}

// explain is for a connection that failed by itself: if its port is not
// ACTIVE (state is QUERY_PORT's answer) and no asynchronous event has said
// so yet, it says so. A port that goes down fails the QP's work requests at
// once, while the kernel delivers IBV_EVENT_PORT_ERR from a work queue, so
// the completion error usually comes first.
func (w *asyncWatch) explain(dev string, port uint8, state uverbs.PortState, err error) {
	if err != nil || state == uverbs.PortActive {
		return
	}
	w.once.Do(func() {
		w.out.errorf("gorping: %s port %d is %v: connection ended\n", dev, port, state)
		w.said.Store(true)
	})
}

// stop ends the watch and waits for it.
func (w *asyncWatch) stop() {
	w.cancel()
	<-w.done
}
