package rxemodel

import (
	"bytes"
	"testing"

	"github.com/gorping/gorping/uverbs"
	_ "github.com/gorping/gorping/uverbs/rxe" // the provider the model answers
)

// pair is two connected RC QPs on the model, each with a registered buffer.
type pair struct {
	ctx  *uverbs.Context
	cq   [2]*uverbs.CQ
	qp   [2]*uverbs.QP
	buf  [2]*uverbs.Buffer
	mr   [2]*uverbs.MR
	pd   *uverbs.PD
	done func()
}

func newPair(t *testing.T, n *NIC) *pair {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	p := &pair{}
	var err error
	p.ctx, err = n.Open("rxe0")
	must(err)
	p.pd, err = p.ctx.AllocPD()
	must(err)
	for i := range 2 {
		p.cq[i], err = p.ctx.CreateCQ(8, nil, 0)
		must(err)
		p.qp[i], err = p.pd.CreateQP(uverbs.QPInitAttr{SendCQ: p.cq[i], RecvCQ: p.cq[i], Type: uverbs.QPTypeRC,
			Cap: uverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
		must(err)
		p.buf[i], err = uverbs.NewBuffer(4096)
		must(err)
		p.mr[i], err = p.pd.RegMR(p.buf[i], uverbs.AccessLocalWrite|uverbs.AccessRemoteRead|uverbs.AccessRemoteWrite)
		must(err)
	}
	for i := range 2 {
		for _, st := range []struct {
			a    uverbs.QPAttr
			mask uverbs.QPAttrMask
		}{
			{uverbs.QPAttr{State: uverbs.QPSInit, PortNum: 1, AccessFlags: uverbs.AccessRemoteRead | uverbs.AccessRemoteWrite},
				uverbs.QPAttrState | uverbs.QPAttrPort | uverbs.QPAttrAccessFlags | uverbs.QPAttrPKeyIndex},
			{uverbs.QPAttr{State: uverbs.QPSRTR, DestQPNum: p.qp[1-i].Num(), PathMTU: uverbs.MTU1024, AH: uverbs.AHAttr{PortNum: 1}},
				uverbs.QPAttrState | uverbs.QPAttrDestQPN | uverbs.QPAttrPathMTU | uverbs.QPAttrAV},
			{uverbs.QPAttr{State: uverbs.QPSRTS}, uverbs.QPAttrState},
		} {
			must(p.qp[i].Modify(&st.a, st.mask))
		}
	}
	p.done = func() {
		for i := range 2 {
			must(p.mr[i].Dereg())
			must(p.buf[i].Free())
			must(p.qp[i].Destroy())
			must(p.cq[i].Destroy())
		}
		must(p.pd.Dealloc())
		must(p.ctx.Close())
	}
	return p
}

func poll(t *testing.T, cq *uverbs.CQ) uverbs.WC {
	t.Helper()
	var wc [1]uverbs.WC
	if n, err := cq.Poll(wc[:]); err != nil || n != 1 {
		t.Fatalf("poll: %d completions, %v (the model runs a send inside its doorbell)", n, err)
	}
	return wc[0]
}

// The model carries an RDMA WRITE and a SEND between two QPs, completes them in the CQ
// rings, and fails (and reports) a WRITE with a key that names no region.
func TestModelWriteSendAndBadKey(t *testing.T) {
	n, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	p := newPair(t, n)
	copy(p.buf[0].Bytes(), "hello, rxe")
	sge := []uverbs.SGE{{Addr: p.buf[0].Addr(), Length: 10, LKey: p.mr[0].LKey}}
	if err := p.qp[0].PostSend(&uverbs.SendWR{ID: 7, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled, SGE: sge,
		RemoteAddr: p.buf[1].Addr() + 100, RKey: p.mr[1].RKey}); err != nil {
		t.Fatal(err)
	}
	if wc := poll(t, p.cq[0]); wc.WRID != 7 || wc.Status != uverbs.WCSuccess || wc.Opcode != uverbs.WCRDMAWrite {
		t.Errorf("WRITE completion %+v", wc)
	}
	if got := p.buf[1].Bytes()[100:110]; !bytes.Equal(got, []byte("hello, rxe")) {
		t.Errorf("WRITE landed %q", got)
	}
	if err := p.qp[1].PostRecv(&uverbs.RecvWR{ID: 9, SGE: []uverbs.SGE{{Addr: p.buf[1].Addr(), Length: 64, LKey: p.mr[1].LKey}}}); err != nil {
		t.Fatal(err)
	}
	if err := p.qp[0].PostSend(&uverbs.SendWR{ID: 8, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGE: sge}); err != nil {
		t.Fatal(err)
	}
	if wc := poll(t, p.cq[1]); wc.WRID != 9 || wc.Status != uverbs.WCSuccess || wc.Opcode != uverbs.WCRecv || wc.ByteLen != 10 {
		t.Errorf("RECV completion %+v", wc)
	}
	poll(t, p.cq[0])
	if len(n.Errors()) != 0 {
		t.Fatalf("violations: %v", n.Errors())
	}
	if err := p.qp[0].PostSend(&uverbs.SendWR{ID: 11, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled, SGE: sge,
		RemoteAddr: p.buf[1].Addr(), RKey: 0xdead}); err != nil {
		t.Fatal(err)
	}
	if wc := poll(t, p.cq[0]); wc.WRID != 11 || wc.Status != uverbs.WCRemAccessErr {
		t.Errorf("WRITE with a bad rkey: %+v, want REM_ACCESS_ERR", wc)
	}
	if errs := n.Errors(); len(errs) != 1 {
		t.Errorf("violations %q, want the bad rkey", errs)
	}
	p.done()
	if q, c, m := n.Live(); q+c+m != 0 {
		t.Errorf("live after release: %d QPs %d CQs %d MRs", q, c, m)
	}
}
