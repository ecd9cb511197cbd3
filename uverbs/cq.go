package uverbs

import (
	"context"
	"errors"
	"fmt"
	"github.com/gorping/gorping/uverbs/driver"
	"os"
	"sync"
	"sync/atomic"

	"github.com/gorping/gorping/internal/wire"
)

// CompChannel is a completion channel: an fd on which the kernel queues one event per armed
// CQ that got a completion.
type CompChannel struct {
	ctx *Context
	ev  *eventFile
}

// CreateCompChannel creates a completion channel (CREATE_COMP_CHANNEL).
func (c *Context) CreateCompChannel() (*CompChannel, error) {
	var req createCompChannelReq
	var resp createCompChannelResp
	if _, err := call(c.cmd, cmdCreateCompChannel, &req, &resp, nil, 0); err != nil {
		return nil, fmt.Errorf("uverbs: %s: %w", c.dev.Name, err)
	}
	ev, err := newEventFile(int(resp.FD), "uverbs completion channel")
	if err != nil {
		return nil, err
	}
	return &CompChannel{ctx: c, ev: ev}, nil
}

// Wait reads one completion event and returns its CQ. The caller must re-arm the CQ, poll
// it, and eventually Ack the event. Wait returns ctx.Err() when ctx ends and ErrClosed when
// the channel is closed meanwhile.
func (ch *CompChannel) Wait(ctx context.Context) (*CQ, error) {
	b, err := ch.ev.read(ctx, 8)
	if err != nil {
		return nil, err
	}
	var d compEventDesc
	wire.Decode(&d, b[:])
	ch.ctx.mu.Lock()
	cq := ch.ctx.cqs[d.CQHandle]
	ch.ctx.mu.Unlock()
	if ch.ctx.cmd.tr != nil && cq != nil {
		ch.traceWait(cq, nil)
	}
	if cq == nil {
		// The kernel drops queued events of a CQ when destroying it, so this means a
		// channel shared with another context.
		return nil, fmt.Errorf("uverbs: completion event for unknown CQ cookie %d", d.CQHandle)
	}
	cq.evRead.Add(1)
	if o, ok := cq.prov.(driver.CompEventObserver); ok {
		o.CompEvent()
	}
	return cq, nil
}

// Close closes the channel; a pending Wait returns ErrClosed. Destroy its CQs first.
func (ch *CompChannel) Close() error {
	if err := ch.ev.close(); err != nil && !errors.Is(err, os.ErrClosed) {
		return fmt.Errorf("uverbs: close completion channel: %w", err)
	}
	return nil
}

// CQ is a completion queue.
type CQ struct {
	ctx    *Context
	handle uint32
	cookie uint64
	cqe    int
	prov   driver.CQ

	flags CQFlags

	evRead  atomic.Uint64 // completion events Wait returned for this CQ
	evAcked atomic.Uint64
	ackCh   chan struct{} // wakes Destroy waiting for acks

	mu         sync.Mutex // Destroy
	dead       bool       // kernel object destroyed (or its context closed)
	provClosed bool
}

// CreateCQ creates a completion queue with at least cqe entries. ch may be nil (no events);
// vector selects the completion vector (< NumCompVectors).
func (c *Context) CreateCQ(cqe int, ch *CompChannel, vector int) (*CQ, error) {
	return c.createCQ(cqe, ch, vector, 0)
}

// CreateCQEx is CreateCQ with creation flags, through the extended command (libibverbs'
// ibv_create_cq_ex). CQTimestamps asks for completion timestamps; a device without them
// refuses (EOPNOTSUPP).
func (c *Context) CreateCQEx(cqe int, ch *CompChannel, vector int, flags CQFlags) (*CQ, error) {
	return c.createCQ(cqe, ch, vector, flags)
}

func (c *Context) createCQ(cqe int, ch *CompChannel, vector int, flags CQFlags) (*CQ, error) {
	if cqe < 1 || cqe > 1<<31-1 {
		return nil, fmt.Errorf("uverbs: CreateCQ: bad depth %d", cqe)
	}
	if ch != nil && ch.ctx != c {
		return nil, errors.New("uverbs: CreateCQ: completion channel of another context")
	}
	if c.isClosed() {
		return nil, ErrClosed
	}
	creq := driver.CQRequest{CQE: cqe, Vector: vector, Flags: flags}
	pending, err := c.prov.PrepareCQ(&creq)
	if err != nil {
		return nil, fmt.Errorf("uverbs: %s: %s provider: %w", c.dev.Name, c.info.Driver, err)
	}
	in, outLen := pending.Udata()
	cq := &CQ{ctx: c, cookie: c.cookie(), ackCh: make(chan struct{}, 1), flags: flags}
	req := createCQReq{UserHandle: cq.cookie, CQE: uint32(creq.CQE), CompVector: uint32(creq.Vector), CompChannel: -1}
	var resp createCQResp
	var drv []byte
	create := func(chFd int) (err error) {
		req.CompChannel = int32(chFd)
		if flags == 0 {
			drv, err = call(c.cmd, cmdCreateCQ, &req, &resp, in, outLen)
			return err
		}
		xreq := exCreateCQReq{UserHandle: req.UserHandle, CQE: req.CQE, CompVector: req.CompVector,
			CompChannel: req.CompChannel, Flags: uint32(flags)}
		var xresp exCreateCQResp
		drv, err = callEx(c.cmd, cmdCreateCQ, &xreq, &xresp, in, outLen)
		resp = xresp.Base
		return err
	}
	if ch == nil {
		err = create(-1)
	} else {
		// Control keeps the channel fd valid (not closed and reused) during the command.
		rc, rerr := ch.ev.f.SyscallConn()
		if rerr != nil {
			err = ch.ev.closedOr(rerr)
		} else if cerr := rc.Control(func(fd uintptr) { err = create(int(fd)) }); cerr != nil {
			err = ch.ev.closedOr(cerr)
		}
	}
	if err != nil {
		pending.Abort()
		return nil, fmt.Errorf("uverbs: %s: %w", c.dev.Name, err)
	}
	cq.handle = resp.CQHandle
	cq.cqe = int(resp.CQE)
	cq.prov, err = pending.Commit(c.cmd, driver.CQCore{Handle: cq.handle, CQE: cq.cqe}, drv)
	if err != nil {
		c.destroyCQCmd(cq.handle) // best effort: the CQ is unusable without its provider
		return nil, fmt.Errorf("uverbs: %s: %s provider: %w", c.dev.Name, c.info.Driver, err)
	}
	if err := track(c, func() map[uint64]*CQ { return c.cqs }, cq.cookie, cq, cq.prov.Close); err != nil {
		return nil, err
	}
	return cq, nil
}

