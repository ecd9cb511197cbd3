// Package providertest is the conformance suite every provider runs without hardware,
// and the fake uverbs kernel the providers whose data path the kernel runs (rxe, siw) run
// it against. A provider's package gets the suite with one test:
//
//	func TestConformance(t *testing.T) { providertest.Run(t, newDevice) }
//
// where newDevice gives a fresh Device, a device model (mlx5); or, for a provider whose
// data path the kernel runs, with the kernel half of its queues (a Driver):
//
//	func TestConformance(t *testing.T) { providertest.RunKernel(t, dev, provider{}, kernel{}) }
//
// docs/adding-a-provider.md has the checklist. Test-only: nothing in the product
// imports it.
package providertest

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gorping/gorping/uverbs"
	"github.com/gorping/gorping/uverbs/driver"
)

// Device is a provider's device without hardware: contexts opened on it share one fabric,
// so the QPs of two contexts connect by number.
type Device interface {
	Open(t *testing.T) *uverbs.Context
}

// Checker is a Device that also reports what it saw the provider do wrong (a fake
// kernel's or a model's list of violations). Run fails a test that leaves any, except
// the one that provokes errors on purpose.
type Checker interface {
	Errors() []string
}

// RunKernel runs the conformance suite on a fresh fake kernel per test, with driver drv
// (the kernel half of provider prov's queues) and dev as its device. Index and Path may
// be left zero.
func RunKernel(t *testing.T, dev uverbs.Device, prov driver.Provider, drv Driver) {
	if dev.Path == "" {
		dev.Index, dev.Path = -1, "/dev/infiniband/uverbs-fake"
	}
	Run(t, func(t *testing.T) Device { return NewKernel(t, dev, prov, drv) })
}

// Run runs the conformance suite; newDevice is called once per test for a fresh device.
func Run(t *testing.T, newDevice func(t *testing.T) Device) {
	for _, tc := range []struct {
		name   string
		f      func(t *testing.T, d Device)
		errsOK bool
	}{
		{"CreateDestroy", testCreateDestroy, false},
		{"CloseWithObjects", testCloseWithObjects, false},
		{"ContextCloseReleases", testContextCloseReleases, false},
		{"SendRecv", testSendRecv, false},
		{"RDMAWriteRead", testRDMAWriteRead, false},
		{"ArmEvents", testArmEvents, false},
		{"WrapAround", testWrapAround, false},
		{"ErrorCompletions", testErrorCompletions, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDevice(t)
			tc.f(t, d)
			if c, ok := d.(Checker); ok && !tc.errsOK {
				if errs := c.Errors(); len(errs) > 0 {
					t.Errorf("the device saw %d violations, first: %s", len(errs), errs[0])
				}
			}
		})
	}
}

// access is what the suite's memory regions allow.
const access = uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead

const bufLen = 4096

// end is one side of a connection: a context with one CQ (both queues), a QP and three
// registered buffers.
type end struct {
	t   *testing.T
	dev Device
	ctx *uverbs.Context
	pd  *uverbs.PD
	ch  *uverbs.CompChannel
	cq  *uverbs.CQ
	qp  *uverbs.QP
	buf [3]*uverbs.Buffer // send, recv, rdma
	mr  [3]*uverbs.MR
	got []uverbs.WC // polled, not yet taken
}

const (
	bSend = iota
	bRecv
	bRDMA
)

func newEnd(t *testing.T, d Device, cqDepth int, cap uverbs.QPCap) *end {
	t.Helper()
	e := &end{t: t, dev: d, ctx: d.Open(t)}
	t.Cleanup(func() { e.ctx.Close() })
	var err error
	if e.pd, err = e.ctx.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if e.ch, err = e.ctx.CreateCompChannel(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.ch.Close() })
	if e.cq, err = e.ctx.CreateCQ(cqDepth, e.ch, 0); err != nil {
		t.Fatal(err)
	}
	if e.qp, err = e.pd.CreateQP(uverbs.QPInitAttr{SendCQ: e.cq, RecvCQ: e.cq, Type: uverbs.QPTypeRC, Cap: cap}); err != nil {
		t.Fatal(err)
	}
	for i := range e.buf {
		b, err := uverbs.NewBuffer(bufLen)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Free() })
		if e.mr[i], err = e.pd.RegMR(b, access); err != nil {
			t.Fatal(err)
		}
		e.buf[i] = b
	}
	return e
}

