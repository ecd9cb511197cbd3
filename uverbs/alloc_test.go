package uverbs

import "testing"

// The data path (PostSend, PostRecv, Poll, Arm) must not allocate: it runs per message.
func TestDataPathAllocs(t *testing.T) {
	e := newTestEnv(t)
	pd, _ := e.ctx.AllocPD()
	cq, err := e.ctx.CreateCQ(8, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	qp, err := pd.CreateQP(QPInitAttr{SendCQ: cq, RecvCQ: cq})
	if err != nil {
		t.Fatal(err)
	}
	e.k.record = false // the fake kernel's own bookkeeping would allocate
	sge := []SGE{{Addr: 0x1000, Length: 16, LKey: 1}}
	swr := &SendWR{ID: 1, Opcode: WRSend, Flags: SendSignaled, SGE: sge}
	rwr := &RecvWR{ID: 2, SGE: sge}
	wc := make([]WC, 4)
	pcq := cq.prov.(*fakeProvCQ)
	for name, f := range map[string]func(){
		"PostSend": func() { qp.PostSend(swr) },
		"PostRecv": func() { qp.PostRecv(rwr) },
		"Poll":     func() { pcq.pending = wc[:1]; cq.Poll(wc) },
		"Arm":      func() { cq.Arm(false) },
	} {
		if n := testing.AllocsPerRun(1000, f); n != 0 {
			t.Errorf("%s: %v allocations per call, want 0", name, n)
		}
	}
	if pqp := e.ctx.prov.(*fakeProvCtx).qps[0]; pqp.sends == 0 || pqp.recvs == 0 {
		t.Error("fake provider not reached")
	}
}
