// Package hns is gorping's provider for HiSilicon RoCE engines (Kunpeng 920's HIP08 and
// HIP09: the hns_roce_hw_v2 kernel driver, "hns"). The kernel only creates objects; the
// data path is user space against the device: send queues of 64-byte WQEs with an
// extended SGE area after them, receive queues of 16-byte segments, and a CQ of 32-byte
// (HIP09: 64-byte) CQEs in user memory the engine reads and writes by DMA, an owner bit
// per entry that tells this lap's from the last, doorbell records in user memory (the
// queues' heads and the CQ's consumer index, which the engine reads), and 64-bit
// doorbells to the context's UAR page, mapped from the uverbs fd. An error completion
// moves the QP to ERR with MODIFY_QP from the poller, for the engine to flush the rest,
// as libhns does. The layouts are libhns 44's (rdma-core), checked against that library
// by the oracle tests. RC QPs only; the direct WQE page (HIP09) is not used. It registers
// itself on amd64 and arm64, the architectures internal/mmio has barriers for.
package hns

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"github.com/gorping/gorping/internal/mmio"
	"github.com/gorping/gorping/internal/umem"
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

// provider is the hns provider. pageSize is the kernel's page size, 0 for this kernel's
// (libhns sizes the UAR mapping and the doorbell record pages by it); the oracle tests open
// contexts on a provider with another (uverbs.WithProvider) to run as on 64 KiB pages.
// hnsABI is the uverbs ABI version of the hns_roce kernel driver.
const hnsABI = 1

type provider struct{ pageSize int }

func (provider) Info() driver.Info {
	return driver.Info{
		// hns_roce sets uverbs_abi_ver 1 and has never changed it; libhns accepts any, gorping
		// only the one it was checked against (the oracle's and the model's devices).
		Driver: hnsDriver, DriverID: hnsDriverID, ABIMin: hnsABI, ABIMax: hnsABI,
		Transport: driver.TransportIB,
		// The RDMA device's parent is the PCI function the hns3 Ethernet driver owns.
		Sysfs: driver.SysfsMatch{BusDrivers: []string{"hns3"}},
		// None: doorbells and the CQ arm are stores to the UAR page.
	}
}

// NewContext runs GET_CONTEXT (no driver request; the CQE size, the QP table size and
// the inline limit back), queries the device (hardware version and limits, which size
// the queues) and maps the UAR page, as libhns does.
func (p provider) NewContext(dev driver.Device, cc driver.ContextCommander) (driver.Context, error) {
	drv, err := cc.GetContext(nil, uctxRespLen)
	if err != nil {
		return nil, err
	}
	var r uctxResp
	wire.Decode(&r, drv)
	c := &context{dev: dev, cmd: cc, resp: r, cqeSize: min(r.CQESize, cqeSizeV3), pageSize: p.pageSize}
	if c.pageSize == 0 {
		c.pageSize = os.Getpagesize()
	}
	if r.CQESize == 0 {
		c.cqeSize = cqeSizeV2
	}
	if c.cqeSize != cqeSizeV2 && c.cqeSize != cqeSizeV3 {
		return nil, fmt.Errorf("hns: the device's CQEs are %d bytes; gorping knows 32 and 64", c.cqeSize)
	}
	attr, err := cc.QueryDevice()
	if err != nil {
		return nil, err
	}
	c.hwVer, c.maxQPWR, c.maxSGE, c.maxCQE = attr.HWVer, attr.MaxQPWR, attr.MaxSGE, attr.MaxCQE
	if c.uar, err = cc.Mmap("hns UAR page", 0, c.pageSize, unix.PROT_READ|unix.PROT_WRITE); err != nil {
		return nil, fmt.Errorf("hns: map the UAR page: %w", err)
	}
	return c, nil
}

// context is the provider's per-context state: the device's limits, the UAR page, the
// pages of doorbell records, the QPs by number (a CQE names its QP by number).
type context struct {
	dev      driver.Device
	cmd      driver.Commander
	resp     uctxResp
	cqeSize  uint32
	pageSize int
	hwVer    uint32
	maxQPWR  uint32
	maxSGE   uint32
	maxCQE   uint32
	uar      []byte

	dbMu    sync.Mutex
	dbPages [2]*dbPage // by kind: the QPs' records, the CQs'
	qps     providerkit.Table[uint32, qp]
}

