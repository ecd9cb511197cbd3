package uverbs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/gorping/gorping/uverbs/driver"
	"io"
	"sync"
	"unsafe"

	"github.com/gorping/gorping/internal/trace"
	"golang.org/x/sys/unix"
)

// Context is an open uverbs device with its kernel ucontext.
type Context struct {
	dev            Device
	info           driver.Info // the provider's Info, read once
	memlock        func() (unix.Rlimit, error)
	prov           driver.Context
	cmd            *cmdPath
	async          *eventFile
	asyncFan       asyncFan // hands each async event to every subscriber
	numCompVectors int

	mu         sync.Mutex
	closed     bool
	refs       int    // OpenShared users; 0 for a private context
	sharedKey  string // key in shared.ctxs, "" for a private context
	nextCookie uint64
	cqs        map[uint64]*CQ
	qps        map[uint64]*QP
}

// Open opens dev's uverbs node and creates its context through the registered provider
// (or the one WithProvider names). Every Open makes a new kernel context; OpenShared
// shares one. withBackend replaces the device node.
func Open(dev Device, opts ...Option) (*Context, error) {
	o := applyOptions(opts)
	p, err := providers.lookup(dev, o.provider)
	if err != nil {
		return nil, err
	}
	if o.backend != nil {
		return openContext(dev, p, -1, o)
	}
	fd, err := unix.Open(dev.Path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, openError(dev.Path, err)
	}
	c, err := openContext(dev, p, fd, o)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return c, nil
}

// OpenBackend creates a context on dev whose device file is b (Open with withBackend).
func OpenBackend(dev Device, b driver.Backend, opts ...Option) (*Context, error) {
	return Open(dev, append(opts, withBackend(b))...)
}

// shared holds the contexts OpenShared hands out, one per device node.
var shared struct {
	mu   sync.Mutex
	ctxs map[string]*Context
}

// OpenShared returns the process's context for dev, opening it (Open, with opts) on first
// use. Each call must be matched by one Close; the kernel context goes away with the last.
// A -P server uses it so that all its connections share one context (on mlx5 that is one
// set of UAR pages and bfregs rather than one per client).
func OpenShared(dev Device, opts ...Option) (*Context, error) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if c := shared.ctxs[dev.Path]; c != nil {
		c.mu.Lock()
		if !c.closed {
			c.refs++
			c.mu.Unlock()
			return c, nil
		}
		c.mu.Unlock()
	}
	c, err := Open(dev, opts...)
	if err != nil {
		return nil, err
	}
	c.refs, c.sharedKey = 1, dev.Path
	if shared.ctxs == nil {
		shared.ctxs = map[string]*Context{}
	}
	shared.ctxs[dev.Path] = c
	return c, nil
}

// ctxCommander is the driver.ContextCommander NewContext gets.
type ctxCommander struct {
	*cmdPath
	dev  Device
	resp *getContextResp
	done bool
}

func (cc *ctxCommander) GetContext(in []byte, outLen int) ([]byte, error) {
	if cc.done {
		return nil, errors.New("uverbs: GET_CONTEXT already succeeded")
	}
	var req getContextReq
	drv, err := call(cc.cmdPath, cmdGetContext, &req, cc.resp, in, outLen)
	if err != nil {
		return nil, fmt.Errorf("uverbs: device %s: %w", cc.dev.Name, err)
	}
	cc.done = true
	if drv == nil {
		drv = []byte{}
	}
	return drv, nil
}

