// Package driver is the provider face of uverbs, as database/sql/driver is database/sql's:
// what a provider (the user-space half of one kernel RDMA driver: uverbs/rxe, uverbs/mlx5,
// ...) implements and what the core hands it. A consumer never needs it; it uses package
// uverbs, which names the verbs types defined here (WC, SendWR, QPCap, ...) as its own.
// docs/adding-a-provider.md is the checklist for a new provider; uverbs/providerkit holds
// what providers share.
package driver

// Device is what a provider learns of the device a context is opened on.
type Device struct {
	Name      string // ibdev name, e.g. "rxe0"
	Driver    string // kernel driver name ("" if unknown)
	DriverID  uint32 // enum rdma_driver_id, 0 if unknown
	ABI       int    // driver uverbs ABI version
	Transport Transport
}

// A Provider is the user-space half of one kernel RDMA driver: the driver-specific parts of
// the create commands and the data path (rings, doorbells). Providers register themselves
// with uverbs.Register from an init function; uverbs never imports one, and the core knows of a
// driver only what its provider's Info says. The providers gorping ships are imported in
// one place (package uverbs/providers); docs/adding-a-provider.md is the checklist.
//
// Every hook that allocates can fail, and creates are two-phase: Prepare* sizes the queue,
// allocates what the driver request points at and may adjust the core request; the core
// then runs the command and calls Commit with the driver response (or Abort if the command
// failed).
type Provider interface {
	// Info describes the driver; the core reads it once per Register and per context.
	Info() Info
	// NewContext creates the provider's side of a context on dev. It runs GET_CONTEXT
	// itself through cc (and may retry it with another request); Open fails if none
	// succeeded.
	NewContext(dev Device, cc ContextCommander) (Context, error)
}

// Info is what a provider says of itself.
type Info struct {
	Driver   string // kernel driver name, as RDMA netlink names it: "rxe"
	DriverID uint32 // enum rdma_driver_id: 14 (RDMA_DRIVER_RXE)
	// ABIMin and ABIMax bound the driver uverbs ABI versions the provider speaks (sysfs
	// abi_version, RDMA netlink's chardev ABI).
	ABIMin, ABIMax int
	// Transport is what the driver's devices run: TransportIB (InfiniBand, RoCE) or
	// TransportIWARP. QP.Transport reports it.
	Transport Transport
	// Sysfs says how discovery recognizes the driver's devices when RDMA netlink cannot
	// tell (kernels without it): the driver id is then unknown, the name comes from here.
	Sysfs SysfsMatch
	// RawCommands are the data-path commands the provider sends through Commander.Write
	// that never sleep in its kernel driver (CmdPostSend as a doorbell, CmdReqNotifyCQ):
	// the core writes them with a raw write(2) the Go scheduler does not see (see rawWrite
	// in cmd.go). Every other command is an ordinary system call. Only CmdPostSend and
	// CmdReqNotifyCQ may be listed.
	RawCommands []uint32
}

// SysfsMatch is how a driver's devices look in sysfs (class/infiniband/<dev>). Discovery
// tries the bus driver first, then the software-device rules.
type SysfsMatch struct {
	// BusDrivers are the kernel drivers of the device's bus device (device/driver), e.g.
	// "mlx5_core" for mlx5.
	BusDrivers []string
	// SoftParent: a software device without a bus device whose `parent` attribute names
	// its netdev (rxe).
	SoftParent bool
	// SoftNode: a software device without a bus device and without `parent`, recognized
	// by its node type, which is that of Transport (siw: RNIC).
	SoftNode bool
}

// A Context is a provider's per-context state.
type Context interface {
	PrepareCQ(req *CQRequest) (PendingCQ, error)
	PrepareQP(req *QPRequest) (PendingQP, error)
	Close() error // after the uverbs fd is closed and every CQ and QP was closed
}

