package mlx5

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"unsafe"

	"github.com/gorping/gorping/uverbs/driver"
	"golang.org/x/sys/unix"
)

// testLimits are the context limits of a ConnectX-6 as the oracle's fake kernel answered.
var testLimits = devLimits{maxSQDescSz: 1024, maxRQDescSz: 512, maxSendWQEBB: 1 << 15, maxRecvWR: 1 << 15}

func mapAnon(t testing.TB, n int) []byte {
	t.Helper()
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(b) })
	return b
}

func addrOf(b []byte) uint64 { return uint64(uintptr(unsafe.Pointer(&b[0]))) }

// testQP is a QP with its buffer, doorbell record and a UAR page of plain memory.
type testQP struct {
	qp    *qp
	buf   []byte
	dbrec *[2]uint32
	uar   []byte
	g     qpGeometry
}

func newTestQP(t testing.TB, g qpGeometry, qpn uint32, bfRegSize, bfIndex int) *testQP {
	t.Helper()
	buf := mapAnon(t, max(g.rqBytes+g.sqBytes, 4096))
	db := mapAnon(t, 4096)
	uar := mapAnon(t, uarSize)
	dbrec := (*[2]uint32)(unsafe.Pointer(&db[0]))
	bf := &bfreg{index: bfIndex, reg: unsafe.Pointer(&uar[bfOffset])}
	if bfIndex != 0 {
		bf.bufSize = bfRegSize / 2
	}
	q := &qp{qpn: qpn}
	if g.sqWQECnt > 0 {
		q.sq = newSendQueue(buf[g.rqBytes:g.rqBytes+g.sqBytes], g, qpn, false, dbrec, bf)
	}
	if g.rqWQECnt > 0 {
		q.rq = newRecvQueue(buf[:g.rqBytes], g, dbrec)
	}
	return &testQP{qp: q, buf: buf, dbrec: dbrec, uar: uar, g: g}
}

func dbrecWord(p *[2]uint32, i int) uint32 {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], p[i])
	return binary.BigEndian.Uint32(b[:])
}

