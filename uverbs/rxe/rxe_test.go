package rxe

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/gorping/gorping/internal/umem"
	"github.com/gorping/gorping/uverbs"
	"github.com/gorping/gorping/uverbs/driver"
	"golang.org/x/sys/unix"
)

// fakeCmd records provider commands instead of writing to a uverbs fd.
type fakeCmd struct {
	rings  *fakeKernelRings // serves Mmap; nil: ENODEV
	record bool
	cmds   []uint32
	reqs   [][]byte
	resps  []int
	err    error // returned by Write
}

func (f *fakeCmd) Write(cmd uint32, req, resp []byte) error {
	if f.record {
		f.cmds = append(f.cmds, cmd)
		f.reqs = append(f.reqs, append([]byte(nil), req...))
		f.resps = append(f.resps, len(resp))
	}
	return f.err
}

func (f *fakeCmd) Mmap(what string, off int64, length, prot int) ([]byte, error) {
	if f.rings == nil {
		return nil, unix.ENODEV
	}
	if prot != unix.PROT_READ|unix.PROT_WRITE {
		f.rings.t.Errorf("%s mapped with prot %#x, want read-write", what, prot)
	}
	return f.rings.mmap(uint64(off), length)
}
func (f *fakeCmd) Munmap([]byte) error {
	if f.rings != nil {
		f.rings.unmaps++
	}
	return nil
}

// fakeCtxCmd answers GET_CONTEXT for NewContext.
type fakeCtxCmd struct {
	fakeCmd
	gets []int // outLen of every GetContext
}

func (f *fakeCtxCmd) GetContext(in []byte, outLen int) ([]byte, error) {
	if len(in) != 0 {
		return nil, unix.EINVAL
	}
	f.gets = append(f.gets, outLen)
	return make([]byte, outLen), nil
}
func (f *fakeCtxCmd) QueryDevice() (driver.DeviceAttr, error) { return driver.DeviceAttr{}, nil }

// fakeKernelRings plays the kernel's side of the mmap: offsets name pre-built rings.
type fakeKernelRings struct {
	t      testing.TB
	rings  map[uint64]*umem.Mem
	mapped map[uint64]bool
	unmaps int
}

// newRingMem builds a queue mapping the way rxe_queue_init lays it out.
func newRingMem(t testing.TB, slots int, log2Elem uint32) *umem.Mem {
	t.Helper()
	m, err := umem.Anon(ringDataOff + slots<<log2Elem)
	if err != nil {
		t.Fatal(err)
	}
	h := (*queueBuf)(unsafe.Pointer(&m.Bytes()[0]))
	h.Log2ElemSize = log2Elem
	h.IndexMask = uint32(slots - 1)
	return m
}

func (k *fakeKernelRings) mmap(off uint64, size int) ([]byte, error) {
	mem, ok := k.rings[off]
	if !ok || size != mem.Len() {
		return nil, unix.EINVAL
	}
	if k.mapped[off] {
		return nil, unix.EINVAL // rxe: each queue can be mapped once
	}
	k.mapped[off] = true
	return mem.Bytes(), nil
}

func newFakeRxe(t testing.TB) (*rxeContext, *fakeKernelRings) {
	k := &fakeKernelRings{t: t, rings: map[uint64]*umem.Mem{}, mapped: map[uint64]bool{}}
	t.Cleanup(func() {
		for _, m := range k.rings {
			m.Free()
		}
	})
	return &rxeContext{}, k
}

func mminfoBytes(off uint64, size int) []byte {
	b := binary.LittleEndian.AppendUint64(nil, off)
	b = binary.LittleEndian.AppendUint32(b, uint32(size))
	return binary.LittleEndian.AppendUint32(b, 0)
}

func idx(mem []byte, off int) *uint32 { return (*uint32)(unsafe.Pointer(&mem[off])) }

