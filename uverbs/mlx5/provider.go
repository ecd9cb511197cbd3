// Package mlx5 is gorping's provider for NVIDIA/Mellanox ConnectX-4 and later (the mlx5_ib
// kernel driver). The kernel only creates objects; the data path is user space against
// the device: WQEs and CQEs live in user memory the adapter reads and writes by DMA,
// doorbell records in user memory, and doorbells are stores to UAR pages mapped from the
// uverbs fd. The provider uses static UARs only (no DEVX, no dynamic UARs), 64-byte CQEs
// carrying the QP's user index, and RC/UC QPs. It registers itself on amd64 and arm64,
// the architectures internal/mmio has barriers for.
package mlx5

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/gorping/gorping/internal/mmio"
	"github.com/gorping/gorping/internal/umem"
	"github.com/gorping/gorping/internal/wire"
	"github.com/gorping/gorping/uverbs"
	"github.com/gorping/gorping/uverbs/driver"
	"golang.org/x/sys/unix"
)

func init() {
	if mmio.Supported {
		uverbs.Register(provider{})
	}
}

// GET_CONTEXT request: libmlx5's bfreg counts, CQE version 1 and 4 KiB UARs; no DEVX, no
// dynamic UARs. libmlx5 asks for 16 bfregs, or as many as one system page holds if more
// (two per 4 KiB UAR: 32 on a 64 KiB-page kernel), of which max(4, total-12) dedicated
// "low latency" ones.
const (
	defTotalBfregs  = 16
	defLowLatBfregs = 4
	medBfregsMax    = 12 // MLX5_MED_BFREGS_TSHOLD
)

func reqBfregs(pageSize int) (total, lowLat int) {
	total = max(defTotalBfregs, pageSize/uarSize*usableBfregsUAR)
	return total, max(defLowLatBfregs, total-medBfregsMax)
}

// provider is the mlx5 provider. pageSize is the kernel's page size, 0 for this
// kernel's; the oracle and model tests open contexts on a provider with another
// (uverbs.WithProvider) to run as on 16 or 64 KiB-page kernels.
type provider struct{ pageSize int }

func (provider) Info() driver.Info {
	return driver.Info{
		Driver: mlx5Driver, DriverID: mlx5DriverID, ABIMin: mlx5ABI, ABIMax: mlx5ABI,
		Transport: driver.TransportIB,
		Sysfs:     driver.SysfsMatch{BusDrivers: []string{"mlx5_core"}},
		// None: doorbells and the CQ arm are stores to the UAR page, not commands.
	}
}

func (p provider) NewContext(dev driver.Device, cc driver.ContextCommander) (driver.Context, error) {
	ps := p.pageSize
	if ps == 0 {
		ps = unix.Getpagesize()
	}
	total, low := reqBfregs(ps)
	req := allocUcontextReq{
		TotalNumBfregs:      uint32(total),
		NumLowLatencyBfregs: uint32(low),
		MaxCQEVersion:       cqeVersionMax,
		LibCaps:             libCap4KUAR,
	}
	drv, err := cc.GetContext(wire.Bytes(&req), allocUcontextRespLen)
	if err != nil {
		return nil, err
	}
	var r allocUcontextResp
	wire.Decode(&r, drv)
	attr, err := cc.QueryDevice()
	if err != nil {
		return nil, err
	}
	return newContext(dev, cc, &r, attr, ps, low)
}

// context is the provider's per-context state: the static UAR pages, the bfregs QPs were
// given, the doorbell-record pages and the user-index table CQ polling uses.
type context struct {
	dev      driver.Device
	cmd      driver.Commander
	resp     allocUcontextResp
	vendor   uint32
	part     uint32
	lim      devLimits
	pageSize int
	nupp     int      // 4 KiB UARs per system page
	uars     [][]byte // static UAR system pages, mapped write-only
	lowLat   int

	bfMu   sync.Mutex
	bfregs map[int]*bfreg

	table qpTable
	dbrs  dbrAllocator
	clock *clockPage // the kernel's clock_info page; nil: no completion timestamps
}