// CQRequest is the core part of a CREATE_CQ as it will be sent. PrepareCQ may change CQE
// (e.g. to the depth the provider's ring really has).
type CQRequest struct {
	CQE    int
	Vector int
	Flags  CQFlags // CreateCQEx's flags (CQTimestamps): the provider fills WC.Timestamp
}

// PendingCQ is a CQ between PrepareCQ and the kernel's answer.
type PendingCQ interface {
	Udata() (in []byte, outLen int) // CREATE_CQ driver parts
	// Commit is called after CREATE_CQ succeeded; resp is the driver response. On error
	// the core destroys the kernel CQ (and calls nothing else).
	Commit(cmd Commander, core CQCore, resp []byte) (CQ, error)
	Abort() // CREATE_CQ failed: free what PrepareCQ allocated
}

// QPRequest is the core part of a CREATE_QP as it will be sent. PrepareQP may change Cap
// (the capabilities the kernel is told about).
type QPRequest struct {
	Type   QPType
	Cap    QPCap
	SigAll bool
	SendCQ CQ
	RecvCQ CQ
	// PD is the kernel handle of the PD the QP is created on (irdma registers the queue
	// memory on it, with REG_MR, before CREATE_QP).
	PD uint32
}

// PendingQP is a QP between PrepareQP and the kernel's answer.
type PendingQP interface {
	Udata() (in []byte, outLen int) // CREATE_QP driver parts
	// Commit is called after CREATE_QP succeeded. core.Cap holds the kernel's answer; the
	// provider may overwrite it with the capabilities it really provides, which QP.Cap
	// then reports. On error the core destroys the kernel QP.
	Commit(cmd Commander, core *QPCore, resp []byte) (QP, error)
	Abort() // CREATE_QP failed
}

// A CQ is a provider's completion queue data path. Close is called after the
// kernel CQ was destroyed (unmap rings, free buffers).
type CQ interface {
	Poll(wc []WC) (int, error)
	Arm(solicitedOnly bool) error
	Close() error
}

// A QP is a provider's queue pair data path. Close is called after the kernel QP
// was destroyed.
type QP interface {
	PostSend(wr *SendWR) error
	PostRecv(wr *RecvWR) error
	Close() error
}

// Commander is what a provider gets of its context: the command path and the device's
// mappings. Mmap and Munmap run under the command lock, so a mapping can never hit a closed
// (or reused) fd: after Context.Close they return ErrClosed / only unmap.
type Commander interface {
	// Write sends one provider write() command (rxe's and siw's doorbell and CQ arm, a
	// provider's own driver commands): header | req, at most 256 bytes, as is its response. If resp is not empty, req must begin with the
	// 8-byte `response` field, which Write points at mmap'd memory, and the response is
	// copied to resp afterwards. req is not modified. Write does not allocate unless it
	// fails, and Writes from several goroutines run side by side.
	Write(cmd uint32, req, resp []byte) error
	// Mmap maps length bytes of the device file at offset off (MAP_SHARED, prot as given);
	// what names the mapping in traces and errors ("rxe send queue ring").
	Mmap(what string, off int64, length, prot int) ([]byte, error)
	Munmap(b []byte) error
}

// ContextCommander is the Commander NewContext gets: it can also create the kernel
// context and, after that, query the device (vendor and part ids).
type ContextCommander interface {
	Commander
	// GetContext runs GET_CONTEXT with driver request in and returns the outLen-byte
	// driver response. After a success further calls fail.
	GetContext(in []byte, outLen int) ([]byte, error)
	QueryDevice() (DeviceAttr, error)
}

// CQCore is what the core knows about a CQ it created for a provider.
type CQCore struct {
	Handle uint32 // kernel cq_handle
	CQE    int    // depth granted by the kernel
}

// QPCore is what the core knows about a QP it created for a provider.
type QPCore struct {
	Handle uint32 // kernel qp_handle
	QPN    uint32
	Type   QPType
	Cap    QPCap // capabilities granted by the kernel; Commit may replace them
	SigAll bool
	SendCQ CQ
	RecvCQ CQ
}

