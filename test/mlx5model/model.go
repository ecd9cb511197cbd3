// Package mlx5model is a test-only model of a ConnectX adapter and its kernel driver, in
// process: mlx5_ib's and the device's half of the provider's queues plugged into the fake
// uverbs kernel of test/providertest. The kernel answers the core commands and executes
// the work between QPs; this package answers mlx5's driver data (as mlx5_ib would), hands
// out UAR pages as plain memory, learns of doorbells from the provider's stores to them
// (internal/mmio's recorder), reads the provider's send and receive WQEs from its buffers
// and writes CQEs in the format the oracle confirmed (64-byte CQEs, owner bit, user
// index). It is independent of the provider's code: formats are written out here from the
// device's documented layout, so a provider bug is not mirrored.
//
// It checks what a device would reject: WQE index and QPN in every control segment, the
// doorbell against the doorbell record and the WQE in the queue, keys and access rights
// of every SGE, CQ overrun. Violations are recorded (Errors) and turn into error CQEs
// where a device would report one.
package mlx5model

import (
	"encoding/binary"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/gorping/gorping/internal/mmio"
	"github.com/gorping/gorping/test/internal/kcmd"
	"github.com/gorping/gorping/test/providertest"
	"github.com/gorping/gorping/uverbs"
	"golang.org/x/sys/unix"
)

// Config shapes the modelled device.
type Config struct {
	BfRegSize int // 0: no write combining, doorbells only; 512 like a ConnectX-6
	// KeepStamps keeps, per CQ with completion timestamps, every CQE's opcode and
	// timestamp (Stamps), for tests that check what was made of them.
	KeepStamps bool
	// PageSize is the modelled kernel's page size (0: 4096). With 16 or 64 KiB pages one
	// UAR mapping holds 4 or 16 UARs of 4 KiB, as on arm64 kernels with large pages.
	PageSize int
	// NoTimestamps makes the extended device query report no completion timestamps, as
	// a device without them would.
	NoTimestamps bool
	// Fail, if set, is asked before every command (its uverbs number, bit 31 for the
	// extended ones); an error fails the command with it, as the kernel would.
	Fail func(cmd uint32) error
}

// Values the model's driver answers with: those of a ConnectX-6 as the oracle's fake
// kernel gave libmlx5.
const (
	maxSQDescSz  = 1024
	maxRQDescSz  = 512
	maxSendWQEBB = 1 << 15
	maxRecvWR    = 1 << 15
	vendorID     = 0x02c9
	vendorPartID = 4123
)

// Layout of a 4 KiB UAR (the device's, written out here independently of the provider).
const (
	uarSize    = 4096
	bfOffset   = 0x800 // first BlueFlame register / doorbell
	cqDoorbell = 0x20  // CQ arm doorbell of the first UAR
)

// NIC is one modelled adapter. Contexts opened on it (Open) can reach each other's QPs.
type NIC struct {
	cfg Config
	k   *providertest.Kernel
	d   *driver
}

// Stats counts what the model executed: the kernel's counters, the rings' laps, and the
// UAR stores that rang an SQ (8-byte doorbell or BlueFlame copy) or armed a CQ.
type Stats = providertest.Stats

// New starts a model; Close stops it. It panics unless Available() is nil: without the
// mmio recorder no doorbell would ever reach it.
func New(cfg Config) *NIC {
	if err := Available(); err != nil {
		panic(err)
	}
	if cfg.PageSize == 0 {
		cfg.PageSize = 4096
	}
	d := &driver{cfg: cfg, all: map[uint32]*mcq{}}
	d.rs.qps, d.rs.cqs, d.rs.bfPart = map[uint32]*mqp{}, map[uint32]*mcq{}, map[uintptr][]byte{}
	clk, err := newDevClock(cfg.PageSize)
	if err != nil {
		panic(fmt.Sprintf("mlx5model: clock page: %v", err))
	}
	d.clock = clk
	d.cancel = mmio.Subscribe(d.ring)
	k, err := providertest.StartKernel(device("mlx5_0"), nil, d, providertest.Options{Fail: cfg.Fail})
	if err != nil {
		d.cancel()
		panic(fmt.Sprintf("mlx5model: %v", err))
	}
	d.k = k
	return &NIC{cfg: cfg, k: k, d: d}
}

// NewForTest is New for tests: without the mmio recorder it skips t loudly, or fails it
// under CI=true; the model is closed when t ends.
func NewForTest(t testing.TB, cfg Config) *NIC {
	t.Helper()
	if err := Available(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skipf("*** SKIPPING: %v ***", err)
	}
	n := New(cfg)
	t.Cleanup(n.Close)
	return n
}