var defaultCap = uverbs.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}

// connect takes both QPs to RTS, each aimed at the other (what rdma_cm does for RC).
func connect(t *testing.T, a, b *end) {
	t.Helper()
	for _, p := range [][2]*end{{a, b}, {b, a}} {
		q, peer := p[0].qp, p[1].qp
		for _, st := range []struct {
			attr uverbs.QPAttr
			mask uverbs.QPAttrMask
		}{
			{uverbs.QPAttr{State: uverbs.QPSInit, PortNum: 1, AccessFlags: access},
				uverbs.QPAttrState | uverbs.QPAttrPKeyIndex | uverbs.QPAttrPort | uverbs.QPAttrAccessFlags},
			{uverbs.QPAttr{State: uverbs.QPSRTR, PathMTU: uverbs.MTU1024, DestQPNum: peer.Num(), MaxDestRdAtomic: 1, MinRNRTimer: 12,
				AH: uverbs.AHAttr{IsGlobal: 1, PortNum: 1}},
				uverbs.QPAttrState | uverbs.QPAttrAV | uverbs.QPAttrPathMTU | uverbs.QPAttrDestQPN | uverbs.QPAttrRQPSN |
					uverbs.QPAttrMaxDestRdAtomic | uverbs.QPAttrMinRNRTimer},
			{uverbs.QPAttr{State: uverbs.QPSRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1},
				uverbs.QPAttrState | uverbs.QPAttrTimeout | uverbs.QPAttrRetryCnt | uverbs.QPAttrRNRRetry |
					uverbs.QPAttrSQPSN | uverbs.QPAttrMaxQPRdAtomic},
		} {
			if err := q.Modify(&st.attr, st.mask); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func (e *end) sge(i, n int) []uverbs.SGE {
	return []uverbs.SGE{{Addr: e.buf[i].Addr(), Length: uint32(n), LKey: e.mr[i].LKey}}
}

func (e *end) postRecv(id uint64, n int) {
	e.t.Helper()
	if err := e.qp.PostRecv(&uverbs.RecvWR{ID: id, SGE: e.sge(bRecv, n)}); err != nil {
		e.t.Fatalf("PostRecv %d: %v", id, err)
	}
}

func (e *end) post(wr *uverbs.SendWR) {
	e.t.Helper()
	if err := e.qp.PostSend(wr); err != nil {
		e.t.Fatalf("PostSend %d (%v): %v", wr.ID, wr.Opcode, err)
	}
}

// next is the next completion, polled for up to 10 s (a device model completes on its
// own goroutine).
func (e *end) next() uverbs.WC {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	wc := make([]uverbs.WC, 4)
	for len(e.got) == 0 {
		n, err := e.cq.Poll(wc)
		if err != nil {
			e.t.Fatalf("Poll: %v", err)
		}
		e.got = append(e.got, wc[:n]...)
		if n == 0 {
			if time.Now().After(deadline) {
				var seen []string
				if c, ok := e.dev.(Checker); ok {
					seen = c.Errors()
				}
				e.t.Fatalf("no completion within 10 s; the device saw %q", seen)
			}
			time.Sleep(20 * time.Microsecond)
		}
	}
	w := e.got[0]
	e.got = e.got[1:]
	return w
}

// expect takes the next completion and checks it is id's, successful, with opcode op.
func (e *end) expect(id uint64, op uverbs.WCOpcode) uverbs.WC {
	e.t.Helper()
	w := e.next()
	if w.WRID != id || w.Status != uverbs.WCSuccess || w.Opcode != op || w.QPNum != e.qp.Num() {
		e.t.Fatalf("completion %+v, want WR %d %v SUCCESS on QP %d", w, id, op, e.qp.Num())
	}
	return w
}

func fill(b []byte, seed byte) {
	for i := range b {
		b[i] = seed + byte(i*7)
	}
}

// Every object comes and goes, in order, with the capabilities asked for or more.
func testCreateDestroy(t *testing.T, d Device) {
	ctx := d.Open(t)
	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	b, err := uverbs.NewBuffer(bufLen)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free()
	mr, err := pd.RegMR(b, access)
	if err != nil {
		t.Fatal(err)
	}
	if mr.Addr != b.Addr() || mr.Len != bufLen {
		t.Errorf("MR covers %#x+%d, want the buffer %#x+%d", mr.Addr, mr.Len, b.Addr(), bufLen)
	}
	ch, err := ctx.CreateCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := ctx.CreateCQ(16, ch, 0)
	if err != nil {
		t.Fatal(err)
	}
	if cq.CQE() < 16 {
		t.Errorf("CQ holds %d CQEs, asked for 16", cq.CQE())
	}
	qp, err := pd.CreateQP(uverbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Type: uverbs.QPTypeRC, Cap: defaultCap})
	if err != nil {
		t.Fatal(err)
	}
	if c := qp.Cap(); c.MaxSendWR < defaultCap.MaxSendWR || c.MaxRecvWR < defaultCap.MaxRecvWR ||
		c.MaxSendSGE < 1 || c.MaxRecvSGE < 1 {
		t.Errorf("QP capabilities %+v, asked for %+v", c, defaultCap)
	}
	if qp.Num() == 0 {
		t.Error("QP number 0")
	}
	// A second QP on the same CQ, destroyed first.
	qp2, err := pd.CreateQP(uverbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Type: uverbs.QPTypeRC, Cap: defaultCap})
	if err != nil {
		t.Fatal(err)
	}
	if qp2.Num() == qp.Num() {
		t.Errorf("two QPs numbered %d", qp.Num())
	}
	for _, step := range []struct {
		what string
		f    func() error
	}{
		{"destroy QP 2", qp2.Destroy}, {"destroy QP", qp.Destroy}, {"destroy QP again", qp.Destroy},
		{"destroy CQ", cq.Destroy}, {"close channel", ch.Close}, {"deregister MR", mr.Dereg},
		{"deallocate PD", pd.Dealloc}, {"close context", ctx.Close}, {"close context again", ctx.Close},
	} {
		if err := step.f(); err != nil {
			t.Errorf("%s: %v", step.what, err)
		}
	}
	if _, err := ctx.AllocPD(); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("AllocPD after Close: %v, want ErrClosed", err)
	}
}

