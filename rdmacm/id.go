package rdmacm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"
	"unsafe"

	"github.com/gorping/gorping/uverbs"
	"golang.org/x/sys/unix"
)

// ID is an rdma_cm identifier (struct rdma_cm_id): a listener, an active
// connection, or a passive connection (the Child of a CONNECT_REQUEST).
type ID struct {
	ch     *Channel
	uid    uint64 // our cookie in the kernel's events; a child's reaches the kernel at Accept
	handle uint32 // the kernel's id

	mu        sync.Mutex
	cond      *sync.Cond    // on mu: received grew, or the reader stopped
	queue     []Event       // unbounded: see push
	notify    chan struct{} // capacity 1: the queue became non-empty
	closed    chan struct{} // closed by Destroy
	destroyed bool
	received  uint32 // events the reader took from the kernel for this uid

	qp           cmQP // librdmacm-owned QP (AttachQP), nil in -q mode
	ib           bool // the QP's port has InfiniBand link layer
	iwarp        bool // the QP's device is iWARP: Disconnect moves it to SQD
	connectError bool // hidden CONNECT_RESPONSE work failed

	reqResp, reqInit uint8 // a child's CONNECT_REQUEST values, for Accept
}

// cmQP is what the hidden transitions need from a verbs QP: *uverbs.QP
// through an adapter, a recorder in tests.
type cmQP interface {
	modify(attr *uverbs.QPAttr, mask uverbs.QPAttrMask) error
	qpNum() uint32
	iwarp() bool // the QP's device has iWARP transport
}

func newID(ch *Channel, uid uint64, handle uint32) *ID {
	id := &ID{ch: ch, uid: uid, handle: handle,
		notify: make(chan struct{}, 1), closed: make(chan struct{})}
	id.cond = sync.NewCond(&id.mu)
	return id
}

// Event returns the next event of this ID, waiting for one until ctx is done.
// After Destroy it returns ErrClosed; if the channel's reader failed it
// returns that error once the queued events are consumed.
func (id *ID) Event(ctx context.Context) (Event, error) {
	for {
		id.mu.Lock()
		if len(id.queue) > 0 {
			ev := id.queue[0]
			id.queue[0] = Event{}
			id.queue = id.queue[1:]
			id.mu.Unlock()
			return ev, nil
		}
		destroyed := id.destroyed
		id.mu.Unlock()
		if destroyed {
			return Event{}, ErrClosed
		}
		if id.ch.stopped.Load() {
			return Event{}, id.ch.readErr
		}
		select {
		case <-id.notify:
		case <-id.closed:
		case <-id.ch.readerDone:
		case <-ctx.Done():
			return Event{}, ctx.Err()
		}
	}
}

// push queues ev (if deliver) and counts it as received. The queue is
// unbounded on purpose: the reader must never wait for a consumer, and the
// kernel bounds what one id can produce (a listener's CONNECT_REQUESTs by the
// listen backlog, a connection by its handful of state changes). For a
// destroyed ID the event is dropped; a child it carries is returned for the
// caller to destroy.
func (id *ID) push(ev Event, deliver bool) (orphan *ID) {
	id.mu.Lock()
	defer id.mu.Unlock()
	id.received++
	id.cond.Broadcast()
	if id.destroyed {
		return ev.Child
	}
	if !deliver {
		return nil
	}
	id.queue = append(id.queue, ev)
	select {
	case id.notify <- struct{}{}:
	default:
	}
	return nil
}

func (id *ID) attached() (cmQP, bool) {
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.qp, id.ib
}

func (id *ID) hadConnectError() bool {
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.connectError
}

func (id *ID) alive() error {
	id.mu.Lock()
	defer id.mu.Unlock()
	if id.destroyed {
		return ErrClosed
	}
	return nil
}

