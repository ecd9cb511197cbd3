// Package irdma is gorping's provider for Intel Ethernet 800 series adapters (E810,
// E822/E823: the irdma kernel driver, GEN_2 hardware) in RoCEv2 mode. The kernel only
// creates objects; the data path is user space against the device: send and receive
// queues of 32-byte quanta and a CQ of 32-byte CQEs in user memory the adapter reads and
// writes by DMA, each entry carrying a valid bit whose polarity flips every lap of its
// ring, a shadow area per CQ the device reads the consumer index and the arm request
// from, and 32-bit doorbells (the QP's or CQ's id) to one doorbell page per context,
// mapped from the uverbs fd. The provider registers its queue memory with the kernel
// itself (REG_MR with irdma's driver data) before it creates the queue, on a PD of its
// own for CQs, as libirdma does. The layouts are libirdma 44's (rdma-core), checked
// against that library by the oracle tests. RC QPs only; X722 (GEN_1, the i40iw
// interface) and iWARP mode are refused. It registers itself on amd64 and arm64, the
// architectures internal/mmio has barriers for.
package irdma

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/gorping/gorping/internal/mmio"
	"github.com/gorping/gorping/internal/wire"
	"github.com/gorping/gorping/uverbs"
	"github.com/gorping/gorping/uverbs/driver"
	"github.com/gorping/gorping/uverbs/providerkit"
	"golang.org/x/sys/unix"
)

func init() {
	if mmio.Supported {
		uverbs.Register(provider{})
	}
}

type provider struct{}

func (provider) Info() driver.Info {
	return driver.Info{
		Driver: irdmaDriver, DriverID: irdmaDriverID, ABIMin: irdmaABIOld, ABIMax: irdmaABI,
		Transport: driver.TransportIB,
		// The RDMA device's parent is the PCI function the Ethernet driver (ice) owns.
		Sysfs: driver.SysfsMatch{BusDrivers: []string{"ice"}},
		// None: doorbells and the CQ arm are stores to the doorbell page.
	}
}

// NewContext runs GET_CONTEXT as libirdma does (ABI 5, again with 4 if the kernel
// refuses), maps the doorbell page and allocates the PD the CQs' memory is registered on.
func (provider) NewContext(dev driver.Device, cc driver.ContextCommander) (driver.Context, error) {
	if dev.Transport == driver.TransportIWARP {
		return nil, fmt.Errorf("irdma: %s runs iWARP; gorping's irdma provider drives RoCEv2 only (load irdma with roce_ena=1): %w", dev.Name, unix.EOPNOTSUPP)
	}
	req := uctxReq{UserspaceVer: irdmaABI}
	drv, err := cc.GetContext(wire.Bytes(&req)[:uctxReqLen], uctxRespLen)
	if err != nil {
		req.UserspaceVer = irdmaABIOld
		var err2 error
		if drv, err2 = cc.GetContext(wire.Bytes(&req)[:uctxReqLen], uctxRespLen); err2 != nil {
			return nil, err
		}
	}
	var r uctxResp
	wire.Decode(&r, drv)
	switch r.HwRev {
	case gen2:
	case 0, gen1:
		return nil, fmt.Errorf("irdma: %s is an X722 (i40iw, GEN_1); gorping's irdma provider drives the E800 series (GEN_2) only: %w", dev.Name, unix.EOPNOTSUPP)
	default:
		return nil, fmt.Errorf("irdma: %s is hardware generation %d; gorping's irdma provider knows GEN_2 (E800 series) only: %w", dev.Name, r.HwRev, unix.EOPNOTSUPP)
	}
	if r.MaxHwSQChunk == 0 || r.MaxHwWqFrags == 0 || r.MaxHwCQSize == 0 {
		return nil, fmt.Errorf("irdma: GET_CONTEXT answered a device without queues (sq chunk %d, %d fragments, CQs of %d)", r.MaxHwSQChunk, r.MaxHwWqFrags, r.MaxHwCQSize)
	}
	c := &context{dev: dev, cmd: cc, attrs: r, abi: int(req.UserspaceVer)}
	// libirdma maps one hardware page; the kernel rounds the mapping to its own page.
	c.db, err = cc.Mmap("irdma doorbell page", int64(r.DbMmapKey), hwPage, unix.PROT_READ|unix.PROT_WRITE)
	if err != nil {
		return nil, fmt.Errorf("irdma: map the doorbell page: %w", err)
	}
	if c.pdHandle, c.pdID, err = c.allocPD(); err != nil {
		cc.Munmap(c.db)
		return nil, fmt.Errorf("irdma: the context's PD: %w", err)
	}
	return c, nil
}

