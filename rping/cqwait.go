package rping

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorping/gorping/uverbs"
)

// cqPoller is what the poll loop needs from a CQ (*uverbs.CQ; a fake in tests).
type cqPoller interface {
	Poll(wc []uverbs.WC) (int, error)
	Arm(solicitedOnly bool) error
	Ack(n int)
}

// compWaiter is what the poll loop needs from a completion channel.
type compWaiter interface {
	Wait(ctx context.Context) (*uverbs.CQ, error)
}

// cqWait delivers one connection's completions and CM events to its ping loop,
// which calls next itself: no goroutine per completion and no hand-off. next
// drains a local batch of work completions, then polls the CQ; only when the CQ
// is empty does it deliver a parked CM event, arm the CQ, poll once more (a
// completion that arrived between the empty poll and the arm raises no event)
// and at last wait on the completion channel. A burst of completions therefore
// costs one event and one arm at most, and completions that reached the CQ
// before a CM event are always delivered before it.
//
// With busy set (--poll) next never arms or waits: it polls until a completion
// or CM event is there, using a CPU the whole time the loop waits. It never
// yields either: runtime.Gosched wakes another thread to steal the goroutine,
// which would burn a second CPU. The CM goroutine runs on another P, or (with
// one CPU) when the runtime preempts the loop.
//
// CM events come from another goroutine through deliverCM, which parks the
// event and cancels the current wait.
type cqWait struct {
	cq   cqPoller
	ch   compWaiter
	out  *printer
	busy bool
	// spin, if set, runs on every empty poll of a busy-polling next. The product
	// leaves it nil (never yield, see above); the device-model tests set
	// runtime.Gosched, because their "NIC" is a goroutine that needs the same CPUs.
	spin func()

	wc      [16]uverbs.WC
	head, n int  // wc[head:n] are polled but not yet delivered
	armed   bool // an event is requested and not yet read
	failed  bool // the completion path broke: every next reports compError
	// firstErr is the status of the first failed completion (WCSuccess if
	// none): converse reads it after the loop to explain the failure.
	firstErr uverbs.WCStatus
	cmEvents chan completion
	// The stall watch (stall). Arming it is on every wait of the ping loop, so
	// it only stores a deadline; the timer is reset only when it would fire
	// after that deadline, and on firing early it re-arms itself for the rest.
	stallTimer *time.Timer  // made on first use; guarded by mu
	stallAt    atomic.Int64 // the watch's deadline on stallClock (0: disarmed)
	timerAt    atomic.Int64 // when stallTimer fires on stallClock (0: not pending)
	stallClock time.Time    // the deadlines' zero
	stopped    bool         // guarded by mu: stop ran, arm nothing more

	mu         sync.Mutex      // guards the wait context, shared with deliverCM
	waitParent context.Context // the ctx waitCtx derives from
	waitCtx    context.Context // cancelled by deliverCM; renewed only after that
	waitCancel context.CancelFunc
}

// newCQWait returns the loop for cq and ch; armed says whether cq was armed
// at setup (rping arms once before connecting).
func newCQWait(cq cqPoller, ch compWaiter, out *printer, busy, armed bool) *cqWait {
	return &cqWait{cq: cq, ch: ch, out: out, busy: busy, armed: armed, cmEvents: make(chan completion, 1), stallClock: time.Now()}
}

// next returns the next completion or CM event. It returns ctx.Err() once ctx
// is done and nothing is pending; failures of the completion path are printed
// (rping's CQ-thread lines) and returned as compError.
func (w *cqWait) next(ctx context.Context) (completion, error) {
	for {
		if w.head < w.n {
			wc := &w.wc[w.head]
			w.head++
			if st := wc.Status; st != uverbs.WCSuccess && st != uverbs.WCWRFlushErr {
				if w.firstErr == uverbs.WCSuccess {
					w.firstErr = st
				}
				w.describe()
			}
			return wcCompletion(wc), nil
		}
		if w.failed {
			return completion{kind: compError}, nil
		}
		n, err := w.cq.Poll(w.wc[:])
		if err != nil {
			w.out.errorf("poll error %d\n", errnoOf(err))
			return w.fail(), nil
		}
		if n > 0 {
			w.head, w.n = 0, n
			continue
		}
		select {
		case ev := <-w.cmEvents:
			return ev, nil
		default:
		}
		if err := ctx.Err(); err != nil {
			return completion{}, err
		}
		if w.busy {
			if w.spin != nil {
				w.spin()
			}
			continue
		}
		if !w.armed {
			if err := w.cq.Arm(false); err != nil {
				w.out.errorf("Failed to set notify!\n")
				return w.fail(), nil
			}
			w.armed = true
			continue // poll again: see above
		}
		wctx := w.waitContext(ctx)
		if wctx == nil {
			continue // a CM event is parked
		}
		if _, err := w.ch.Wait(wctx); err != nil {
			if ctx.Err() != nil {
				return completion{}, ctx.Err()
			}
			if wctx.Err() != nil {
				continue // woken for a CM event
			}
			w.out.errorf("Failed to get cq event!\n")
			return w.fail(), nil
		}
		w.cq.Ack(1)
		w.armed = false
	}
}