func device(name string) uverbs.Device {
	return uverbs.Device{Name: name, Index: 0, Uverbs: "uverbs0", Path: "/dev/infiniband/model-" + name,
		Driver: "mlx5", DriverID: 1, ABI: 1, NodeGUID: 0x0202c9fffe000001}
}

// Device is the uverbs device the model presents.
func (n *NIC) Device(name string) uverbs.Device { return device(name) }

// Open opens a context on the model through the mlx5 provider.
func (n *NIC) Open(name string, opts ...uverbs.Option) (*uverbs.Context, error) {
	return n.k.OpenAs(device(name), opts...)
}

// Errors returns every violation the model saw.
func (n *NIC) Errors() []string { return n.k.Errors() }

// Stats returns the counters.
func (n *NIC) Stats() Stats { return n.k.Stats() }

// Live counts the objects the model's contexts still hold: QPs and CQs not destroyed,
// memory regions not deregistered. After a user of the model released everything they
// are 0.
func (n *NIC) Live() (qps, cqs, mrs int) { return n.k.Live() }

// TimestampedCQs returns the numbers of the CQs created with completion timestamps, in
// the order they were created.
func (n *NIC) TimestampedCQs() []uint32 {
	n.k.Lock()
	defer n.k.Unlock()
	var cqns []uint32
	for _, c := range n.d.order {
		if c.ts {
			cqns = append(cqns, c.cqn)
		}
	}
	return cqns
}

// Stamp is one timestamped CQE: its opcode (op_own >> 4) and the device clock in it.
type Stamp struct {
	Opcode byte
	TS     uint64
}

// Stamps returns the CQEs the model stamped on the CQ with number cqn, in order
// (Config.KeepStamps).
func (n *NIC) Stamps(cqn uint32) []Stamp {
	n.k.Lock()
	defer n.k.Unlock()
	if c := n.d.all[cqn]; c != nil {
		return append([]Stamp(nil), c.stamps...)
	}
	return nil
}

// TimestampNS converts a device timestamp as the model's clock_info page defines it
// (frac 0, so the snapshot does not matter beyond 1 ns of rounding).
func TimestampNS(ts uint64) uint64 { return cyclesNS(ts) }

// Close stops the engine.
func (n *NIC) Close() {
	n.d.cancel()
	n.k.Close()
}

// driver is mlx5_ib and the device for the fake kernel (providertest.Driver and Engine).
type driver struct {
	cfg    Config
	k      *providertest.Kernel
	clock  *devClock
	nextN  uint32
	all    map[uint32]*mcq // every CQ made, by CQN (Stamps after destroy)
	order  []*mcq          // in creation order
	passes atomic.Uint64   // engine passes (tests wait for the engine with it)
	rs     ringState       // doorbells from the mmio recorder (doorbell.go)
	cancel func()
}

// mctx is one uverbs context on the model (one open of the device).
type mctx struct {
	uars    [][]byte // static UAR system pages (PageSize bytes, nupp UARs each)
	nupp    int
	tot     int // static bfregs
	lowLat  int
	bfUsers map[int]int // net bfreg index -> QPs
}

// mcq is a CQ as the device sees it.
type mcq struct {
	cq     *providertest.CQ
	cqn    uint32
	buf    []byte
	ncqe   uint32
	db     *[2]uint32
	pi     uint32 // producer index
	x      *mctx
	armCI  uint32
	ts     bool // created with completion timestamps: stamp every CQE
	stamps []Stamp
}

// mqp is a QP as the device sees it.
type mqp struct {
	qp           *providertest.QP
	qpn, uidx    uint32
	buf          []byte
	db           *[2]uint32
	sqCnt, rqCnt uint32 // SQ blocks, RQ slots
	rqShift      uint32
	sqOff        int
	bfreg        int // net bfreg index: UAR bfreg/2, register bfreg%2
	x            *mctx

	sqCI uint32 // next SQ block to execute
	rung uint32 // SQ producer counter (16 bits) the last doorbell announced
	rqCI uint32 // next RQ slot to consume (count)
}

func le32(b []byte) uint32 { return kcmd.LE32(b) }
func le64(b []byte) uint64 { return kcmd.LE64(b) }

var putLE = kcmd.PutLE

func be32(b []byte) uint32   { return binary.BigEndian.Uint32(b) }
func dbrec(p *uint32) uint32 { return beLoad(p) }
func beLoad(p *uint32) uint32 {
	v := atomic.LoadUint32(p)
	return v>>24 | v>>8&0xff00 | v<<8&0xff0000 | v<<24
}
func pow2(v uint32) bool   { return v != 0 && v&(v-1) == 0 }
func alignUp(n, a int) int { return (n + a - 1) / a * a }

