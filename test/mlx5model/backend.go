package mlx5model

import (
	"encoding/binary"
	"os"
	"sync"
	"unsafe"

	"github.com/gorping/gorping/test/internal/kcmd"
	"golang.org/x/sys/unix"
)

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

// mctx is one uverbs context on the model (one open of the device).
type mctx struct {
	uars    [][]byte // static UAR system pages (PageSize bytes, nupp UARs each)
	nupp    int
	tot     int // static bfregs
	lowLat  int
	bfUsers map[int]int      // net bfreg index -> QPs
	pipes   map[int]*os.File // read fd handed out -> write end
	async   *os.File
	dead    bool
}

// backend is the device file of one context: it plays mlx5_ib for the commands.
type backend struct {
	nic *NIC
	mu  sync.Mutex
	x   *mctx
}

func le32(b []byte) uint32 { return kcmd.LE32(b) }
func le64(b []byte) uint64 { return kcmd.LE64(b) }

var putLE = kcmd.PutLE

// Write executes one command (header | core | driver data) and writes the response where
// the request's first u64 points, as the kernel does (kcmd: extended commands arrive
// with their ex header stripped).
func (b *backend) Write(p []byte) (int, error) {
	cmd, req, outLen, err := kcmd.Decode(p)
	if err != nil {
		return 0, err
	}
	n := b.nic
	if n.cfg.Fail != nil {
		if err := n.cfg.Fail(cmd); err != nil {
			return 0, err
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	resp, err := b.exec(cmd, req, outLen)
	if err != nil {
		return 0, err
	}
	kcmd.Reply(req, resp, outLen)
	return len(p), nil
}

const exFlag = kcmd.ExFlag

func (b *backend) exec(cmd uint32, req []byte, outLen int) ([]byte, error) {
	n := b.nic
	switch cmd {
	case 0: // GET_CONTEXT
		if b.x != nil {
			return nil, unix.EINVAL
		}
		if len(req) < 8+32 || outLen < 8+72 {
			return nil, unix.EINVAL
		}
		d := req[8:]
		tot, low := int(le32(d[0:])), int(le32(d[4:]))
		if flags, mask, caps := le32(d[8:]), le32(d[12:]), le64(d[24:]); flags != 0 || mask != 0 || caps&2 != 0 {
			n.fail("GET_CONTEXT asks flags %#x comp_mask %#x lib_caps %#x", flags, mask, caps)
			return nil, unix.EINVAL
		}
		if le64(d[24:])&1 == 0 {
			n.fail("GET_CONTEXT without lib_caps 4K_UAR")
			return nil, unix.EINVAL
		}
		// As mlx5_ib: the bfregs asked for are rounded up to whole system pages.
		nupp := n.cfg.PageSize / uarSize
		perPage := 2 * nupp
		if tot == 0 || tot > 512 {
			return nil, unix.EINVAL
		}
		tot = (tot + perPage - 1) / perPage * perPage
		if low > tot-1 {
			return nil, unix.EINVAL
		}
		x := &mctx{tot: tot, lowLat: low, nupp: nupp, bfUsers: map[int]int{}, pipes: map[int]*os.File{}}
		for i := 0; i < tot/perPage; i++ {
			page, err := unix.Mmap(-1, 0, n.cfg.PageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
			if err != nil {
				return nil, err
			}
			x.uars = append(x.uars, page)
		}
		r, w, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		x.async = w
		asyncFd, err := unix.Dup(int(r.Fd()))
		r.Close()
		if err != nil {
			return nil, err
		}
		b.x = x
		n.ctxs = append(n.ctxs, x)
		n.addUARs(x)
		cqeVersion := uint32(1)
		if d[16] == 0 {
			cqeVersion = 0
		}
		out := putLE(uint32(asyncFd), 1)
		out = append(out, putLE(1<<17, uint32(n.cfg.BfRegSize), uint32(tot), 64)...)
		out = binary.LittleEndian.AppendUint16(out, maxSQDescSz)
		out = binary.LittleEndian.AppendUint16(out, maxRQDescSz)
		out = append(out, putLE(maxSendWQEBB, maxRecvWR, 1<<15)...)
		out = binary.LittleEndian.AppendUint16(out, 1) // num_ports
		out = binary.LittleEndian.AppendUint16(out, 0)
		out = append(out, putLE(0, 72)...)           // comp_mask, response_length
		out = append(out, byte(cqeVersion), 3, 0, 1) // clock_info_versions: V1
		out = binary.LittleEndian.AppendUint64(out, 0)
		out = append(out, putLE(12, uint32(nupp), 0, 0)...) // log_uar_size, num_uars_per_page
		return out, nil
	case 1 | exFlag: // QUERY_DEVICE_EX: the base attributes, then the timestamp clock
		base, _ := b.exec(1, req, outLen)
		out := make([]byte, 304)
		copy(out, base)
		binary.LittleEndian.PutUint32(out[180:], 304) // response_length
		if !n.cfg.NoTimestamps {
			binary.LittleEndian.PutUint64(out[208:], clockMask) // completion_timestamp_mask
			binary.LittleEndian.PutUint64(out[216:], clockKHz)  // hca_core_clock
		}
		return out, nil
	case 18 | exFlag: // CREATE_CQ_EX: the legacy request's fields at other offsets, and flags
		if len(req) < 8+32+32 {
			return nil, unix.EINVAL
		}
		x := req[8:]
		if le32(x[20:]) != 0 || le32(x[24:])&^1 != 0 {
			n.fail("CREATE_CQ_EX: comp_mask %#x flags %#x", le32(x[20:]), le32(x[24:]))
			return nil, unix.EOPNOTSUPP
		}
		legacy := make([]byte, 32, 32+len(x)-32)
		copy(legacy[0:8], req[0:8]) // response
		copy(legacy[8:28], x[0:20]) // user_handle, cqe, comp_vector, comp_channel
		legacy = append(legacy, x[32:]...)
		resp, err := b.createCQ(legacy, le32(x[24:])&1 != 0)
		if err != nil {
			return nil, err
		}
		// ib_uverbs_ex_create_cq_resp: the legacy answer, comp_mask, response_length;
		// then the driver's (cqn).
		out := append(append([]byte(nil), resp[:8]...), putLE(0, 16)...)
		return append(out, resp[8:]...), nil
	case 1: // QUERY_DEVICE
		out := make([]byte, 176)
		binary.LittleEndian.PutUint64(out[8:], 0x0100c9fffe000002)
		binary.LittleEndian.PutUint32(out[40:], vendorID)
		binary.LittleEndian.PutUint32(out[44:], vendorPartID)
		binary.LittleEndian.PutUint32(out[52:], 1<<17)
		binary.LittleEndian.PutUint32(out[56:], 1<<15)
		binary.LittleEndian.PutUint32(out[64:], 30)
		binary.LittleEndian.PutUint32(out[76:], 1<<22-1)
		binary.LittleEndian.PutUint32(out[88:], 16)
		binary.LittleEndian.PutUint32(out[100:], 16)
		out[171] = 1
		return out, nil
	case 2: // QUERY_PORT
		out := make([]byte, 40)
		binary.LittleEndian.PutUint32(out[4:], 1<<30)
		binary.LittleEndian.PutUint32(out[16:], 256)
		out[26], out[27], out[28], out[36], out[37] = 4, 5, 3, 5, 2 // ACTIVE, 4096, 1024, LinkUp, Ethernet
		return out, nil
	case 3: // ALLOC_PD
		n.nextN++
		return putLE(n.nextN, n.nextN|0x800000), nil // handle, pdn
	case 4: // DEALLOC_PD
		return nil, nil
	case 13: // DEREG_MR: by handle
		for key, mr := range n.mrs {
			if mr.handle == le32(req) {
				delete(n.mrs, key)
				return nil, nil
			}
		}
		return nil, unix.EINVAL
	case 9: // REG_MR
		n.nextN++
		key := n.nextN<<8 | 0x07
		n.mrs[key] = &mmr{handle: n.nextN, addr: le64(req[8:]), length: le64(req[16:]), access: le32(req[36:]), key: key, pd: le32(req[32:]), x: b.x}
		return putLE(n.nextN, key, key), nil
	case 17: // CREATE_COMP_CHANNEL
		r, w, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		fd, err := unix.Dup(int(r.Fd()))
		r.Close()
		if err != nil {
			w.Close()
			return nil, err
		}
		b.x.pipes[fd] = w
		return putLE(uint32(fd)), nil
	case 18: // CREATE_CQ
		return b.createCQ(req, false)
	case 20: // DESTROY_CQ
		h := le32(req[8:])
		for _, c := range n.cqs {
			if c.handle == h && !c.dead {
				c.dead = true
				n.setCQ(c, false)
				// Like the kernel, report the events user space has read: those still in
				// the channel are not (the model gives each CQ its own channel).
				read := c.events
				if c.channel != nil {
					if pending, err := unix.IoctlGetInt(int(c.channel.Fd()), unix.TIOCINQ); err == nil {
						read -= uint32(pending / 8)
					}
				}
				return putLE(read, 0), nil
			}
		}
		return nil, unix.EINVAL
	case 24: // CREATE_QP
		return b.createQP(req)
	case 26: // MODIFY_QP
		h, mask := le32(req[64:]), le32(req[68:])
		for _, q := range n.qps {
			if q.handle == h && !q.dead {
				if mask&0x100000 != 0 {
					q.dest = le32(req[84:])
				}
				if mask&1 != 0 {
					q.state = req[96]
				}
				return nil, nil
			}
		}
		return nil, unix.EINVAL
	case 27: // DESTROY_QP
		h := le32(req[8:])
		for qpn, q := range n.qps {
			if q.handle == h && !q.dead {
				q.dead = true
				delete(n.qps, qpn)
				n.setQP(q, false)
				b.x.bfUsers[q.bfreg]--
				return putLE(0), nil
			}
		}
		return nil, unix.EINVAL
	}
	return nil, unix.EOPNOTSUPP
}

func (b *backend) createQP(req []byte) ([]byte, error) {
	n := b.nic
	if len(req) < 56+48 {
		n.fail("CREATE_QP: %d bytes of request", len(req))
		return nil, unix.EINVAL
	}
	d := req[56:]
	sqCnt, rqCnt, rqShift, flags, uidx := le32(d[16:]), le32(d[20:]), le32(d[24:]), le32(d[28:]), le32(d[32:])
	if (sqCnt != 0 && !pow2(sqCnt)) || (rqCnt != 0 && !pow2(rqCnt)) || flags != 0 || uidx >= 1<<24 {
		n.fail("CREATE_QP: sq %d rq %d shift %d flags %#x uidx %d", sqCnt, rqCnt, rqShift, flags, uidx)
		return nil, unix.EINVAL
	}
	sqOff := int(rqCnt) << rqShift
	size := sqOff + int(sqCnt)*64
	var send, recv *mcq
	for _, c := range n.cqs {
		if c.handle == le32(req[20:]) {
			send = c
		}
		if c.handle == le32(req[24:]) {
			recv = c
		}
	}
	if send == nil || recv == nil {
		return nil, unix.EINVAL
	}
	n.nextN++
	q := &mqp{handle: n.nextN, qpn: n.nextN | 0x10000, uidx: uidx, pd: le32(req[16:]),
		buf: mem(le64(d[0:]), size), db: (*[2]uint32)(ptrAt(le64(d[8:]))),
		sqCnt: sqCnt, rqCnt: rqCnt, rqShift: rqShift, sqOff: sqOff, sendCQ: send, recvCQ: recv,
		sigAll: req[52] != 0}
	// The kernel's choice: a free low-latency bfreg, else the least used medium one, else 0.
	x := b.x
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
	q.bfreg, q.x = net, x
	n.qps[q.qpn] = q
	n.setQP(q, true)
	gross := uint32(net/2*4 + net%2)
	out := putLE(q.handle, q.qpn, le32(req[32:]), le32(req[36:]), le32(req[40:]), le32(req[44:]), le32(req[48:]), 0)
	out = append(out, putLE(gross, 0, 0, 0, 0, 0, 0, 0)...)
	return append(out, make([]byte, 8)...), nil
}

// createCQ makes a CQ from a legacy CREATE_CQ request (the extended one arrives converted);
// ts: stamp its CQEs with the device clock.
func (b *backend) createCQ(req []byte, ts bool) ([]byte, error) {
	n := b.nic
	if len(req) < 32+32 {
		return nil, unix.EINVAL
	}
	cqe := le32(req[16:])
	ch := int32(le32(req[24:]))
	d := req[32:]
	ncqe := cqe + 1
	if !pow2(ncqe) || le32(d[16:]) != 64 || d[20] != 0 || binary.LittleEndian.Uint16(d[22:]) != 0 {
		n.fail("CREATE_CQ: cqe %d, cqe_size %d, compression %d, flags %#x", cqe, le32(d[16:]), d[20], binary.LittleEndian.Uint16(d[22:]))
		return nil, unix.EINVAL
	}
	n.nextN++
	c := &mcq{handle: n.nextN, cookie: le64(req[8:]), cqn: n.nextN | 0x400, ncqe: ncqe,
		buf: mem(le64(d[0:]), int(ncqe)*64), db: (*[2]uint32)(ptrAt(le64(d[8:]))), x: b.x, ts: ts}
	for i := 63; i < len(c.buf); i += 64 {
		if c.buf[i] != 0xf0 {
			n.fail("CREATE_CQ: CQE %d op_own %#x, want 0xf0", i/64, c.buf[i])
			return nil, unix.EINVAL
		}
	}
	if ch >= 0 {
		c.channel = b.x.pipes[int(ch)]
		if c.channel == nil {
			return nil, unix.EINVAL
		}
	}
	n.cqs = append(n.cqs, c)
	n.setCQ(c, true)
	return putLE(c.handle, cqe, c.cqn, 0), nil
}

// ptrAt is the pointer at a process address the provider passed in a command.
func ptrAt(a uint64) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&a)) }

