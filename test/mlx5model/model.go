// Package mlx5model is a test-only model of a ConnectX adapter and its kernel driver, in
// process: it answers the uverbs commands the mlx5 provider sends (as the mlx5_ib driver
// would), hands out UAR pages as plain memory, and executes the provider's send WQEs
// between its QPs (SEND, RDMA WRITE, RDMA READ, inline data), writing CQEs in the format
// the oracle confirmed (64-byte CQEs, owner bit, user index) and completion events to the
// channel fds. It is independent of the provider's code: formats are written out here
// from the device's documented layout, so a provider bug is not mirrored.
//
// It checks what a device would reject: WQE index and QPN in every control segment, keys
// and access rights of every SGE, CQ overrun. Violations are recorded (Errors) and turn
// into error CQEs where a device would report one.
package mlx5model

import (
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gorping/gorping/internal/mmio"
	"github.com/gorping/gorping/test/internal/kcmd"
	"github.com/gorping/gorping/uverbs"
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

// Layout of a 4 KiB UAR (the device's, written out here independently of the provider).
const (
	uarSize    = 4096
	bfOffset   = 0x800 // first BlueFlame register / doorbell
	cqDoorbell = 0x20  // CQ arm doorbell of the first UAR
)

// NIC is one modelled adapter. Contexts opened on it (Open) can reach each other's QPs.
type NIC struct {
	cfg Config

	mu     sync.Mutex
	qps    map[uint32]*mqp // by QPN
	cqs    []*mcq
	mrs    map[uint32]*mmr // by lkey (== rkey)
	ctxs   []*mctx
	nextN  uint32
	errs   []string
	stop   chan struct{}
	done   chan struct{}
	closed bool
	stats  Stats

	passes   atomic.Uint64 // engine passes (tests wait for the engine with it)
	rs       ringState     // doorbells from the mmio recorder (doorbell.go)
	clock    *devClock     // the device clock and its clock_info page (clock.go)
	rfMu     sync.Mutex
	ringErrs []string // violations ring found, moved to errs by the engine
	cancel   func()
}

// Stats counts what the model executed.
type Stats struct {
	Sends, Writes, Reads, Recvs, CQEs, ErrorCQEs, Events int
	SQLaps, RQLaps, CQLaps                               int // times a ring index wrapped
	Doorbells, BlueFlames, Arms                          int // UAR stores that rang an SQ (8-byte doorbell or BlueFlame copy) or armed a CQ
}

// New starts a model; Close stops it. It panics unless Available() is nil: without the
// mmio recorder no doorbell would ever reach it.
func New(cfg Config) *NIC {
	if err := Available(); err != nil {
		panic(err)
	}
	if cfg.PageSize == 0 {
		cfg.PageSize = 4096
	}
	n := &NIC{cfg: cfg, qps: map[uint32]*mqp{}, mrs: map[uint32]*mmr{}, nextN: 0x100,
		stop: make(chan struct{}), done: make(chan struct{})}
	n.rs.qps, n.rs.cqs, n.rs.bfPart = map[uint32]*mqp{}, map[uint32]*mcq{}, map[uintptr][]byte{}
	clk, err := newDevClock(cfg.PageSize)
	if err != nil {
		panic(fmt.Sprintf("mlx5model: clock page: %v", err))
	}
	n.clock = clk
	n.cancel = mmio.Subscribe(n.ring)
	go n.run()
	return n
}

// Device is the uverbs device the model presents.
func (n *NIC) Device(name string) uverbs.Device {
	return uverbs.Device{Name: name, Index: 0, Uverbs: "uverbs0", Path: "/dev/infiniband/model-" + name,
		Driver: "mlx5", DriverID: 1, ABI: 1, NodeGUID: 0x0202c9fffe000001}
}

// Open opens a context on the model through the mlx5 provider.
func (n *NIC) Open(name string, opts ...uverbs.Option) (*uverbs.Context, error) {
	return uverbs.OpenBackend(n.Device(name), &backend{nic: n}, opts...)
}

// Errors returns every violation the model saw.
func (n *NIC) Errors() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.errs...)
}

// Stats returns the counters.
func (n *NIC) Stats() Stats {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stats
}