// Closing a context with live objects frees their provider side; their Destroy then
// succeeds without a command, and the data path says ErrClosed.
func testCloseWithObjects(t *testing.T, d Device) {
	e := newEnd(t, d, 16, defaultCap)
	if err := e.ctx.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.qp.PostRecv(&uverbs.RecvWR{ID: 1, SGE: e.sge(bRecv, 8)}); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("PostRecv after Close: %v, want ErrClosed", err)
	}
	if _, err := e.cq.Poll(make([]uverbs.WC, 1)); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("Poll after Close: %v, want ErrClosed", err)
	}
	for what, f := range map[string]func() error{"QP": e.qp.Destroy, "CQ": e.cq.Destroy, "MR": e.mr[0].Dereg, "PD": e.pd.Dealloc} {
		if err := f(); err != nil {
			t.Errorf("destroy %s after Close: %v", what, err)
		}
	}
}

// Closing one of two contexts with its objects alive (a connected QP in ERR with a receive
// posted, which a device flushes from the queue's doorbell record) releases them all in
// the kernel, as the kernel's context teardown does, before the provider frees their
// memory: the device (a model's engine) must not go on reading it, and the other
// context's objects stay. Needs a Device that counts its objects (Kernel.Live).
func testContextCloseReleases(t *testing.T, d Device) {
	l, ok := d.(interface{ Live() (qps, cqs, mrs int) })
	if !ok {
		t.Skip("this device does not count its objects")
	}
	b := newEnd(t, d, 16, defaultCap)
	q0, c0, m0 := l.Live()
	a := newEnd(t, d, 16, defaultCap)
	connect(t, a, b)
	a.postRecv(1, bufLen)
	if err := a.qp.Modify(&uverbs.QPAttr{State: uverbs.QPSErr}, uverbs.QPAttrState); err != nil {
		t.Fatal(err)
	}
	if err := a.ctx.Close(); err != nil {
		t.Fatal(err)
	}
	if q, c, m := l.Live(); q != q0 || c != c0 || m != m0 {
		t.Errorf("after closing one of two contexts the device holds %d QPs, %d CQs, %d MRs; want the other's %d, %d, %d", q, c, m, q0, c0, m0)
	}
	// The other context still works.
	b.postRecv(2, bufLen)
	if n, err := b.cq.Poll(make([]uverbs.WC, 1)); n != 0 || err != nil {
		t.Errorf("the other context's CQ: %d completions, %v; want none", n, err)
	}
}

