// Package rdmacm talks to the kernel's RDMA connection manager through the
// /dev/infiniband/rdma_cm write() ABI (rdma/rdma_user_cm.h, ABI version 4),
// without librdmacm. It also makes the QP state transitions librdmacm makes
// behind its caller's back for a QP it owns (AttachQP).
//
// One Channel is one open of the device. A single reader goroutine per Channel
// fetches events (GET_EVENT) and hands each to the queue of the ID whose uid
// it carries; ID.Event takes them from there.
package rdmacm

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gorping/gorping/internal/trace"
	"github.com/gorping/gorping/uverbs"
)

// ErrClosed is returned (wrapped) by operations on a destroyed ID or a closed
// Channel, and by ID.Event once the ID is destroyed.
var ErrClosed = errors.New("rdmacm: closed")

// Channel is an rdma_cm event channel: one open file of /dev/infiniband/rdma_cm
// and the goroutine reading its events.
type Channel struct {
	dev  cmdDevice
	tr   *trace.Tracer // --trace; nil: none
	host uverbs.Host   // where the node is and ID.Device looks for devices

	mu      sync.Mutex
	ids     map[uint64]*ID // by uid, including children not yet accepted
	lastUID uint64
	closed  bool

	stopped    atomic.Bool   // the reader has exited
	readErr    error         // why; written before readerDone is closed
	readerDone chan struct{} // closed when the reader has exited

	removed     chan struct{} // closed at the first RDMA_CM_EVENT_DEVICE_REMOVAL
	removedOnce sync.Once
}

// Open opens the host's rdma_cm node (/dev/infiniband/rdma_cm; WithHost names another
// host), after checking that sysfs, if it says, reports ABI version 4, and starts the
// event reader.
func Open(opts ...Option) (*Channel, error) {
	ch := configure(opts)
	dev, err := openDevice(ch.host.Env())
	if err != nil {
		return nil, err
	}
	ch.start(dev)
	return ch, nil
}

func newChannel(dev cmdDevice, opts ...Option) *Channel {
	ch := configure(opts)
	ch.start(dev)
	return ch
}

func configure(opts []Option) *Channel {
	ch := &Channel{ids: make(map[uint64]*ID), readerDone: make(chan struct{}), removed: make(chan struct{})}
	for _, o := range opts {
		o(ch)
	}
	return ch
}

func (ch *Channel) start(dev cmdDevice) {
	ch.dev = dev
	if ch.tr != nil {
		ch.tr.Emit("rdmacm", "open", []trace.Field{trace.F("path", ch.host.Env().DevPath(devName))}, nil, nil)
		ch.dev = tracedDevice{cmdDevice: dev, tr: ch.tr}
	}
	go ch.readLoop()
}