func TestProviderIdentity(t *testing.T) {
	t.Parallel()
	p := provider{}
	info := p.Info()
	if info.Driver != "rxe" || info.DriverID != 14 || info.Transport != driver.TransportIB {
		t.Errorf("identity %s/%d/%v", info.Driver, info.DriverID, info.Transport)
	}
	if info.ABIMin > 2 || info.ABIMax < 2 {
		t.Errorf("ABI range %d..%d must include rxe's 2", info.ABIMin, info.ABIMax)
	}
	cc := &fakeCtxCmd{}
	pc, err := p.NewContext(driver.Device{Name: "rxe0", Driver: "rxe", DriverID: 14, ABI: 2}, cc)
	if err != nil {
		t.Fatal(err)
	}
	if len(cc.gets) != 1 || cc.gets[0] != 0 {
		t.Errorf("GET_CONTEXT driver response lengths %v, want one with none", cc.gets)
	}
	pcq, err := pc.PrepareCQ(&driver.CQRequest{CQE: 32})
	if err != nil {
		t.Fatal(err)
	}
	if in, out := pcq.Udata(); in != nil || out != 16 {
		t.Errorf("CREATE_CQ udata %v/%d, want 0 in / 16 out", in, out)
	}
	pqp, err := pc.PrepareQP(&driver.QPRequest{Type: driver.QPTypeRC})
	if err != nil {
		t.Fatal(err)
	}
	if in, out := pqp.Udata(); in != nil || out != 32 {
		t.Errorf("CREATE_QP udata %v/%d, want 0 in / 32 out", in, out)
	}
}

func newTestCQ(t testing.TB, slots int) (*cq, []byte, *fakeCmd, *fakeKernelRings) {
	ctx, k := newFakeRxe(t)
	memMap := newRingMem(t, slots, 7)
	mem := memMap.Bytes() // 128-byte CQEs, as rxe rounds struct rxe_cqe
	k.rings[4096] = memMap
	cmd := &fakeCmd{record: true, rings: k}
	pcq, err := ctx.NewCQ(cmd, driver.CQCore{Handle: 77, CQE: slots - 1}, mminfoBytes(4096, len(mem)))
	if err != nil {
		t.Fatal(err)
	}
	return pcq.(*cq), mem, cmd, k
}

// kernelCQE writes a CQE into slot i like the kernel (ib_uverbs_wc layout).
func kernelCQE(mem []byte, i int, wc []byte) {
	copy(mem[ringDataOff+i*128:], wc)
}

func wcBytes(id uint64, status, opcode, byteLen, qpn, flags uint32, port uint8) []byte {
	b := binary.LittleEndian.AppendUint64(nil, id)
	for _, v := range []uint32{status, opcode, 0, byteLen, 0xa1b2c3d4, qpn, 0, flags} {
		b = binary.LittleEndian.AppendUint32(b, v)
	}
	return append(b, 0, 0, 0, 0, 0, 0, port, 0)
}

func TestCQPoll(t *testing.T) {
	t.Parallel()
	q, mem, _, _ := newTestCQ(t, 4)
	wc := make([]driver.WC, 8)
	if n, err := q.Poll(wc); n != 0 || err != nil {
		t.Fatalf("empty Poll = %d, %v", n, err)
	}
	// The kernel produces 3 CQEs, the last wrapping nothing yet.
	kernelCQE(mem, 0, wcBytes(1, 0, 0, 16, 0x11, 0, 0))
	kernelCQE(mem, 1, wcBytes(2, 0, 128, 16, 0x11, 1, 1))
	kernelCQE(mem, 2, wcBytes(3, 5, 2, 0, 0x11, 0, 0))
	atomic.StoreUint32(idx(mem, ringProdOff), 3)
	n, err := q.Poll(wc[:2])
	if n != 2 || err != nil {
		t.Fatalf("Poll = %d, %v; want 2", n, err)
	}
	want0 := driver.WC{WRID: 1, Status: driver.WCSuccess, Opcode: driver.WCSend, ByteLen: 16, Imm: 0xa1b2c3d4, QPNum: 0x11}
	want1 := driver.WC{WRID: 2, Opcode: driver.WCRecv, ByteLen: 16, Imm: 0xa1b2c3d4, QPNum: 0x11, Flags: driver.WCFlagGRH, PortNum: 1}
	if wc[0] != want0 || wc[1] != want1 {
		t.Errorf("CQEs\n%+v\n%+v", wc[0], wc[1])
	}
	if c := atomic.LoadUint32(idx(mem, ringConsOff)); c != 2 {
		t.Errorf("consumer index %d after 2 CQEs, want 2", c)
	}
	// Wrap around: produce slots 3 and 0.
	kernelCQE(mem, 3, wcBytes(4, 0, 1, 64, 0x11, 0, 0))
	kernelCQE(mem, 0, wcBytes(5, 0, 2, 64, 0x11, 0, 0))
	atomic.StoreUint32(idx(mem, ringProdOff), 1)
	n, _ = q.Poll(wc)
	if n != 3 || wc[0].WRID != 3 || wc[0].Status != driver.WCWRFlushErr || wc[1].WRID != 4 || wc[2].WRID != 5 || wc[2].Opcode != driver.WCRDMARead {
		t.Errorf("wrapped Poll = %d: %+v", n, wc[:n])
	}
	if c := atomic.LoadUint32(idx(mem, ringConsOff)); c != 1 {
		t.Errorf("consumer index %d after wrap, want 1", c)
	}
	// A garbage producer index from the kernel is masked, never read out of bounds.
	atomic.StoreUint32(idx(mem, ringProdOff), 0xffffff02)
	if n, _ := q.Poll(wc); n != 1 {
		t.Errorf("Poll with unmasked producer = %d, want 1", n)
	}
}

