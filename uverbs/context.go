package uverbs

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/gorping/gorping/internal/wire"
	"golang.org/x/sys/unix"
)

// Context is an open uverbs device with its kernel ucontext.
type Context struct {
	dev            Device
	provider       Provider
	prov           ProviderContext
	cmd            *cmdPath
	async          *eventFile
	numCompVectors int

	mu         sync.Mutex
	closed     bool
	nextCookie uint64
	cqs        map[uint64]*CQ
	qps        map[uint64]*QP
}

// Open opens dev's uverbs node and creates its context through the registered provider.
func Open(dev Device) (*Context, error) {
	p := findProvider(dev)
	if p == nil {
		return nil, &UnsupportedDriverError{Device: dev.Name, Driver: dev.Driver, DriverID: dev.DriverID, Supported: supportedDrivers()}
	}
	if min, max := p.ABIRange(); dev.ABI < min || dev.ABI > max {
		return nil, fmt.Errorf("uverbs: device %s: driver ABI version %d is not supported by the %s provider (supported %d..%d)", dev.Name, dev.ABI, p.Driver(), min, max)
	}
	fd, err := unix.Open(dev.Path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, openError(dev.Path, err)
	}
	c, err := openContext(dev, p, fd, nil)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return c, nil
}

func openError(path string, err error) error {
	switch {
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return fmt.Errorf("uverbs: open %s: %w: run as root, or give your user read-write access "+
			"to the device, e.g. with a udev rule like rdma-core's: "+
			`KERNEL=="uverbs*", SUBSYSTEM=="infiniband_verbs", MODE="0666"`, path, err)
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENODEV), errors.Is(err, unix.ENXIO):
		return fmt.Errorf("uverbs: open %s: %w (is the ib_uverbs module loaded?)", path, err)
	}
	return fmt.Errorf("uverbs: open %s: %w", path, err)
}

// openContext runs GET_CONTEXT on an open fd. write is the command syscall (nil: write(2)).
// On error the caller closes fd.
func openContext(dev Device, p Provider, fd int, write func(int, []byte) (int, error)) (*Context, error) {
	cmd, err := newCmdPath(fd, write)
	if err != nil {
		return nil, err
	}
	in, outLen := p.ContextUdata()
	var req getContextReq
	var resp getContextResp
	drv, err := call(cmd, cmdGetContext, &req, &resp, in, outLen)
	if err != nil {
		cmd.close()
		return nil, fmt.Errorf("uverbs: device %s: %w", dev.Name, err)
	}
	async, err := newEventFile(int(resp.AsyncFD), "uverbs async events")
	if err != nil {
		cmd.close()
		return nil, err
	}
	c := &Context{
		dev:            dev,
		provider:       p,
		cmd:            cmd,
		async:          async,
		numCompVectors: int(resp.NumCompVectors),
		nextCookie:     1,
		cqs:            map[uint64]*CQ{},
		qps:            map[uint64]*QP{},
	}
	c.prov, err = p.NewContext(cmd, drv)
	if err != nil {
		async.close()
		cmd.close()
		return nil, fmt.Errorf("uverbs: device %s: %s provider: %w", dev.Name, p.Driver(), err)
	}
	return c, nil
}

// Device returns the device this context was opened on.
func (c *Context) Device() Device { return c.dev }

// NumCompVectors is the number of completion vectors (bounds CreateCQ's vector).
func (c *Context) NumCompVectors() int { return c.numCompVectors }

// Close closes the device. The kernel destroys every object created through the context;
// their Destroy/Dealloc/Dereg methods then return nil. Completion channels stay open until
// closed.
func (c *Context) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	cqs, qps := c.cqs, c.qps
	c.cqs, c.qps = map[uint64]*CQ{}, map[uint64]*QP{}
	c.mu.Unlock()

	errs := []error{c.async.close()}
	// Close the fd under the command lock so no command can race with fd reuse.
	c.cmd.mu.Lock()
	errs = append(errs, unix.Close(c.cmd.fd))
	c.cmd.mu.Unlock()
	for _, qp := range qps {
		errs = append(errs, qp.release())
	}
	for _, cq := range cqs {
		errs = append(errs, cq.release())
	}
	errs = append(errs, c.prov.Close(), c.cmd.close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("uverbs: close %s: %w", c.dev.Name, err)
	}
	return nil
}

func (c *Context) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// cookie hands out user_handle values; CQs and QPs share the space.
func (c *Context) cookie() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := c.nextCookie
	c.nextCookie++
	return v
}

// track enters a new object in the context's table of live objects (table is read under
// c.mu: Close swaps the tables), unless the context closed while the object was being
// created: then release frees its provider side and track returns ErrClosed.
func track[T any](c *Context, table func() map[uint64]*T, cookie uint64, obj *T, release func() error) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		release()
		return ErrClosed
	}
	table()[cookie] = obj
	c.mu.Unlock()
	return nil
}

