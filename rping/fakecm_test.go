//go:build !guest

package rping

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/gorping/gorping/rdmacm"
	"github.com/gorping/gorping/uverbs"
)

// fakeCM plays rdma_cm for the connection glue's host tests: IDs of this process that
// connect to each other over a device model. Resolution succeeds at once; Connect hands
// the server side its child ID (requests); Accept, and for a QP the CM owns the
// client's CONNECT_RESPONSE, run librdmacm's hidden QP transitions with the attributes
// InitQPAttr gives; Disconnect moves an owned QP to ERR and tells both sides. Only
// exported uverbs calls touch the QPs, as rdmacm's own steps do.
type fakeCM struct {
	dev      uverbs.Device
	requests chan *fakeID // the server's child ID of each Connect
	// refuse makes Connect fail as against a port nobody listens on: REJECTED.
	refuse bool
	// silent makes Connect go unanswered (a server host that is down).
	silent bool

	mu         sync.Mutex
	ids        []*fakeID // every ID, for a removal
	port       uint16    // the last port channel IDs got
	removed    chan struct{}
	removeOnce sync.Once
}

func newFakeCM(dev uverbs.Device) *fakeCM {
	return &fakeCM{dev: dev, requests: make(chan *fakeID, 4), removed: make(chan struct{})}
}

// newID is an active-side ID bound to src.
func (cm *fakeCM) newID(src netip.AddrPort) *fakeID {
	id := &fakeID{cm: cm, src: src, events: make(chan rdmacm.Event, 16), done: make(chan struct{})}
	cm.mu.Lock()
	cm.ids = append(cm.ids, id)
	cm.mu.Unlock()
	return id
}

// channel is an event channel of the fake CM (Config.cm): its IDs are active-side IDs
// from 192.0.2.2, each with a port of its own.
func (cm *fakeCM) channel() (cmChannel, error) { return &fakeEventChannel{cm: cm}, nil }

// remove is a device removal: every channel's Removed closes, then every ID gets
// DEVICE_REMOVAL, as rdma_cm delivers it.
func (cm *fakeCM) remove() {
	cm.removeOnce.Do(func() { close(cm.removed) })
	cm.mu.Lock()
	ids := append([]*fakeID(nil), cm.ids...)
	cm.mu.Unlock()
	for _, id := range ids {
		go id.push(rdmacm.Event{Type: rdmacm.EventDeviceRemoval})
	}
}

type fakeEventChannel struct {
	cm  *fakeCM
	mu  sync.Mutex
	ids []*fakeID
}

var _ cmChannel = (*fakeEventChannel)(nil)

func (ch *fakeEventChannel) CreateID() (cmID, error) {
	ch.cm.mu.Lock()
	ch.cm.port++
	port := 40000 + ch.cm.port
	ch.cm.mu.Unlock()
	id := ch.cm.newID(netip.AddrPortFrom(netip.MustParseAddr("192.0.2.2"), port))
	ch.mu.Lock()
	ch.ids = append(ch.ids, id)
	ch.mu.Unlock()
	return id, nil
}

func (ch *fakeEventChannel) Removed() <-chan struct{} { return ch.cm.removed }

// Close destroys the channel's IDs, as rdma_destroy_event_channel's caller must have.
func (ch *fakeEventChannel) Close() error {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	for _, id := range ch.ids {
		id.Destroy()
	}
	return nil
}

type fakeID struct {
	cm       *fakeCM
	src, dst netip.AddrPort
	events   chan rdmacm.Event
	done     chan struct{} // closed by Destroy

	mu        sync.Mutex
	peer      *fakeID
	qp        *uverbs.QP // attached: the CM drives it
	qpn       uint32     // the QP number this side announced (Connect, Accept)
	ended     bool       // DISCONNECTED was delivered
	destroyed bool
	rejected  bool
}

var _ cmID = (*fakeID)(nil)