func TestCQArmAndClose(t *testing.T) {
	t.Parallel()
	q, _, cmd, k := newTestCQ(t, 4)
	if err := q.Arm(false); err != nil {
		t.Fatal(err)
	}
	if err := q.Arm(true); err != nil {
		t.Fatal(err)
	}
	want := [][]byte{{77, 0, 0, 0, 0, 0, 0, 0}, {77, 0, 0, 0, 1, 0, 0, 0}}
	for i := range want {
		if cmd.cmds[i] != 23 || !bytes.Equal(cmd.reqs[i], want[i]) || cmd.resps[i] != 0 {
			t.Errorf("arm %d: cmd %d req % x resp %d", i, cmd.cmds[i], cmd.reqs[i], cmd.resps[i])
		}
	}
	cmd.err = fmt.Errorf("uverbs REQ_NOTIFY_CQ: %w", unix.EINVAL)
	if err := q.Arm(false); !errors.Is(err, unix.EINVAL) {
		t.Errorf("Arm error %v not passed through", err)
	}
	if err := q.Close(); err != nil || k.unmaps != 1 {
		t.Fatalf("Close: %v, %d unmaps", err, k.unmaps)
	}
	if _, err := q.Poll(make([]driver.WC, 1)); !errors.Is(err, driver.ErrClosed) {
		t.Errorf("Poll after Close: %v", err)
	}
	if err := q.Arm(false); !errors.Is(err, driver.ErrClosed) {
		t.Errorf("Arm after Close: %v", err)
	}
	if err := q.Close(); err != nil || k.unmaps != 1 {
		t.Errorf("second Close: %v, %d unmaps", err, k.unmaps)
	}
}

func TestNewCQErrors(t *testing.T) {
	t.Parallel()
	ctx, k := newFakeRxe(t)
	cmd := &fakeCmd{rings: k}
	if _, err := ctx.NewCQ(cmd, driver.CQCore{}, make([]byte, 8)); err == nil {
		t.Error("short driver response accepted")
	}
	if _, err := ctx.NewCQ(cmd, driver.CQCore{}, mminfoBytes(8192, 4096)); !errors.Is(err, unix.EINVAL) {
		t.Errorf("unknown offset: %v", err)
	}
	// A header claiming more slots than the mapping holds is rejected and unmapped.
	memMap := newRingMem(t, 4, 7)
	mem := memMap.Bytes()
	(*queueBuf)(unsafe.Pointer(&mem[0])).IndexMask = 1023
	k.rings[4096] = memMap
	if _, err := ctx.NewCQ(cmd, driver.CQCore{}, mminfoBytes(4096, len(mem))); err == nil || k.unmaps != 1 {
		t.Errorf("oversized ring: %v, %d unmaps", err, k.unmaps)
	}
	// Slots smaller than a CQE.
	mem2Map := newRingMem(t, 4, 5)
	mem2 := mem2Map.Bytes()
	k.rings[8192] = mem2Map
	if _, err := ctx.NewCQ(cmd, driver.CQCore{}, mminfoBytes(8192, len(mem2))); err == nil {
		t.Error("32-byte CQ slots accepted")
	}
}

