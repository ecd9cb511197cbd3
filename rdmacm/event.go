package rdmacm

// EventType is enum rdma_cm_event_type.
type EventType uint32

// Event types a kernel (6.1 … 6.12) reports on an rdma_cm channel, named as librdmacm's
// rdma_event_str names them.
const (
	EventAddrResolved    EventType = 0  // RDMA_CM_EVENT_ADDR_RESOLVED
	EventAddrError       EventType = 1  // RDMA_CM_EVENT_ADDR_ERROR
	EventRouteResolved   EventType = 2  // RDMA_CM_EVENT_ROUTE_RESOLVED
	EventRouteError      EventType = 3  // RDMA_CM_EVENT_ROUTE_ERROR
	EventConnectRequest  EventType = 4  // RDMA_CM_EVENT_CONNECT_REQUEST
	EventConnectResponse EventType = 5  // RDMA_CM_EVENT_CONNECT_RESPONSE
	EventConnectError    EventType = 6  // RDMA_CM_EVENT_CONNECT_ERROR
	EventUnreachable     EventType = 7  // RDMA_CM_EVENT_UNREACHABLE
	EventRejected        EventType = 8  // RDMA_CM_EVENT_REJECTED
	EventEstablished     EventType = 9  // RDMA_CM_EVENT_ESTABLISHED
	EventDisconnected    EventType = 10 // RDMA_CM_EVENT_DISCONNECTED
	EventDeviceRemoval   EventType = 11 // RDMA_CM_EVENT_DEVICE_REMOVAL
	EventMulticastJoin   EventType = 12 // RDMA_CM_EVENT_MULTICAST_JOIN
	EventMulticastError  EventType = 13 // RDMA_CM_EVENT_MULTICAST_ERROR
	EventAddrChange      EventType = 14 // RDMA_CM_EVENT_ADDR_CHANGE
	EventTimewaitExit    EventType = 15 // RDMA_CM_EVENT_TIMEWAIT_EXIT
)

// The name table is stringer's (eventName); String adds librdmacm's answer for numbers it
// does not know.
//go:generate sh -c "go run golang.org/x/tools/cmd/stringer@v0.52.0 -type=EventType -linecomment -output=/dev/stdout | sed 's/func (i EventType) String() string/func (i EventType) eventName() string/' > eventtype_string.go"

// String returns the name rdma_event_str gives the event ("UNKNOWN EVENT" for
// numbers it does not know, as librdmacm v44 … HEAD print).
func (t EventType) String() string {
	if t > EventTimewaitExit {
		return "UNKNOWN EVENT"
	}
	return t.eventName()
}

// ConnParam is struct rdma_conn_param: what Connect / Accept send, and what a
// CONNECT_REQUEST / CONNECT_RESPONSE / ESTABLISHED / REJECTED event carries.
//
// ResponderResources / InitiatorDepth 0xFF (MaxRDAtomic) mean "device
// maximum" for Connect and "the peer's request, clamped to the device
// maximum" for Accept, as in librdmacm. The device maxima come from the
// caller: MaxResponderResources / MaxInitiatorDepth (ibv_device_attr
// max_qp_rd_atom / max_qp_init_rd_atom, clamped to 255 by the caller); 0 means
// unknown, which skips librdmacm's range check (EINVAL) and the clamping.
// They are never sent to the kernel.
type ConnParam struct {
	PrivateData        []byte // ≤ 256 bytes; the transport may allow fewer
	ResponderResources uint8
	InitiatorDepth     uint8
	FlowControl        uint8
	RetryCount         uint8
	RNRRetryCount      uint8
	SRQ                bool
	QPNum              uint32 // used only when no QP is attached (-q mode); events: the peer's QPN

	MaxResponderResources uint8 // device limit, see above; input only
	MaxInitiatorDepth     uint8 // device limit, see above; input only
}

// MaxRDAtomic is RDMA_MAX_RESP_RES / RDMA_MAX_INIT_DEPTH.
const MaxRDAtomic = noOverride

// Event is one rdma_cm event of an ID. For EventConnectRequest, Child is the
// new (not yet accepted) connection ID; Accept, Reject or Destroy it.
// Status is the kernel's status: a negative errno, or for EventRejected the
// (positive) IB CM reject reason.
type Event struct {
	Type   EventType
	Status int32
	Child  *ID
	Param  ConnParam
}

// rawEvent is a decoded rdma_ucm_event_resp.
type rawEvent struct {
	uid    uint64
	handle uint32
	typ    EventType
	status int32
	param  ConnParam
}

// decodeEvent decodes a GET_EVENT response (short input is zero-extended).
func decodeEvent(b []byte) rawEvent {
	var r eventResp
	copy(bytesOf(&r), b)
	return rawEvent{
		uid:    r.UID,
		handle: r.ID,
		typ:    EventType(r.Event),
		status: r.Status,
		param:  decodeConnParam(&r.Param),
	}
}

func decodeConnParam(c *connParam) ConnParam {
	p := ConnParam{
		ResponderResources: c.ResponderResources,
		InitiatorDepth:     c.InitiatorDepth,
		FlowControl:        c.FlowControl,
		RetryCount:         c.RetryCount,
		RNRRetryCount:      c.RnrRetryCount,
		SRQ:                c.SRQ != 0,
		QPNum:              c.QPNum,
	}
	if n := int(c.PrivateDataLen); n > 0 {
		p.PrivateData = append([]byte(nil), c.PrivateData[:n]...)
	}
	return p
}