func newContext(dev driver.Device, cmd driver.Commander, r *allocUcontextResp, attr driver.DeviceAttr, pageSize, lowLat int) (*context, error) {
	if r.TotBfregs == 0 {
		return nil, errors.New("mlx5: the kernel gave the context no static UARs (dynamic UARs only), which gorping does not support")
	}
	if r.CQEVersion != 1 {
		return nil, fmt.Errorf("mlx5: the device uses CQE version %d; gorping needs version 1 (user index in the CQE)", r.CQEVersion)
	}
	nupp := int(r.NumUarsPerPage)
	if nupp == 0 {
		nupp = 1 // kernels before 4 KiB UARs
	}
	if nupp*uarSize > pageSize || r.BfRegSize*usableBfregsUAR > uarSize-bfOffset {
		return nil, fmt.Errorf("mlx5: inconsistent UAR layout (%d UARs per %d-byte page, bf_reg_size %d)", nupp, pageSize, r.BfRegSize)
	}
	nsys := int(r.TotBfregs) / (usableBfregsUAR * nupp)
	if nsys == 0 {
		return nil, fmt.Errorf("mlx5: %d static bfregs make no UAR page", r.TotBfregs)
	}
	c := &context{
		dev: dev, cmd: cmd, resp: *r, vendor: attr.VendorID, part: attr.VendorPartID,
		lim: devLimits{
			maxSQDescSz: int(r.MaxSQDescSz), maxRQDescSz: int(r.MaxRQDescSz),
			maxSendWQEBB: int(r.MaxSendWqebb), maxRecvWR: int(r.MaxRecvWR),
		},
		pageSize: pageSize, nupp: nupp, lowLat: lowLat, bfregs: map[int]*bfreg{},
		dbrs: dbrAllocator{pageSize: pageSize, slot: max(int(r.CacheLineSize), 64)},
	}
	// Map every static UAR page now, as libmlx5 does: bfregs are handed out by CREATE_QP and
	// the CQ arm doorbell lives in the first page.
	for i := 0; i < nsys; i++ {
		b, err := cmd.Mmap("mlx5 UAR page", uarMmapOffset(mmapRegularPage, i, pageSize), pageSize, unix.PROT_WRITE)
		if err != nil {
			c.unmapUARs()
			return nil, fmt.Errorf("mlx5: map UAR page %d of %d: %w", i, nsys, err)
		}
		c.uars = append(c.uars, b)
	}
	// The clock_info page converts completion timestamps; libmlx5 maps it here too. A
	// kernel without it (or refusing it) leaves the context without timestamps.
	if r.ClockInfoVersions&(1<<clockInfoV1) != 0 {
		if b, err := cmd.Mmap("mlx5 clock_info page", uarMmapOffset(mmapClockInfo, clockInfoV1, pageSize), pageSize, unix.PROT_READ); err == nil {
			c.clock = &clockPage{b: b, ci: (*clockInfo)(unsafe.Pointer(&b[0]))}
		}
	}
	return c, nil
}

func (c *context) unmapUARs() error {
	var errs []error
	for _, b := range c.uars {
		errs = append(errs, c.cmd.Munmap(b))
	}
	c.uars = nil
	if c.clock != nil {
		errs = append(errs, c.cmd.Munmap(c.clock.b))
		c.clock = nil
	}
	return errors.Join(errs...)
}

// Close unmaps the UAR pages and frees the doorbell-record pages.
func (c *context) Close() error {
	return errors.Join(c.unmapUARs(), c.dbrs.close())
}

func (c *context) Describe() string {
	bf := "no BlueFlame (write-combining unavailable)"
	if c.resp.BfRegSize != 0 {
		bf = fmt.Sprintf("BlueFlame registers of %d bytes", c.resp.BfRegSize)
	}
	ts := "no clock_info page (no completion timestamps)"
	if c.clock != nil {
		ts = "clock_info page (completion timestamps, free-running format)"
	}
	if c.resp.CompMask&respMaskRealTimeTS != 0 {
		ts += ", device can stamp real time (not used)"
	}
	return fmt.Sprintf("mlx5 %s: vendor %#x part %d, %d static UAR pages of %d bytes (%d UARs each), %d bfregs (%d low-latency), %s, cqe_version %d, max_sq_desc %d, max_rq_desc %d, max_send_wqebb %d, max_recv_wr %d, %s",
		c.dev.Name, c.vendor, c.part, len(c.uars), c.pageSize, c.nupp, c.resp.TotBfregs, c.lowLat, bf,
		c.resp.CQEVersion, c.lim.maxSQDescSz, c.lim.maxRQDescSz, c.lim.maxSendWQEBB, c.lim.maxRecvWR, ts)
}