type testQP struct {
	qp     *qp
	sq, rq []byte
	cmd    *fakeCmd
	k      *fakeKernelRings
}

func newTestQP(t testing.TB, sqSlots, rqSlots int, sigAll bool) testQP {
	ctx, k := newFakeRxe(t)
	sqMap := newRingMem(t, sqSlots, 8)
	sq := sqMap.Bytes() // 256 bytes: 208 + 1 SGE, rounded up
	rqMap := newRingMem(t, rqSlots, 6)
	rq := rqMap.Bytes() // 64 bytes: 40 + 1 SGE, rounded up
	k.rings[1<<16] = rqMap
	k.rings[2<<16] = sqMap
	cmd := &fakeCmd{record: true, rings: k}
	resp := append(mminfoBytes(1<<16, len(rq)), mminfoBytes(2<<16, len(sq))...)
	core := driver.QPCore{Handle: 9, QPN: 0x11, Type: driver.QPTypeRC, SigAll: sigAll,
		Cap: driver.QPCap{MaxSendWR: uint32(sqSlots - 1), MaxRecvWR: uint32(rqSlots - 1), MaxSendSGE: 3, MaxRecvSGE: 1}}
	p, err := ctx.NewQP(cmd, core, resp)
	if err != nil {
		t.Fatal(err)
	}
	return testQP{qp: p.(*qp), sq: sq, rq: rq, cmd: cmd, k: k}
}

