package siw

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/gorping/gorping/uverbs/driver"
	"golang.org/x/sys/unix"
)

// fakeCmd is a Commander whose mappings are anonymous memory standing in for the
// kernel's queues, and which records the commands written.
type fakeCmd struct {
	t      *testing.T
	maps   map[int64][]byte // mmap offset -> mapping
	writes []uint32
	reqs   [][]byte
	mapErr error
}

func newFake(t *testing.T) *fakeCmd { return &fakeCmd{t: t, maps: map[int64][]byte{}} }

func (f *fakeCmd) Write(cmd uint32, req, resp []byte) error {
	f.writes = append(f.writes, cmd)
	f.reqs = append(f.reqs, append([]byte(nil), req...))
	return nil
}

func (f *fakeCmd) Mmap(what string, off int64, length, prot int) ([]byte, error) {
	if f.mapErr != nil {
		return nil, f.mapErr
	}
	b, err := unix.Mmap(-1, 0, length, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		f.t.Fatal(err)
	}
	f.maps[off] = b
	f.t.Cleanup(func() { unix.Munmap(b) })
	return b, nil
}

func (f *fakeCmd) Munmap(b []byte) error { return nil }

var le = binary.LittleEndian

func cqResp(num uint32, key uint64) []byte {
	b := make([]byte, createCQLen)
	le.PutUint32(b[0:], 7)
	le.PutUint32(b[4:], num)
	le.PutUint64(b[8:], key)
	return b
}

func qpResp(qpn, nsq, nrq uint32, sqKey, rqKey uint64) []byte {
	b := make([]byte, createQPLen)
	le.PutUint32(b[0:], qpn)
	le.PutUint32(b[4:], nsq)
	le.PutUint32(b[8:], nrq)
	le.PutUint64(b[16:], sqKey)
	le.PutUint64(b[24:], rqKey)
	return b
}

func newTestCQ(t *testing.T, f *fakeCmd, num uint32) (*cq, []byte) {
	ctx := &context{}
	p, err := ctx.PrepareCQ(&driver.CQRequest{CQE: int(num)})
	if err != nil {
		t.Fatal(err)
	}
	if in, out := p.Udata(); in != nil || out != createCQLen {
		t.Fatalf("CREATE_CQ udata = %d in, %d out; want 0, %d", len(in), out, createCQLen)
	}
	pc, err := p.Commit(f, driver.CQCore{Handle: 3, CQE: int(num)}, cqResp(num, 0x5000))
	if err != nil {
		t.Fatal(err)
	}
	mem := f.maps[0x5000]
	if len(mem) != int(num)*cqeSize+cqCtrlSize {
		t.Fatalf("CQ mapping is %d bytes, want %d", len(mem), int(num)*cqeSize+cqCtrlSize)
	}
	return pc.(*cq), mem
}

// putCQE writes a CQE the way the kernel does: fields, then flags = VALID.
func putCQE(mem []byte, slot int, id uint64, op uint8, status uint16, bytes uint32, qpn uint64) {
	b := mem[slot*cqeSize:]
	le.PutUint64(b[0:], id)
	b[9] = op
	le.PutUint16(b[10:], status)
	le.PutUint32(b[12:], bytes)
	le.PutUint64(b[24:], qpn)
	b[8] = wqeValid
}