// Live counts the objects the model's contexts still hold: QPs and CQs not destroyed,
// memory regions not deregistered. After a user of the model released everything they
// are 0.
func (n *NIC) Live() (qps, cqs, mrs int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, c := range n.cqs {
		if !c.dead {
			cqs++
		}
	}
	return len(n.qps), cqs, len(n.mrs)
}

// TimestampedCQs returns the numbers of the CQs created with completion timestamps, in
// the order they were created.
func (n *NIC) TimestampedCQs() []uint32 {
	n.mu.Lock()
	defer n.mu.Unlock()
	var cqns []uint32
	for _, c := range n.cqs {
		if c.ts {
			cqns = append(cqns, c.cqn)
		}
	}
	return cqns
}

// Close stops the engine.
func (n *NIC) Close() {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	n.closed = true
	n.mu.Unlock()
	n.cancel()
	close(n.stop)
	<-n.done
}

func (n *NIC) fail(format string, args ...any) {
	n.errs = append(n.errs, fmt.Sprintf(format, args...))
}

// mem views n bytes at a process address (provider buffers are real memory here).
func mem(addr uint64, n int) []byte { return kcmd.Mem(addr, n) }

type mmr struct {
	handle       uint32
	addr, length uint64
	access       uint32
	key          uint32
	pd           uint32
	x            *mctx // the context that registered it
}

// mcq is a CQ as the device sees it.
type mcq struct {
	handle  uint32
	cookie  uint64 // user_handle, the completion event's payload
	cqn     uint32
	buf     []byte
	ncqe    uint32
	db      *[2]uint32
	pi      uint32 // producer index
	channel *os.File
	x       *mctx

	armWord uint32 // last arm word rung
	armed   bool
	armCI   uint32
	events  uint32
	dead    bool
	ts      bool // created with completion timestamps: stamp every CQE
	stamps  []Stamp
}

// Stamp is one timestamped CQE: its opcode (op_own >> 4) and the device clock in it.
type Stamp struct {
	Opcode byte
	TS     uint64
}

// Stamps returns the CQEs the model stamped on the CQ with number cqn, in order
// (Config.KeepStamps).
func (n *NIC) Stamps(cqn uint32) []Stamp {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, c := range n.cqs {
		if c.cqn == cqn {
			return append([]Stamp(nil), c.stamps...)
		}
	}
	return nil
}

// TimestampNS converts a device timestamp as the model's clock_info page defines it
// (frac 0, so the snapshot does not matter beyond 1 ns of rounding).
func TimestampNS(ts uint64) uint64 { return cyclesNS(ts) }

// mqp is a QP as the device sees it.
type mqp struct {
	handle, qpn, uidx uint32
	pd                uint32
	buf               []byte
	db                *[2]uint32
	sqCnt, rqCnt      uint32 // SQ blocks, RQ slots
	rqShift           uint32
	sqOff             int
	sendCQ, recvCQ    *mcq
	state             uint8
	dest              uint32
	sigAll            bool
	bfreg             int // net bfreg index: UAR bfreg/2, register bfreg%2
	x                 *mctx

	sqCI     uint32 // next SQ block to execute
	rung     uint32 // SQ producer counter (16 bits) the last doorbell announced
	rungOnce bool
	rqCI     uint32 // next RQ slot to consume (count)
	dead     bool
}

func be32(b []byte) uint32   { return binary.BigEndian.Uint32(b) }
func dbrec(p *uint32) uint32 { return beLoad(p) }
func beLoad(p *uint32) uint32 {
	v := atomic.LoadUint32(p)
	return v>>24 | v>>8&0xff00 | v<<8&0xff0000 | v<<24
}
func pow2(v uint32) bool   { return v != 0 && v&(v-1) == 0 }
func alignUp(n, a int) int { return (n + a - 1) / a * a }

// run is the device engine: it watches every doorbell record and executes what it finds.
func (n *NIC) run() {
	defer close(n.done)
	idle := 0
	for {
		select {
		case <-n.stop:
			return
		default:
		}
		n.mu.Lock()
		progress := n.step()
		n.mu.Unlock()
		n.passes.Add(1)
		if progress {
			idle = 0
			continue
		}
		// Idle: yield first, then sleep a little, as a device would just wait.
		if idle++; idle < 50 {
			runtime.Gosched()
		} else {
			time.Sleep(20 * time.Microsecond)
		}
	}
}