func TestPostSendWQE(t *testing.T) {
	t.Parallel()
	tq := newTestQP(t, 4, 4, false)
	q := tq.qp
	if q.maxSendSGE != 3 {
		t.Fatalf("maxSendSGE = %d, want 3 (256-byte slot: (256-208)/16)", q.maxSendSGE)
	}
	// Dirty the slot as the kernel's scratch use would.
	for i := ringDataOff; i < ringDataOff+256; i++ {
		tq.sq[i] = 0xee
	}
	wr := &driver.SendWR{ID: 0x1122334455667788, Opcode: driver.WRRDMAWrite, Flags: driver.SendSignaled,
		SGE:        []driver.SGE{{Addr: 0xa000, Length: 100, LKey: 0x55}, {Addr: 0xb000, Length: 28, LKey: 0x66}},
		RemoteAddr: 0xdead0000, RKey: 0x77, Imm: 0x12345678}
	if err := q.PostSend(wr); err != nil {
		t.Fatal(err)
	}
	w := tq.sq[ringDataOff : ringDataOff+256]
	u32 := func(off int) uint32 { return binary.LittleEndian.Uint32(w[off:]) }
	u64 := func(off int) uint64 { return binary.LittleEndian.Uint64(w[off:]) }
	checks := []struct {
		name      string
		off       int
		got, want uint64
	}{
		{"wr_id", 0, u64(0), 0x1122334455667788},
		{"reserved (old num_sge)", 8, uint64(u32(8)), 0},
		{"opcode", 12, uint64(u32(12)), 0},
		{"send_flags", 16, uint64(u32(16)), 2},
		{"imm (not an IMM opcode)", 20, uint64(u32(20)), 0},
		{"remote_addr", 24, u64(24), 0xdead0000},
		{"rkey", 32, uint64(u32(32)), 0x77},
		{"union tail", 36, u64(36), 0},
		{"status", 144, uint64(u32(144)), 0},
		{"state", 148, uint64(u32(148)), 0},
		{"iova = remote_addr", 152, u64(152), 0xdead0000},
		{"mask", 160, uint64(u32(160)), 0},
		{"ssn", 176, uint64(u32(176)), 0},
		{"dma.length", 184, uint64(u32(184)), 128},
		{"dma.resid", 188, uint64(u32(188)), 128},
		{"dma.cur_sge", 192, uint64(u32(192)), 0},
		{"dma.num_sge", 196, uint64(u32(196)), 2},
		{"dma.sge_offset", 200, uint64(u32(200)), 0},
		{"sge[0].addr", 208, u64(208), 0xa000},
		{"sge[0].length", 216, uint64(u32(216)), 100},
		{"sge[0].lkey", 220, uint64(u32(220)), 0x55},
		{"sge[1].addr", 224, u64(224), 0xb000},
		{"sge[1].lkey", 236, uint64(u32(236)), 0x66},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s @%d = %#x, want %#x", c.name, c.off, c.got, c.want)
		}
	}
	if p := atomic.LoadUint32(idx(tq.sq, ringProdOff)); p != 1 {
		t.Errorf("producer index %d, want 1", p)
	}
	// QP in RESET: the WQE is queued, the doorbell deferred.
	if len(tq.cmd.cmds) != 0 {
		t.Fatalf("doorbell rung before RTS: %v", tq.cmd.cmds)
	}
	for _, s := range []driver.QPState{driver.QPSInit, driver.QPSRTR} {
		if err := q.SetState(s); err != nil || len(tq.cmd.cmds) != 0 {
			t.Fatalf("SetState(%v): %v, cmds %v", s, err, tq.cmd.cmds)
		}
	}
	if err := q.SetState(driver.QPSRTS); err != nil {
		t.Fatal(err)
	}
	wantDB := []byte{0, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 56, 0, 0, 0}
	if len(tq.cmd.cmds) != 1 || tq.cmd.cmds[0] != 28 || !bytes.Equal(tq.cmd.reqs[0], wantDB) || tq.cmd.resps[0] != 4 {
		t.Fatalf("deferred doorbell: cmds %v req % x resp %v", tq.cmd.cmds, tq.cmd.reqs, tq.cmd.resps)
	}
	// In RTS every post rings. SEND_WITH_IMM carries the immediate.
	// A stale RemoteAddr/RKey in a reused WR must not leak into a SEND WQE.
	wr2 := &driver.SendWR{ID: 2, Opcode: driver.WRSendWithImm, SGE: wr.SGE[:1], Imm: 0x12345678, RemoteAddr: 0x999, RKey: 9}
	if err := q.PostSend(wr2); err != nil {
		t.Fatal(err)
	}
	w2 := tq.sq[ringDataOff+256:]
	if binary.LittleEndian.Uint32(w2[12:]) != 3 || binary.LittleEndian.Uint32(w2[20:]) != 0x12345678 ||
		binary.LittleEndian.Uint32(w2[196:]) != 1 || binary.LittleEndian.Uint32(w2[184:]) != 100 ||
		binary.LittleEndian.Uint64(w2[24:]) != 0 || binary.LittleEndian.Uint32(w2[32:]) != 0 || binary.LittleEndian.Uint64(w2[152:]) != 0 {
		t.Errorf("SEND_WITH_IMM WQE % x", w2[:208])
	}
	if len(tq.cmd.cmds) != 2 {
		t.Errorf("doorbells %v, want 2", tq.cmd.cmds)
	}
	// A doorbell failure in RTS is reported.
	tq.cmd.err = fmt.Errorf("uverbs POST_SEND: %w", unix.EINVAL)
	if err := q.PostSend(wr2); !errors.Is(err, unix.EINVAL) {
		t.Errorf("doorbell error %v not reported", err)
	}
}

func TestSigAllAndValidation(t *testing.T) {
	t.Parallel()
	tq := newTestQP(t, 4, 4, true)
	q := tq.qp
	if err := q.PostSend(&driver.SendWR{Opcode: driver.WRSend}); err != nil {
		t.Fatal(err)
	}
	if f := binary.LittleEndian.Uint32(tq.sq[ringDataOff+16:]); f&uint32(driver.SendSignaled) == 0 {
		t.Errorf("sq_sig_all QP: send_flags %#x lacks SIGNALED", f)
	}
	bad := []*driver.SendWR{
		{Opcode: driver.WRAtomicFetchAdd},
		{Opcode: driver.WRSend, Flags: driver.SendInline},
		{Opcode: driver.WRSend, SGE: make([]driver.SGE, 4)},
		{Opcode: driver.WRSend, SGE: []driver.SGE{{Length: 1 << 31}, {Length: 1 << 31}}},
	}
	for i, wr := range bad {
		if err := q.PostSend(wr); !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.EOPNOTSUPP) {
			t.Errorf("bad WR %d: err %v", i, err)
		}
	}
	if p := atomic.LoadUint32(idx(tq.sq, ringProdOff)); p != 1 {
		t.Errorf("rejected WRs were produced: producer %d", p)
	}
}

