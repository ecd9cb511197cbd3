//go:build guest

package guest

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/gorping/gorping/test/guesttest"
	"github.com/gorping/gorping/uverbs"
	_ "github.com/gorping/gorping/uverbs/rxe"
)

// The guest's rxe0 sits on d0 with 192.0.2.1; its RoCE v2 GID is ::ffff:192.0.2.1.
var guestGID = netip.MustParseAddr("192.0.2.1").As16()

// side is one end of the loopback connection.
type side struct {
	name string
	cq   *uverbs.CQ
	qp   *uverbs.QP
	buf  *uverbs.Buffer
	mr   *uverbs.MR
	wcs  []uverbs.WC // completions collected so far
}

// collector drives the completion channel the way rping's CQ thread does: wait for an
// event, ack it, re-arm, then poll until empty (completions that raced with the arm).
type collector struct {
	t     *testing.T
	ch    *uverbs.CompChannel
	sides []*side
	buf   [8]uverbs.WC
}

func (c *collector) drain(s *side) {
	for {
		n, err := s.cq.Poll(c.buf[:])
		if err != nil {
			c.t.Fatalf("%s Poll: %v", s.name, err)
		}
		if n == 0 {
			return
		}
		s.wcs = append(s.wcs, c.buf[:n]...)
	}
}

// waitFor returns once s holds n completions, or fails the test.
func (c *collector) waitFor(s *side, n int) []uverbs.WC {
	c.t.Helper()
	deadline := time.Now().Add(eventTimeout)
	for _, x := range c.sides {
		c.drain(x)
	}
	for len(s.wcs) < n {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		cq, err := c.ch.Wait(ctx)
		cancel()
		if err != nil {
			c.t.Fatalf("waiting for %d completions on %s (have %+v): %v", n, s.name, s.wcs, err)
		}
		cq.Ack(1)
		if err := cq.Arm(false); err != nil {
			c.t.Fatalf("re-arm: %v", err)
		}
		for _, x := range c.sides {
			if x.cq == cq {
				c.drain(x)
			}
		}
	}
	got := s.wcs[:n]
	s.wcs = s.wcs[n:]
	return got
}

