package hns_test

import (
	"encoding/binary"
	"testing"
	"unsafe"

	"github.com/gorping/gorping/test/hnsoracle"
	"github.com/gorping/gorping/test/oracle"
	"github.com/gorping/gorping/uverbs"
	"github.com/gorping/gorping/uverbs/driver"
)

// The data path (PostSend, PostRecv, Poll, Arm) must not allocate: it runs per message.
// The device's side is played by hand over the oracle's fake kernel: each post is
// completed by a CQE written into the CQ ring as the engine writes it (the owner bit of
// the lap).
func TestDataPathAllocs(t *testing.T) {
	nodb := hnsoracle.DefaultParams()
	nodb.QPCaps, nodb.CQCaps = 0, 0
	h9 := hnsoracle.ParamSets()["hip09"]
	for _, p := range []hnsoracle.Params{hnsoracle.DefaultParams(), nodb, h9} {
		be := oracle.NewBackend(hnsoracle.Driver{P: p})
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
		depth, size := hnsoracle.CQDepth(63), int(p.CQESize)
		le := binary.LittleEndian
		n, sqIdx := 0, uint32(0)
		complete := func(recv bool) {
			c := ring[(n%depth)*size : (n%depth+1)*size]
			w := uint32(0)
			if (n/depth)%2 == 0 {
				w |= 1 << 7
			}
			if recv {
				w |= 1<<6 | hnsoracle.RcvSend
				le.PutUint32(c[16:], 16)
			} else {
				w |= sqIdx << 16
				sqIdx++
			}
			le.PutUint32(c[12:], p.FirstQPN)
			le.PutUint32(c[0:], w)
			n++
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
				complete(false)
				if n, err := cq.Poll(wc); n != 1 || err != nil || wc[0].Status != driver.WCSuccess {
					t.Fatalf("Poll found no send completion (%d, %v)", n, err)
				}
			},
			"PostRecv+Poll": func() {
				if err := qp.PostRecv(rwr); err != nil {
					t.Fatal(err)
				}
				complete(true)
				if n, err := cq.Poll(wc); n != 1 || err != nil || wc[0].ByteLen != 16 {
					t.Fatalf("Poll found no receive completion (%d, %v)", n, err)
				}
			},
			"Arm": func() { cq.Arm(false) },
		} {
			if allocs := testing.AllocsPerRun(1000, f); allocs != 0 {
				t.Errorf("hw %#x caps %#x: %s: %v allocations per call, want 0", p.HwVer, p.QPCaps, name, allocs)
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