func TestQueueFullAndWrap(t *testing.T) {
	t.Parallel()
	tq := newTestQP(t, 4, 4, false)
	q := tq.qp
	q.SetState(driver.QPSRTS)
	wr := &driver.SendWR{Opcode: driver.WRSend}
	for i := 0; i < 3; i++ {
		wr.ID = uint64(i)
		if err := q.PostSend(wr); err != nil {
			t.Fatalf("post %d: %v", i, err)
		}
	}
	err := q.PostSend(wr)
	if !errors.Is(err, driver.ErrQueueFull) || !errors.Is(err, unix.ENOMEM) {
		t.Fatalf("4th post into 3 usable slots: %v, want ErrQueueFull/ENOMEM", err)
	}
	// The kernel completes two WQEs: two slots free again, wrapping around.
	atomic.StoreUint32(idx(tq.sq, ringConsOff), 2)
	for i := 3; i < 5; i++ {
		wr.ID = uint64(i)
		if err := q.PostSend(wr); err != nil {
			t.Fatalf("post %d after completions: %v", i, err)
		}
	}
	if p := atomic.LoadUint32(idx(tq.sq, ringProdOff)); p != 1 {
		t.Errorf("producer %d after wrap, want 1", p)
	}
	if id := binary.LittleEndian.Uint64(tq.sq[ringDataOff:]); id != 4 {
		t.Errorf("slot 0 holds wr_id %d, want 4", id)
	}
	if err := q.PostSend(wr); !errors.Is(err, driver.ErrQueueFull) {
		t.Errorf("post into full ring after wrap: %v", err)
	}
}

func TestPostRecv(t *testing.T) {
	t.Parallel()
	tq := newTestQP(t, 4, 4, false)
	q := tq.qp
	wr := &driver.RecvWR{ID: 0xabc, SGE: []driver.SGE{{Addr: 0xc000, Length: 16, LKey: 0x99}}}
	if err := q.PostRecv(wr); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("PostRecv in RESET: %v, want EINVAL", err)
	}
	q.SetState(driver.QPSInit)
	for i := ringDataOff; i < ringDataOff+64; i++ {
		tq.rq[i] = 0xee
	}
	if err := q.PostRecv(wr); err != nil {
		t.Fatal(err)
	}
	w := tq.rq[ringDataOff : ringDataOff+64]
	want := make([]byte, 56)
	binary.LittleEndian.PutUint64(want[0:], 0xabc)
	binary.LittleEndian.PutUint32(want[16:], 16) // dma.length
	binary.LittleEndian.PutUint32(want[20:], 16) // dma.resid
	binary.LittleEndian.PutUint32(want[28:], 1)  // dma.num_sge
	binary.LittleEndian.PutUint64(want[40:], 0xc000)
	binary.LittleEndian.PutUint32(want[48:], 16)
	binary.LittleEndian.PutUint32(want[52:], 0x99)
	if !bytes.Equal(w[:56], want) {
		t.Errorf("recv WQE\n got % x\nwant % x", w[:56], want)
	}
	if p := atomic.LoadUint32(idx(tq.rq, ringProdOff)); p != 1 {
		t.Errorf("RQ producer %d", p)
	}
	if len(tq.cmd.cmds) != 0 {
		t.Errorf("PostRecv issued commands %v; receives need no syscall", tq.cmd.cmds)
	}
	if err := q.PostRecv(&driver.RecvWR{SGE: make([]driver.SGE, 2)}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("2 SGEs on a 1-SGE RQ: %v", err)
	}
	if err := q.Close(); err != nil || tq.k.unmaps != 2 {
		t.Fatalf("Close: %v, unmaps %d", err, tq.k.unmaps)
	}
	if err := q.PostRecv(wr); !errors.Is(err, driver.ErrClosed) {
		t.Errorf("PostRecv after Close: %v", err)
	}
	if err := q.PostSend(&driver.SendWR{Opcode: driver.WRSend}); !errors.Is(err, driver.ErrClosed) {
		t.Errorf("PostSend after Close: %v", err)
	}
}

