package irdma

import (
	"encoding/binary"
	"testing"

	"github.com/gorping/gorping/internal/umem"
	"github.com/gorping/gorping/uverbs/driver"
)

// newTestCQ is a CQ of size CQEs over memory of the test's, with one QP (completion
// context 1) whose queues hold a few posted work requests; its doorbells go to a page of
// the test's.
func newTestCQ(t testing.TB, size uint32) (*cq, *qp) {
	t.Helper()
	db, err := umem.Anon(4096)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Free() })
	c := &context{db: db.Bytes()}
	mem, err := umem.Anon(int(size)*cqeSize + shadowAreaSize)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Free() })
	b := mem.Bytes()
	q := &cq{c: c, mem: mem, buf: b[:int(size)*cqeSize], shadow: b[int(size)*cqeSize:], size: size, polarity: 1}
	p := &qp{c: c, qpID: 7, ctx: 1, sendCQ: q, recvCQ: q, chunk: 8, caps: capSendWithImm | capWriteWithImm}
	p.sq = wq{size: 64, head: 5, trk: make([]sqTrk, 64)}
	for i := range p.sq.trk {
		p.sq.trk[i] = sqTrk{wrid: uint64(i), quanta: uint8(1 + i%3), op: uint8(i % 4)}
	}
	p.rq = wq{size: 16, head: 5, mult: 2, wrid: make([]uint64, 16)}
	c.qps.Set(1, p)
	return q, p
}

// FuzzPoll: whatever the device writes into the CQEs (valid bits, queue, errors, WQE
// indices, extensions, completion contexts), polling never panics, returns at most what
// was asked, and keeps every index in its ring.
func FuzzPoll(f *testing.F) {
	valid := make([]byte, 32)
	binary.LittleEndian.PutUint64(valid[8:], 1)
	binary.LittleEndian.PutUint64(valid[24:], 1<<63|1<<62|2<<32)
	f.Add(valid, uint8(4))
	f.Add(make([]byte, 32*4), uint8(8))
	f.Fuzz(func(t *testing.T, cqes []byte, n uint8) {
		q, p := newTestCQ(t, 8)
		copy(q.buf, cqes)
		// Every context is the QP's (1) or none, so that the QP's queues are exercised.
		for i := 0; i < 8; i++ {
			if v := binary.LittleEndian.Uint64(q.buf[i*32+8:]); v > 1 {
				binary.LittleEndian.PutUint64(q.buf[i*32+8:], v&1)
			}
		}
		wc := make([]driver.WC, int(n%16)+1)
		got, err := q.Poll(wc)
		if err != nil || got > len(wc) {
			t.Fatalf("Poll: %d of %d, %v", got, len(wc), err)
		}
		if q.head >= q.size || p.sq.tail >= p.sq.size || p.rq.tail >= p.rq.size {
			t.Fatalf("indices out of range: head %d, sq %d, rq %d", q.head, p.sq.tail, p.rq.tail)
		}
	})
}

// Malformed driver responses and capabilities beyond the device's are refused without a
// panic.
func TestCommitRefusesShortResponses(t *testing.T) {
	q, _ := newTestCQ(t, 8)
	c := q.c
	c.attrs = uctxResp{MaxHwCQSize: 100, MaxHwWqFrags: 13, MaxHwReadSges: 13, MaxHwInline: 101, MaxHwWqQuanta: 32768, MaxHwRQQuanta: 32768, MaxHwSQChunk: 8, HwRev: gen2}
	c.cmd = nopCommander{}
	pc, err := c.PrepareCQ(&driver.CQRequest{CQE: 8})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pc.Commit(nil, driver.CQCore{}, make([]byte, 4)); err == nil {
		t.Error("a CREATE_CQ response of 4 bytes was taken")
	}
	if _, err := c.PrepareCQ(&driver.CQRequest{CQE: 101}); err == nil {
		t.Error("a CQ deeper than max_hw_cq_size was prepared")
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
	iwarp := make([]byte, qpRespLen)
	binary.LittleEndian.PutUint32(iwarp[4:], 4)
	binary.LittleEndian.PutUint32(iwarp[8:], 4)
	iwarp[18] = 1 // lsmm
	if _, err := pq.Commit(nil, &driver.QPCore{}, iwarp); err == nil {
		t.Error("an iWARP QP (lsmm) was taken")
	}
	pq, _ = c.PrepareQP(&driver.QPRequest{Type: driver.QPTypeRC, Cap: caps})
	big := make([]byte, qpRespLen)
	binary.LittleEndian.PutUint32(big[4:], 1<<20)
	binary.LittleEndian.PutUint32(big[8:], 4)
	if _, err := pq.Commit(nil, &driver.QPCore{}, big); err == nil {
		t.Error("a send queue larger than the one allocated was taken")
	}
	for _, cp := range []driver.QPCap{{MaxSendSGE: 14}, {MaxRecvSGE: 14}, {MaxInlineData: 102}, {MaxSendWR: 1 << 16}} {
		if _, err := c.PrepareQP(&driver.QPRequest{Type: driver.QPTypeRC, Cap: cp}); err == nil {
			t.Errorf("a QP with caps %+v beyond the device's was prepared", cp)
		}
	}
}

// nopCommander answers every command with zeros (registrations of a test's memory).
type nopCommander struct{}

func (nopCommander) Write(cmd uint32, req, resp []byte) error { clear(resp); return nil }
func (nopCommander) Mmap(string, int64, int, int) ([]byte, error) {
	return nil, nil
}
func (nopCommander) Munmap([]byte) error { return nil }
func (nopCommander) Fd() int             { return -1 }