// stall arms (d > 0) or disarms the stall watch. When d passes without a
// re-arm or disarm, a compStall is parked like a CM event (unless one is
// parked already, which wakes the loop anyway). The common case, a re-arm with
// the same d, is two atomic operations: no timer operation and no clock read
// (from is the wait's start, which the ping loop reads anyway), which the loop
// would otherwise pay on every wait.
func (w *cqWait) stall(from time.Time, d time.Duration) {
	if d <= 0 {
		w.stallAt.Store(0)
		return
	}
	at := int64(from.Sub(w.stallClock) + d)
	w.stallAt.Store(at)
	if t := w.timerAt.Load(); t != 0 && t <= at {
		return // the timer fires in time, and re-arms itself if that is early
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	rem := max(time.Duration(at)-time.Since(w.stallClock), 0)
	if w.stallTimer == nil {
		w.stallTimer = time.AfterFunc(rem, w.stallFired)
	} else {
		w.stallTimer.Reset(rem)
	}
	w.timerAt.Store(at)
}

// stallFired runs when the timer fires: a deadline that has passed parks a
// compStall; one still ahead (the watch was re-armed since) re-arms the timer.
// It reads the deadline again after storing the timer's state, and stall
// stores the deadline before reading that state, so a concurrent stall is
// seen by one of the two.
func (w *cqWait) stallFired() {
	w.mu.Lock()
	due := false
	for !w.stopped {
		at, now := w.stallAt.Load(), int64(time.Since(w.stallClock))
		switch {
		case at == 0:
			w.timerAt.Store(0)
		case now < at:
			w.stallTimer.Reset(time.Duration(at - now))
			w.timerAt.Store(at)
		default:
			w.timerAt.Store(0)
			due = w.stallAt.CompareAndSwap(at, 0)
		}
		if due || w.stallAt.Load() == at {
			break
		}
	}
	w.mu.Unlock()
	if !due {
		return
	}
	select {
	case w.cmEvents <- completion{kind: compStall}:
	default:
		return
	}
	w.mu.Lock()
	if w.waitCancel != nil {
		w.waitCancel()
	}
	w.mu.Unlock()
}

// describe prints, with -d, the provider's own account of the CQ after an
// error completion (mlx5: the CQE's syndrome and vendor syndrome).
func (w *cqWait) describe() {
	if d, ok := w.cq.(interface{ Describe() string }); ok {
		if s := d.Describe(); s != "" {
			w.out.debugf("%s\n", s)
		}
	}
}

func (w *cqWait) fail() completion {
	w.failed = true
	return completion{kind: compError}
}

// waitContext returns the context to wait with: a child of ctx that deliverCM
// cancels. It is renewed only when ctx changes or after a CM event, so the
// steady state allocates nothing (uverbs registers its cancellation hook once
// per context). It returns nil when a CM event is parked: then do not wait.
func (w *cqWait) waitContext(ctx context.Context) context.Context {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.cmEvents) > 0 {
		return nil
	}
	if w.waitParent != ctx || w.waitCtx.Err() != nil {
		if w.waitCancel != nil {
			w.waitCancel()
		}
		w.waitParent = ctx
		w.waitCtx, w.waitCancel = context.WithCancel(ctx)
	}
	return w.waitCtx
}

// deliverCM parks a CM event for next and wakes its wait. It blocks while an
// earlier event is still parked, and gives up (false) when ctx ends.
func (w *cqWait) deliverCM(ctx context.Context, comp completion) bool {
	select {
	case w.cmEvents <- comp:
	case <-ctx.Done():
		return false
	}
	// Parked before the cancel: a next that sees the cancellation finds it.
	w.mu.Lock()
	if w.waitCancel != nil {
		w.waitCancel()
	}
	w.mu.Unlock()
	return true
}

// stop releases the wait context and the stall watch.
func (w *cqWait) stop() {
	w.mu.Lock()
	w.stopped = true
	if w.stallTimer != nil {
		w.stallTimer.Stop()
	}
	if w.waitCancel != nil {
		w.waitCancel()
	}
	w.mu.Unlock()
}

// keepaliveWRID marks the keepalive's work request (the others have 0).
const keepaliveWRID = 0x6b656570 // "keep"

// wcCompletion translates a work completion for the ping loop.
func wcCompletion(wc *uverbs.WC) completion {
	comp := completion{status: int(wc.Status), byteLen: wc.ByteLen, ts: wc.Timestamp}
	if wc.WRID == keepaliveWRID {
		comp.kind = compKeepalive
		return comp
	}
	switch wc.Opcode {
	case uverbs.WCSend:
		comp.kind = compSend
	case uverbs.WCRecv:
		comp.kind = compRecv
	case uverbs.WCRDMARead:
		comp.kind = compRead
	case uverbs.WCRDMAWrite:
		comp.kind = compWrite
	}
	return comp
}
