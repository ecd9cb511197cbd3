package bnxtre_test

import (
	"encoding/binary"
	"testing"
	"unsafe"

	"github.com/gorping/gorping/test/bnxtreoracle"
	"github.com/gorping/gorping/test/oracle"
	"github.com/gorping/gorping/uverbs"
	"github.com/gorping/gorping/uverbs/driver"
)

// The data path (PostSend, PostRecv, Poll, Arm) must not allocate: it runs per message.
// The device's side is played by hand over the oracle's fake kernel: each post is
// completed by a CQE written into the CQ ring as the device writes it.
func TestDataPathAllocs(t *testing.T) {
	for _, p := range []bnxtreoracle.Params{bnxtreoracle.DefaultParams(), func() bnxtreoracle.Params {
		p := bnxtreoracle.DefaultParams()
		p.Variable = true
		return p
	}()} {
		be := oracle.NewBackend(bnxtreoracle.Driver{P: p})
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
		qp, err := pd.CreateQP(uverbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Type: driver.QPTypeRC,
			Cap: driver.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
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
		handle, _ := be.Fake.Get("qp0.handle")
		le := binary.LittleEndian
		slot, phase, seq := 0, uint32(1), uint32(0)
		complete := func(typ uint32) {
			c := ring[slot*32 : slot*32+32]
			if typ == 0 {
				le.PutUint64(c[0:], handle)
				le.PutUint32(c[8:], seq)
			} else {
				le.PutUint32(c[0:], 16)
				le.PutUint64(c[8:], handle)
			}
			le.PutUint32(c[24:], phase|typ<<1)
			if slot++; slot == r.Len/32 {
				slot, phase = 0, phase^1
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
				seq++
				complete(0)
				if n, _ := cq.Poll(wc); n != 1 {
					t.Fatal("Poll found no send completion")
				}
			},
			"PostRecv+Poll": func() {
				if err := qp.PostRecv(rwr); err != nil {
					t.Fatal(err)
				}
				complete(1)
				if n, _ := cq.Poll(wc); n != 1 {
					t.Fatal("Poll found no receive completion")
				}
			},
			"Arm": func() { cq.Arm(false) },
		} {
			if n := testing.AllocsPerRun(1000, f); n != 0 {
				t.Errorf("variable %v: %s: %v allocations per call, want 0", p.Variable, name, n)
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