// Destroy destroys the kernel id and waits, as librdmacm does, until the
// reader has dispatched every event the kernel says it reported for it (the
// kernel discards the unread rest). Queued events are dropped; children of
// undelivered CONNECT_REQUESTs are destroyed too. Destroying twice is a no-op.
func (id *ID) Destroy() error {
	id.mu.Lock()
	if id.destroyed {
		id.mu.Unlock()
		return nil
	}
	id.destroyed = true
	close(id.closed)
	pending := id.queue
	id.queue = nil
	id.mu.Unlock()

	n, err := id.ch.destroyHandle(id.handle)
	if err == nil {
		id.mu.Lock()
		for id.received < n && !id.ch.stopped.Load() {
			id.cond.Wait()
		}
		id.mu.Unlock()
	} else {
		err = fmt.Errorf("rdmacm: destroy id: %w", err)
	}
	id.ch.unregister(id.uid)
	for _, ev := range pending {
		if ev.Child != nil {
			ev.Child.Destroy()
		}
	}
	return err
}

func (id *ID) exec(what string, cmd uint32, body []byte, respOff int, resp []byte) error {
	if err := id.alive(); err != nil {
		return fmt.Errorf("rdmacm: %s: %w", what, err)
	}
	if err := id.ch.dev.exec(cmd, body, respOff, resp); err != nil {
		return fmt.Errorf("rdmacm: %s: %w", what, err)
	}
	return nil
}

// Bind binds the ID to a local address (rdma_bind_addr). A zero port lets
// the kernel choose one; an unspecified address binds no device yet.
func (id *ID) Bind(addr netip.AddrPort) error {
	cmd := bindCmd{ID: id.handle}
	size, err := putSockaddr(&cmd.Addr, addr)
	if err != nil {
		return fmt.Errorf("rdmacm: bind: %w", err)
	}
	cmd.AddrSize = size
	return id.exec("bind "+addr.String(), cmdBind, bytesOf(&cmd), 0, nil)
}

// Listen starts listening for connection requests (rdma_listen). The kernel
// treats backlog ≤ 0 or above net.rdma_ucm.max_backlog as that maximum.
func (id *ID) Listen(backlog int) error {
	cmd := listenCmd{ID: id.handle, Backlog: uint32(max(backlog, 0))}
	return id.exec("listen", cmdListen, bytesOf(&cmd), 0, nil)
}

// ResolveAddr starts address resolution (rdma_resolve_addr); the outcome is an
// EventAddrResolved or EventAddrError. A zero src means no source address.
func (id *ID) ResolveAddr(src, dst netip.AddrPort, timeout time.Duration) error {
	cmd := resolveAddr{ID: id.handle, TimeoutMs: millis(timeout)}
	var err error
	if src.IsValid() {
		if cmd.SrcSize, err = putSockaddr(&cmd.SrcAddr, src); err != nil {
			return fmt.Errorf("rdmacm: resolve addr: %w", err)
		}
	}
	if cmd.DstSize, err = putSockaddr(&cmd.DstAddr, dst); err != nil {
		return fmt.Errorf("rdmacm: resolve addr: %w", err)
	}
	return id.exec("resolve addr "+dst.String(), cmdResolveAddr, bytesOf(&cmd), 0, nil)
}

// ResolveRoute starts route resolution (rdma_resolve_route); the outcome is an
// EventRouteResolved or EventRouteError. Unlike librdmacm it never asks ibacm.
func (id *ID) ResolveRoute(timeout time.Duration) error {
	cmd := resolveRoute{ID: id.handle, TimeoutMs: millis(timeout)}
	return id.exec("resolve route", cmdResolveRoute, bytesOf(&cmd), 0, nil)
}

func millis(d time.Duration) uint32 {
	return uint32(min(max(d.Milliseconds(), 0), 1<<32-1))
}

// AddrInfo is the answer to QUERY(ADDR): the device and port the ID is bound
// to (NodeGUID 0: none yet) and its addresses.
type AddrInfo struct {
	NodeGUID   uint64 // as sysfs node_guid reads: the kernel's 8 bytes, big-endian
	PortNum    uint8
	PKey       uint16
	IbdevIndex int // kernel ib_device index; -1 if the kernel does not say
	Src, Dst   netip.AddrPort
}