func (n *NIC) step() bool {
	progress := n.doorbells()
	if now := time.Now(); now.Sub(n.clock.updated) >= clockRefresh {
		n.clock.refresh(now)
	}
	for _, q := range n.qps {
		if q.dead {
			continue
		}
		if q.state == 6 { // ERR: flush
			progress = n.flush(q) || progress
			continue
		}
		if q.state == 3 { // RTS executes the send queue
			for n.execOne(q) {
				progress = true
			}
		}
	}
	for _, c := range n.cqs {
		if !c.dead {
			progress = n.checkArm(c) || progress
		}
	}
	return progress
}

// rqPI is the producer counter the provider published for q's RQ: receives need no
// doorbell, the device reads the record when a message arrives.
func (q *mqp) rqPI() uint32 { return dbrec(&q.db[0]) }

// wqe returns the send WQE block i (masked) of q.
func (q *mqp) block(i uint32) int { return q.sqOff + int(i&(q.sqCnt-1))*64 }

// sqByte maps an offset from a WQE start to the SQ buffer, wrapping at the SQ end.
func (q *mqp) sqAt(start, off int) int {
	sqLen := int(q.sqCnt) * 64
	return q.sqOff + (start-q.sqOff+off)%sqLen
}

type sge struct {
	addr uint64
	len  uint32
	key  uint32
}

// execOne executes the next posted send WQE of q; false if there is none (or it must wait
// for a receive at the peer).
func (n *NIC) execOne(q *mqp) bool {
	if q.sqCI&0xffff == q.rung {
		return false // nothing rung beyond what ran
	}
	start := q.block(q.sqCI)
	ctrl := q.buf[start : start+16]
	w0, w1 := be32(ctrl[0:]), be32(ctrl[4:])
	opcode, idx := byte(w0), uint16(w0>>8)
	ds, qpn := int(w1&0x3f), w1>>8
	fm := ctrl[11]
	if idx != uint16(q.sqCI) || qpn != q.qpn || ds < 1 || uint32(ds*16+63)/64 > (q.rung-q.sqCI)&0xffff {
		n.fail("QP %#x: WQE at block %d has index %d, qpn %#x, ds %d", q.qpn, q.sqCI, idx, qpn, ds)
		q.state = 6
		return true
	}
	off := 16
	var raddr uint64
	var rkey uint32
	if opcode == 0x08 || opcode == 0x09 || opcode == 0x10 {
		s := q.sqAt(start, off)
		raddr, rkey = binary.BigEndian.Uint64(q.buf[s:]), be32(q.buf[s+8:])
		off += 16
	}
	// Gather list or inline data.
	var sges []sge
	var inline []byte
	for off < ds*16 {
		s := q.sqAt(start, off)
		w := be32(q.buf[s:])
		if w&0x80000000 != 0 {
			l := int(w &^ 0x80000000)
			inline = make([]byte, l)
			for i := range inline {
				inline[i] = q.buf[q.sqAt(start, off+4+i)]
			}
			off += alignUp(4+l, 16)
			continue
		}
		sges = append(sges, sge{addr: binary.BigEndian.Uint64(q.buf[s+8:]), len: w, key: be32(q.buf[s+4:])})
		off += 16
	}
	peer := n.qps[q.dest]
	var status byte // syndrome, 0 = ok
	var byteCnt uint32
	switch opcode {
	case 0x0a, 0x0b: // SEND, SEND_IMM
		if peer == nil || peer.dead || (peer.state != 2 && peer.state != 3) {
			status = 0x15 // transport retry exceeded: nobody answers
			break
		}
		if peer.rqCI&0xffff == peer.rqPI() {
			return false // RNR: wait for the peer to post a receive
		}
		data, synd := n.gather(q, sges, inline)
		if synd != 0 {
			status = synd
			break
		}
		if synd := n.deliver(peer, q, data, opcode, be32(ctrl[12:])); synd != 0 {
			status = 0x13 // the responder's error comes back as remote access/op error
			if synd == 0x01 {
				status = 0x14
			}
		}
		n.stats.Sends++
	case 0x08, 0x09: // RDMA WRITE
		data, synd := n.gather(q, sges, inline)
		if synd != 0 {
			status = synd
			break
		}
		dst, ok := n.remote(peer, raddr, rkey, len(data), 2)
		if !ok {
			status = 0x13
			break
		}
		copy(dst, data)
		n.stats.Writes++
	case 0x10: // RDMA READ
		total := 0
		for _, g := range sges {
			total += int(g.len)
		}
		src, ok := n.remote(peer, raddr, rkey, total, 4)
		if !ok {
			status = 0x13
			break
		}
		if synd := n.scatter(q, sges, src, 1); synd != 0 {
			status = synd
			break
		}
		byteCnt = uint32(total)
		n.stats.Reads++
	default:
		n.fail("QP %#x: unsupported WQE opcode %#x", q.qpn, opcode)
		status = 0x02
	}
	blocks := uint32((ds*16 + 63) / 64)
	if (q.sqCI&(q.sqCnt-1))+blocks >= q.sqCnt {
		n.stats.SQLaps++
	}
	wqeIdx := uint16(q.sqCI)
	q.sqCI += blocks
	if status != 0 {
		n.cqe(q.sendCQ, q, 13, func(c []byte) {
			c[54], c[55] = 0x42, status
			binary.BigEndian.PutUint32(c[56:], uint32(opcode)<<24|q.qpn)
			binary.BigEndian.PutUint16(c[60:], wqeIdx)
		})
		q.state = 6
		return true
	}
	if fm&0x08 != 0 || q.sigAll {
		n.cqe(q.sendCQ, q, 0, func(c []byte) {
			binary.BigEndian.PutUint32(c[44:], byteCnt)
			binary.BigEndian.PutUint32(c[56:], uint32(opcode)<<24|q.qpn)
			binary.BigEndian.PutUint16(c[60:], wqeIdx)
		})
	}
	return true
}