// A SEND lands in the posted receive, with both completions and the bytes intact; an
// unsignaled SEND completes only at the receiver.
func testSendRecv(t *testing.T, d Device) {
	a, b := newEnd(t, d, 16, defaultCap), newEnd(t, d, 16, defaultCap)
	connect(t, a, b)
	msg := a.buf[bSend].Bytes()[:100]
	fill(msg, 1)
	b.postRecv(7, bufLen)
	a.post(&uverbs.SendWR{ID: 8, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGE: a.sge(bSend, 100)})
	a.expect(8, uverbs.WCSend)
	if w := b.expect(7, uverbs.WCRecv); w.ByteLen != 100 {
		t.Errorf("receive of %d bytes, want 100", w.ByteLen)
	}
	if !bytes.Equal(b.buf[bRecv].Bytes()[:100], msg) {
		t.Error("received bytes differ from the sent ones")
	}
	// Unsignaled, then signaled: the sender sees only the second.
	b.postRecv(9, bufLen)
	b.postRecv(10, bufLen)
	a.post(&uverbs.SendWR{ID: 11, Opcode: uverbs.WRSend, SGE: a.sge(bSend, 10)})
	a.post(&uverbs.SendWR{ID: 12, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGE: a.sge(bSend, 20)})
	a.expect(12, uverbs.WCSend)
	if w := b.expect(9, uverbs.WCRecv); w.ByteLen != 10 {
		t.Errorf("first receive of %d bytes, want 10", w.ByteLen)
	}
	if w := b.expect(10, uverbs.WCRecv); w.ByteLen != 20 {
		t.Errorf("second receive of %d bytes, want 20", w.ByteLen)
	}
}

// RDMA WRITE puts bytes into the peer's region, RDMA READ fetches them back (rping's two
// one-sided operations).
func testRDMAWriteRead(t *testing.T, d Device) {
	a, b := newEnd(t, d, 16, defaultCap), newEnd(t, d, 16, defaultCap)
	connect(t, a, b)
	src := a.buf[bSend].Bytes()[:256]
	fill(src, 3)
	a.post(&uverbs.SendWR{ID: 1, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled, SGE: a.sge(bSend, 256),
		RemoteAddr: b.buf[bRDMA].Addr() + 64, RKey: b.mr[bRDMA].RKey})
	a.expect(1, uverbs.WCRDMAWrite)
	if !bytes.Equal(b.buf[bRDMA].Bytes()[64:64+256], src) {
		t.Error("RDMA WRITE: the peer's region does not hold the bytes")
	}
	fill(b.buf[bRDMA].Bytes()[:512], 9)
	a.post(&uverbs.SendWR{ID: 2, Opcode: uverbs.WRRDMARead, Flags: uverbs.SendSignaled, SGE: a.sge(bRDMA, 512),
		RemoteAddr: b.buf[bRDMA].Addr(), RKey: b.mr[bRDMA].RKey})
	if w := a.expect(2, uverbs.WCRDMARead); w.ByteLen != 512 && w.ByteLen != 0 {
		t.Errorf("RDMA READ completion of %d bytes", w.ByteLen)
	}
	if !bytes.Equal(a.buf[bRDMA].Bytes()[:512], b.buf[bRDMA].Bytes()[:512]) {
		t.Error("RDMA READ: the local region does not hold the peer's bytes")
	}
}

// An armed CQ raises one completion event on its channel; Wait returns the CQ, and the
// completion is there to poll.
func testArmEvents(t *testing.T, d Device) {
	a, b := newEnd(t, d, 16, defaultCap), newEnd(t, d, 16, defaultCap)
	connect(t, a, b)
	for round := range 3 {
		if err := b.cq.Arm(false); err != nil {
			t.Fatal(err)
		}
		id := uint64(100 + round)
		b.postRecv(id, bufLen)
		a.post(&uverbs.SendWR{ID: id, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGE: a.sge(bSend, 32)})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		cq, err := b.ch.Wait(ctx)
		cancel()
		if err != nil {
			t.Fatalf("round %d: no completion event: %v", round, err)
		}
		if cq != b.cq {
			t.Fatalf("round %d: event for another CQ", round)
		}
		cq.Ack(1)
		b.expect(id, uverbs.WCRecv)
		a.expect(id, uverbs.WCSend)
	}
	if err := b.qp.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := b.cq.Destroy(); err != nil {
		t.Errorf("destroy CQ after its events were acknowledged: %v", err)
	}
}