func (id *fakeID) push(ev rdmacm.Event) {
	select {
	case id.events <- ev:
	case <-id.done:
	}
}

func (id *fakeID) Event(ctx context.Context) (rdmacm.Event, error) {
	select {
	case ev := <-id.events:
		return ev, nil
	case <-id.done:
		return rdmacm.Event{}, rdmacm.ErrClosed
	case <-ctx.Done():
		return rdmacm.Event{}, ctx.Err()
	}
}

func (id *fakeID) ResolveAddr(src, dst netip.AddrPort, timeout time.Duration) error {
	if src.IsValid() {
		id.src = netip.AddrPortFrom(src.Addr(), id.src.Port())
	}
	id.dst = dst
	id.push(rdmacm.Event{Type: rdmacm.EventAddrResolved})
	return nil
}

func (id *fakeID) ResolveRoute(time.Duration) error {
	id.push(rdmacm.Event{Type: rdmacm.EventRouteResolved})
	return nil
}

func (id *fakeID) Query() (rdmacm.AddrInfo, error) {
	return rdmacm.AddrInfo{NodeGUID: id.cm.dev.NodeGUID, PortNum: 1, IbdevIndex: id.cm.dev.Index, Src: id.src, Dst: id.dst}, nil
}

func (id *fakeID) Device() (uverbs.Device, error) { return id.cm.dev, nil }

// Bind and Listen: the fake CM has no listeners (host tests start serve on the child
// IDs it hands out).
func (id *fakeID) Bind(netip.AddrPort) error { return errors.New("fake CM: no listeners") }
func (id *fakeID) Listen(int) error          { return errors.New("fake CM: no listeners") }

// qpAccess is what rdma_cm's INIT attributes grant rping's QPs.
const qpAccess = uverbs.AccessLocalWrite | uverbs.AccessRemoteRead | uverbs.AccessRemoteWrite

// InitQPAttr gives the attributes rdma_cm's INIT_QP_ATTR would for RoCE: the peer's QP
// number once it is known.
func (id *fakeID) InitQPAttr(state uverbs.QPState) (*uverbs.QPAttr, uverbs.QPAttrMask, error) {
	id.mu.Lock()
	var dest uint32
	if id.peer != nil {
		id.peer.mu.Lock()
		dest = id.peer.qpn
		id.peer.mu.Unlock()
	}
	id.mu.Unlock()
	switch state {
	case uverbs.QPSInit:
		return &uverbs.QPAttr{State: state, PortNum: 1, AccessFlags: qpAccess},
			uverbs.QPAttrState | uverbs.QPAttrAccessFlags | uverbs.QPAttrPKeyIndex | uverbs.QPAttrPort, nil
	case uverbs.QPSRTR:
		return &uverbs.QPAttr{State: state, PathMTU: uverbs.MTU1024, DestQPNum: dest, MaxDestRdAtomic: 1,
				MinRNRTimer: 12, AH: uverbs.AHAttr{IsGlobal: 1, PortNum: 1}},
			uverbs.QPAttrState | uverbs.QPAttrAV | uverbs.QPAttrPathMTU | uverbs.QPAttrRQPSN | uverbs.QPAttrMinRNRTimer |
				uverbs.QPAttrMaxDestRdAtomic | uverbs.QPAttrDestQPN, nil
	case uverbs.QPSRTS:
		return &uverbs.QPAttr{State: state, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1},
			uverbs.QPAttrState | uverbs.QPAttrTimeout | uverbs.QPAttrRetryCnt | uverbs.QPAttrRNRRetry |
				uverbs.QPAttrSQPSN | uverbs.QPAttrMaxQPRdAtomic, nil
	}
	return nil, 0, fmt.Errorf("fake CM: no attributes for %v", state)
}

func (id *fakeID) modify(qp *uverbs.QP, states ...uverbs.QPState) error {
	for _, s := range states {
		a, mask, err := id.InitQPAttr(s)
		if err != nil {
			return err
		}
		if err := qp.Modify(a, mask); err != nil {
			return fmt.Errorf("fake CM: modify qp to %v: %w", s, err)
		}
	}
	return nil
}