// lookup finds the MR of key covering [addr, addr+n) with the access bits need (0: any).
func (n *NIC) lookup(key uint32, addr uint64, length int, need uint32) bool {
	m := n.mrs[key]
	return m != nil && addr >= m.addr && addr+uint64(length) <= m.addr+m.length && m.access&need == need
}

func (n *NIC) gather(q *mqp, sges []sge, inline []byte) ([]byte, byte) {
	if inline != nil {
		return inline, 0
	}
	var data []byte
	for _, g := range sges {
		if !n.lookup(g.key, g.addr, int(g.len), 0) {
			n.fail("QP %#x: gather lkey %#x [%#x+%d] not registered", q.qpn, g.key, g.addr, g.len)
			return nil, 0x04 // local protection error
		}
		data = append(data, mem(g.addr, int(g.len))...)
	}
	return data, 0
}

// scatter writes data into the sges (access: LOCAL_WRITE needed).
func (n *NIC) scatter(q *mqp, sges []sge, data []byte, need uint32) byte {
	for _, g := range sges {
		if len(data) == 0 {
			break
		}
		if !n.lookup(g.key, g.addr, int(g.len), need) {
			n.fail("QP %#x: scatter lkey %#x [%#x+%d] not writable", q.qpn, g.key, g.addr, g.len)
			return 0x04
		}
		k := copy(mem(g.addr, int(g.len)), data)
		data = data[k:]
	}
	if len(data) > 0 {
		return 0x01 // local length error
	}
	return 0
}

func (n *NIC) remote(peer *mqp, addr uint64, key uint32, length int, need uint32) ([]byte, bool) {
	if peer == nil || !n.lookup(key, addr, length, need) || n.mrs[key].pd != peer.pd {
		n.fail("remote access rkey %#x [%#x+%d] (access %#x) refused", key, addr, length, need)
		return nil, false
	}
	return mem(addr, length), true
}