// Query asks the kernel for the ID's device, port and addresses.
func (id *ID) Query() (AddrInfo, error) {
	cmd := query{ID: id.handle, Option: queryAddr}
	resp := queryAddrResp{IbdevIndex: ^uint32(0)} // kernels without the field leave it
	if err := id.exec("query addr", cmdQuery, bytesOf(&cmd), int(unsafe.Offsetof(cmd.Response)), bytesOf(&resp)); err != nil {
		return AddrInfo{}, err
	}
	return decodeQueryAddr(&resp), nil
}

func decodeQueryAddr(r *queryAddrResp) AddrInfo {
	raw := bytesOf(r)
	info := AddrInfo{
		NodeGUID:   binary.BigEndian.Uint64(r.NodeGUID[:]),
		PortNum:    r.PortNum,
		PKey:       binary.BigEndian.Uint16(raw[unsafe.Offsetof(r.Pkey):]),
		IbdevIndex: int(int32(r.IbdevIndex)),
		Src:        parseSockaddr(r.SrcAddr[:], r.SrcSize),
		Dst:        parseSockaddr(r.DstAddr[:], r.DstSize),
	}
	if r.IbdevIndex == ^uint32(0) {
		info.IbdevIndex = -1
	}
	return info
}

// initQPAttr asks the kernel for the attributes and mask that move a QP of
// this ID to state.
func (id *ID) initQPAttr(state uverbs.QPState) (uverbs.QPAttr, error) {
	cmd := initQPAttr{ID: id.handle, QPState: uint32(state)}
	var raw [sizeofQPAttr]byte
	err := id.exec("init qp attr ("+state.String()+")", cmdInitQPAttr, bytesOf(&cmd),
		int(unsafe.Offsetof(cmd.Response)), raw[:])
	var a uverbs.QPAttr
	a.UnmarshalBinary(raw[:])
	return a, err
}

// attachQP makes qp librdmacm-owned: RESET→INIT now with the kernel's
// attributes, later transitions as documented on AttachQP.
func (id *ID) attachQP(qp cmQP, ib bool) error {
	if qp == nil {
		return fmt.Errorf("rdmacm: attach qp: no qp: %w", unix.EINVAL)
	}
	if cur, _ := id.attached(); cur != nil {
		return fmt.Errorf("rdmacm: attach qp: id already has a qp: %w", unix.EINVAL)
	}
	if err := id.modifyFromCM(qp, qpsInit, false, noOverride); err != nil {
		return err
	}
	id.mu.Lock()
	id.qp, id.ib, id.iwarp = qp, ib, qp.iwarp()
	id.mu.Unlock()
	return nil
}

// modifyFromCM moves qp to state with the attributes INIT_QP_ATTR returns.
// For RTR it clears the obsolete RoCE mask bits on InfiniBand ports and
// overrides max_dest_rd_atomic, for RTS max_rd_atomic (unless noOverride).
func (id *ID) modifyFromCM(qp cmQP, state uverbs.QPState, ib bool, override uint8) error {
	a, err := id.initQPAttr(state)
	if err != nil {
		return err
	}
	mask := a.AttrMask
	switch state {
	case qpsRTR:
		if ib {
			mask &^= qpMaskRoCEObsolete
		}
		if override != noOverride {
			a.MaxDestRdAtomic = override
		}
	case qpsRTS:
		if override != noOverride {
			a.MaxRdAtomic = override
		}
	}
	if err := qp.modify(&a, mask); err != nil {
		return fmt.Errorf("rdmacm: modify qp to %v: %w", state, err)
	}
	return nil
}

// toRTS is librdmacm's ucma_modify_qp_rtr + ucma_modify_qp_rts: INIT again
// (the CM exchange changes the INIT attributes), RTR, RTS.
func (id *ID) toRTS(qp cmQP, ib bool, respRes, initDepth uint8) error {
	if err := id.modifyFromCM(qp, qpsInit, ib, noOverride); err != nil {
		return err
	}
	if err := id.modifyFromCM(qp, qpsRTR, ib, respRes); err != nil {
		return err
	}
	return id.modifyFromCM(qp, qpsRTS, ib, initDepth)
}

// qpToErr moves an attached QP to ERR (mask STATE only) so its posted work
// requests flush.
func (id *ID) qpToErr() error {
	qp, _ := id.attached()
	if qp == nil {
		return nil
	}
	a := uverbs.QPAttr{State: qpsErr}
	if err := qp.modify(&a, qpMaskState); err != nil {
		return fmt.Errorf("rdmacm: modify qp to error state: %w", err)
	}
	return nil
}

