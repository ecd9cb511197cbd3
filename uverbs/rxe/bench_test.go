package rxe

import (
	"sync/atomic"
	"testing"

	"github.com/gorping/gorping/uverbs/driver"
)

// Data-path cost with fake rings (no kernel): what gorping adds per operation.

func BenchmarkPostSend(b *testing.B) {
	tq := newTestQP(b, 64, 4, false)
	tq.qp.SetState(driver.QPSRTS)
	tq.cmd.record = false
	wr := &driver.SendWR{ID: 1, Opcode: driver.WRSend, Flags: driver.SendSignaled, SGE: []driver.SGE{{Addr: 0x1000, Length: 64, LKey: 1}}}
	b.ReportAllocs()
	for b.Loop() {
		if err := tq.qp.PostSend(wr); err != nil {
			b.Fatal(err)
		}
		atomic.StoreUint32(idx(tq.sq, ringConsOff), atomic.LoadUint32(idx(tq.sq, ringProdOff)))
	}
}

func BenchmarkPostRecv(b *testing.B) {
	tq := newTestQP(b, 4, 64, false)
	tq.qp.SetState(driver.QPSInit)
	wr := &driver.RecvWR{ID: 1, SGE: []driver.SGE{{Addr: 0x1000, Length: 64, LKey: 1}}}
	b.ReportAllocs()
	for b.Loop() {
		if err := tq.qp.PostRecv(wr); err != nil {
			b.Fatal(err)
		}
		atomic.StoreUint32(idx(tq.rq, ringConsOff), atomic.LoadUint32(idx(tq.rq, ringProdOff)))
	}
}

func BenchmarkPoll(b *testing.B) {
	q, mem, _, _ := newTestCQ(b, 64)
	wc := make([]driver.WC, 16)
	b.ReportAllocs()
	for b.Loop() {
		p := atomic.LoadUint32(idx(mem, ringProdOff))
		atomic.StoreUint32(idx(mem, ringProdOff), (p+1)&63)
		if n, _ := q.Poll(wc); n != 1 {
			b.Fatal("no CQE")
		}
	}
}