// Small queues and many round trips: every ring wraps many times and completions stay in
// order.
func testWrapAround(t *testing.T, d Device) {
	cap := uverbs.QPCap{MaxSendWR: 2, MaxRecvWR: 2, MaxSendSGE: 1, MaxRecvSGE: 1}
	a, b := newEnd(t, d, 4, cap), newEnd(t, d, 4, cap)
	connect(t, a, b)
	const rounds = 300
	for i := range uint64(rounds) {
		// b's receive for the request and a's for the reply are posted before either is sent.
		b.postRecv(2*i, 64)
		a.postRecv(2*i+1, 64)
		binaryPut(a.buf[bSend].Bytes(), i)
		a.post(&uverbs.SendWR{ID: 2 * i, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGE: a.sge(bSend, 8)})
		b.expect(2*i, uverbs.WCRecv)
		if got := binaryGet(b.buf[bRecv].Bytes()); got != i {
			t.Fatalf("round %d: received %d", i, got)
		}
		binaryPut(b.buf[bSend].Bytes(), ^i)
		b.post(&uverbs.SendWR{ID: 2*i + 1, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGE: b.sge(bSend, 8)})
		// a's CQ gets its send completion and the reply, in the device's order.
		seen := map[uverbs.WCOpcode]uverbs.WC{}
		for range 2 {
			w := a.next()
			seen[w.Opcode] = w
		}
		if s, r := seen[uverbs.WCSend], seen[uverbs.WCRecv]; s.WRID != 2*i || r.WRID != 2*i+1 || s.Status != 0 || r.Status != 0 {
			t.Fatalf("round %d: client completions %+v", i, seen)
		}
		if got := binaryGet(a.buf[bRecv].Bytes()); got != ^i {
			t.Fatalf("round %d: reply %d", i, got)
		}
		b.expect(2*i+1, uverbs.WCSend)
	}
}

func binaryPut(b []byte, v uint64) {
	for i := range 8 {
		b[i] = byte(v >> (8 * i))
	}
}

func binaryGet(b []byte) uint64 {
	var v uint64
	for i := range 8 {
		v |= uint64(b[i]) << (8 * i)
	}
	return v
}

// An RDMA WRITE with a bad rkey completes in error (even unsignaled), the QP goes to
// ERR, and what was queued behind it, sends and receives, is flushed.
func testErrorCompletions(t *testing.T, d Device) {
	a, b := newEnd(t, d, 16, defaultCap), newEnd(t, d, 16, defaultCap)
	connect(t, a, b)
	a.postRecv(50, bufLen)
	a.post(&uverbs.SendWR{ID: 51, Opcode: uverbs.WRRDMAWrite, SGE: a.sge(bSend, 16),
		RemoteAddr: b.buf[bRDMA].Addr(), RKey: b.mr[bRDMA].RKey ^ 0x5a5a00})
	first := a.next()
	if first.WRID != 51 || first.Status != uverbs.WCRemAccessErr {
		t.Fatalf("completion %+v (%v), want WR 51 REM_ACCESS_ERR", first, first.Status)
	}
	// The QP is in ERR now: the posted receive is flushed, and so is a new send (unless
	// the provider refuses to post on a QP in ERR).
	want := map[uint64]bool{50: true}
	if err := a.qp.PostSend(&uverbs.SendWR{ID: 52, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGE: a.sge(bSend, 8)}); err == nil {
		want[52] = true
	} else {
		t.Logf("PostSend on a QP in ERR: %v", err)
	}
	for n := len(want); n > 0; n-- {
		w := a.next()
		if w.Status != uverbs.WCWRFlushErr || !want[w.WRID] {
			t.Fatalf("completion %+v (%v) after the error, want WR_FLUSH_ERR for one of %v", w, w.Status, want)
		}
		delete(want, w.WRID)
	}
}