func (c *Context) destroyCQCmd(handle uint32) (destroyCQResp, error) {
	req := destroyCQReq{CQHandle: handle}
	var resp destroyCQResp
	_, err := call(c.cmd, cmdDestroyCQ, &req, &resp, nil, 0)
	return resp, err
}

// CQE returns the depth the kernel granted.
func (cq *CQ) CQE() int { return cq.cqe }

// Timestamps reports whether the CQ's completions carry the device's timestamps
// (created with CQTimestamps, by a provider that converts them).
func (cq *CQ) Timestamps() bool {
	_, ok := cq.prov.(driver.TimestampConverter)
	return ok && cq.flags&CQTimestamps != 0
}

// TimestampNS converts a completion timestamp (WC.Timestamp) to nanoseconds of the
// device's clock; ok is false if the CQ has no timestamps or the clock cannot be read
// now. Differences of two conversions are durations.
func (cq *CQ) TimestampNS(ts uint64) (ns uint64, ok bool) {
	if t, is := cq.prov.(driver.TimestampConverter); is && cq.flags&CQTimestamps != 0 {
		return t.TimestampNS(ts)
	}
	return 0, false
}

// Describe returns the provider's one-line view of the CQ ("" if it has none).
func (cq *CQ) Describe() string {
	if d, ok := cq.prov.(driver.Describer); ok {
		return d.Describe()
	}
	return ""
}

// Poll fills wc with up to len(wc) completions and returns how many. It does not allocate.
func (cq *CQ) Poll(wc []WC) (int, error) {
	if cq.ctx.cmd.tr != nil {
		n, err := cq.prov.Poll(wc)
		cq.tracePoll(wc, n, err)
		return n, err
	}
	return cq.prov.Poll(wc)
}

// Arm requests a completion event for the next (solicited-only: next solicited)
// completion. Events are one-shot: re-arm after each, then poll again.
func (cq *CQ) Arm(solicitedOnly bool) error { return cq.prov.Arm(solicitedOnly) }

// Ack acknowledges n completion events returned by CompChannel.Wait for this CQ.
func (cq *CQ) Ack(n int) {
	if n <= 0 {
		return
	}
	cq.evAcked.Add(uint64(n))
	select {
	case cq.ackCh <- struct{}{}:
	default:
	}
}

// Destroy destroys the CQ (DESTROY_CQ). It fails with ErrUnackedEvents, leaving the CQ
// intact, while events returned by Wait are unacknowledged. If a concurrent Wait returns an
// event between that check and the kernel's destroy, Destroy waits for its Ack, as
// ibv_destroy_cq does.
func (cq *CQ) Destroy() error {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	c := cq.ctx
	if cq.dead || c.isClosed() {
		return nil // Context.Close released it
	}
	if read, acked := cq.evRead.Load(), cq.evAcked.Load(); read > acked {
		return fmt.Errorf("uverbs: destroy CQ: %d of %d completion events unacknowledged, call CQ.Ack first: %w", read-acked, read, ErrUnackedEvents)
	}
	resp, err := c.destroyCQCmd(cq.handle)
	if err != nil {
		return fmt.Errorf("uverbs: %s: %w", c.dev.Name, err)
	}
	cq.dead = true
	c.mu.Lock()
	delete(c.cqs, cq.cookie)
	c.mu.Unlock()
	for cq.evAcked.Load() < uint64(resp.CompEventsReported) {
		<-cq.ackCh
	}
	return cq.closeProvLocked()
}

func (cq *CQ) closeProvLocked() error {
	if cq.provClosed {
		return nil
	}
	cq.provClosed = true
	return cq.prov.Close()
}

// release frees the provider side after the context closed.
func (cq *CQ) release() error {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	cq.dead = true
	return cq.closeProvLocked()
}