// Mmap hands out the context's UAR pages: command 0 (regular), index = page offset.
func (b *backend) Mmap(off int64, length, prot int) ([]byte, error) {
	b.nic.mu.Lock()
	defer b.nic.mu.Unlock()
	ps := int64(b.nic.cfg.PageSize)
	if b.x == nil || length != int(ps) || off%ps != 0 {
		b.nic.fail("mmap offset %#x length %d: not one %d-byte page", off, length, ps)
		return nil, unix.EINVAL
	}
	pg := off / ps
	if cmd := (pg >> 8) & 0xff; cmd == 7 { // the clock_info page, read-only
		if pg&0xff != 0 || prot&unix.PROT_WRITE != 0 {
			b.nic.fail("clock_info mmap index %d prot %#x", pg&0xff, prot)
			return nil, unix.EPERM
		}
		return b.nic.clock.page, nil
	}
	cmd, idx := (pg>>8)&0xff, int(pg&0xff|(pg>>16)&0xff<<8)
	if cmd != 0 || idx >= len(b.x.uars) || prot&unix.PROT_WRITE == 0 {
		b.nic.fail("mmap offset %#x (command %d, index %d), prot %#x", off, cmd, idx, prot)
		return nil, unix.EINVAL
	}
	return b.x.uars[idx], nil
}

// Close is the device file's release: like the kernel's context teardown, the context's
// QPs and CQs stop existing for the engine before the provider frees their memory.
func (b *backend) Close() error {
	n := b.nic
	n.mu.Lock()
	defer n.mu.Unlock()
	if b.x == nil {
		return nil
	}
	for qpn, q := range n.qps {
		if q.x == b.x && !q.dead {
			q.dead = true
			delete(n.qps, qpn)
			n.setQP(q, false)
		}
	}
	for _, c := range n.cqs {
		if c.x == b.x && !c.dead {
			c.dead = true
			n.setCQ(c, false)
		}
	}
	for key, m := range n.mrs {
		if m.x == b.x {
			delete(n.mrs, key)
		}
	}
	b.x.dead = true
	return nil
}

// Munmap: the model keeps its UAR pages until Close of the NIC.
func (b *backend) Munmap([]byte) error { return nil }