func (d *driver) GetContext(c *providertest.Context, in, out []byte) error {
	k := c.Kernel()
	if len(in) < 32 || len(out) < 72 {
		return unix.EINVAL
	}
	tot, low := int(le32(in[0:])), int(le32(in[4:]))
	if flags, mask, caps := le32(in[8:]), le32(in[12:]), le64(in[24:]); flags != 0 || mask != 0 || caps&2 != 0 {
		k.Fail("GET_CONTEXT asks flags %#x comp_mask %#x lib_caps %#x", flags, mask, caps)
		return unix.EINVAL
	}
	if le64(in[24:])&1 == 0 {
		k.Fail("GET_CONTEXT without lib_caps 4K_UAR")
		return unix.EINVAL
	}
	// As mlx5_ib: the bfregs asked for are rounded up to whole system pages.
	nupp := d.cfg.PageSize / uarSize
	perPage := 2 * nupp
	if tot == 0 || tot > 512 {
		return unix.EINVAL
	}
	tot = (tot + perPage - 1) / perPage * perPage
	if low > tot-1 {
		return unix.EINVAL
	}
	x := &mctx{tot: tot, lowLat: low, nupp: nupp, bfUsers: map[int]int{}}
	for i := 0; i < tot/perPage; i++ {
		page, err := unix.Mmap(-1, 0, d.cfg.PageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			return err
		}
		x.uars = append(x.uars, page)
	}
	c.Driver = x
	d.addUARs(x)
	cqeVersion := uint32(1)
	if in[16] == 0 {
		cqeVersion = 0
	}
	r := putLE(1<<17, uint32(d.cfg.BfRegSize), uint32(tot), 64)
	r = binary.LittleEndian.AppendUint16(r, maxSQDescSz)
	r = binary.LittleEndian.AppendUint16(r, maxRQDescSz)
	r = append(r, putLE(maxSendWQEBB, maxRecvWR, 1<<15)...)
	r = binary.LittleEndian.AppendUint16(r, 1) // num_ports
	r = binary.LittleEndian.AppendUint16(r, 0)
	r = append(r, putLE(0, 72)...)             // comp_mask, response_length
	r = append(r, byte(cqeVersion), 3, 0, 1)   // clock_info_versions: V1
	r = binary.LittleEndian.AppendUint64(r, 0) // hca_core_clock_offset
	r = append(r, putLE(12, uint32(nupp), 0, 0)...)
	copy(out, r)
	return nil
}

func (d *driver) QueryDevice(r *kcmd.QueryDeviceResp) {
	r.VendorID, r.VendorPartID, r.MaxQP, r.MaxQPWR, r.MaxSGE, r.MaxCQE = vendorID, vendorPartID, 1<<17, 1<<15, 30, 1<<22-1
	r.MaxQPRdAtom, r.MaxQPInitRdAtom = 16, 16
}

func (d *driver) QueryDeviceEx(r *kcmd.ExQueryDeviceResp) {
	if !d.cfg.NoTimestamps {
		r.TimestampMask, r.HcaCoreClock = clockMask, clockKHz
	}
}

func (d *driver) QueryPort(_ uint8, r *kcmd.QueryPortResp) {
	r.MaxMsgSz, r.GIDTblLen, r.MaxMTU, r.ActiveMTU = 1<<30, 256, 5, 3
}

// AllocPD: mlx5_ib answers the pdn and fails without room for it.
func (d *driver) AllocPD(_ *providertest.Context, h uint32, in, out []byte) error {
	if len(out) < 4 {
		return unix.EFAULT
	}
	copy(out, putLE(h|0x800000))
	return nil
}

func (d *driver) RegMR(mr *providertest.MR, in, out []byte) error {
	mr.Key = mr.Handle<<8 | 0x07
	return nil
}

// CreateCQ makes a CQ from CREATE_CQ's or CREATE_CQ_EX's driver data (mlx5_ib_create_cq);
// the extended one's flag asks completion timestamps.
func (d *driver) CreateCQ(k *providertest.Kernel, c *providertest.CQ, in, out []byte) (int, error) {
	if c.Flags&^1 != 0 {
		k.Fail("CREATE_CQ_EX: flags %#x", c.Flags)
		return 0, unix.EOPNOTSUPP
	}
	if len(in) < 32 || len(out) < 4 {
		return 0, unix.EINVAL
	}
	ncqe := uint32(c.CQE) + 1
	if !pow2(ncqe) || le32(in[16:]) != 64 || in[20] != 0 || binary.LittleEndian.Uint16(in[22:]) != 0 {
		k.Fail("CREATE_CQ: cqe %d, cqe_size %d, compression %d, flags %#x", c.CQE, le32(in[16:]), in[20], binary.LittleEndian.Uint16(in[22:]))
		return 0, unix.EINVAL
	}
	d.nextN++
	q := &mcq{cq: c, cqn: d.nextN | 0x400, ncqe: ncqe, buf: kcmd.Mem(le64(in[0:]), int(ncqe)*64),
		db: (*[2]uint32)(kcmd.Ptr(le64(in[8:]))), x: c.Ctx.Driver.(*mctx), ts: c.Flags&1 != 0}
	for i := 63; i < len(q.buf); i += 64 {
		if q.buf[i] != 0xf0 {
			k.Fail("CREATE_CQ: CQE %d op_own %#x, want 0xf0", i/64, q.buf[i])
			return 0, unix.EINVAL
		}
	}
	c.Driver = q
	d.all[q.cqn] = q
	d.order = append(d.order, q)
	d.setCQ(q, true)
	copy(out, putLE(q.cqn))
	return c.CQE, nil
}

