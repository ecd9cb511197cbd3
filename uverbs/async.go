package uverbs

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/gorping/gorping/internal/wire"
)

// A context's asynchronous events (QP and CQ errors, port changes, device
// fatal) arrive once, on one fd. A context is shared: all of a -P server's
// connections use one (OpenShared), and a client and a server in one process
// do too. Readers taking turns on the fd would each see only some events, and
// a reader blocked on the fd would hold up another's teardown, so one
// goroutine per context reads the fd and hands every event to every
// subscriber.

// AsyncEvents is one subscription to a context's asynchronous events: it sees
// every event that arrives after SubscribeAsync returned it.
type AsyncEvents struct {
	fan     *asyncFan
	ch      chan AsyncEvent
	dropped atomic.Uint64 // events lost because ch was full
}

// asyncQueue is how many events a subscriber may fall behind; async events are
// rare (a handful per connection failure), so a full queue means nobody reads.
const asyncQueue = 32

// asyncFan is a context's reader and its subscribers.
type asyncFan struct {
	mu      sync.Mutex
	subs    map[*AsyncEvents]struct{}
	started bool
	done    chan struct{} // closed when the reader has stopped; err says why
	err     error
}

// SubscribeAsync subscribes to the context's asynchronous events; Close the
// subscription when done. The context's reader starts with the first one.
func (c *Context) SubscribeAsync() *AsyncEvents {
	f := &c.asyncFan
	s := &AsyncEvents{fan: f, ch: make(chan AsyncEvent, asyncQueue)}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.subs == nil {
		f.subs = map[*AsyncEvents]struct{}{}
	}
	f.subs[s] = struct{}{}
	if !f.started {
		f.started = true
		f.done = make(chan struct{})
		go c.readAsync()
	}
	return s
}

// readAsync reads the async fd until it fails (ErrClosed once the context is
// closed; EIO after a disassociation) and fans every event out.
func (c *Context) readAsync() {
	f := &c.asyncFan
	for {
		b, err := c.async.read(context.Background(), 16)
		if err != nil {
			f.mu.Lock()
			f.err = err
			close(f.done)
			f.mu.Unlock()
			return
		}
		ev := c.decodeAsync(b)
		f.mu.Lock()
		for s := range f.subs {
			select {
			case s.ch <- ev:
			default:
				s.dropped.Add(1)
			}
		}
		f.mu.Unlock()
	}
}

// decodeAsync turns the kernel's event into an AsyncEvent, finding its CQ or
// QP by the cookie gorping gave the kernel.
func (c *Context) decodeAsync(b [16]byte) AsyncEvent {
	var d asyncEventDesc
	wire.Decode(&d, b[:])
	ev := AsyncEvent{Type: AsyncEventType(d.EventType), Element: d.Element}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch ev.Type {
	case EventCQErr:
		ev.CQ = c.cqs[d.Element]
	case EventQPFatal, EventQPReqErr, EventQPAccessErr, EventCommEst, EventSQDrained,
		EventPathMig, EventPathMigErr, EventQPLastWQEReached:
		ev.QP = c.qps[d.Element]
	}
	return ev
}

// Next waits for the subscription's next event. It returns ctx.Err() when ctx
// ends first, and, once the events it has are read, the reader's error
// (ErrClosed after the context is closed).
func (s *AsyncEvents) Next(ctx context.Context) (AsyncEvent, error) {
	select {
	case ev := <-s.ch:
		return ev, nil
	case <-ctx.Done():
		return AsyncEvent{}, ctx.Err()
	case <-s.fan.done:
		select {
		case ev := <-s.ch:
			return ev, nil
		default:
		}
		return AsyncEvent{}, s.fan.err
	}
}

// Dropped reports how many events the subscription lost because it fell
// asyncQueue events behind.
func (s *AsyncEvents) Dropped() uint64 { return s.dropped.Load() }

// Close ends the subscription. The reader runs until the context closes.
func (s *AsyncEvents) Close() {
	s.fan.mu.Lock()
	delete(s.fan.subs, s)
	s.fan.mu.Unlock()
}