func (c *context) Close() error {
	var errs []error
	if c.uar != nil {
		errs = append(errs, c.cmd.Munmap(c.uar))
		c.uar = nil
	}
	c.dbMu.Lock()
	for i, p := range c.dbPages {
		for ; p != nil; p = p.next {
			errs = append(errs, p.mem.Free())
		}
		c.dbPages[i] = nil
	}
	c.dbMu.Unlock()
	return errors.Join(errs...)
}

func (c *context) Describe() string {
	gen := "HIP08"
	if c.hwVer >= hwVer3 {
		gen = "HIP09"
	}
	return fmt.Sprintf("hns %s: %s (hw_ver %#x), CQEs of %d bytes, page %d bytes, max_qp_wr %d, max_sge %d, max_cqe %d, inline %d",
		c.dev.Name, gen, c.hwVer, c.cqeSize, c.pageSize, c.maxQPWR, c.maxSGE, c.maxCQE, c.resp.MaxInlineData)
}

// PDUdata: hns answers ALLOC_PD with the PD number (4 bytes), which the data path does
// not use.
func (c *context) PDUdata() ([]byte, int)           { return nil, pdRespLen }
func (c *context) PDAllocated(uint32, []byte) error { return nil }

// doorbell writes one 64-bit doorbell (queue, command; index and flags) to the UAR page.
func (c *context) doorbell(staged *[2]uint32, tag, cmd, param uint32) {
	staged[0] = tag&qpnMask | cmd<<dbCmdShift
	staged[1] = param
	mmio.Store64(unsafe.Pointer(&c.uar[dbOffset]), unsafe.Pointer(staged))
}

// Doorbell records come from pages of them, one list of pages per kind, a page taken
// from the front of its list while it has a free record, the lowest free record first
// (libhns' hns_roce_alloc_db): the records' places are the library's.
const (
	dbKindQP = 0
	dbKindCQ = 1
)

type dbPage struct {
	mem  *umem.Mem
	used []bool
	n    int
	next *dbPage
	prev *dbPage
}

// allocDB returns a zeroed doorbell record of kind.
func (c *context) allocDB(kind int) (*uint32, error) {
	c.dbMu.Lock()
	defer c.dbMu.Unlock()
	p := c.dbPages[kind]
	for ; p != nil; p = p.next {
		if p.n < len(p.used) {
			break
		}
	}
	if p == nil {
		m, err := umem.Anon(c.pageSize)
		if err != nil {
			return nil, fmt.Errorf("hns: doorbell record page: %w", err)
		}
		p = &dbPage{mem: m, used: make([]bool, c.pageSize/recordSize), next: c.dbPages[kind]}
		if p.next != nil {
			p.next.prev = p
		}
		c.dbPages[kind] = p
	}
	i := 0
	for p.used[i] {
		i++
	}
	p.used[i] = true
	p.n++
	r := (*uint32)(unsafe.Pointer(&p.mem.Bytes()[i*recordSize]))
	*r = 0
	return r, nil
}

// freeDB gives a record back; a page with none in use goes.
func (c *context) freeDB(kind int, r *uint32) {
	if r == nil {
		return
	}
	c.dbMu.Lock()
	defer c.dbMu.Unlock()
	a := uintptr(unsafe.Pointer(r))
	for p := c.dbPages[kind]; p != nil; p = p.next {
		base := uintptr(unsafe.Pointer(&p.mem.Bytes()[0]))
		if a < base || a >= base+uintptr(p.mem.Len()) {
			continue
		}
		p.used[(a-base)/recordSize] = false
		if p.n--; p.n == 0 {
			if p.prev != nil {
				p.prev.next = p.next
			} else {
				c.dbPages[kind] = p.next
			}
			if p.next != nil {
				p.next.prev = p.prev
			}
			p.mem.Free()
		}
		return
	}
}