func (cc *ctxCommander) QueryDevice() (DeviceAttr, error) {
	if !cc.done {
		return DeviceAttr{}, errors.New("uverbs: QUERY_DEVICE before GET_CONTEXT")
	}
	return queryDevice(cc.cmdPath, cc.dev.Name)
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

// openContext creates the context on fd (-1 with a backend). On error the caller closes
// fd.
func openContext(dev Device, p driver.Provider, fd int, o options) (*Context, error) {
	cmd, err := newCmdPath(fd, p.Info(), o)
	if err != nil {
		return nil, err
	}
	if tr := o.tracer; tr != nil {
		tr.Emit("uverbs", "open", []trace.Field{trace.F("device", dev.Name), trace.F("path", dev.Path),
			trace.F("driver", dev.Driver), trace.F("abi", dev.ABI)}, nil, nil)
		tr.Emit("mmap", "anonymous command arena and doorbell lanes (the kernel writes responses there)", []trace.Field{trace.F("length", arenaSize+laneCount*laneSize)}, nil, nil)
	}
	var resp getContextResp
	cc := &ctxCommander{cmdPath: cmd, dev: dev, resp: &resp}
	prov, err := p.NewContext(dev.driverDevice(), cc)
	if err == nil && !cc.done {
		prov.Close()
		err = errors.New("provider created no kernel context")
	}
	if err != nil {
		if cc.done {
			// The kernel context dies with the fd; only the async fd is ours to close.
			unix.Close(int(resp.AsyncFD))
		}
		cmd.close()
		return nil, fmt.Errorf("uverbs: device %s: %s provider: %w", dev.Name, p.Info().Driver, err)
	}
	async, err := newEventFile(int(resp.AsyncFD), "uverbs async events")
	if err != nil {
		prov.Close()
		cmd.close()
		return nil, err
	}
	return &Context{
		dev:            dev,
		info:           p.Info(),
		memlock:        o.memlock,
		prov:           prov,
		cmd:            cmd,
		async:          async,
		numCompVectors: int(resp.NumCompVectors),
		nextCookie:     1,
		cqs:            map[uint64]*CQ{},
		qps:            map[uint64]*QP{},
	}, nil
}

// Device returns the device this context was opened on.
func (c *Context) Device() Device { return c.dev }

// NumCompVectors is the number of completion vectors (bounds CreateCQ's vector).
func (c *Context) NumCompVectors() int { return c.numCompVectors }

// Close closes the device. The kernel destroys every object created through the context;
// their Destroy/Dealloc/Dereg methods then return nil. Completion channels stay open until
// closed.
//
// A context from OpenShared is closed by the last of its users' Close calls.
func (c *Context) Close() error {
	if c.sharedKey != "" {
		shared.mu.Lock()
		c.mu.Lock()
		if c.refs > 1 {
			c.refs--
			c.mu.Unlock()
			shared.mu.Unlock()
			return nil
		}
		c.refs = 0
		if shared.ctxs[c.sharedKey] == c {
			delete(shared.ctxs, c.sharedKey)
		}
		c.mu.Unlock()
		shared.mu.Unlock()
	}
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
	if c.cmd.backend == nil {
		errs = append(errs, unix.Close(c.cmd.fd))
	} else if cl, ok := c.cmd.backend.(io.Closer); ok {
		// A backend plays the device file: closing it is where the kernel tears the
		// context's objects down, before their memory is released below.
		errs = append(errs, cl.Close())
	}
	c.cmd.fdClosed = true
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
func (c *Context) QueryDevice() (DeviceAttr, error) { return queryDevice(c.cmd, c.dev.Name) }

func queryDevice(cmd *cmdPath, name string) (DeviceAttr, error) {
	var req queryDeviceReq
	var r queryDeviceResp
	if _, err := call(cmd, cmdQueryDevice, &req, &r, nil, 0); err != nil {
		return DeviceAttr{}, fmt.Errorf("uverbs: %s: %w", name, err)
	}
	return deviceAttrFromWire(&r), nil
}

// QueryDeviceEx returns the device attributes of the extended query (QUERY_DEVICE_EX),
// which add the completion timestamp capability to QueryDevice's.
func (c *Context) QueryDeviceEx() (DeviceAttrEx, error) {
	var req exQueryDeviceReq
	var r exQueryDeviceResp
	if _, err := callEx(c.cmd, cmdQueryDevice, &req, &r, nil, 0); err != nil {
		return DeviceAttrEx{}, fmt.Errorf("uverbs: %s: %w", c.dev.Name, err)
	}
	a := DeviceAttrEx{DeviceAttr: deviceAttrFromWire(&r.Base)}
	// The kernel fills what it knows and says how much (older kernels: less).
	if r.ResponseLength >= uint32(unsafe.Offsetof(r.HcaCoreClock)+8) {
		a.CompletionTimestampMask, a.HCACoreClockKHz = r.TimestampMask, r.HcaCoreClock
	}
	return a, nil
}

// Describe returns the provider's one-line view of the context ("" if it has none).
func (c *Context) Describe() string {
	if d, ok := c.prov.(driver.Describer); ok {
		return d.Describe()
	}
	return ""
}

// QueryPort returns the attributes of port (1-based) (QUERY_PORT).
func (c *Context) QueryPort(port uint8) (PortAttr, error) {
	req := queryPortReq{PortNum: port}
	var r queryPortResp
	if _, err := call(c.cmd, cmdQueryPort, &req, &r, nil, 0); err != nil {
		return PortAttr{}, fmt.Errorf("uverbs: %s port %d: %w", c.dev.Name, port, err)
	}
	a := portAttrFromWire(&r)
	a.GRHRequired = r.Flags&1 != 0 // IB_UVERBS_QPF_GRH_REQUIRED
	return a, nil
}

// be64 reads a __be64 (the GUIDs of QUERY_DEVICE's answer).
func be64(b [8]byte) uint64 { return binary.BigEndian.Uint64(b[:]) }