// QueryDevice returns the device attributes (QUERY_DEVICE).
func (c *Context) QueryDevice() (DeviceAttr, error) {
	var req queryDeviceReq
	var r queryDeviceResp
	if _, err := call(c.cmd, cmdQueryDevice, &req, &r, nil, 0); err != nil {
		return DeviceAttr{}, fmt.Errorf("uverbs: %s: %w", c.dev.Name, err)
	}
	return deviceAttrFromWire(&r), nil
}

// QueryPort returns the attributes of port (1-based) (QUERY_PORT).
func (c *Context) QueryPort(port uint8) (PortAttr, error) {
	req := queryPortReq{PortNum: port}
	var r queryPortResp
	if _, err := call(c.cmd, cmdQueryPort, &req, &r, nil, 0); err != nil {
		return PortAttr{}, fmt.Errorf("uverbs: %s port %d: %w", c.dev.Name, port, err)
	}
	return PortAttr{
		State:        PortState(r.State),
		PhysState:    r.PhysState,
		MaxMTU:       MTU(r.MaxMtu),
		ActiveMTU:    MTU(r.ActiveMtu),
		LinkLayer:    LinkLayer(r.LinkLayer),
		GIDTableLen:  r.GidTblLen,
		PKeyTableLen: r.PkeyTblLen,
		CapFlags:     r.PortCapFlags,
		MaxMsgSize:   r.MaxMsgSz,
		LID:          r.Lid,
		SMLID:        r.SmLid,
		LMC:          r.Lmc,
		SMSL:         r.SmSl,
		ActiveWidth:  r.ActiveWidth,
		ActiveSpeed:  r.ActiveSpeed,
		GRHRequired:  r.Flags&1 != 0,
	}, nil
}

// AsyncEvent waits for the next asynchronous event of the context. It returns ctx.Err()
// when ctx ends and ErrClosed once the context is closed.
func (c *Context) AsyncEvent(ctx context.Context) (AsyncEvent, error) {
	b, err := c.async.read(ctx, 16)
	if err != nil {
		return AsyncEvent{}, err
	}
	var d asyncEventDesc
	wire.Decode(&d, b[:])
	ev := AsyncEvent{Type: AsyncEventType(d.EventType), Element: d.Element}
	c.mu.Lock()
	switch ev.Type {
	case EventCQErr:
		ev.CQ = c.cqs[d.Element]
	case EventQPFatal, EventQPReqErr, EventQPAccessErr, EventCommEst, EventSQDrained,
		EventPathMig, EventPathMigErr, EventQPLastWQEReached:
		ev.QP = c.qps[d.Element]
	}
	c.mu.Unlock()
	return ev, nil
}

// deviceAttrFromWire converts QUERY_DEVICE's answer; the GUIDs are __be64.
func deviceAttrFromWire(r *queryDeviceResp) DeviceAttr {
	return DeviceAttr{
		FWVer:                 r.FWVer,
		NodeGUID:              binary.BigEndian.Uint64(r.NodeGUID[:]),
		SysImageGUID:          binary.BigEndian.Uint64(r.SysImageGUID[:]),
		MaxMRSize:             r.MaxMRSize,
		PageSizeCap:           r.PageSizeCap,
		VendorID:              r.VendorID,
		VendorPartID:          r.VendorPartID,
		HWVer:                 r.HWVer,
		MaxQP:                 r.MaxQP,
		MaxQPWR:               r.MaxQPWR,
		DeviceCapFlags:        r.DeviceCapFlags,
		MaxSGE:                r.MaxSGE,
		MaxSGERd:              r.MaxSGERd,
		MaxCQ:                 r.MaxCQ,
		MaxCQE:                r.MaxCQE,
		MaxMR:                 r.MaxMR,
		MaxPD:                 r.MaxPD,
		MaxQPRdAtom:           r.MaxQPRdAtom,
		MaxEERdAtom:           r.MaxEERdAtom,
		MaxResRdAtom:          r.MaxResRdAtom,
		MaxQPInitRdAtom:       r.MaxQPInitRdAtom,
		MaxEEInitRdAtom:       r.MaxEEInitRdAtom,
		AtomicCap:             r.AtomicCap,
		MaxEE:                 r.MaxEE,
		MaxRDD:                r.MaxRDD,
		MaxMW:                 r.MaxMW,
		MaxRawIPv6QP:          r.MaxRawIPv6QP,
		MaxRawEthyQP:          r.MaxRawEthyQP,
		MaxMcastGrp:           r.MaxMcastGrp,
		MaxMcastQPAttach:      r.MaxMcastQPAttach,
		MaxTotalMcastQPAttach: r.MaxTotalMcastQPAttach,
		MaxAH:                 r.MaxAH,
		MaxFMR:                r.MaxFMR,
		MaxMapPerFMR:          r.MaxMapPerFMR,
		MaxSRQ:                r.MaxSRQ,
		MaxSRQWR:              r.MaxSRQWR,
		MaxSRQSGE:             r.MaxSRQSGE,
		MaxPKeys:              r.MaxPKeys,
		LocalCAAckDelay:       r.LocalCAAckDelay,
		PhysPortCnt:           r.PhysPortCnt,
	}
}
