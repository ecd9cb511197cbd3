package uverbs

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// A Provider is the user-space half of one kernel RDMA driver: the driver-specific parts of
// the create commands and the data path (rings, doorbells). Providers register themselves
// with Register from an init function; uverbs never imports one.
type Provider interface {
	Driver() string                                                 // kernel driver name, e.g. "rxe"
	DriverID() uint32                                               // enum rdma_driver_id, e.g. 14 for rxe
	ABIRange() (min, max int)                                       // accepted driver uverbs ABI versions (sysfs abi_version)
	ContextUdata() (in []byte, outLen int)                          // GET_CONTEXT driver parts
	NewContext(cmd Commander, resp []byte) (ProviderContext, error) // resp: driver response
}

// A ProviderContext is a provider's per-context state.
type ProviderContext interface {
	CQUdata(cqe int) (in []byte, outLen int) // CREATE_CQ driver parts
	// NewCQ is called after CREATE_CQ succeeded; resp is the driver response. On error the
	// core destroys the kernel CQ.
	NewCQ(cmd Commander, core CQCore, resp []byte) (ProviderCQ, error)
	QPUdata(attr *QPInitAttr) (in []byte, outLen int) // CREATE_QP driver parts
	// NewQP is called after CREATE_QP succeeded; on error the core destroys the kernel QP.
	NewQP(cmd Commander, core QPCore, resp []byte) (ProviderQP, error)
	Close() error // after the uverbs fd is closed
}

// A ProviderCQ is a provider's completion queue data path. Close is called after the
// kernel CQ was destroyed (unmap rings, free buffers).
type ProviderCQ interface {
	Poll(wc []WC) (int, error)
	Arm(solicitedOnly bool) error
	Close() error
}

// A ProviderQP is a provider's queue pair data path. Close is called after the kernel QP
// was destroyed.
type ProviderQP interface {
	PostSend(wr *SendWR) error
	PostRecv(wr *RecvWR) error
	Close() error
}

// Commander is what a provider gets of its context: the command path and the fd to mmap.
type Commander interface {
	// Write sends one write() command: header | req. If resp is not empty, req must begin
	// with the 8-byte `response` field, which Write points at arena memory, and the
	// response is copied to resp afterwards. req is not modified. Write does not allocate
	// unless it fails.
	Write(cmd uint32, req, resp []byte) error
	Fd() int
}

// CQCore is what the core knows about a CQ it created for a provider.
type CQCore struct {
	Handle uint32 // kernel cq_handle
	CQE    int    // depth granted by the kernel
	Udata  []byte // the `in` slice CQUdata returned (lets a provider find its allocation)
}

// QPCore is what the core knows about a QP it created for a provider.
type QPCore struct {
	Handle uint32 // kernel qp_handle
	QPN    uint32
	Type   QPType
	Cap    QPCap // capabilities granted by the kernel
	SigAll bool
	SendCQ ProviderCQ
	RecvCQ ProviderCQ
	Udata  []byte // the `in` slice QPUdata returned
}

// Optional provider interfaces. The core checks for them with type assertions, so drivers
// with more driver data (siw: REG_MR; mlx5: ALLOC_PD, user-allocated queue buffers) fit
// without changing the core.

// PDUdater supplies ALLOC_PD driver parts (mlx5 requires a 4-byte pdn response).
type PDUdater interface {
	PDUdata() (in []byte, outLen int)
}

// MRUdater supplies REG_MR driver parts (siw requires 8 bytes in and 8 out).
type MRUdater interface {
	MRUdata(access AccessFlags) (in []byte, outLen int)
}

// UdataReleaser is told when a create command failed after CQUdata/QPUdata, so it can free
// what it allocated for the request (mlx5 queue buffers, doorbell records).
type UdataReleaser interface {
	ReleaseCQUdata(in []byte)
	ReleaseQPUdata(in []byte)
}

// CompEventObserver is a ProviderCQ that must see every completion event read for its CQ
// (mlx5 advances its arm sequence number).
type CompEventObserver interface {
	CompEvent()
}

// QPStateObserver is a ProviderQP told about every state a successful MODIFY_QP set
// (rxe defers the send doorbell until RTS and refuses receives in RESET). An error (e.g. a
// deferred doorbell that failed) is returned by QP.Modify.
type QPStateObserver interface {
	SetState(s QPState) error
}

var (
	providersMu sync.RWMutex
	providers   []Provider
)

// Register makes a provider available to Open. It panics on a duplicate driver id/name.
func Register(p Provider) {
	providersMu.Lock()
	defer providersMu.Unlock()
	for _, q := range providers {
		if q.DriverID() == p.DriverID() || q.Driver() == p.Driver() {
			panic(fmt.Sprintf("uverbs: provider %q registered twice", p.Driver()))
		}
	}
	providers = append(providers, p)
}

// findProvider matches by driver id first, then by driver name (sysfs discovery without
// netlink yields only a name).
func findProvider(dev Device) Provider {
	providersMu.RLock()
	defer providersMu.RUnlock()
	if dev.DriverID != 0 {
		for _, p := range providers {
			if p.DriverID() == dev.DriverID {
				return p
			}
		}
	}
	if dev.Driver != "" {
		for _, p := range providers {
			if p.Driver() == dev.Driver {
				return p
			}
		}
	}
	return nil
}

func supportedDrivers() []string {
	providersMu.RLock()
	defer providersMu.RUnlock()
	var names []string
	for _, p := range providers {
		names = append(names, p.Driver())
	}
	sort.Strings(names)
	return names
}

// UnsupportedDriverError is returned by Open for a device no registered provider handles.
type UnsupportedDriverError struct {
	Device    string
	Driver    string // "" if unknown
	DriverID  uint32
	Supported []string
}

func (e *UnsupportedDriverError) Error() string {
	drv := e.Driver
	if drv == "" {
		drv = "unknown"
	}
	if e.DriverID != 0 {
		drv = fmt.Sprintf("%s (driver id %d)", drv, e.DriverID)
	}
	sup := "none"
	if len(e.Supported) > 0 {
		sup = strings.Join(e.Supported, ", ")
	}
	return fmt.Sprintf("uverbs: device %s uses driver %s, which has no gorping provider (supported: %s)", e.Device, drv, sup)
}