// context is the provider's per-context state: the device's limits, the doorbell page,
// the PD the CQ memory is registered on, and the QPs by the completion context their
// CQEs carry.
type context struct {
	dev      driver.Device
	cmd      driver.Commander
	attrs    uctxResp
	abi      int
	db       []byte
	pdHandle uint32 // ALLOC_PD of the context (libirdma's iwupd)
	pdID     uint32
	qps      providerkit.Table[uint64, qp]
}

func (c *context) feature(f uint64) bool { return c.attrs.FeatureFlags&f != 0 }

// allocPD runs ALLOC_PD with irdma's response (the PD id).
func (c *context) allocPD() (handle, id uint32, err error) {
	var req allocPDCmd
	resp := make([]byte, unsafe.Sizeof(allocPDCoreResp{})+pdRespLen)
	if err := c.cmd.Write(cmdAllocPD, wire.Bytes(&req), resp); err != nil {
		return 0, 0, err
	}
	var core allocPDCoreResp
	var drv pdResp
	wire.Decode(&core, resp)
	wire.Decode(&drv, resp[unsafe.Sizeof(core):])
	return core.PDHandle, drv.PDID, nil
}

// regMR registers queue memory (REG_MR with irdma's reg_type and page counts) on the
// PD with handle pd, local write only, as libirdma's ibv_cmd_reg_mr calls do.
func (c *context) regMR(pd uint32, addr uint64, length int, mr memRegReq) (uint32, error) {
	var req struct {
		core regMRCmd
		drv  memRegReq
	}
	req.core = regMRCmd{Start: addr, Length: uint64(length), HcaVa: addr, PDHandle: pd, AccessFlags: uint32(driver.AccessLocalWrite)}
	req.drv = mr
	resp := make([]byte, unsafe.Sizeof(regMRCoreResp{}))
	if err := c.cmd.Write(cmdRegMR, wire.Bytes(&req), resp); err != nil {
		return 0, err
	}
	var r regMRCoreResp
	wire.Decode(&r, resp)
	return r.MRHandle, nil
}

// deregMR deregisters queue memory after its queue was destroyed. After Context.Close
// (the fd is closed) the kernel has released it with the context.
func (c *context) deregMR(handle uint32) error {
	req := deregMRCmd{MRHandle: handle}
	err := c.cmd.Write(cmdDeregMR, wire.Bytes(&req), nil)
	if errors.Is(err, driver.ErrClosed) {
		return nil
	}
	return err
}

// Close unmaps the doorbell page. The context's PD goes with the kernel context (the fd
// is closed when this runs), where libirdma deallocates it first.
func (c *context) Close() error {
	if c.db == nil {
		return nil
	}
	err := c.cmd.Munmap(c.db)
	c.db = nil
	return err
}

func (c *context) Describe() string {
	a := &c.attrs
	return fmt.Sprintf("irdma %s: GEN_%d, ABI %d, features %#x, PD %d (id %d), %d fragments, inline %d, sq chunk %d quanta, wq %d/rq %d quanta, CQs of %d..%d",
		c.dev.Name, a.HwRev, c.abi, a.FeatureFlags, c.pdHandle, c.pdID, a.MaxHwWqFrags, a.MaxHwInline, a.MaxHwSQChunk, a.MaxHwWqQuanta, a.MaxHwRQQuanta, a.MinHwCQSize, a.MaxHwCQSize)
}

// PDUdata: irdma answers ALLOC_PD with the PD id (8 bytes), which the data path does not
// use.
func (c *context) PDUdata() ([]byte, int)           { return nil, pdRespLen }
func (c *context) PDAllocated(uint32, []byte) error { return nil }

// MRUdata: REG_MR of an application buffer carries reg_type MEM (8 bytes, no response).
func (c *context) MRUdata(driver.AccessFlags) ([]byte, int) {
	return wire.Bytes(&memRegReq{RegType: memregTypeMem}), 0
}
func (c *context) MRRegistered(uint32, []byte) error { return nil }

// doorbell rings a 32-bit doorbell at off of the doorbell page (0: a QP's send queue, 64:
// a CQ's arm) with id, after the writes it announces (udma_to_device_barrier).
func (c *context) doorbell(staged *uint32, off int, id uint32) {
	*staged = id
	mmio.ToDevice()
	mmio.Store32(unsafe.Pointer(&c.db[off]), unsafe.Pointer(staged))
}