func TestSizeQPMatchesLibmlx5(t *testing.T) {
	// RC, max_send_wr 16, max_recv_wr 16, one SGE each, max_inline 64: libmlx5 44 gives
	// inline 124, 25 usable send WRs, 128 SQ blocks, RQ 16 x 16 bytes with the SQ at 0x100.
	g, err := sizeQP(testLimits, 16, 16, 1, 1, 64)
	if err != nil {
		t.Fatal(err)
	}
	want := qpGeometry{sqWQESize: 320, sqWQECnt: 128, sqMaxPost: 25, maxInline: 124, maxSendSGE: 1,
		rqWQECnt: 16, rqWQEShift: 4, rqMaxPost: 16, maxRecvSGE: 1, rqBytes: 0x100, sqBytes: 8192}
	if g != want {
		t.Fatalf("sizeQP:\n got %+v\nwant %+v", g, want)
	}
	// No inline: the WQE is overhead + one data segment rounded to 64.
	g, err = sizeQP(testLimits, 2, 1, 2, 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	if g.sqWQESize != 256 || g.sqWQECnt != 8 || g.sqMaxPost != 2 || g.maxInline != 256-192-4 ||
		g.rqWQECnt != 1 || g.rqWQEShift != 6 || g.maxRecvSGE != 4 || g.rqBytes != 64 {
		t.Fatalf("sizeQP(2,1,2,3,0) = %+v", g)
	}
	for _, c := range []struct{ s, r, ss, rs, inl int }{
		{16, 16, 100, 1, 0},     // too many send SGEs
		{16, 16, 1, 1, 1000},    // inline too big
		{16, 1 << 16, 1, 1, 0},  // too many receives
		{1 << 20, 16, 1, 1, 64}, // too many send blocks
		{16, 16, 1, 64, 0},      // receive WQE too big
	} {
		if _, err := sizeQP(testLimits, c.s, c.r, c.ss, c.rs, c.inl); !errors.Is(err, errQPCaps) {
			t.Errorf("sizeQP(%+v) = %v, want errQPCaps", c, err)
		}
	}
	for want, ncqe := range map[int]int{1: 2, 15: 16, 16: 32, 100: 128} {
		if n, err := cqEntries(want); err != nil || n != ncqe {
			t.Errorf("cqEntries(%d) = %d, %v; want %d", want, n, err, ncqe)
		}
	}
	if _, err := cqEntries(0); err == nil {
		t.Error("cqEntries(0) succeeded")
	}
	if off := uarMmapOffset(mmapRegularPage, 3, 4096); off != 3*4096 {
		t.Errorf("uarMmapOffset(0,3) = %#x", off)
	}
	if off := uarMmapOffset(7, 0x1ff, 4096); off != (0x1<<16|7<<8|0xff)*4096 {
		t.Errorf("uarMmapOffset(7,0x1ff) = %#x", off)
	}
}

func TestWQEBytesAsLibmlx5Wrote(t *testing.T) {
	g, _ := sizeQP(testLimits, 16, 16, 1, 1, 64)
	tq := newTestQP(t, g, 0x1a2, 0, 0)
	data := mapAnon(t, 4096)
	const lkey = 0x110007
	a := addrOf(data)

	if err := tq.qp.PostRecv(&driver.RecvWR{ID: 1, SGE: []driver.SGE{{Addr: a, Length: 0x1000, LKey: lkey}}}); err != nil {
		t.Fatal(err)
	}
	want := append([]byte{0, 0, 0x10, 0, 0, 0x11, 0, 7}, binary.BigEndian.AppendUint64(nil, a)...)
	if got := tq.buf[:16]; !bytes.Equal(got, want) {
		t.Errorf("RECV WQE 0 = % x, want % x", got, want)
	}
	if w := dbrecWord(tq.dbrec, dbrRecv); w != 1 {
		t.Errorf("receive doorbell record = %d, want 1", w)
	}

	sq := tq.buf[g.rqBytes:]
	sge := []driver.SGE{{Addr: a, Length: 100, LKey: lkey}}
	if err := tq.qp.PostSend(&driver.SendWR{ID: 2, Opcode: driver.WRSend, Flags: driver.SendSignaled, SGE: sge}); err != nil {
		t.Fatal(err)
	}
	want = []byte{0, 0, 0, 0x0a, 0, 1, 0xa2, 2, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 100, 0, 0x11, 0, 7}
	want = binary.BigEndian.AppendUint64(want, a)
	if got := sq[:32]; !bytes.Equal(got, want) {
		t.Errorf("SEND WQE 0 = % x\nwant % x", got, want)
	}
	if w := dbrecWord(tq.dbrec, dbrSend); w != 1 { // a 32-byte WQE takes one block
		t.Errorf("send doorbell record = %d, want 1", w)
	}
	// bfreg 0 never uses BlueFlame: the first 8 bytes of the ctrl segment at 0x800.
	if got := tq.uar[bfOffset : bfOffset+8]; !bytes.Equal(got, sq[:8]) {
		t.Errorf("UAR doorbell = % x, want % x", got, sq[:8])
	}

	if err := tq.qp.PostSend(&driver.SendWR{ID: 3, Opcode: driver.WRRDMAWrite, SGE: sge, RemoteAddr: 0x1122334455667788, RKey: 0xabcd}); err != nil {
		t.Fatal(err)
	}
	w1 := sq[64:]
	want = []byte{0, 0, 1, 8, 0, 1, 0xa2, 3, 0, 0, 0, 0, 0, 0, 0, 0,
		0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0, 0, 0xab, 0xcd, 0, 0, 0, 0,
		0, 0, 0, 100, 0, 0x11, 0, 7}
	want = binary.BigEndian.AppendUint64(want, a)
	if got := w1[:48]; !bytes.Equal(got, want) {
		t.Errorf("RDMA WRITE WQE = % x\nwant % x", got, want)
	}

	if err := tq.qp.PostSend(&driver.SendWR{ID: 5, Opcode: driver.WRRDMARead, SGE: sge, RemoteAddr: 0x1122334455667788, RKey: 0xabcd}); err != nil {
		t.Fatal(err)
	}
	want[2], want[3], want[11] = 2, 0x10, 0
	if got := sq[128 : 128+48]; !bytes.Equal(got, want) {
		t.Errorf("RDMA READ WQE = % x\nwant % x", got, want)
	}

	copy(data, "0123456789abcdefghijklmn")
	if err := tq.qp.PostSend(&driver.SendWR{ID: 4, Opcode: driver.WRSend, Flags: driver.SendInline | driver.SendSignaled,
		SGE: []driver.SGE{{Addr: a, Length: 24}}}); err != nil {
		t.Fatal(err)
	}
	w2 := sq[3*64:]
	want = append([]byte{0, 0, 3, 0x0a, 0, 1, 0xa2, 3, 0, 0, 0, 8, 0, 0, 0, 0, 0x80, 0, 0, 0x18}, "0123456789abcdefghijklmn"...)
	if got := w2[:len(want)]; !bytes.Equal(got, want) {
		t.Errorf("inline SEND WQE = % x\nwant % x", got, want)
	}
	if err := tq.qp.PostSend(&driver.SendWR{Opcode: driver.WRSend, Flags: driver.SendInline, SGE: []driver.SGE{{Addr: a, Length: 125}}}); !errors.Is(err, errInlineLen) {
		t.Errorf("inline of 125 bytes: %v", err)
	}
	if err := tq.qp.PostSend(&driver.SendWR{Opcode: driver.WRAtomicFetchAdd}); !errors.Is(err, errBadOpcode) {
		t.Errorf("atomic: %v", err)
	}
	if err := tq.qp.PostSend(&driver.SendWR{Opcode: driver.WRSend, SGE: make([]driver.SGE, 2)}); !errors.Is(err, errTooManySGE) {
		t.Errorf("two SGEs: %v", err)
	}
}

func TestBlueFlameAlternatesHalves(t *testing.T) {
	g, _ := sizeQP(testLimits, 16, 16, 1, 1, 64)
	tq := newTestQP(t, g, 0x1a2, 512, 6*4)
	data := mapAnon(t, 4096)
	sq := tq.buf[g.rqBytes:]
	for i := 0; i < 3; i++ {
		clear(tq.uar)
		if err := tq.qp.PostSend(&driver.SendWR{ID: uint64(i), Opcode: driver.WRSend, SGE: []driver.SGE{{Addr: addrOf(data), Length: 8, LKey: 1}}}); err != nil {
			t.Fatal(err)
		}
		off := bfOffset + (i%2)*0x100
		wqe := sq[i*64 : i*64+64]
		if got := tq.uar[off : off+64]; !bytes.Equal(got, wqe) {
			t.Fatalf("post %d: BlueFlame at %#x = % x, want the WQE % x", i, off, got, wqe)
		}
		if other := tq.uar[bfOffset+((i+1)%2)*0x100 : bfOffset+((i+1)%2)*0x100+64]; !bytes.Equal(other, make([]byte, 64)) {
			t.Fatalf("post %d wrote the other half too", i)
		}
	}
}

func TestSQWrapsAndFills(t *testing.T) {
	// 2 send WRs of 256 bytes in 8 blocks: every post wraps quickly.
	g, err := sizeQP(testLimits, 2, 1, 2, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	tq := newTestQP(t, g, 7, 0, 0)
	data := mapAnon(t, 4096)
	sge := []driver.SGE{{Addr: addrOf(data), Length: 1, LKey: 1}}
	for i := 0; i < 2; i++ {
		if err := tq.qp.PostSend(&driver.SendWR{ID: uint64(i), Opcode: driver.WRSend, SGE: sge}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tq.qp.PostSend(&driver.SendWR{Opcode: driver.WRSend, SGE: sge}); !errors.Is(err, driver.ErrQueueFull) {
		t.Fatalf("third post on a full SQ: %v", err)
	}
}

func TestArmWordAndSyndromes(t *testing.T) {
	if w := armWord(0, false, 2); w != 2 {
		t.Errorf("armWord(0,false,2) = %#x", w)
	}
	if w := armWord(5, true, 0x1234567); w != 1<<28|1<<24|0x234567 {
		t.Errorf("armWord(5,true,..) = %#x", w)
	}
	if SyndromeName(0x13) != "REMOTE_ACCESS_ERR" || syndromeStatus(0x13) != driver.WCRemAccessErr {
		t.Error("syndrome 0x13")
	}
	if SyndromeName(0x99) != "syndrome 0x99" || syndromeStatus(0x99) != driver.WCGeneralErr {
		t.Errorf("unknown syndrome: %q", SyndromeName(0x99))
	}
	for s, name := range syndromeNames {
		if syndromeStatus(s) == driver.WCGeneralErr {
			t.Errorf("syndrome %s maps to GENERAL", name)
		}
	}
}

func TestCQPollArm(t *testing.T) {
	g, _ := sizeQP(testLimits, 16, 16, 1, 1, 64)
	tq := newTestQP(t, g, 0x1a2, 0, 0)
	tbl := &qpTable{}
	tq.qp.uidx = tbl.add(tq.qp)
	buf := mapAnon(t, 16*cqeSize)
	initCQEs(buf)
	db := mapAnon(t, 4096)
	uar := mapAnon(t, uarSize)
	c := &cqRing{buf: buf, ncqe: 16, cqn: 0x40e, dbrec: (*[2]uint32)(unsafe.Pointer(&db[0])),
		uarDB: unsafe.Pointer(&uar[cqDoorbellOffset]), table: tbl}
	data := mapAnon(t, 4096)
	sge := []driver.SGE{{Addr: addrOf(data), Length: 100, LKey: 1}}
	tq.qp.PostRecv(&driver.RecvWR{ID: 77, SGE: sge})
	tq.qp.PostSend(&driver.SendWR{ID: 88, Opcode: driver.WRSend, Flags: driver.SendSignaled, SGE: sge})

	var wc [4]driver.WC
	if n, err := c.poll(wc[:]); n != 0 || err != nil {
		t.Fatalf("empty CQ: %d, %v", n, err)
	}
	put := func(i int, op byte, f func(cqe []byte)) {
		cqe := buf[i*cqeSize : (i+1)*cqeSize]
		clear(cqe)
		binary.BigEndian.PutUint32(cqe[cqeSrqnUidx:], tq.qp.uidx)
		f(cqe)
		cqe[cqeOpOwn] = op<<4 | byte(i/16)&1
	}
	put(0, cqeReq, func(cqe []byte) {
		binary.BigEndian.PutUint32(cqe[cqeSopDropQpn:], opSend<<24|0x1a2)
		binary.BigEndian.PutUint16(cqe[cqeWqeCounter:], 0)
	})
	put(1, cqeRespSend, func(cqe []byte) { binary.BigEndian.PutUint32(cqe[cqeByteCnt:], 100) })
	n, err := c.poll(wc[:])
	if err != nil || n != 2 {
		t.Fatalf("poll = %d, %v", n, err)
	}
	if wc[0].WRID != 88 || wc[0].Opcode != driver.WCSend || wc[0].Status != 0 || wc[0].QPNum != 0x1a2 {
		t.Errorf("send completion %+v", wc[0])
	}
	if wc[1].WRID != 77 || wc[1].Opcode != driver.WCRecv || wc[1].ByteLen != 100 {
		t.Errorf("receive completion %+v", wc[1])
	}
	if got := dbrecWord(c.dbrec, dbrSetCI); got != 2 {
		t.Errorf("set_ci = %d, want 2", got)
	}
	if err := c.arm(false); err != nil {
		t.Fatal(err)
	}
	if got := dbrecWord(c.dbrec, dbrArm); got != 2 {
		t.Errorf("arm record = %#x, want 2", got)
	}
	if got, want := uar[cqDoorbellOffset:cqDoorbellOffset+8], []byte{0, 0, 0, 2, 0, 0, 4, 0x0e}; !bytes.Equal(got, want) {
		t.Errorf("arm doorbell = % x, want % x", got, want)
	}
	c.event()
	c.arm(true)
	if got := dbrecWord(c.dbrec, dbrArm); got != 1<<28|1<<24|2 {
		t.Errorf("second arm record = %#x", got)
	}
	// An error CQE names its syndrome.
	put(2, cqeReqErr, func(cqe []byte) {
		cqe[cqeSyndrome], cqe[cqeVendorErrSynd] = 0x13, 0x88
		binary.BigEndian.PutUint16(cqe[cqeWqeCounter:], 0)
	})
	var msg string
	c.onError = func(s string) { msg = s }
	n, err = c.poll(wc[:])
	if err != nil || n != 1 || wc[0].Status != driver.WCRemAccessErr || wc[0].VendorErr != 0x88 || wc[0].WRID != 88 {
		t.Fatalf("error CQE: %d %v %+v", n, err, wc[0])
	}
	if !bytes.Contains([]byte(msg), []byte("REMOTE_ACCESS_ERR (syndrome 0x13")) {
		t.Errorf("error text %q does not name the syndrome", msg)
	}
}