// deliver consumes the peer's next receive WQE for data and completes it.
func (n *NIC) deliver(peer, from *mqp, data []byte, opcode byte, imm uint32) byte {
	slot := int(peer.rqCI&(peer.rqCnt-1)) << peer.rqShift
	var sges []sge
	for i := 0; i < 1<<peer.rqShift/16; i++ {
		s := peer.buf[slot+i*16:]
		if be32(s[4:]) == 0x100 { // invalid lkey ends the list
			break
		}
		sges = append(sges, sge{addr: binary.BigEndian.Uint64(s[8:]), len: be32(s[0:]), key: be32(s[4:])})
	}
	if peer.rqCI&(peer.rqCnt-1) == peer.rqCnt-1 {
		n.stats.RQLaps++
	}
	peer.rqCI++
	synd := n.scatter(peer, sges, data, 1)
	if synd != 0 {
		n.cqe(peer.recvCQ, peer, 14, func(c []byte) { c[55] = synd })
		peer.state = 6
		return synd
	}
	op := byte(2)
	if opcode == 0x0b {
		op = 3
	}
	n.cqe(peer.recvCQ, peer, op, func(c []byte) {
		binary.BigEndian.PutUint32(c[24:], from.qpn)
		binary.BigEndian.PutUint32(c[36:], imm)
		binary.BigEndian.PutUint32(c[44:], uint32(len(data)))
		binary.BigEndian.PutUint32(c[56:], peer.qpn)
	})
	n.stats.Recvs++
	return 0
}

// flush completes everything outstanding on a QP in ERR with WR_FLUSH_ERR.
func (n *NIC) flush(q *mqp) bool {
	progress := false
	for q.sqCI&0xffff != q.rung {
		start := q.block(q.sqCI)
		w0, w1 := be32(q.buf[start:]), be32(q.buf[start+4:])
		blocks := uint32((int(w1&0x3f)*16 + 63) / 64)
		idx := uint16(w0 >> 8)
		// A WQE that does not end by the rung index is garbage: flush up to there only.
		q.sqCI += min(max(blocks, 1), (q.rung-q.sqCI)&0xffff)
		n.cqe(q.sendCQ, q, 13, func(c []byte) {
			c[55] = 0x05
			binary.BigEndian.PutUint32(c[56:], w0&0xff<<24|q.qpn)
			binary.BigEndian.PutUint16(c[60:], idx)
		})
		progress = true
	}
	for q.rqCI&0xffff != q.rqPI() {
		q.rqCI++
		n.cqe(q.recvCQ, q, 14, func(c []byte) { c[55] = 0x05 })
		progress = true
	}
	return progress
}

// cqe writes one CQE: body first, then the last word with opcode and owner bit.
func (n *NIC) cqe(c *mcq, q *mqp, opcode byte, fill func([]byte)) {
	if c == nil || c.dead {
		return
	}
	ci := dbrec(&c.db[0]) & 0xffffff
	if (c.pi-ci)&0xffffff >= c.ncqe {
		n.fail("CQ %#x overrun: producer %d, consumer %d, %d entries", c.cqn, c.pi, ci, c.ncqe)
		return
	}
	slot := c.pi & (c.ncqe - 1)
	e := c.buf[slot*64 : slot*64+64]
	clear(e[:60])
	binary.BigEndian.PutUint32(e[32:], q.uidx)
	var last [4]byte
	fill(e)
	if c.ts {
		n.clock.stamp(e)
		if n.cfg.KeepStamps {
			c.stamps = append(c.stamps, Stamp{Opcode: opcode, TS: binary.BigEndian.Uint64(e[48:])})
		}
	}
	copy(last[:3], e[60:63])
	owner := byte(0)
	if c.pi&c.ncqe != 0 {
		owner = 1
	}
	last[3] = opcode<<4 | owner
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&e[60])), binary.LittleEndian.Uint32(last[:]))
	if slot == c.ncqe-1 {
		n.stats.CQLaps++
	}
	c.pi++
	n.stats.CQEs++
	if opcode >= 13 {
		n.stats.ErrorCQEs++
	}
}

// checkArm fires the completion event of an armed CQ (armDoorbell) once a CQE beyond
// the armed consumer index exists.
func (n *NIC) checkArm(c *mcq) bool {
	progress := false
	if c.armed && c.channel != nil && (c.pi-c.armCI)&0xffffff > 0 && (c.pi-c.armCI)&0xffffff <= c.ncqe {
		c.armed = false
		var ev [8]byte
		binary.LittleEndian.PutUint64(ev[:], c.cookie)
		// A full channel means events go unread (a loop that re-arms without
		// reading them): fail then, rather than block the engine under n.mu.
		c.channel.SetWriteDeadline(time.Now().Add(time.Second))
		if _, err := c.channel.Write(ev[:]); err != nil {
			n.fail("CQ %#x: completion event: %v (is the channel read?)", c.cqn, err)
		}
		c.events++
		n.stats.Events++
		progress = true
	}
	return progress
}