// Optional Context interfaces. The core checks for them with type assertions.

// PDHooks supplies ALLOC_PD driver parts and gets the driver response (mlx5: the pdn).
// An error from PDAllocated deallocates the PD and fails AllocPD.
type PDHooks interface {
	PDUdata() (in []byte, outLen int)
	PDAllocated(handle uint32, resp []byte) error
}

// MRHooks supplies REG_MR driver parts and gets the driver response (siw: 8 bytes each
// way). An error from MRRegistered deregisters the MR and fails RegMR.
type MRHooks interface {
	MRUdata(access AccessFlags) (in []byte, outLen int)
	MRRegistered(handle uint32, resp []byte) error
}

// CompEventObserver is a CQ that must see every completion event read for its CQ
// (mlx5 advances its arm sequence number).
type CompEventObserver interface {
	CompEvent()
}

// QPStateObserver is a QP told about every state a successful MODIFY_QP set
// (rxe defers the send doorbell until RTS and refuses receives in RESET). An error (e.g. a
// deferred doorbell that failed) is returned by QP.Modify.
type QPStateObserver interface {
	SetState(s QPState) error
}

// QPAttrObserver is a QP told about every successful MODIFY_QP, with the
// attributes and the mask it carried (bnxt_re writes each send WQE's PSN range for the
// device's retransmissions, from the send PSN and path MTU the QP was given). Its error
// is QP.Modify's.
type QPAttrObserver interface {
	Modified(attr *QPAttr, mask QPAttrMask) error
}

// TimestampConverter is a CQ whose completions carry device timestamps when
// created with CQTimestamps (mlx5): it converts one to nanoseconds of the device clock.
type TimestampConverter interface {
	TimestampNS(ts uint64) (ns uint64, ok bool)
}

// Describer is an optional Context, CQ or QP that describes its
// provider-side state in one line (mlx5: UAR and bfreg, queue sizes) for debug output.
type Describer interface {
	Describe() string
}

// Optional Provider interface.

// LinkDownAdvisor is a Provider whose driver has a known problem after a port's link went
// down, and says what to do about it (rxe: its QP1 does not recover from a link flap).
// rping's explanation of an unanswered connection request and `gorping devices` print
// the advice after their own facts; uverbs.Device.LinkDownAdvice asks for it.
type LinkDownAdvisor interface {
	// LinkDownAdvice is the advice for dev, whose port on netdev ("" if unknown) saw its
	// link go down: one clause, lower case, without a final period; "" if none.
	LinkDownAdvice(dev Device, netdev string) string
}

// Backend stands in for a device file (tests, device models; uverbs.OpenBackend): every
// command write and every mapping of the context goes to it instead of the kernel; ioctls
// fail with ENOTTY, as on a kernel without the ioctl interface. The fds its GET_CONTEXT and
// CREATE_COMP_CHANNEL answers carry must be real (e.g. pipes); the context owns them. A
// Backend that is also an io.Closer is closed by Context.Close where the device file would
// be: before the provider frees its queue memory, as the kernel releases the context's
// objects when the fd closes.
type Backend interface {
	Write(p []byte) (int, error)
	Mmap(off int64, length, prot int) ([]byte, error)
	Munmap(b []byte) error
}

// UDPSourcePorter is a Provider that knows the RoCEv2 UDP source port its driver gives an
// RC QP connected by rdma_cm (mlx5, rxe).
type UDPSourcePorter interface {
	// UDPSourcePort is the port for a QP lqpn connected to rqpn over a route with RoCEv2
	// flow label fl (rdmacm.FlowLabel) on kernel (major, minor; zero if unknown); 0 if
	// the driver's choice is not known there. providerkit.FlowLabelSport is the core's
	// formula.
	UDPSourcePort(kernel [2]int, fl, lqpn, rqpn uint32) uint16
}