// qpShutdown is librdmacm's ucma_shutdown: an attached QP goes to ERR, on
// iWARP to SQD (mask STATE only).
func (id *ID) qpShutdown() error {
	id.mu.Lock()
	qp, iwarp := id.qp, id.iwarp
	id.mu.Unlock()
	if qp == nil || !iwarp {
		return id.qpToErr()
	}
	a := uverbs.QPAttr{State: uverbs.QPSSQD}
	if err := qp.modify(&a, qpMaskState); err != nil {
		return fmt.Errorf("rdmacm: modify qp to SQD: %w", err)
	}
	return nil
}

// finishConnect is librdmacm's CONNECT_RESPONSE processing for an ID with a
// QP: INIT, RTR, RTS (no rd_atomic overrides on the active side), then ACCEPT
// with an invalid conn_param (the kernel sends the RTU). The app sees
// ESTABLISHED, or CONNECT_ERROR (status -errno) with the QP in ERR.
func (id *ID) finishConnect(ev Event, qp cmQP, ib bool) Event {
	err := id.toRTS(qp, ib, noOverride, noOverride)
	if err == nil {
		err = id.establish()
	}
	if err != nil {
		id.qpToErr()
		id.mu.Lock()
		id.connectError = true
		id.mu.Unlock()
		return Event{Type: EventConnectError, Status: negErrno(err), Param: ev.Param}
	}
	ev.Type = EventEstablished
	return ev
}

func negErrno(err error) int32 {
	var e unix.Errno
	if errors.As(err, &e) {
		return -int32(e)
	}
	return -1 // librdmacm's status for errors without an errno
}

// checkParam is librdmacm's ucma_valid_param for PS_TCP, against the device
// limits the caller supplied (0: unknown, not checked).
func checkParam(p *ConnParam) error {
	if len(p.PrivateData) > maxPrivateData {
		return fmt.Errorf("%d bytes of private data: %w", len(p.PrivateData), unix.EINVAL)
	}
	if p.ResponderResources != MaxRDAtomic && p.MaxResponderResources != 0 &&
		p.ResponderResources > p.MaxResponderResources {
		return fmt.Errorf("responder resources %d > device maximum %d: %w",
			p.ResponderResources, p.MaxResponderResources, unix.EINVAL)
	}
	if p.InitiatorDepth != MaxRDAtomic && p.MaxInitiatorDepth != 0 &&
		p.InitiatorDepth > p.MaxInitiatorDepth {
		return fmt.Errorf("initiator depth %d > device maximum %d: %w",
			p.InitiatorDepth, p.MaxInitiatorDepth, unix.EINVAL)
	}
	return nil
}

// kernParam builds the kernel conn_param (valid = 1). With a QP attached its
// number replaces p.QPNum and srq is 0 (uverbs QPs have no SRQ).
func kernParam(p *ConnParam, qp cmQP, respRes, initDepth uint8) connParam {
	k := connParam{
		QPNum:              p.QPNum,
		ResponderResources: respRes,
		InitiatorDepth:     initDepth,
		FlowControl:        p.FlowControl,
		RetryCount:         p.RetryCount,
		RnrRetryCount:      p.RNRRetryCount,
		Valid:              1,
	}
	if p.SRQ {
		k.SRQ = 1
	}
	if qp != nil {
		k.QPNum, k.SRQ = qp.qpNum(), 0
	}
	k.PrivateDataLen = uint8(copy(k.PrivateData[:], p.PrivateData))
	return k
}