func (id *fakeID) AttachQP(qp *uverbs.QP, ib bool) error {
	if err := id.modify(qp, uverbs.QPSInit); err != nil {
		return err
	}
	id.mu.Lock()
	id.qp = qp
	id.mu.Unlock()
	return nil
}

func (id *fakeID) announce(p rdmacm.ConnParam) {
	id.mu.Lock()
	defer id.mu.Unlock()
	id.qpn = p.QPNum
	if id.qp != nil {
		id.qpn = id.qp.Num()
	}
}

// Connect sends the request: the server side gets its child ID.
func (id *fakeID) Connect(p rdmacm.ConnParam) error {
	id.announce(p)
	switch {
	case id.cm.refuse:
		id.push(rdmacm.Event{Type: rdmacm.EventRejected, Status: 28})
		return nil
	case id.cm.silent:
		return nil
	}
	child := &fakeID{cm: id.cm, src: id.dst, dst: id.src, peer: id, events: make(chan rdmacm.Event, 16), done: make(chan struct{})}
	id.mu.Lock()
	id.peer = child
	id.mu.Unlock()
	id.cm.requests <- child
	return nil
}

// Accept runs the hidden steps on both owned QPs and reports the connection: both
// ESTABLISHED, or CONNECT_RESPONSE to a client that drives its QP itself (-q).
func (id *fakeID) Accept(p rdmacm.ConnParam) error {
	id.announce(p)
	if id.qp != nil {
		if err := id.modify(id.qp, uverbs.QPSInit, uverbs.QPSRTR, uverbs.QPSRTS); err != nil {
			return err
		}
	}
	cl := id.peer
	// The client's event carries this side's QPN, as the kernel's carries the REP's.
	param := rdmacm.ConnParam{QPNum: id.qpn}
	if cl.qp == nil {
		cl.push(rdmacm.Event{Type: rdmacm.EventConnectResponse, Param: param})
		return nil
	}
	if err := cl.modify(cl.qp, uverbs.QPSInit, uverbs.QPSRTR, uverbs.QPSRTS); err != nil {
		cl.push(rdmacm.Event{Type: rdmacm.EventConnectError, Status: -1})
		return nil
	}
	cl.push(rdmacm.Event{Type: rdmacm.EventEstablished, Param: param})
	id.push(rdmacm.Event{Type: rdmacm.EventEstablished})
	return nil
}

// Establish is the -q client's RTU: the server's connection is up.
func (id *fakeID) Establish() error {
	id.peer.push(rdmacm.Event{Type: rdmacm.EventEstablished})
	return nil
}

func (id *fakeID) Reject() error {
	id.mu.Lock()
	id.rejected = true
	id.mu.Unlock()
	id.peer.push(rdmacm.Event{Type: rdmacm.EventRejected, Status: 28})
	return nil
}

func (id *fakeID) Disconnect() error {
	id.mu.Lock()
	qp := id.qp
	id.mu.Unlock()
	if qp != nil {
		a := uverbs.QPAttr{State: uverbs.QPSErr}
		if err := qp.Modify(&a, uverbs.QPAttrState); err != nil {
			return err
		}
	}
	id.disconnected()
	if id.peer != nil {
		id.peer.disconnected()
	}
	return nil
}

// disconnected delivers DISCONNECTED once.
func (id *fakeID) disconnected() {
	id.mu.Lock()
	first := !id.ended
	id.ended = true
	id.mu.Unlock()
	if first {
		id.push(rdmacm.Event{Type: rdmacm.EventDisconnected})
	}
}

func (id *fakeID) Destroy() error {
	id.mu.Lock()
	defer id.mu.Unlock()
	if !id.destroyed {
		id.destroyed = true
		close(id.done)
	}
	return nil
}