func (d *driver) CreateQP(k *providertest.Kernel, p *providertest.QP, in, out []byte) error {
	if len(in) < 48 || len(out) < 4 {
		k.Fail("CREATE_QP: %d/%d bytes of driver data", len(in), len(out))
		return unix.EINVAL
	}
	sqCnt, rqCnt, rqShift, flags, uidx := le32(in[16:]), le32(in[20:]), le32(in[24:]), le32(in[28:]), le32(in[32:])
	if (sqCnt != 0 && !pow2(sqCnt)) || (rqCnt != 0 && !pow2(rqCnt)) || flags != 0 || uidx >= 1<<24 {
		k.Fail("CREATE_QP: sq %d rq %d shift %d flags %#x uidx %d", sqCnt, rqCnt, rqShift, flags, uidx)
		return unix.EINVAL
	}
	sqOff := int(rqCnt) << rqShift
	size := sqOff + int(sqCnt)*64
	d.nextN++
	x := p.Ctx.Driver.(*mctx)
	q := &mqp{qp: p, qpn: d.nextN | 0x10000, uidx: uidx, buf: kcmd.Mem(le64(in[0:]), size), db: (*[2]uint32)(kcmd.Ptr(le64(in[8:]))),
		sqCnt: sqCnt, rqCnt: rqCnt, rqShift: rqShift, sqOff: sqOff, x: x}
	// The kernel's choice: a free low-latency bfreg, else the least used medium one, else 0.
	net := 0
	firstLow := x.tot - x.lowLat
	for i := firstLow; i < x.tot; i++ {
		if x.bfUsers[i] == 0 {
			net = i
			break
		}
	}
	if net == 0 {
		best := -1
		for i := 1; i < firstLow; i++ {
			if best < 0 || x.bfUsers[i] < x.bfUsers[best] {
				best = i
			}
		}
		if best > 0 {
			net = best
		}
	}
	x.bfUsers[net]++
	q.bfreg = net
	p.QPN, p.Driver = q.qpn, q
	d.setQP(q, true)
	copy(out, putLE(uint32(net/2*4+net%2))) // bfreg_index, gross
	return nil
}

func (d *driver) DestroyQP(p *providertest.QP) {
	q := p.Driver.(*mqp)
	d.setQP(q, false)
	q.x.bfUsers[q.bfreg]--
}

func (d *driver) DestroyCQ(c *providertest.CQ) { d.setCQ(c.Driver.(*mcq), false) }

// Mmap hands out the context's UAR pages (command 0, regular; index = page offset) and the
// clock_info page (command 7), read-only.
func (d *driver) Mmap(c *providertest.Context, off int64, length, prot int) ([]byte, error) {
	k := c.Kernel()
	x, _ := c.Driver.(*mctx)
	ps := int64(d.cfg.PageSize)
	if x == nil || length != int(ps) || off%ps != 0 {
		k.Fail("mmap offset %#x length %d: not one %d-byte page", off, length, ps)
		return nil, unix.EINVAL
	}
	pg := off / ps
	if cmd := (pg >> 8) & 0xff; cmd == 7 {
		if pg&0xff != 0 || prot&unix.PROT_WRITE != 0 {
			k.Fail("clock_info mmap index %d prot %#x", pg&0xff, prot)
			return nil, unix.EPERM
		}
		return d.clock.page, nil
	}
	cmd, idx := (pg>>8)&0xff, int(pg&0xff|(pg>>16)&0xff<<8)
	if cmd != 0 || idx >= len(x.uars) || prot&unix.PROT_WRITE == 0 {
		k.Fail("mmap offset %#x (command %d, index %d), prot %#x", off, cmd, idx, prot)
		return nil, unix.EINVAL
	}
	return x.uars[idx], nil
}

// Doorbells is the engine's first act in every pass: the doorbells rung, then the clock.
func (d *driver) Doorbells(k *providertest.Kernel) bool {
	progress := d.doorbells(k)
	if now := time.Now(); now.Sub(d.clock.updated) >= clockRefresh {
		d.clock.refresh(now)
	}
	d.passes.Add(1)
	return progress
}

func ptrAt(a uint64) unsafe.Pointer { return kcmd.Ptr(a) }
