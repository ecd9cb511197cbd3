package hns

import (
	"encoding/binary"
	"testing"

	"github.com/gorping/gorping/internal/umem"
	"github.com/gorping/gorping/uverbs/driver"
)

// newTestCQ is a CQ of depth CQEs of size bytes over memory of the test's, with one QP
// (QPN 7) whose queues hold a few posted work requests; its doorbells go to a page of the
// test's.
func newTestCQ(t testing.TB, depth, size uint32) (*cq, *qp) {
	t.Helper()
	uar, err := umem.Anon(4096)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { uar.Free() })
	c := &context{uar: uar.Bytes(), cqeSize: size, pageSize: 4096, cmd: nopCommander{}}
	mem, err := umem.Anon(int(depth*size) + 4096)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Free() })
	b := mem.Bytes()
	q := &cq{c: c, mem: mem, buf: b[:depth*size], depth: depth, size: size, armSN: 1}
	p := &qp{c: c, qpn: 7, sendCQ: q, recvCQ: q, sigBits: true}
	p.sq = wq{cnt: 64, shift: 6, head: 20, wrid: make([]uint64, 64)}
	p.rq = wq{cnt: 64, shift: 6, head: 20, wqe: 5, ring: make([]byte, 64<<5), wrid: make([]uint64, 64)}
	p.rinl = make([]rinl, 64)
	for i := range p.rinl {
		p.rinl[i] = rinl{addr: make([]uint64, 1), len: make([]uint32, 1)}
	}
	p.state.Store(uint32(driver.QPSRTS))
	c.qps.Set(7, p)
	return q, p
}

// FuzzPoll: whatever the engine writes into the CQEs (owner bits, queue, opcode, status,
// WQE index, inline flag, QPN), polling never panics and returns at most what was asked.
func FuzzPoll(f *testing.F) {
	valid := make([]byte, 32)
	binary.LittleEndian.PutUint32(valid[0:], 1<<7|1<<6|1)
	binary.LittleEndian.PutUint32(valid[12:], 7)
	f.Add(valid, uint8(4))
	f.Add(make([]byte, 32*4), uint8(8))
	f.Fuzz(func(t *testing.T, cqes []byte, n uint8) {
		q, _ := newTestCQ(t, 64, 32)
		copy(q.buf, cqes)
		// Every QPN is the QP's (7) or none, so that the QP's queues are exercised.
		for i := 0; i < 64; i++ {
			v := binary.LittleEndian.Uint32(q.buf[i*32+12:])
			binary.LittleEndian.PutUint32(q.buf[i*32+12:], v&0xff000000|7*(v&1))
		}
		wc := make([]driver.WC, int(n%16)+1)
		got, _ := q.Poll(wc)
		if got > len(wc) || got < 0 {
			t.Fatalf("Poll: %d of %d", got, len(wc))
		}
	})
}

// Malformed driver responses and capabilities beyond the device's are refused without a
// panic.
func TestCommitRefusesShortResponses(t *testing.T) {
	q, _ := newTestCQ(t, 64, 32)
	c := q.c
	c.maxCQE, c.maxQPWR, c.maxSGE, c.hwVer = 1000, 0x8000, 64, hwVer2
	pc, err := c.PrepareCQ(&driver.CQRequest{CQE: 8})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pc.Commit(nil, driver.CQCore{}, make([]byte, 8)); err == nil {
		t.Error("a CREATE_CQ response of 8 bytes was taken")
	}
	if _, err := c.PrepareCQ(&driver.CQRequest{CQE: 1001}); err == nil {
		t.Error("a CQ deeper than max_cqe was prepared")
	}
	caps := driver.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}
	pq, err := c.PrepareQP(&driver.QPRequest{Type: driver.QPTypeRC, Cap: caps})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pq.Commit(nil, &driver.QPCore{}, make([]byte, 4)); err == nil {
		t.Error("a CREATE_QP response of 4 bytes was taken")
	}
	pq, _ = c.PrepareQP(&driver.QPRequest{Type: driver.QPTypeRC, Cap: caps})
	if _, err := pq.Commit(nil, &driver.QPCore{Cap: driver.QPCap{MaxRecvWR: 1 << 20, MaxRecvSGE: 2}}, make([]byte, qpRespLen)); err == nil {
		t.Error("a receive queue larger than the one allocated was taken")
	}
	for _, cp := range []driver.QPCap{{MaxSendSGE: 65}, {MaxRecvSGE: 65}, {MaxSendWR: 0x8001}, {MaxRecvWR: 4}} {
		if _, err := c.PrepareQP(&driver.QPRequest{Type: driver.QPTypeRC, Cap: cp}); err == nil {
			t.Errorf("a QP with caps %+v was prepared", cp)
		}
	}
}

// nopCommander answers every command with zeros.
type nopCommander struct{}

func (nopCommander) Write(cmd uint32, req, resp []byte) error { clear(resp); return nil }
func (nopCommander) Mmap(string, int64, int, int) ([]byte, error) {
	return nil, nil
}
func (nopCommander) Munmap([]byte) error { return nil }
func (nopCommander) Fd() int             { return -1 }
