package mlx5model

import (
	"encoding/binary"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/gorping/gorping/internal/mmio"
	"github.com/gorping/gorping/uverbs"
	_ "github.com/gorping/gorping/uverbs/mlx5"
)

// end is one side of a connection on the model: context, CQ, RC QP, a registered buffer.
type end struct {
	nic *NIC
	ctx *uverbs.Context
	pd  *uverbs.PD
	ch  *uverbs.CompChannel
	cq  *uverbs.CQ
	qp  *uverbs.QP
	buf *uverbs.Buffer
	mr  *uverbs.MR
}

func newEnd(t *testing.T, n *NIC) *end { return newEndFlags(t, n, 0) }

func newEndFlags(t *testing.T, n *NIC, flags uverbs.CQFlags) *end {
	t.Helper()
	e := &end{nic: n}
	var err error
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	e.ctx, err = n.Open("mlx5_0")
	must(err)
	t.Cleanup(func() { e.ctx.Close() })
	e.pd, err = e.ctx.AllocPD()
	must(err)
	e.ch, err = e.ctx.CreateCompChannel()
	must(err)
	e.cq, err = e.ctx.CreateCQEx(15, e.ch, 0, flags)
	must(err)
	e.qp, err = e.pd.CreateQP(uverbs.QPInitAttr{SendCQ: e.cq, RecvCQ: e.cq, Type: uverbs.QPTypeRC,
		Cap: uverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 100}})
	must(err)
	// The model must hear of the QP's and CQ's end before their memory goes (closing a
	// backend context tells it nothing).
	t.Cleanup(func() { e.qp.Destroy(); e.cq.Destroy() })
	e.buf, err = uverbs.NewBuffer(4096)
	must(err)
	t.Cleanup(func() { e.buf.Free() })
	e.mr, err = e.pd.RegMR(e.buf, uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite|uverbs.AccessRemoteRead)
	must(err)
	return e
}

