package uverbs

//go:generate go run golang.org/x/tools/cmd/stringer@v0.52.0 -type=PortState,PhysState,LinkLayer,AsyncEventType,GIDType -linecomment -output=names_string.go

// QPInitAttr describes a queue pair to create.
type QPInitAttr struct {
	SendCQ *CQ
	RecvCQ *CQ
	Type   QPType
	Cap    QPCap
	SigAll bool // every send WR generates a completion
}

// DeviceAttrEx is what the extended device query (QUERY_DEVICE_EX) adds to DeviceAttr.
type DeviceAttrEx struct {
	DeviceAttr
	// CompletionTimestampMask has the bits a completion timestamp holds; 0 means the
	// device has no completion timestamps (rxe, siw).
	CompletionTimestampMask uint64
	// HCACoreClockKHz is the frequency of the clock those timestamps count.
	HCACoreClockKHz uint64
}

// PortState is a port state (enum ib_port_state).
type PortState uint8

const (
	PortNop         PortState = 0 // NOP
	PortDown        PortState = 1 // DOWN
	PortInit        PortState = 2 // INIT
	PortArmed       PortState = 3 // ARMED
	PortActive      PortState = 4 // ACTIVE
	PortActiveDefer PortState = 5 // ACTIVE_DEFER
)

// LinkLayer is a port's link layer (IB_LINK_LAYER_*).
type LinkLayer uint8

const (
	LinkLayerUnspecified LinkLayer = 0 // Unspecified
	LinkLayerInfiniBand  LinkLayer = 1 // InfiniBand
	LinkLayerEthernet    LinkLayer = 2 // Ethernet
)

// PortAttr are a port's attributes (from struct ib_uverbs_query_port_resp).
type PortAttr struct {
	State        PortState
	PhysState    PhysState
	MaxMTU       MTU
	ActiveMTU    MTU
	LinkLayer    LinkLayer
	GIDTableLen  uint32
	PKeyTableLen uint16
	CapFlags     uint32
	MaxMsgSize   uint32
	LID          uint16
	SMLID        uint16
	LMC          uint8
	SMSL         uint8
	ActiveWidth  uint8
	ActiveSpeed  uint8
	GRHRequired  bool
}

// PhysState is a port's physical state (the number sysfs prints before the name), named
// as iproute2's `rdma link` prints it.
type PhysState uint8

const (
	physNop                       PhysState = 0 // NOP
	physSleep                     PhysState = 1 // SLEEP
	physPolling                   PhysState = 2 // POLLING
	physDisabled                  PhysState = 3 // DISABLED
	physPortConfigurationTraining PhysState = 4 // PORT_CONFIGURATION_TRAINING
	physLinkUp                    PhysState = 5 // LINK_UP
	physLinkErrorRecovery         PhysState = 6 // LINK_ERROR_RECOVERY
	physPHYTest                   PhysState = 7 // PHY_TEST
)

// AsyncEventType is an asynchronous event type (enum ib_event_type).
type AsyncEventType uint32

const (
	EventCQErr            AsyncEventType = 0  // CQ_ERR
	EventQPFatal          AsyncEventType = 1  // QP_FATAL
	EventQPReqErr         AsyncEventType = 2  // QP_REQ_ERR
	EventQPAccessErr      AsyncEventType = 3  // QP_ACCESS_ERR
	EventCommEst          AsyncEventType = 4  // COMM_EST
	EventSQDrained        AsyncEventType = 5  // SQ_DRAINED
	EventPathMig          AsyncEventType = 6  // PATH_MIG
	EventPathMigErr       AsyncEventType = 7  // PATH_MIG_ERR
	EventDeviceFatal      AsyncEventType = 8  // DEVICE_FATAL
	EventPortActive       AsyncEventType = 9  // PORT_ACTIVE
	EventPortErr          AsyncEventType = 10 // PORT_ERR
	EventLIDChange        AsyncEventType = 11 // LID_CHANGE
	EventPKeyChange       AsyncEventType = 12 // PKEY_CHANGE
	EventSMChange         AsyncEventType = 13 // SM_CHANGE
	EventSRQErr           AsyncEventType = 14 // SRQ_ERR
	EventSRQLimitReached  AsyncEventType = 15 // SRQ_LIMIT_REACHED
	EventQPLastWQEReached AsyncEventType = 16 // QP_LAST_WQE_REACHED
	EventClientReregister AsyncEventType = 17 // CLIENT_REREGISTER
	EventGIDChange        AsyncEventType = 18 // GID_CHANGE
	EventWQFatal          AsyncEventType = 19 // WQ_FATAL
)

// AsyncEvent is one event read from the context's async event fd. Element is the port
// number for port/device events and the object's cookie otherwise; CQ or QP is set when the
// event names a live object of this context. Reading an event acknowledges it.
type AsyncEvent struct {
	Type    AsyncEventType
	Element uint64
	CQ      *CQ
	QP      *QP
}

// GIDType is a GID's type (IB_UVERBS_GID_TYPE_*). Its String is the name sysfs and
// `rdma link` give it: "IB", "RoCE v1", "RoCE v2".
type GIDType uint32

const (
	GIDTypeIB     GIDType = 0 // IB
	GIDTypeRoCEv1 GIDType = 1 // RoCE v1
	GIDTypeRoCEv2 GIDType = 2 // RoCE v2
)

// GIDEntry is one valid GID table entry.
type GIDEntry struct {
	GID     [16]byte // network order
	Index   uint32
	Port    uint32
	Type    GIDType
	IfIndex uint32 // 0 if no netdev
}