// Connect sends a connection request (rdma_connect). ResponderResources /
// InitiatorDepth MaxRDAtomic need the device limits in p. With a QP attached
// the outcome is EventEstablished (after the hidden RTR/RTS/RTU) or
// EventConnectError; without, the kernel's EventConnectResponse (finish with
// InitQPAttr, modify and Establish).
func (id *ID) Connect(p ConnParam) error {
	if err := checkParam(&p); err != nil {
		return fmt.Errorf("rdmacm: connect: %w", err)
	}
	initDepth, respRes := p.InitiatorDepth, p.ResponderResources
	if initDepth == MaxRDAtomic {
		if p.MaxInitiatorDepth == 0 {
			return fmt.Errorf("rdmacm: connect: initiator depth \"device maximum\" without device limits: %w", unix.EINVAL)
		}
		initDepth = p.MaxInitiatorDepth
	}
	if respRes == MaxRDAtomic {
		if p.MaxResponderResources == 0 {
			return fmt.Errorf("rdmacm: connect: responder resources \"device maximum\" without device limits: %w", unix.EINVAL)
		}
		respRes = p.MaxResponderResources
	}
	qp, _ := id.attached()
	cmd := connectCmd{ConnParam: kernParam(&p, qp, respRes, initDepth), ID: id.handle}
	return id.exec("connect", cmdConnect, bytesOf(&cmd), 0, nil)
}

// Accept accepts a connection request on a child ID (rdma_accept) and gives
// the child its uid, so its events start to flow. MaxRDAtomic in
// ResponderResources / InitiatorDepth takes the peer's values clamped to the
// device limits in p; librdmacm's rdma_accept(id, NULL) equals
// ConnParam{ResponderResources: MaxRDAtomic, InitiatorDepth: MaxRDAtomic,
// RetryCount: 7, RNRRetryCount: 7} plus the limits. With a QP attached the QP
// is moved INIT→RTR→RTS first (max_dest_rd_atomic / max_rd_atomic set to the
// negotiated values), and to ERR if the ACCEPT command fails.
func (id *ID) Accept(p ConnParam) error {
	if err := checkParam(&p); err != nil {
		return fmt.Errorf("rdmacm: accept: %w", err)
	}
	initDepth, respRes := p.InitiatorDepth, p.ResponderResources
	if initDepth == MaxRDAtomic {
		initDepth = id.reqInit
		if p.MaxInitiatorDepth != 0 {
			initDepth = min(initDepth, p.MaxInitiatorDepth)
		}
	}
	if respRes == MaxRDAtomic {
		respRes = id.reqResp
		if p.MaxResponderResources != 0 {
			respRes = min(respRes, p.MaxResponderResources)
		}
	}
	qp, ib := id.attached()
	if qp != nil {
		if err := id.toRTS(qp, ib, respRes, initDepth); err != nil {
			return err
		}
	}
	cmd := acceptCmd{UID: id.uid, ConnParam: kernParam(&p, qp, respRes, initDepth), ID: id.handle}
	if err := id.exec("accept", cmdAccept, bytesOf(&cmd), 0, nil); err != nil {
		id.qpToErr()
		return err
	}
	return nil
}

// Establish tells the kernel the active side has moved its own QP to RTS
// (rdma_establish, -q mode): ACCEPT with an invalid conn_param, and the
// kernel sends the RTU. EINVAL if a QP is attached (then it is automatic).
func (id *ID) Establish() error {
	if qp, _ := id.attached(); qp != nil {
		return fmt.Errorf("rdmacm: establish: id owns its qp: %w", unix.EINVAL)
	}
	return id.establish()
}

func (id *ID) establish() error {
	cmd := acceptCmd{ID: id.handle}
	return id.exec("establish", cmdAccept, bytesOf(&cmd), 0, nil)
}

// Reject rejects a connection request (rdma_reject, no private data).
func (id *ID) Reject() error {
	cmd := rejectCmd{ID: id.handle}
	return id.exec("reject", cmdReject, bytesOf(&cmd), 0, nil)
}

// Disconnect moves an attached QP to ERR (so its work requests flush), or to
// SQD on iWARP (the kernel then closes the stream gracefully), and then
// disconnects (rdma_disconnect). If the QP cannot be moved, nothing is sent,
// as in librdmacm.
func (id *ID) Disconnect() error {
	if err := id.qpShutdown(); err != nil {
		return fmt.Errorf("rdmacm: disconnect: %w", err)
	}
	cmd := disconnectCmd{ID: id.handle}
	return id.exec("disconnect", cmdDisconnect, bytesOf(&cmd), 0, nil)
}
