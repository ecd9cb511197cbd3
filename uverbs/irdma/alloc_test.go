package irdma_test

import (
	"encoding/binary"
	"testing"
	"unsafe"

	"github.com/gorping/gorping/test/irdmaoracle"
	"github.com/gorping/gorping/test/oracle"
	"github.com/gorping/gorping/uverbs"
	"github.com/gorping/gorping/uverbs/driver"
)

// The data path (PostSend, PostRecv, Poll, Arm) must not allocate: it runs per message.
// The device's side is played by hand over the oracle's fake kernel: each post is
// completed by a CQE written into the CQ ring as the device writes it (the valid bit
// last).
func TestDataPathAllocs(t *testing.T) {
	for _, p := range []irdmaoracle.Params{irdmaoracle.DefaultParams(), {FirstQPN: 3, FirstCQN: 5, FirstLKey: 0x100}} {
		be := oracle.NewBackend(irdmaoracle.Driver{P: p})
		be.StopRecording()
		ctx, err := uverbs.OpenBackend(dev, be)
		if err != nil {
			t.Fatal(err)
		}
		pd, _ := ctx.AllocPD()
		cq, err := ctx.CreateCQ(63, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		caps := driver.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}
		qp, err := pd.CreateQP(uverbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Type: driver.QPTypeRC, Cap: caps})
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range oracle.RTSAttrs() {
			if err := qp.Modify(&st.A, st.M); err != nil {
				t.Fatal(err)
			}
		}
		buf, _ := uverbs.NewBuffer(4096)
		mr, err := pd.RegMR(buf, driver.AccessLocalWrite)
		if err != nil {
			t.Fatal(err)
		}
		r := be.Fake.Region("cq0")
		a := r.Addr
		ring := unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&a))), r.Len)
		ctxID, _ := be.Fake.Get("qp0.handle")
		entries := irdmaoracle.CQEntries(63)
		sqSize := irdmaoracle.SQQuanta(oracle.Caps{MaxSendWR: 16, MaxSendSGE: 1})
		rqSize, _ := irdmaoracle.RQ(oracle.Caps{MaxRecvWR: 16, MaxRecvSGE: 1})
		le := binary.LittleEndian
		slot, valid, sq, rq := 0, uint64(1), uint32(0), uint32(0)
		complete := func(send bool) {
			c := ring[slot*32 : slot*32+32]
			w3 := valid << 63
			if send {
				w3 |= 1<<62 | uint64(sq)<<32 | irdmaoracle.OpSend<<56
				sq = (sq + 1) % sqSize
			} else {
				w3 |= uint64(rq) << 32
				rq = (rq + 1) % rqSize
				le.PutUint64(c[0:], 16)
			}
			le.PutUint64(c[8:], ctxID)
			le.PutUint64(c[16:], uint64(p.FirstQPN)<<32)
			le.PutUint64(c[24:], w3)
			if slot++; slot == entries {
				slot, valid = 0, valid^1
			}
		}
		sge := []driver.SGE{{Addr: buf.Addr(), Length: 16, LKey: mr.LKey}}
		swr := &driver.SendWR{ID: 1, Opcode: driver.WRSend, Flags: driver.SendSignaled, SGE: sge}
		rwr := &driver.RecvWR{ID: 2, SGE: sge}
		wc := make([]driver.WC, 4)
		for name, f := range map[string]func(){
			"PostSend+Poll": func() {
				if err := qp.PostSend(swr); err != nil {
					t.Fatal(err)
				}
				complete(true)
				if n, _ := cq.Poll(wc); n != 1 || wc[0].Status != driver.WCSuccess {
					t.Fatalf("Poll found no send completion (%d, %v)", n, wc[0].Status)
				}
			},
			"PostRecv+Poll": func() {
				if err := qp.PostRecv(rwr); err != nil {
					t.Fatal(err)
				}
				complete(false)
				if n, _ := cq.Poll(wc); n != 1 || wc[0].ByteLen != 16 {
					t.Fatalf("Poll found no receive completion (%d)", n)
				}
			},
			"Arm": func() { cq.Arm(false) },
		} {
			if n := testing.AllocsPerRun(1000, f); n != 0 {
				t.Errorf("features %#x: %s: %v allocations per call, want 0", p.Features, name, n)
			}
		}
		mr.Dereg()
		buf.Free()
		qp.Destroy()
		cq.Destroy()
		ctx.Close()
		be.Close()
	}
}