func TestCQPollAndArm(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	q, mem := newTestCQ(t, f, 4)
	wc := make([]driver.WC, 8)
	if n, err := q.Poll(wc); n != 0 || err != nil {
		t.Fatalf("empty CQ polled %d, %v", n, err)
	}
	putCQE(mem, 0, 11, opReceive, 0, 64, 0x44)
	putCQE(mem, 1, 12, opRead, 4, 0, 0x44)
	putCQE(mem, 2, 13, opWrite, 99, 0, 0x44) // unknown status
	n, err := q.Poll(wc[:2])
	if n != 2 || err != nil {
		t.Fatalf("Poll = %d, %v; want 2", n, err)
	}
	want := []driver.WC{
		{WRID: 11, Status: driver.WCSuccess, Opcode: driver.WCRecv, ByteLen: 64, QPNum: 0x44},
		{WRID: 12, Status: driver.WCWRFlushErr, Opcode: driver.WCRDMARead, QPNum: 0x44},
	}
	for i := range want {
		if wc[i] != want[i] {
			t.Errorf("wc[%d] = %+v, want %+v", i, wc[i], want[i])
		}
	}
	if mem[8] != 0 || mem[cqeSize+8] != 0 {
		t.Error("polled CQEs were not handed back (flags not cleared)")
	}
	if mem[2*cqeSize+8] != wqeValid {
		t.Error("an unpolled CQE was handed back")
	}
	if n, _ := q.Poll(wc); n != 1 || wc[0].Status != driver.WCGeneralErr || wc[0].Opcode != driver.WCRDMAWrite {
		t.Errorf("third poll: %d, %+v", n, wc[0])
	}
	// The consumer wraps: slot 3, then slot 0 again.
	putCQE(mem, 3, 14, opSend, 0, 1, 1)
	putCQE(mem, 0, 15, opSend, 0, 2, 1)
	if n, _ := q.Poll(wc); n != 2 || wc[0].WRID != 14 || wc[1].WRID != 15 {
		t.Errorf("wrapped poll: %d, %+v %+v", n, wc[0], wc[1])
	}

	ctrl := mem[4*cqeSize:]
	if err := q.Arm(false); err != nil || le.Uint32(ctrl) != notifySolicited|notifyNextCompletion {
		t.Errorf("Arm(any) = %v, ctrl word %#x", err, le.Uint32(ctrl))
	}
	if err := q.Arm(true); err != nil || le.Uint32(ctrl) != notifySolicited {
		t.Errorf("Arm(solicited) = %v, ctrl word %#x", err, le.Uint32(ctrl))
	}
	if len(f.writes) != 0 {
		t.Errorf("polling or arming wrote commands %v; siw needs none", f.writes)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Poll(wc); !errors.Is(err, driver.ErrClosed) {
		t.Errorf("Poll after Close: %v", err)
	}
	if err := q.Arm(false); !errors.Is(err, driver.ErrClosed) {
		t.Errorf("Arm after Close: %v", err)
	}
}

func TestCQCommitRejects(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	for name, resp := range map[string][]byte{
		"short":       make([]byte, 8),
		"not pow2":    cqResp(3, 0x1000),
		"invalid key": cqResp(4, invalKey),
	} {
		if _, err := (pendingCQ{}).Commit(f, driver.CQCore{}, resp); err == nil {
			t.Errorf("%s: Commit accepted %x", name, resp)
		}
	}
}

func newTestQP(t *testing.T, f *fakeCmd, nsq, nrq uint32, sigAll bool) (*qp, []byte, []byte) {
	ctx := &context{}
	req := &driver.QPRequest{Type: driver.QPTypeRC, Cap: driver.QPCap{MaxSendWR: nsq, MaxRecvWR: nrq, MaxSendSGE: 2, MaxRecvSGE: 2}, SigAll: sigAll}
	p, err := ctx.PrepareQP(req)
	if err != nil {
		t.Fatal(err)
	}
	if in, out := p.Udata(); in != nil || out != createQPLen {
		t.Fatalf("CREATE_QP udata = %d in, %d out", len(in), out)
	}
	core := &driver.QPCore{Handle: 9, QPN: 0x44, Type: driver.QPTypeRC, Cap: req.Cap, SigAll: sigAll}
	pq, err := p.Commit(f, core, qpResp(0x44, nsq, nrq, 0x1000, 0x2000))
	if err != nil {
		t.Fatal(err)
	}
	if core.Cap.MaxSendWR != nsq || core.Cap.MaxRecvWR != nrq {
		t.Errorf("reported caps %+v, want the granted %d/%d", core.Cap, nsq, nrq)
	}
	return pq.(*qp), f.maps[0x1000], f.maps[0x2000]
}

func TestPostSendEncoding(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	q, sq, _ := newTestQP(t, f, 2, 2, false)
	if len(sq) != 2*sqeSize {
		t.Fatalf("SQ mapping %d bytes", len(sq))
	}
	wr := driver.SendWR{ID: 0x1122, Opcode: driver.WRRDMAWrite, Flags: driver.SendSignaled,
		SGE:        []driver.SGE{{Addr: 0xa000, Length: 100, LKey: 0x55}, {Addr: 0xb000, Length: 8, LKey: 0x56}},
		RemoteAddr: 0xdead0000, RKey: 0x77}
	if err := q.PostSend(&wr); err != nil {
		t.Fatal(err)
	}
	e := sq[:sqeSize]
	if got := le.Uint64(e[0:]); got != 0x1122 {
		t.Errorf("id %#x", got)
	}
	if got := le.Uint16(e[8:]); got != wqeValid|wqeSignalled {
		t.Errorf("flags %#x, want VALID|SIGNALLED", got)
	}
	if e[10] != 2 || e[11] != opWrite {
		t.Errorf("num_sge %d opcode %d", e[10], e[11])
	}
	if le.Uint32(e[12:]) != 0x77 || le.Uint64(e[16:]) != 0xdead0000 {
		t.Errorf("rkey %#x raddr %#x", le.Uint32(e[12:]), le.Uint64(e[16:]))
	}
	if le.Uint64(e[24:]) != 0xa000 || le.Uint32(e[32:]) != 100 || le.Uint32(e[36:]) != 0x55 ||
		le.Uint64(e[40:]) != 0xb000 || le.Uint32(e[48:]) != 8 || le.Uint32(e[52:]) != 0x56 {
		t.Errorf("SGEs % x", e[24:56])
	}
	if len(f.writes) != 1 || f.writes[0] != driver.CmdPostSend {
		t.Fatalf("doorbell writes %v", f.writes)
	}
	// struct ib_uverbs_post_send: response u64, qp_handle u32, wr_count, sge_count, wqe_size.
	db := f.reqs[0]
	if le.Uint32(db[8:]) != 9 || le.Uint32(db[12:]) != 0 || le.Uint32(db[20:]) != doorbellWQE {
		t.Errorf("doorbell body % x", db)
	}

	// A plain send, unsignaled, on a QP without sq_sig_all: no SIGNALLED, no rkey.
	if err := q.PostSend(&driver.SendWR{ID: 2, Opcode: driver.WRSend, RKey: 9, RemoteAddr: 9, SGE: wr.SGE[:1]}); err != nil {
		t.Fatal(err)
	}
	e = sq[sqeSize:]
	if le.Uint16(e[8:]) != wqeValid || e[11] != opSend || le.Uint32(e[12:]) != 0 || le.Uint64(e[16:]) != 0 {
		t.Errorf("send SQE flags %#x opcode %d rkey %#x raddr %#x", le.Uint16(e[8:]), e[11], le.Uint32(e[12:]), le.Uint64(e[16:]))
	}
	// Both elements are still VALID (the kernel has not taken them): the SQ is full.
	if err := q.PostSend(&wr); !errors.Is(err, driver.ErrQueueFull) {
		t.Errorf("post to a full SQ: %v", err)
	}
	// The kernel takes slot 0 (clears its flags); it is reused.
	le.PutUint16(sq[8:], 0)
	if err := q.PostSend(&driver.SendWR{ID: 3, Opcode: driver.WRRDMARead, SGE: wr.SGE[:1], RemoteAddr: 1, RKey: 2}); err != nil {
		t.Fatal(err)
	}
	if le.Uint64(sq[0:]) != 3 || sq[11] != opRead || sq[10] != 1 {
		t.Errorf("reused slot: id %d opcode %d num_sge %d", le.Uint64(sq[0:]), sq[11], sq[10])
	}
}

func TestPostSendRejects(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	q, sq, _ := newTestQP(t, f, 4, 4, true)
	sges := []driver.SGE{{Addr: 1, Length: 1, LKey: 1}, {Addr: 2, Length: 2, LKey: 2}, {Addr: 3, Length: 3, LKey: 3}}
	for name, wr := range map[string]driver.SendWR{
		"imm":       {Opcode: driver.WRSendWithImm},
		"atomic":    {Opcode: driver.WRAtomicFetchAdd, SGE: sges[:1]},
		"inline":    {Opcode: driver.WRSend, Flags: driver.SendInline},
		"sges":      {Opcode: driver.WRSend, SGE: sges},
		"read 2sge": {Opcode: driver.WRRDMARead, SGE: sges[:2]},
	} {
		if err := q.PostSend(&wr); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if len(f.writes) != 0 || le.Uint16(sq[8:]) != 0 {
		t.Error("a refused work request reached the queue or rang the doorbell")
	}
	// sq_sig_all signals every send.
	if err := q.PostSend(&driver.SendWR{Opcode: driver.WRSend}); err != nil || le.Uint16(sq[8:]) != wqeValid|wqeSignalled {
		t.Errorf("sig_all send: %v, flags %#x", err, le.Uint16(sq[8:]))
	}
}

func TestPostRecvEncoding(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	q, _, rq := newTestQP(t, f, 1, 2, false)
	if len(rq) != 2*rqeSize {
		t.Fatalf("RQ mapping %d bytes", len(rq))
	}
	for i := uint64(1); i <= 2; i++ {
		if err := q.PostRecv(&driver.RecvWR{ID: i, SGE: []driver.SGE{{Addr: 0x1000 * i, Length: 64, LKey: 5}}}); err != nil {
			t.Fatal(err)
		}
	}
	e := rq[rqeSize:]
	if le.Uint64(e[0:]) != 2 || le.Uint16(e[8:]) != wqeValid || e[10] != 1 ||
		le.Uint64(e[16:]) != 0x2000 || le.Uint32(e[24:]) != 64 || le.Uint32(e[28:]) != 5 {
		t.Errorf("RQE % x", e[:32])
	}
	if err := q.PostRecv(&driver.RecvWR{ID: 3}); !errors.Is(err, driver.ErrQueueFull) {
		t.Errorf("post to a full RQ: %v", err)
	}
	if len(f.writes) != 0 {
		t.Errorf("PostRecv wrote commands %v", f.writes)
	}
	if err := q.PostRecv(&driver.RecvWR{SGE: make([]driver.SGE, 3)}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("too many SGEs: %v", err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if err := q.PostRecv(&driver.RecvWR{}); !errors.Is(err, driver.ErrClosed) {
		t.Errorf("PostRecv after Close: %v", err)
	}
	if err := q.PostSend(&driver.SendWR{Opcode: driver.WRSend}); !errors.Is(err, driver.ErrClosed) {
		t.Errorf("PostSend after Close: %v", err)
	}
}

func TestPrepareQPRejects(t *testing.T) {
	t.Parallel()
	ctx := &context{}
	for name, req := range map[string]driver.QPRequest{
		"UD":     {Type: driver.QPTypeUD, Cap: driver.QPCap{MaxSendWR: 1}},
		"sge":    {Type: driver.QPTypeRC, Cap: driver.QPCap{MaxSendWR: 1, MaxSendSGE: 7}},
		"inline": {Type: driver.QPTypeRC, Cap: driver.QPCap{MaxSendWR: 1, MaxInlineData: 81}},
	} {
		if _, err := ctx.PrepareQP(&req); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	f := newFake(t)
	if _, err := (pendingQP{}).Commit(f, &driver.QPCore{}, qpResp(1, 4, 4, invalKey, 0x2000)); err == nil {
		t.Error("an unexported SQ was accepted")
	}
	if _, err := (pendingQP{}).Commit(f, &driver.QPCore{}, qpResp(1, 3, 4, 0x1000, 0x2000)); err == nil {
		t.Error("3 SQEs (not a power of two) accepted")
	}
}

func TestMRUdata(t *testing.T) {
	t.Parallel()
	c := &context{}
	in, out := c.MRUdata(driver.AccessLocalWrite)
	if len(in) != 8 || out != 8 {
		t.Fatalf("REG_MR udata %d in, %d out; want 8, 8", len(in), out)
	}
	for _, b := range in {
		if b != 0 {
			t.Fatalf("REG_MR request % x, want stag_key 0", in)
		}
	}
	if err := c.MRRegistered(1, make([]byte, 4)); err == nil {
		t.Error("a short REG_MR response was accepted")
	}
	if err := c.MRRegistered(1, make([]byte, 8)); err != nil {
		t.Error(err)
	}
}