// bfreg returns the bfreg with gross index idx as CREATE_QP reported it.
func (c *context) bfreg(idx int) (*bfreg, error) {
	sys, uar, k := idx/(bfregsPerUAR*c.nupp), (idx/bfregsPerUAR)%c.nupp, idx%bfregsPerUAR
	if idx < 0 || sys >= len(c.uars) || k >= usableBfregsUAR {
		return nil, fmt.Errorf("mlx5: kernel assigned bfreg %d, outside the context's %d UAR pages", idx, len(c.uars))
	}
	c.bfMu.Lock()
	defer c.bfMu.Unlock()
	if b := c.bfregs[idx]; b != nil {
		b.users++
		return b, nil
	}
	off := uar*uarSize + bfOffset + k*int(c.resp.BfRegSize)
	b := &bfreg{index: idx, reg: unsafe.Pointer(&c.uars[sys][off]), users: 1}
	if idx != 0 {
		b.bufSize = int(c.resp.BfRegSize) / 2
	}
	// The kernel hands the last lowLat bfregs (net numbering) to one QP each; the others,
	// and bfreg 0, are shared between QPs of the context and need the doorbell serialized.
	if net := (idx/bfregsPerUAR)*usableBfregsUAR + k; idx == 0 || net < int(c.resp.TotBfregs)-c.lowLat {
		b.lock = new(sync.Mutex)
	}
	c.bfregs[idx] = b
	return b, nil
}

func (c *context) releaseBfreg(b *bfreg) {
	c.bfMu.Lock()
	defer c.bfMu.Unlock()
	if b.users--; b.users == 0 {
		delete(c.bfregs, b.index)
	}
}

// dbrAllocator carves doorbell records (8 bytes, one cache line apart) out of mmap'd pages,
// which the kernel pins when a CQ or QP names them.
type dbrAllocator struct {
	mu       sync.Mutex
	pageSize int
	slot     int
	pages    []*umem.Mem
	free     []dbrec
}

type dbrec struct {
	mem *umem.Mem
	off int
}

func (d dbrec) words() *[2]uint32 { return (*[2]uint32)(unsafe.Pointer(&d.mem.Bytes()[d.off])) }
func (d dbrec) addr() uint64      { return d.mem.AddrAt(d.off) }

func (a *dbrAllocator) alloc() (dbrec, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.free) == 0 {
		m, err := umem.Anon(a.pageSize)
		if err != nil {
			return dbrec{}, fmt.Errorf("mlx5: doorbell record page: %w", err)
		}
		a.pages = append(a.pages, m)
		for off := a.pageSize - a.slot; off >= 0; off -= a.slot {
			a.free = append(a.free, dbrec{m, off})
		}
	}
	d := a.free[len(a.free)-1]
	a.free = a.free[:len(a.free)-1]
	*d.words() = [2]uint32{}
	return d, nil
}

func (a *dbrAllocator) release(d dbrec) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.free = append(a.free, d)
}

func (a *dbrAllocator) close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	var errs []error
	for _, m := range a.pages {
		errs = append(errs, m.Free())
	}
	a.pages, a.free = nil, nil
	return errors.Join(errs...)
}

// PDUdata: mlx5_ib answers ALLOC_PD with the protection domain number and fails (EFAULT)
// without room for it.
func (c *context) PDUdata() ([]byte, int) { return nil, allocPDRespLen }

// PDAllocated keeps nothing: user space needs the pdn only for DEVX objects.
func (c *context) PDAllocated(handle uint32, resp []byte) error {
	if len(resp) < allocPDRespLen {
		return fmt.Errorf("mlx5: ALLOC_PD driver response is %d bytes, want %d", len(resp), allocPDRespLen)
	}
	return nil
}