func TestNewQPRejects(t *testing.T) {
	t.Parallel()
	ctx, k := newFakeRxe(t)
	cmd := &fakeCmd{rings: k}
	if _, err := ctx.NewQP(cmd, driver.QPCore{Type: driver.QPTypeRC}, make([]byte, 16)); err == nil {
		t.Error("short CREATE_QP response accepted")
	}
	if _, err := ctx.NewQP(cmd, driver.QPCore{Type: driver.QPTypeUD}, make([]byte, 32)); err == nil {
		t.Error("UD accepted")
	}
	// SQ maps, RQ does not: the SQ mapping is released again.
	sqMap := newRingMem(t, 4, 8)
	sq := sqMap.Bytes()
	k.rings[2<<16] = sqMap
	resp := append(mminfoBytes(1<<16, 4096), mminfoBytes(2<<16, len(sq))...)
	if _, err := ctx.NewQP(cmd, driver.QPCore{Type: driver.QPTypeRC, Cap: driver.QPCap{MaxSendSGE: 1, MaxRecvSGE: 1}}, resp); err == nil || k.unmaps != 1 {
		t.Errorf("RQ map failure: %v, unmaps %d", err, k.unmaps)
	}
}

func TestDataPathAllocs(t *testing.T) {
	tq := newTestQP(t, 64, 64, false)
	q := tq.qp
	q.SetState(driver.QPSRTS)
	tq.cmd.record = false
	cqq, mem, cmd, _ := newTestCQ(t, 64)
	cmd.record = false
	sge := []driver.SGE{{Addr: 0x1000, Length: 16, LKey: 1}}
	swr := &driver.SendWR{ID: 1, Opcode: driver.WRSend, Flags: driver.SendSignaled, SGE: sge}
	rwr := &driver.RecvWR{ID: 2, SGE: sge}
	wc := make([]driver.WC, 4)
	for name, f := range map[string]func(){
		"PostSend": func() {
			q.PostSend(swr)
			atomic.StoreUint32(idx(tq.sq, ringConsOff), atomic.LoadUint32(idx(tq.sq, ringProdOff))) // kernel completes it
		},
		"PostRecv": func() {
			q.PostRecv(rwr)
			atomic.StoreUint32(idx(tq.rq, ringConsOff), atomic.LoadUint32(idx(tq.rq, ringProdOff)))
		},
		"Poll": func() {
			p := atomic.LoadUint32(idx(mem, ringProdOff))
			atomic.StoreUint32(idx(mem, ringProdOff), (p+1)&63)
			if n, _ := cqq.Poll(wc); n != 1 {
				t.Fatal("Poll found no CQE")
			}
		},
		"Arm": func() { cqq.Arm(false) },
	} {
		if n := testing.AllocsPerRun(1000, f); n != 0 {
			t.Errorf("%s: %v allocations per call, want 0", name, n)
		}
	}
}

// The advice after a link went down names the device and its netdev, and reaches
// applications through the registered provider (Device.LinkDownAdvice).
func TestLinkDownAdvice(t *testing.T) {
	t.Parallel()
	dev := uverbs.Device{Name: "rxe1", Driver: "rxe", DriverID: rxeDriverID}
	want := "rdma link delete rxe1; rdma link add rxe1 type rxe netdev d0"
	if got := dev.LinkDownAdvice("d0"); !strings.HasPrefix(got, "rxe's QP1") || !strings.HasSuffix(got, want) {
		t.Errorf("LinkDownAdvice = %q, want rxe's QP1 ... %q", got, want)
	}
	if got := (uverbs.Device{Name: "mlx5_0", Driver: "mlx5", DriverID: 1}).LinkDownAdvice("eth0"); got != "" {
		t.Errorf("a driver without advice: %q", got)
	}
}