// Close destroys every ID still alive on the channel (the kernel would do so
// when the file closes; doing it here also wakes their Event callers), stops
// the reader and closes the device.
func (ch *Channel) Close() error {
	ch.mu.Lock()
	if ch.closed {
		ch.mu.Unlock()
		return nil
	}
	ch.closed = true
	ids := make([]*ID, 0, len(ch.ids))
	for _, id := range ch.ids {
		ids = append(ids, id)
	}
	ch.mu.Unlock()

	var errs []error
	for _, id := range ids {
		if err := id.Destroy(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := ch.dev.close(); err != nil {
		errs = append(errs, fmt.Errorf("rdmacm: close channel: %w", err))
	}
	<-ch.readerDone
	return errors.Join(errs...)
}

// Removed is closed once the channel has seen RDMA_CM_EVENT_DEVICE_REMOVAL
// for any of its IDs, before that event is queued to its ID. The kernel then
// waits until every user of the device lets go of it (rdma_cm ids, and for
// drivers that cannot disassociate a context, like rxe, every open verbs
// context), so whoever holds resources on the device must release them; an ID
// whose owner is not reading its events at the time would otherwise never tell.
func (ch *Channel) Removed() <-chan struct{} { return ch.removed }

// CreateID creates an rdma_cm ID in the TCP port space (RC QPs).
func (ch *Channel) CreateID() (*ID, error) {
	id, err := ch.register(0)
	if err != nil {
		return nil, fmt.Errorf("rdmacm: create id: %w", err)
	}
	cmd := createID{UID: id.uid, Ps: psTCP, QPType: qptRC}
	var resp createIDResp
	if err := ch.dev.exec(cmdCreateID, bytesOf(&cmd), int(unsafe.Offsetof(cmd.Response)), bytesOf(&resp)); err != nil {
		ch.unregister(id.uid)
		return nil, fmt.Errorf("rdmacm: create id: %w", err)
	}
	id.handle = resp.ID
	return id, nil
}

// register allocates a uid and enters a new ID with the given kernel handle
// in the dispatch map.
func (ch *Channel) register(handle uint32) (*ID, error) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.closed {
		return nil, ErrClosed
	}
	ch.lastUID++ // uid 0 means "no owner" to the kernel: never hand it out
	id := newID(ch, ch.lastUID, handle)
	ch.ids[id.uid] = id
	return id, nil
}

func (ch *Channel) unregister(uid uint64) {
	ch.mu.Lock()
	delete(ch.ids, uid)
	ch.mu.Unlock()
}

func (ch *Channel) lookup(uid uint64) *ID {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.ids[uid]
}

// destroyHandle sends DESTROY_ID and returns events_reported: how many events
// the kernel has handed out for this id (its unread ones it discards).
func (ch *Channel) destroyHandle(handle uint32) (uint32, error) {
	cmd := destroyID{ID: handle}
	var resp destroyIDResp
	if err := ch.dev.exec(cmdDestroyID, bytesOf(&cmd), 0, bytesOf(&resp)); err != nil {
		return 0, err
	}
	return resp.EventsReported, nil
}

func (ch *Channel) readLoop() {
	buf := make([]byte, sizeofEventResp)
	var err error
	for {
		clear(buf)
		if err = ch.dev.getEvent(buf); err != nil {
			break
		}
		ev := decodeEvent(buf)
		if ch.tr != nil {
			ch.traceEvent(ev)
		}
		ch.dispatch(ev)
	}
	if !errors.Is(err, ErrClosed) {
		err = fmt.Errorf("rdmacm: get event: %w", err)
	}
	ch.readErr = err
	ch.stopped.Store(true)
	// Wake every Destroy waiting for events that will now never be dispatched.
	ch.mu.Lock()
	ids := make([]*ID, 0, len(ch.ids))
	for _, id := range ch.ids {
		ids = append(ids, id)
	}
	ch.mu.Unlock()
	for _, id := range ids {
		id.mu.Lock()
		id.cond.Broadcast()
		id.mu.Unlock()
	}
	close(ch.readerDone)
}

// dispatch routes one kernel event to its ID, doing librdmacm's hidden work
// on the way. It runs on the reader goroutine and never blocks on a consumer.
func (ch *Channel) dispatch(r rawEvent) {
	if r.typ == EventDeviceRemoval {
		// The kernel has already begun destroying the id (the handle
		// still needs DESTROY_ID); signal before the event reaches the ID,
		// so its reader finds Removed closed.
		ch.removedOnce.Do(func() { close(ch.removed) })
	}
	id := ch.lookup(r.uid)
	if id == nil {
		slog.Debug("rdmacm: dropping event for unknown uid", "uid", r.uid, "id", r.handle, "event", r.typ.String())
		if r.typ == EventConnectRequest {
			// The kernel made a child id for us; nobody will ever own it.
			ch.destroyHandle(r.handle)
		}
		return
	}
	ev := Event{Type: r.typ, Status: r.status, Param: r.param}
	deliver := true
	switch r.typ {
	case EventConnectRequest:
		child, err := ch.register(r.handle)
		if err != nil { // channel closing
			ch.destroyHandle(r.handle)
			deliver = false
			break
		}
		child.reqResp = r.param.ResponderResources
		child.reqInit = r.param.InitiatorDepth
		ev.Child = child
	case EventConnectResponse:
		if qp, ib := id.attached(); qp != nil {
			ev = id.finishConnect(ev, qp, ib)
		}
	case EventRejected:
		// After a failed CONNECT_RESPONSE the app already has its
		// CONNECT_ERROR; librdmacm swallows the kernel's follow-ups.
		if id.hadConnectError() {
			deliver = false
		} else {
			id.qpToErr()
		}
	case EventDisconnected:
		if id.hadConnectError() {
			deliver = false
		}
	}
	if orphan := id.push(ev, deliver); orphan != nil {
		orphan.Destroy()
	}
}
