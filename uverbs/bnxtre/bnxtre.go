// Package bnxtre is gorping's provider for Broadcom NetXtreme-C/E RoCE adapters (the
// bnxt_re kernel driver: BCM573xx/574xx and the Thor BCM5750x family). The kernel only
// creates objects; the data path is user space against the device: send and receive
// queues of 16-byte slots and a CQ of 32-byte CQEs in user memory the adapter reads and
// writes by DMA, a phase bit that tells a new CQE from an old one, and 64-bit doorbells
// (queue index, queue id and type) to one doorbell page per context, mapped from the
// uverbs fd. The layouts are libbnxt_re 44's (rdma-core), checked against that library
// by the oracle tests; the WQE mode the kernel answers (static 128-byte WQEs, or variable
// ones) decides the queue geometry. RC QPs only. It registers itself on amd64 and arm64,
// the architectures internal/mmio has barriers for.
package bnxtre

import (
	"errors"
	"fmt"
	"sync"
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
		Driver: bnxtDriver, DriverID: bnxtDriverID, ABIMin: bnxtABI, ABIMax: bnxtABI,
		Transport: driver.TransportIB,
		// The RDMA device's parent is the PCI function the Ethernet driver owns.
		Sysfs: driver.SysfsMatch{BusDrivers: []string{"bnxt_en"}},
		// None: doorbells and the CQ arm are stores to the doorbell page.
	}
}

// NewContext runs GET_CONTEXT (no driver request), maps the shared page the kernel keeps
// per context (AH ids; mapped as libbnxt_re does) and queries the device's limits, which
// size the queues.
func (provider) NewContext(dev driver.Device, cc driver.ContextCommander) (driver.Context, error) {
	drv, err := cc.GetContext(nil, uctxRespLen)
	if err != nil {
		return nil, err
	}
	var r uctxResp
	wire.Decode(&r, drv)
	if r.PgSize == 0 || r.PgSize&(r.PgSize-1) != 0 || r.PgSize < 4096 {
		return nil, fmt.Errorf("bnxt_re: the kernel's page size %d is not a power of two of at least 4096", r.PgSize)
	}
	if r.CQESz != cqeSize {
		return nil, fmt.Errorf("bnxt_re: the device's CQEs are %d bytes; gorping knows the %d-byte format", r.CQESz, cqeSize)
	}
	c := &context{dev: dev, cmd: cc, resp: r, pgSize: int(r.PgSize)}
	if r.CompMask&ucntxCmaskHaveCctx != 0 {
		c.chipNum = uint16(r.ChipId0)
	}
	if r.CompMask&ucntxCmaskHaveMode != 0 {
		c.variable = r.Mode&wqeModeVariable != 0
	}
	c.shpg, err = cc.Mmap("bnxt_re shared page", 0, c.pgSize, unix.PROT_READ|unix.PROT_WRITE)
	if err != nil {
		return nil, fmt.Errorf("bnxt_re: map the shared page: %w", err)
	}
	attr, err := cc.QueryDevice()
	if err != nil {
		cc.Munmap(c.shpg)
		return nil, err
	}
	c.maxSGE, c.maxQPWR = attr.MaxSGE, attr.MaxQPWR
	return c, nil
}

// context is the provider's per-context state: the shared page, the doorbell page (mapped
// with the first PD, as libbnxt_re does), the device limits and the QPs by the handle
// their CQEs carry.
type context struct {
	dev      driver.Device
	cmd      driver.Commander
	resp     uctxResp
	pgSize   int
	chipNum  uint16
	variable bool // variable-size WQEs (else every WQE takes 128 bytes)
	maxSGE   uint32
	maxQPWR  uint32
	shpg     []byte

	dbMu sync.Mutex
	dpi  uint32
	db   []byte // the doorbell page: every doorbell of the context goes to its offset 0

	qps providerkit.Table[uint64, qp]

	// flushMu guards the CQs' flush lists (libbnxt_re's fqlock): the QPs in error whose
	// remaining work requests the CQ completes with WR_FLUSH_ERR itself.
	flushMu sync.Mutex
}

// genP5 reports a Thor chip, whose PSN search entries are the extended ones.
func (c *context) genP5() bool {
	return c.chipNum == chip57508 || c.chipNum == chip57504 || c.chipNum == chip57502
}

func (c *context) Close() error {
	var errs []error
	if c.db != nil {
		errs = append(errs, c.cmd.Munmap(c.db))
		c.db = nil
	}
	if c.shpg != nil {
		errs = append(errs, c.cmd.Munmap(c.shpg))
		c.shpg = nil
	}
	return errors.Join(errs...)
}

func (c *context) Describe() string {
	mode := "static 128-byte WQEs"
	if c.variable {
		mode = "variable-size WQEs"
	}
	gen := "gen P4"
	if c.genP5() {
		gen = "gen P5 (Thor)"
	}
	return fmt.Sprintf("bnxt_re %s: chip %#x (%s), %s, page %d bytes, CQEs of %d bytes, dpi %d, max_sge %d, max_qp_wr %d",
		c.dev.Name, c.chipNum, gen, mode, c.pgSize, c.resp.CQESz, c.dpi, c.maxSGE, c.maxQPWR)
}

// PDUdata: bnxt_re answers ALLOC_PD with the PD id, the doorbell page index (dpi) and
// where the doorbell page maps (dbr).
func (c *context) PDUdata() ([]byte, int) { return nil, pdRespLen }

// PDAllocated maps the doorbell page with the context's first PD; later PDs share it.
func (c *context) PDAllocated(handle uint32, resp []byte) error {
	if len(resp) < pdRespLen {
		return fmt.Errorf("bnxt_re: ALLOC_PD driver response is %d bytes, want %d", len(resp), pdRespLen)
	}
	var r pdResp
	wire.Decode(&r, resp)
	c.dbMu.Lock()
	defer c.dbMu.Unlock()
	if c.db != nil {
		return nil
	}
	db, err := c.cmd.Mmap("bnxt_re doorbell page", int64(r.Dbr), c.pgSize, unix.PROT_WRITE)
	if err != nil {
		return fmt.Errorf("bnxt_re: map the doorbell page (dpi %d): %w", r.Dpi, err)
	}
	c.db, c.dpi = db, r.Dpi
	return nil
}

// doorbell rings one doorbell: index, queue id and type, as one 64-bit store to the
// doorbell page after the writes it announces (mmio_wc_start), flushed out.
func (c *context) doorbell(staged *uint64, index, qid, typ uint32) {
	*staged = uint64(index&dbIndexMask) | uint64(qid&dbQIDMask|typ<<dbTypeShift)<<32
	mmio.WCStart()
	mmio.Store64(unsafe.Pointer(&c.db[0]), unsafe.Pointer(staged))
	mmio.Flush()
}

// roundupPow2 is libbnxt_re's roundup_pow_of_two: the smallest power of two >= n, and 2
// for 1.
func roundupPow2(n uint32) uint32 {
	if n == 1 {
		return 2
	}
	r := uint32(1)
	for r < n {
		r <<= 1
	}
	return r
}