func connectEnds(t *testing.T, a, b *end) {
	t.Helper()
	acc := uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead
	for _, p := range [][2]*end{{a, b}, {b, a}} {
		for _, st := range []struct {
			attr uverbs.QPAttr
			mask uverbs.QPAttrMask
		}{
			{uverbs.QPAttr{State: uverbs.QPSInit, PortNum: 1, AccessFlags: acc}, 0x39},
			{uverbs.QPAttr{State: uverbs.QPSRTR, PathMTU: uverbs.MTU1024, DestQPNum: p[1].qp.Num(), MaxDestRdAtomic: 1,
				MinRNRTimer: 12, AH: uverbs.AHAttr{IsGlobal: 1, PortNum: 1}}, 0x129181},
			{uverbs.QPAttr{State: uverbs.QPSRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1}, 0x12e01},
		} {
			if err := p[0].qp.Modify(&st.attr, st.mask); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// write posts a signaled RDMA WRITE of n bytes from a to b's buffer.
func (a *end) write(t *testing.T, b *end, id uint64, n uint32, flags uverbs.SendFlags) {
	t.Helper()
	wr := uverbs.SendWR{ID: id, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled | flags,
		SGE:        []uverbs.SGE{{Addr: a.buf.Addr(), Length: n, LKey: a.mr.LKey}},
		RemoteAddr: b.buf.Addr(), RKey: b.mr.RKey}
	if err := a.qp.PostSend(&wr); err != nil {
		t.Fatal(err)
	}
}

// await polls a's CQ for one completion of wr id.
func (a *end) await(t *testing.T, id uint64) {
	t.Helper()
	if !a.awaitOK(t, id) {
		t.Fatalf("no completion for wr %d within 10s; model violations: %q", id, a.nic.Errors())
	}
}

func (a *end) awaitOK(t *testing.T, id uint64) bool {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	wc := make([]uverbs.WC, 1)
	for time.Now().Before(deadline) {
		n, err := a.cq.Poll(wc)
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			if wc[0].WRID != id || wc[0].Status != uverbs.WCSuccess {
				t.Fatalf("completion %+v, want wr %d", wc[0], id)
			}
			return true
		}
		time.Sleep(100 * time.Microsecond)
	}
	return false
}

// passes waits until the engine has run two more full passes.
func (n *NIC) settle() {
	for start := n.d.passes.Load(); n.d.passes.Load() < start+2; {
		time.Sleep(50 * time.Microsecond)
	}
}

// mq returns the model's view of a QP.
func (n *NIC) mq(qpn uint32) *mqp {
	n.k.Lock()
	defer n.k.Unlock()
	return n.k.QP(qpn).Driver.(*mqp)
}

// reg is the address of q's doorbell / BlueFlame register (first half).
func (n *NIC) reg(q *mqp) unsafe.Pointer { return n.regOf(q.x, q.bfreg) }

// regOf is the address of net bfreg i of context x.
func (n *NIC) regOf(x *mctx, i int) unsafe.Pointer {
	page := x.uars[i/2/x.nupp]
	off := (i/2%x.nupp)*uarSize + bfOffset + i%2*n.cfg.BfRegSize
	return unsafe.Pointer(&page[off])
}

func storeBE(p *uint32, v uint32) { mmio.StoreRecord(p, v>>24|v>>8&0xff00|v<<8&0xff0000|v<<24) }

// TestModelRingsOnlyOnDoorbells: the model runs a send queue only when its doorbell is
// rung by a store to the QP's UAR register (an 8-byte doorbell, or a BlueFlame copy of
// several 64-byte chunks that the model puts together); a WQE whose doorbell record was
// updated but which was never rung stays unexecuted until its doorbell comes.
func TestModelRingsOnlyOnDoorbells(t *testing.T) {
	for _, bf := range []int{0, 512} {
		n := NewForTest(t, Config{BfRegSize: bf})
		a, b := newEnd(t, n), newEnd(t, n)
		connectEnds(t, a, b)
		a.write(t, b, 1, 8, 0)
		a.await(t, 1)
		// A WQE of three blocks (100 bytes inline): with BlueFlame one copy of three chunks.
		for i := range a.buf.Bytes()[:100] {
			a.buf.Bytes()[i] = byte(i)
		}
		a.write(t, b, 2, 100, uverbs.SendInline)
		a.await(t, 2)
		st := n.Stats()
		if bf != 0 && st.BlueFlames != 2 || bf == 0 && st.Doorbells != 2 {
			t.Errorf("bf %d: two posts rang %+v", bf, st)
		}
		if errs := n.Errors(); len(errs) != 0 || b.buf.Bytes()[99] != 99 {
			t.Fatalf("bf %d: 100-byte inline WRITE: errors %q, byte 99 = %d", bf, errs, b.buf.Bytes()[99])
		}
		// Post the next WQE (block 4) by hand as a provider that forgets the doorbell
		// would: a copy of the first with the next index, and the doorbell record only.
		q := n.mq(a.qp.Num())
		wqe := q.buf[q.block(0) : q.block(0)+64]
		next := q.buf[q.block(4) : q.block(4)+64]
		copy(next, wqe)
		binary.BigEndian.PutUint32(next[0:], 4<<8|0x08)
		storeBE(&q.db[1], 5)
		n.settle()
		if st := n.Stats(); st.Writes != 2 {
			t.Fatalf("bf %d: the model executed %d WRITEs; the third was never rung", bf, st.Writes)
		}
		// Now ring it: the 8-byte doorbell is its ctrl segment's first 8 bytes, at the half
		// the provider's next ring would use.
		mmio.WCStart()
		mmio.Store64(n.reg(q), unsafe.Pointer(&next[0]))
		mmio.Flush()
		a.await(t, 0) // the provider has no wr_id for the hand-made WQE
		if st := n.Stats(); st.Writes != 3 || len(n.Errors()) != 0 {
			t.Fatalf("bf %d: after the doorbell: %d WRITEs, errors %q", bf, st.Writes, n.Errors())
		}
	}
}

// TestModelRejectsBadDoorbells: each way a doorbell can disagree with the queue is a
// violation: the record does not announce the rung WQE, the doorbell bytes or the
// BlueFlame copy are not the WQE in the queue, the QP rings another QP's register, an arm
// doorbell disagrees with the CQ's arm record.
func TestModelRejectsBadDoorbells(t *testing.T) {
	cases := []struct {
		name string
		bad  func(n *NIC, q, other *mqp, c *mcq)
		want string
	}{
		{"record behind", func(n *NIC, q, _ *mqp, _ *mcq) {
			storeBE(&q.db[1], 0) // the record still says nothing was posted
			ctrl := q.buf[q.block(0) : q.block(0)+8]
			mmio.Store64(n.reg(q), unsafe.Pointer(&ctrl[0]))
		}, "doorbell record says"},
		{"doorbell bytes", func(n *NIC, q, _ *mqp, _ *mcq) {
			var db [8]byte
			copy(db[:], q.buf[q.block(0):])
			db[3] ^= 0x02 // another opcode than the WQE's
			mmio.Store64(n.reg(q), unsafe.Pointer(&db[0]))
		}, "doorbell byte 3"},
		{"blueflame bytes", func(n *NIC, q, _ *mqp, _ *mcq) {
			var wqe [64]byte
			copy(wqe[:], q.buf[q.block(0):])
			wqe[40] ^= 0xff // the copy differs from the queue in the data segment
			mmio.Copy64(unsafe.Add(n.reg(q), n.cfg.BfRegSize/2), unsafe.Pointer(&wqe[0]))
		}, "BlueFlame copy byte 40"},
		{"other bfreg", func(n *NIC, q, _ *mqp, _ *mcq) {
			ctrl := q.buf[q.block(0) : q.block(0)+8]
			mmio.Store64(n.regOf(q.x, q.bfreg^1), unsafe.Pointer(&ctrl[0]))
		}, "its bfreg"},
		{"arm record", func(n *NIC, _, _ *mqp, c *mcq) {
			storeBE(&c.db[1], 0x10000000)
			db := [8]byte{0x20} // sn 2, while the record says sn 1
			binary.BigEndian.PutUint32(db[4:], c.cqn)
			mmio.Store64(unsafe.Pointer(&c.x.uars[0][cqDoorbell]), unsafe.Pointer(&db[0]))
		}, "arm doorbell"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := NewForTest(t, Config{BfRegSize: 512})
			a, b := newEnd(t, n), newEnd(t, n)
			connectEnds(t, a, b)
			a.write(t, b, 1, 8, 0)
			a.await(t, 1)
			if errs := n.Errors(); len(errs) != 0 {
				t.Fatalf("violations before the test: %q", errs)
			}
			var c *mcq
			q, other := n.mq(a.qp.Num()), n.mq(b.qp.Num())
			n.k.Lock()
			for _, x := range n.d.order {
				if x.x == q.x {
					c = x
				}
			}
			n.k.Unlock()
			tc.bad(n, q, other, c)
			n.settle()
			errs := strings.Join(n.Errors(), "\n")
			if !strings.Contains(errs, tc.want) {
				t.Errorf("violations %q, want one with %q", errs, tc.want)
			}
		})
	}
}
