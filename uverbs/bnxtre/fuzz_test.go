package bnxtre

import (
	"encoding/binary"
	"testing"

	"github.com/gorping/gorping/internal/umem"
	"github.com/gorping/gorping/uverbs/driver"
)

// newTestCQ is a CQ of depth entries over memory of the test's, with one QP (handle 1)
// whose queues hold a few posted work requests; its doorbells go to a page of the test's.
func newTestCQ(t testing.TB, depth uint32) (*cq, *qp) {
	t.Helper()
	db, err := umem.Anon(4096)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Free() })
	c := &context{pgSize: 4096, db: db.Bytes()}
	mem, err := umem.Anon(int(depth) * cqeSize)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Free() })
	q := &cq{c: c, mem: mem, buf: mem.Bytes(), depth: depth, phase: 1, firstArm: true}
	p := &qp{c: c, qpn: 7, handle: 1, scq: q, rcq: q}
	for _, w := range []**queue{&p.sq, &p.rq} {
		*w = &queue{depth: 64, maxSlots: 1, nwr: 8, swque: make([]swqe, 8), buf: make([]byte, 64*slotSize)}
		(*w).tail = 5
		for i := range (*w).swque {
			(*w).swque[i] = swqe{wrid: uint64(i), slots: 1, sig: i%2 == 0}
		}
	}
	c.qps.Set(1, p)
	return q, p
}

// FuzzPoll: whatever the device writes into the CQEs (any type, status, flags, handle,
// con_indx), polling never panics, returns at most what was asked, and moves the
// consumer index by at most the ring.
func FuzzPoll(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0}, uint8(4))
	f.Add(make([]byte, 32*4), uint8(8))
	f.Fuzz(func(t *testing.T, cqes []byte, n uint8) {
		q, p := newTestCQ(t, 8)
		copy(q.buf, cqes)
		// Every handle is the QP's (1) or none, so that the QP's queues are exercised.
		for i := 0; i < 8; i++ {
			for _, off := range []int{0, 8} {
				if v := binary.LittleEndian.Uint64(q.buf[i*32+off:]); v > 1 {
					binary.LittleEndian.PutUint64(q.buf[i*32+off:], v&1)
				}
			}
		}
		wc := make([]driver.WC, int(n%16)+1)
		got, err := q.Poll(wc)
		if err != nil || got > len(wc) {
			t.Fatalf("Poll: %d of %d, %v", got, len(wc), err)
		}
		if q.head >= q.depth || p.sq.lastIdx >= p.sq.nwr || p.rq.lastIdx >= p.rq.nwr {
			t.Fatalf("indices out of range: head %d, sq %d, rq %d", q.head, p.sq.lastIdx, p.rq.lastIdx)
		}
	})
}

// Malformed driver responses are refused without a panic.
func TestCommitRefusesShortResponses(t *testing.T) {
	c := &context{pgSize: 4096, resp: uctxResp{MaxCqd: 100, CQESz: cqeSize}}
	pc, err := c.PrepareCQ(&driver.CQRequest{CQE: 8})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pc.Commit(nil, driver.CQCore{}, make([]byte, 8)); err == nil {
		t.Error("a CREATE_CQ response of 8 bytes was taken")
	}
	if _, err := c.PrepareCQ(&driver.CQRequest{CQE: 101}); err == nil {
		t.Error("a CQ deeper than max_cqd was prepared")
	}
	c.maxSGE, c.maxQPWR = 6, 100
	pq, err := c.PrepareQP(&driver.QPRequest{Type: driver.QPTypeRC, Cap: driver.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pq.Commit(nil, &driver.QPCore{}, make([]byte, 4)); err == nil {
		t.Error("a CREATE_QP response of 4 bytes was taken")
	}
	if _, err := c.PrepareQP(&driver.QPRequest{Type: driver.QPTypeRC, Cap: driver.QPCap{MaxSendSGE: 7}}); err == nil {
		t.Error("a QP with more SGEs than the device's was prepared")
	}
	if _, err := c.PrepareQP(&driver.QPRequest{Type: driver.QPTypeRC, Cap: driver.QPCap{MaxInlineData: 97}}); err == nil {
		t.Error("a QP with more inline data than the device's was prepared")
	}
}