// TestGuestLoopbackRC connects two RC QPs of rxe0 to each other by hand (no rdma_cm) and
// runs SEND/RECV, RDMA WRITE and RDMA READ between them through the mmap'd rings.
func TestGuestLoopbackRC(t *testing.T) {
	before := guesttest.ResourceCounts(t)
	dev := guesttest.RxeDevice(t)
	ctx, err := uverbs.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			ctx.Close()
		}
	}()
	pa, err := ctx.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	gids, err := ctx.GIDTable()
	if err != nil {
		t.Fatal(err)
	}
	sgid := -1
	for _, g := range gids {
		if g.GID == guestGID && g.Type == uverbs.GIDTypeRoCEv2 && g.Port == 1 {
			sgid = int(g.Index)
		}
	}
	if sgid < 0 {
		t.Fatalf("no RoCE v2 GID ::ffff:192.0.2.1 in %+v", gids)
	}
	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	ch, err := ctx.CreateCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	const bufSize = 1 << 16
	access := uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead
	mk := func(name string) *side {
		s := &side{name: name}
		if s.cq, err = ctx.CreateCQ(32, ch, 0); err != nil {
			t.Fatal(err)
		}
		if s.buf, err = uverbs.NewBuffer(bufSize); err != nil {
			t.Fatal(err)
		}
		if s.mr, err = pd.RegMR(s.buf, access); err != nil {
			t.Fatal(err)
		}
		if s.qp, err = pd.CreateQP(uverbs.QPInitAttr{SendCQ: s.cq, RecvCQ: s.cq, Type: uverbs.QPTypeRC,
			Cap: uverbs.QPCap{MaxSendWR: 16, MaxRecvWR: 4, MaxSendSGE: 2, MaxRecvSGE: 1}}); err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := mk("A"), mk("B")
	col := &collector{t: t, ch: ch, sides: []*side{a, b}}

	mid := guesttest.ResourceCounts(t)
	for k, d := range map[string]int{"pd": 1, "cq": 2, "qp": 2, "mr": 2} {
		if mid[k]-before[k] != d {
			t.Errorf("%s count %d → %d, want +%d", k, before[k], mid[k], d)
		}
	}

	for _, s := range []*side{a, b} {
		if err := s.cq.Arm(false); err != nil {
			t.Fatal(err)
		}
		init := uverbs.QPAttr{State: uverbs.QPSInit, PortNum: 1, AccessFlags: access}
		if err := s.qp.Modify(&init, uverbs.QPAttrState|uverbs.QPAttrPKeyIndex|uverbs.QPAttrPort|uverbs.QPAttrAccessFlags); err != nil {
			t.Fatalf("%s → INIT: %v", s.name, err)
		}
	}

	// B receives into the start of its buffer.
	recv := func(id uint64) {
		if err := b.qp.PostRecv(&uverbs.RecvWR{ID: id, SGE: []uverbs.SGE{{Addr: b.mr.Addr, Length: 256, LKey: b.mr.LKey}}}); err != nil {
			t.Fatalf("PostRecv: %v", err)
		}
	}
	recv(0xb1)

	// A posts a SEND while still in INIT: the WQE waits in the ring and the doorbell is
	// deferred until A reaches RTS (the kernel answers EINVAL to a doorbell before RTS).
	msg1 := []byte("first message, posted before RTS; two SGEs")
	copy(a.buf.Bytes()[1024:], msg1[:10])
	copy(a.buf.Bytes()[2048:], msg1[10:])
	send1 := &uverbs.SendWR{ID: 0xa1, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGE: []uverbs.SGE{
		{Addr: a.mr.Addr + 1024, Length: 10, LKey: a.mr.LKey},
		{Addr: a.mr.Addr + 2048, Length: uint32(len(msg1) - 10), LKey: a.mr.LKey},
	}}
	if err := a.qp.PostSend(send1); err != nil {
		t.Fatalf("PostSend in INIT: %v", err)
	}

	connect := func(s, peer *side, psn uint32) {
		rtr := uverbs.QPAttr{
			State: uverbs.QPSRTR, PathMTU: uverbs.MTU1024, DestQPNum: peer.qp.Num(), RQPSN: psn ^ 0x5555,
			MaxDestRdAtomic: 1, MinRNRTimer: 12,
			AH: uverbs.AHAttr{IsGlobal: 1, PortNum: 1,
				GRH: uverbs.GlobalRoute{DGID: guestGID, SGIDIndex: uint8(sgid), HopLimit: 64}},
		}
		if pa.ActiveMTU < rtr.PathMTU {
			rtr.PathMTU = pa.ActiveMTU
		}
		mask := uverbs.QPAttrState | uverbs.QPAttrAV | uverbs.QPAttrPathMTU | uverbs.QPAttrDestQPN |
			uverbs.QPAttrRQPSN | uverbs.QPAttrMaxDestRdAtomic | uverbs.QPAttrMinRNRTimer
		if err := s.qp.Modify(&rtr, mask); err != nil {
			t.Fatalf("%s → RTR: %v", s.name, err)
		}
	}
	rts := func(s *side, psn uint32) {
		attr := uverbs.QPAttr{State: uverbs.QPSRTS, SQPSN: psn ^ 0x5555, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1}
		mask := uverbs.QPAttrState | uverbs.QPAttrSQPSN | uverbs.QPAttrTimeout | uverbs.QPAttrRetryCnt |
			uverbs.QPAttrRNRRetry | uverbs.QPAttrMaxQPRdAtomic
		if err := s.qp.Modify(&attr, mask); err != nil {
			t.Fatalf("%s → RTS: %v", s.name, err)
		}
	}
	// Each side's SQ PSN must equal the peer's RQ PSN.
	connect(b, a, 0x1000)
	connect(a, b, 0x2000)
	rts(b, 0x2000)
	if n, _ := a.cq.Poll(make([]uverbs.WC, 1)); n != 0 {
		t.Fatal("A completed a send before reaching RTS")
	}
	rts(a, 0x1000)
	for _, s := range []*side{a, b} {
		qa, err := s.qp.Query(uverbs.QPAttrState | uverbs.QPAttrAV | uverbs.QPAttrDestQPN)
		if err != nil {
			t.Fatal(err)
		}
		if qa.State != uverbs.QPSRTS || qa.AH.GRH.DGID != guestGID || qa.AH.IsGlobal != 1 || qa.AH.GRH.SGIDIndex != uint8(sgid) {
			t.Errorf("%s after RTS: %+v", s.name, qa)
		}
	}

	// SEND → RECV.
	swc := col.waitFor(a, 1)[0]
	if swc.Status != uverbs.WCSuccess || swc.Opcode != uverbs.WCSend || swc.WRID != 0xa1 || swc.QPNum != a.qp.Num() {
		t.Errorf("send completion %+v (status %v)", swc, swc.Status)
	}
	rwc := col.waitFor(b, 1)[0]
	if rwc.Status != uverbs.WCSuccess || rwc.Opcode != uverbs.WCRecv || rwc.WRID != 0xb1 || rwc.QPNum != b.qp.Num() ||
		rwc.ByteLen != uint32(len(msg1)) || rwc.Flags&uverbs.WCFlagGRH == 0 || rwc.SrcQP != a.qp.Num() && rwc.SrcQP != 0 {
		t.Errorf("recv completion %+v", rwc)
	}
	if got := b.buf.Bytes()[:len(msg1)]; !bytes.Equal(got, msg1) {
		t.Errorf("B received %q, want %q", got, msg1)
	}

	// SEND with immediate, posted in RTS (rings the doorbell at once).
	recv(0xb2)
	msg2 := []byte("second message")
	copy(a.buf.Bytes()[4096:], msg2)
	if err := a.qp.PostSend(&uverbs.SendWR{ID: 0xa2, Opcode: uverbs.WRSendWithImm, Flags: uverbs.SendSignaled, Imm: 0x04030201,
		SGE: []uverbs.SGE{{Addr: a.mr.Addr + 4096, Length: uint32(len(msg2)), LKey: a.mr.LKey}}}); err != nil {
		t.Fatal(err)
	}
	if w := col.waitFor(a, 1)[0]; w.Status != uverbs.WCSuccess || w.WRID != 0xa2 || w.Opcode != uverbs.WCSend {
		t.Errorf("send-with-imm completion %+v", w)
	}
	w := col.waitFor(b, 1)[0]
	if w.Status != uverbs.WCSuccess || w.WRID != 0xb2 || w.ByteLen != uint32(len(msg2)) ||
		w.Flags&uverbs.WCFlagWithImm == 0 || w.Imm != 0x04030201 {
		t.Errorf("recv-with-imm completion %+v", w)
	}
	if got := b.buf.Bytes()[:len(msg2)]; !bytes.Equal(got, msg2) {
		t.Errorf("B received %q", got)
	}

	// RDMA WRITE A → B (no completion on B).
	payload := bytes.Repeat([]byte("rdma-write;"), 400) // 4400 bytes: several 1024-byte packets
	copy(a.buf.Bytes()[8192:], payload)
	if err := a.qp.PostSend(&uverbs.SendWR{ID: 0xa3, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
		SGE:        []uverbs.SGE{{Addr: a.mr.Addr + 8192, Length: uint32(len(payload)), LKey: a.mr.LKey}},
		RemoteAddr: b.mr.Addr + 16384, RKey: b.mr.RKey}); err != nil {
		t.Fatal(err)
	}
	if w := col.waitFor(a, 1)[0]; w.Status != uverbs.WCSuccess || w.WRID != 0xa3 || w.Opcode != uverbs.WCRDMAWrite {
		t.Errorf("RDMA WRITE completion %+v (status %v)", w, w.Status)
	}
	if got := b.buf.Bytes()[16384 : 16384+len(payload)]; !bytes.Equal(got, payload) {
		t.Errorf("RDMA WRITE: B's buffer holds %q...", got[:32])
	}

	// RDMA READ A ← B.
	src := bytes.Repeat([]byte("rdma-read!"), 500)
	copy(b.buf.Bytes()[32768:], src)
	if err := a.qp.PostSend(&uverbs.SendWR{ID: 0xa4, Opcode: uverbs.WRRDMARead, Flags: uverbs.SendSignaled,
		SGE:        []uverbs.SGE{{Addr: a.mr.Addr + 40000, Length: uint32(len(src)), LKey: a.mr.LKey}},
		RemoteAddr: b.mr.Addr + 32768, RKey: b.mr.RKey}); err != nil {
		t.Fatal(err)
	}
	if w := col.waitFor(a, 1)[0]; w.Status != uverbs.WCSuccess || w.WRID != 0xa4 || w.Opcode != uverbs.WCRDMARead || w.ByteLen != uint32(len(src)) {
		t.Errorf("RDMA READ completion %+v (status %v)", w, w.Status)
	}
	if got := a.buf.Bytes()[40000 : 40000+len(src)]; !bytes.Equal(got, src) {
		t.Errorf("RDMA READ: A's buffer holds %q...", got[:32])
	}

	// Unsignaled sends complete silently, then a signaled one reports; the SQ slots of the
	// unsignaled ones are reused without error (ring wrap-around with a real kernel).
	for i := 0; i < 40; i++ {
		flags := uverbs.SendFlags(0)
		if i%10 == 9 {
			flags = uverbs.SendSignaled
		}
		err := a.qp.PostSend(&uverbs.SendWR{ID: uint64(0x100 + i), Opcode: uverbs.WRRDMAWrite, Flags: flags,
			SGE:        []uverbs.SGE{{Addr: a.mr.Addr + 8192, Length: 64, LKey: a.mr.LKey}},
			RemoteAddr: b.mr.Addr + 16384, RKey: b.mr.RKey})
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		if flags != 0 {
			if w := col.waitFor(a, 1)[0]; w.Status != uverbs.WCSuccess || w.WRID != uint64(0x100+i) {
				t.Fatalf("signaled write %d: %+v", i, w)
			}
		}
	}

	// A bad rkey: the requester gets a remote access error, then the QP is in ERR and a
	// receive posted on B flushes once B is moved to ERR too.
	if err := a.qp.PostSend(&uverbs.SendWR{ID: 0xa5, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
		SGE:        []uverbs.SGE{{Addr: a.mr.Addr, Length: 8, LKey: a.mr.LKey}},
		RemoteAddr: b.mr.Addr, RKey: b.mr.RKey ^ 0xff00}); err != nil {
		t.Fatal(err)
	}
	if w := col.waitFor(a, 1)[0]; w.WRID != 0xa5 || w.Status != uverbs.WCRemAccessErr {
		t.Errorf("bad-rkey completion %+v (status %v), want REM_ACCESS_ERR", w, w.Status)
	}
	recv(0xb3)
	if err := b.qp.Modify(&uverbs.QPAttr{State: uverbs.QPSErr}, uverbs.QPAttrState); err != nil {
		t.Fatal(err)
	}
	if w := col.waitFor(b, 1)[0]; w.WRID != 0xb3 || w.Status != uverbs.WCWRFlushErr {
		t.Errorf("flushed recv %+v (status %v), want WR_FLUSH_ERR", w, w.Status)
	}

	// Teardown in verbs order; every object must be gone afterwards.
	for _, s := range []*side{a, b} {
		if err := s.qp.Destroy(); err != nil {
			t.Fatalf("%s QP: %v", s.name, err)
		}
	}
	for _, s := range []*side{a, b} {
		if err := s.cq.Destroy(); err != nil {
			t.Fatalf("%s CQ: %v", s.name, err)
		}
		if err := s.mr.Dereg(); err != nil {
			t.Fatal(err)
		}
		if err := s.buf.Free(); err != nil {
			t.Fatal(err)
		}
	}
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	if err := pd.Dealloc(); err != nil {
		t.Fatal(err)
	}
	if err := ctx.Close(); err != nil {
		t.Fatal(err)
	}
	closed = true
	after := guesttest.ResourceCounts(t)
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s count %d before, %d after teardown", k, v, after[k])
		}
	}
}

// TestGuestCloseReleases: closing a context with live objects frees them all in the kernel.
func TestGuestCloseReleases(t *testing.T) {
	before := guesttest.ResourceCounts(t)
	ctx, err := uverbs.Open(guesttest.RxeDevice(t))
	if err != nil {
		t.Fatal(err)
	}
	pd, _ := ctx.AllocPD()
	cq, err := ctx.CreateCQ(8, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	qp, err := pd.CreateQP(uverbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Cap: uverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if err := ctx.Close(); err != nil {
		t.Fatal(err)
	}
	if err := qp.PostSend(&uverbs.SendWR{Opcode: uverbs.WRSend}); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("PostSend after Close: %v", err)
	}
	if _, err := cq.Poll(make([]uverbs.WC, 1)); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("Poll after Close: %v", err)
	}
	after := guesttest.ResourceCounts(t)
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s count %d before, %d after Close", k, v, after[k])
		}
	}
}
