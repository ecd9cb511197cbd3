package irdmaoracle

import (
	"fmt"

	"github.com/gorping/gorping/test/oracle"
)

// Fixed addresses of the scenarios' registered buffers (MAP_FIXED in the harness), and
// the remote buffer RDMA scenarios name.
const (
	MRBase     = 0x7e0000000000
	MRStride   = 0x100000
	MRLen      = 4096
	RemoteAddr = 0x7f1122334000
	RemoteKey  = 0x2a2b2c
)

// Geometry of the library's queues, written out here from libirdma's sizing (and the
// kernel's, which has to agree) to place the CQEs' WQE indices as the device would.

func roundupPow2(n uint32) uint32 {
	r := uint32(1)
	for r < n {
		r <<= 1
	}
	return r
}

// Shift is the power of two of quanta a WQE of sge fragments and inline bytes takes
// (GEN_2).
func Shift(sge, inline uint32) uint32 {
	switch {
	case sge <= 1 && inline <= 8:
		return 0
	case sge < 4 && inline <= 39:
		return 1
	case sge < 8 && inline <= 101:
		return 2
	}
	return 3
}

func depth(wr, shift, rsvd uint32) uint32 {
	return max(roundupPow2(wr<<shift+rsvd), 8<<shift)
}

// SQQuanta is the send queue's ring of a QP created with caps; RQ its receive queue's
// WQEs and the quanta each takes.
func SQQuanta(c oracle.Caps) uint32 {
	return depth(c.MaxSendWR, Shift(c.MaxSendSGE+1, c.MaxInline), 258)
}
func RQ(c oracle.Caps) (wqes, mult uint32) {
	s := Shift(c.MaxRecvSGE, 0)
	return depth(c.MaxRecvWR, s, 1) >> s, 1 << s
}

// CQEntries is the ring of a CQ of depth cqe.
func CQEntries(cqe int) int { return max((cqe+1)*2, 4) }

// Quanta is what one send WR takes: by its fragments (SGEs and the immediate), or by its
// inline bytes.
func Quanta(w oracle.SendWR) uint32 {
	n := uint32(0)
	for _, g := range w.SGEs {
		n += g.Len
	}
	if w.Flags&oracle.FlagInline != 0 && w.Opcode != oracle.OpRDMARead {
		if n <= 8 {
			return 1
		}
		return min(2+(n-9)/31, 8)
	}
	f := uint32(len(w.SGEs))
	if w.Opcode == oracle.OpSendImm || w.Opcode == oracle.OpRDMAWriteImm {
		f++
	}
	return f/2 + 1
}

// Builder assembles a scenario and keeps what its CQEs need: each CQ's slots written,
// each QP's send ring (where the next WQE goes, NOPs to a chunk's end included) and
// receive ring.
type Builder struct {
	Sc        oracle.Scenario
	P         Params
	cqEntries map[int]int
	cqWritten map[int]int
	sq        map[int]*ring
	rq        map[int]*ring
}

type ring struct{ size, head, tail, mult uint32 }

func (r *ring) used() uint32 { return (r.head + r.size - r.tail) % r.size }

// NewBuilder starts a scenario with open, pd and MRs mr0..mr(nMR-1).
func NewBuilder(name string, p Params, nMR int) *Builder {
	b := &Builder{Sc: oracle.Scenario{Name: name, Driver: Driver{p}}, P: p,
		cqEntries: map[int]int{}, cqWritten: map[int]int{}, sq: map[int]*ring{}, rq: map[int]*ring{}}
	b.Add(oracle.Step{Kind: oracle.KOpen}, oracle.Step{Kind: oracle.KPD})
	for i := 0; i < nMR; i++ {
		b.Add(oracle.Step{Kind: oracle.KMR, ID: i, Addr: MRBase + uint64(i)*MRStride, Len: MRLen,
			Access: oracle.AccessLocalWrite | oracle.AccessRemoteWrite | oracle.AccessRemoteRead})
	}
	return b
}

func (b *Builder) Add(s ...oracle.Step) *Builder { b.Sc.Steps = append(b.Sc.Steps, s...); return b }

// CQ creates CQ id of depth cqe.
func (b *Builder) CQ(id, cqe int, withChannel bool) *Builder {
	b.cqEntries[id] = CQEntries(cqe)
	return b.Add(oracle.Step{Kind: oracle.KCQ, ID: id, CQE: cqe, WithChannel: withChannel})
}

// QP creates RC QP id on cq (send and receive) and moves it to RTS.
func (b *Builder) QP(id, cq int, c oracle.Caps) *Builder { return b.QP2(id, cq, cq, c) }

// QP2 creates RC QP id with its send and receive CQs, and moves it to RTS.
func (b *Builder) QP2(id, scq, rcq int, c oracle.Caps) *Builder {
	b.rings(id, c)
	return b.Add(oracle.Step{Kind: oracle.KQP, ID: id, SendCQ: scq, RecvCQ: rcq, Caps: c}, oracle.Step{Kind: oracle.KRTS, ID: id})
}

func (b *Builder) rings(id int, c oracle.Caps) {
	w, m := RQ(c)
	b.sq[id], b.rq[id] = &ring{size: SQQuanta(c)}, &ring{size: w, mult: m}
}

// Send posts ws as one chain on qp and returns the quantum index of each WQE (what a CQE
// completing it names); a WR the library refuses (the ring full) gets none and ends the
// chain, as its posting does.
func (b *Builder) Send(qp int, ws ...oracle.SendWR) []uint32 {
	r := b.sq[qp]
	var idx []uint32
	for _, w := range ws {
		q := Quanta(w)
		free := int(r.size) - int(r.used()) - 257
		avail := SQChunk - r.head%SQChunk
		pad := uint32(0)
		if q > avail {
			pad = avail
		}
		if int(q+pad) > free {
			break
		}
		r.head = (r.head + pad) % r.size
		idx = append(idx, r.head)
		r.head = (r.head + q) % r.size
	}
	b.Add(oracle.Step{Kind: oracle.KSend, ID: qp, Sends: ws, WantErr: len(idx) < len(ws)})
	return idx
}

// Recv posts ws as one chain on qp and returns each WQE's quantum index.
func (b *Builder) Recv(qp int, ws ...oracle.RecvWR) []uint32 {
	r := b.rq[qp]
	var idx []uint32
	for range ws {
		if r.used() == r.size-1 {
			break
		}
		idx = append(idx, r.head*r.mult)
		r.head = (r.head + 1) % r.size
	}
	b.Add(oracle.Step{Kind: oracle.KRecv, ID: qp, Recvs: ws, WantErr: len(idx) < len(ws)})
	return idx
}

// Poll polls cq for up to n completions.
func (b *Builder) Poll(cq, n int) *Builder {
	return b.Add(oracle.Step{Kind: oracle.KPoll, ID: cq, N: n})
}

// CQE is one 32-byte CQE as the device writes it.
type CQE struct {
	SQ       bool   // a send queue's (else the receive queue's)
	WQEIdx   uint32 // the quantum index of the WQE it completes
	Op       uint8  // the operation: a send WQE's opcode, a receive's IB opcode
	Length   uint32 // receive: the payload's bytes
	QPID     uint32 // word 2's qp_id
	Major    uint16 // error: the major code (1: flushed)
	Minor    uint16
	Error    bool
	Stag     uint32 // receive: an invalidated STag (0: none)
	Imm      uint32 // with HasImm: the immediate, in an extension CQE in the next slot
	HasImm   bool
	QP       int // whose completion context it carries; -1: none (a QP destroyed)
	SkipPeek bool
}

// CQE writes c as the next CQE of cq (and its extension after it).
func (b *Builder) CQE(cq int, c CQE) *Builder {
	e := b.cqEntries[cq]
	if e == 0 {
		panic(fmt.Sprintf("irdmaoracle: cqe for unknown cq %d", cq))
	}
	valid := func(n int) uint64 { return uint64(1 ^ (n/e)&1) }
	n := b.cqWritten[cq]
	bs := make([]byte, 32)
	le.PutUint64(bs[0:], uint64(c.Length))
	le.PutUint64(bs[16:], uint64(c.QPID)<<32|uint64(c.Stag))
	w3 := uint64(c.Minor) | uint64(c.Major)<<16 | uint64(c.WQEIdx&0x7fff)<<32 | uint64(c.Op&0x3f)<<56 | valid(n)<<63
	if c.SQ {
		w3 |= 1 << 62
	}
	if c.Error {
		w3 |= 1 << 55
	}
	if c.Stag != 0 {
		w3 |= 1 << 53
	}
	if c.HasImm {
		w3 |= 1 << 50
		x := make([]byte, 32)
		le.PutUint64(x[0:], uint64(c.Imm))
		le.PutUint64(x[24:], 1<<62|valid(n+1)<<63)
		// The extension first: the device's CQE is whole before its valid bit.
		b.Add(oracle.Step{Kind: oracle.KCQE, ID: cq, Slot: (n + 1) % e, Bytes: x, Ref: -1})
		b.cqWritten[cq]++
	}
	b.cqWritten[cq]++
	le.PutUint64(bs[24:], w3)
	return b.Add(oracle.Step{Kind: oracle.KCQE, ID: cq, Slot: n % e, Bytes: bs, Ref: c.QP})
}

// Req is a successful send CQE of qp for the WQE at idx with opcode op.
func (b *Builder) Req(qp int, idx uint32, op uint8) CQE {
	return CQE{SQ: true, WQEIdx: idx, Op: op, QPID: b.P.FirstQPN + uint32(qp), QP: qp}
}

// Resp is a receive CQE of qp for the WQE at idx.
func (b *Builder) Resp(qp int, idx uint32, length uint32) CQE {
	return CQE{WQEIdx: idx, Op: 0x04, Length: length, QPID: b.P.FirstQPN + uint32(qp), QP: qp} // IB SEND_ONLY
}

// Send opcodes (the WQE's, as a send CQE reports them).
const (
	OpWrite = 0x00
	OpRead  = 0x01
	OpSend  = 0x03
)

func sge0(mr int, off uint64, n uint32) []oracle.SGE {
	return []oracle.SGE{{MR: mr, Off: off, Len: n}}
}

var stdCaps = oracle.Caps{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInline: 64}

// ParamSets are the devices every scenario runs on: an E810 with current firmware (CQ
// resize: the shadow area apart), one with firmware before it (the shadow area after the
// ring), and the first at 16 and 64 KiB pages.
func ParamSets() map[string]Params {
	e := DefaultParams()
	old := e
	old.Features = 0
	k16, k64 := e, old
	k16.PageSize, k64.PageSize = 16<<10, 64<<10
	return map[string]Params{"e810": e, "e810-oldfw": old, "e810@16k": k16, "e810-oldfw@64k": k64}
}

// Scenarios returns every scenario on p, named "<set>/<name>"; on a set with larger pages
// those whose sizing or layout the page size can change.
func Scenarios(set string, p Params) []oracle.Scenario {
	var out []oracle.Scenario
	add := func(b *Builder) {
		switch name := b.Sc.Name; {
		case p.PageSize > 4096 && name != "context" && name != "cq-depths" && name != "qp-caps" && name != "send-kinds" && name != "pings":
			return
		default:
			b.Sc.Name = set + "/" + name
			out = append(out, b.Sc)
		}
	}

	// context: creation, a port query, teardown.
	add(NewBuilder("context", p, 0).Add(oracle.Step{Kind: oracle.KQueryPort, Port: 1}, oracle.Step{Kind: oracle.KDeallocPD}))

	// cq-depths: CREATE_CQ for several depths (rings of one page and more), one with a
	// completion channel.
	b := NewBuilder("cq-depths", p, 0).Add(oracle.Step{Kind: oracle.KChannel})
	for i, d := range []int{1, 2, 15, 16, 63, 64, 100, 255, 1000} {
		b.CQ(i, d, i == 3)
	}
	b.Add(oracle.Step{Kind: oracle.KDestroyCQ, ID: 0})
	add(b)

	// qp-caps: CREATE_QP sizing for several caps (SGEs, inline data, depths).
	b = NewBuilder("qp-caps", p, 0).CQ(0, 63, false)
	for i, c := range []oracle.Caps{stdCaps, {MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1},
		{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 2, MaxRecvSGE: 2}, {MaxSendWR: 100, MaxSendSGE: 3, MaxRecvSGE: 1, MaxInline: 28},
		{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 4, MaxRecvSGE: 4, MaxInline: 96}, {MaxSendWR: 128, MaxRecvWR: 32, MaxSendSGE: 6, MaxRecvSGE: 5},
		{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 13, MaxRecvSGE: 13, MaxInline: 101}, {MaxSendWR: 1000, MaxRecvWR: 1000, MaxSendSGE: 1, MaxRecvSGE: 1}} {
		b.rings(i, c)
		b.Add(oracle.Step{Kind: oracle.KQP, ID: i, SendCQ: 0, RecvCQ: 0, Caps: c, SigAll: i == 2})
	}
	b.Add(oracle.Step{Kind: oracle.KDestroyQP, ID: 1})
	add(b)

	// recv: RECV with one SGE, a chain, two and three SGEs in a four-SGE RQ (quanta of four).
	b = NewBuilder("recv", p, 2).CQ(0, 15, false).QP(0, 0, stdCaps).QP(1, 0, oracle.Caps{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 4})
	b.Recv(0, oracle.RecvWR{WRID: 1, SGEs: sge0(0, 0, 4096)})
	b.Recv(0, oracle.RecvWR{WRID: 2, SGEs: sge0(0, 64, 100)}, oracle.RecvWR{WRID: 3, SGEs: sge0(1, 0, 200)}, oracle.RecvWR{WRID: 4, SGEs: sge0(1, 8, 8)})
	b.Recv(1, oracle.RecvWR{WRID: 5, SGEs: []oracle.SGE{{MR: 0, Off: 0, Len: 16}, {MR: 1, Off: 32, Len: 48}, {MR: 0, Off: 1024, Len: 1000}}})
	b.Recv(1, oracle.RecvWR{WRID: 6, SGEs: []oracle.SGE{{MR: 0, Off: 0, Len: 16}, {MR: 1, Off: 32, Len: 48}}})
	add(b)

	add(sendKinds(p))
	add(inline(p))
	add(sqWrap(p))
	add(cqeSuccess(p))
	add(cqeErrors(p))
	add(cqWrap(p))
	add(arm(p))
	add(twoQPs(p))
	add(teardown(p))
	add(postErrors(p))
	add(qpDestroyClean(p))
	add(pings(p))
	return out
}

// sendKinds: signaled and unsignaled SEND, SEND with immediate, solicited, fenced, two
// SGEs (an even fragment count ends with an empty fragment), RDMA WRITE (+imm), RDMA
// READ, a zero-length SEND, a chain, and WRs of 3 and 4 quanta that NOPs pad to the next
// 8-quanta chunk.
func sendKinds(p Params) *Builder {
	b := NewBuilder("send-kinds", p, 2).CQ(0, 63, false).QP(0, 0, oracle.Caps{MaxSendWR: 32, MaxRecvWR: 16, MaxSendSGE: 6, MaxRecvSGE: 1, MaxInline: 64})
	b.Send(0, oracle.SendWR{WRID: 10, Opcode: oracle.OpSend, Flags: oracle.FlagSignaled, SGEs: sge0(0, 0, 8)})
	b.Send(0, oracle.SendWR{WRID: 11, Opcode: oracle.OpSend, SGEs: sge0(0, 16, 100)})
	b.Send(0, oracle.SendWR{WRID: 12, Opcode: oracle.OpSendImm, Flags: oracle.FlagSignaled | oracle.FlagSolicited, Imm: 0xdeadbeef, SGEs: sge0(1, 0, 64)})
	b.Send(0, oracle.SendWR{WRID: 13, Opcode: oracle.OpSend, Flags: oracle.FlagSignaled | oracle.FlagFence, SGEs: []oracle.SGE{{MR: 0, Off: 0, Len: 32}, {MR: 1, Off: 64, Len: 32}}})
	b.Send(0, oracle.SendWR{WRID: 14, Opcode: oracle.OpRDMAWrite, Flags: oracle.FlagSignaled, RAddr: RemoteAddr, RKey: RemoteKey, SGEs: sge0(0, 0, 4096)})
	b.Send(0, oracle.SendWR{WRID: 15, Opcode: oracle.OpRDMAWriteImm, Flags: oracle.FlagSignaled | oracle.FlagSolicited, Imm: 7, RAddr: RemoteAddr + 8, RKey: RemoteKey, SGEs: sge0(1, 0, 16)})
	b.Send(0, oracle.SendWR{WRID: 16, Opcode: oracle.OpRDMARead, Flags: oracle.FlagSignaled, RAddr: RemoteAddr, RKey: RemoteKey, SGEs: sge0(1, 128, 64)})
	b.Send(0, oracle.SendWR{WRID: 17, Opcode: oracle.OpSend, Flags: oracle.FlagSignaled, SGEs: sge0(0, 0, 0)})
	b.Send(0, oracle.SendWR{WRID: 18, Opcode: oracle.OpSend, Flags: oracle.FlagSignaled})
	var five, six []oracle.SGE
	for i := 0; i < 6; i++ {
		g := oracle.SGE{MR: i % 2, Off: uint64(100 * i), Len: uint32(10 + i)}
		if i < 5 {
			five = append(five, g)
		}
		six = append(six, g)
	}
	b.Send(0, oracle.SendWR{WRID: 19, Opcode: oracle.OpSend, Flags: oracle.FlagSignaled, SGEs: five})
	b.Send(0, oracle.SendWR{WRID: 20, Opcode: oracle.OpRDMAWrite, RAddr: RemoteAddr, RKey: RemoteKey, SGEs: six})
	b.Send(0, oracle.SendWR{WRID: 21, Opcode: oracle.OpRDMARead, Flags: oracle.FlagSignaled, RAddr: RemoteAddr, RKey: RemoteKey, SGEs: six})
	b.Send(0,
		oracle.SendWR{WRID: 22, Opcode: oracle.OpSend, SGEs: sge0(0, 0, 8)},
		oracle.SendWR{WRID: 23, Opcode: oracle.OpRDMAWrite, RAddr: RemoteAddr, RKey: RemoteKey, SGEs: sge0(0, 8, 8)},
		oracle.SendWR{WRID: 24, Opcode: oracle.OpSend, Flags: oracle.FlagSignaled, SGEs: sge0(0, 16, 8)})
	return b
}

// inline: SEND and RDMA WRITE inline of sizes up to the device's limit (and the quanta
// boundaries 8/9, 39/40, 70/71), from one and from two SGEs.
func inline(p Params) *Builder {
	b := NewBuilder("inline", p, 2).CQ(0, 63, false).QP(0, 0, oracle.Caps{MaxSendWR: 32, MaxRecvWR: 16, MaxSendSGE: 2, MaxRecvSGE: 1, MaxInline: 101})
	for i, n := range []uint32{0, 1, 8, 9, 12, 31, 39, 40, 64, 70, 71, 95, 101} {
		b.Send(0, oracle.SendWR{WRID: uint64(100 + i), Opcode: oracle.OpSend, Flags: oracle.FlagSignaled | oracle.FlagInline, SGEs: sge0(0, uint64(i), n)})
	}
	b.Send(0, oracle.SendWR{WRID: 200, Opcode: oracle.OpSendImm, Flags: oracle.FlagSignaled | oracle.FlagInline, Imm: 0x1234, SGEs: sge0(1, 3, 20)})
	b.Send(0, oracle.SendWR{WRID: 201, Opcode: oracle.OpRDMAWrite, Flags: oracle.FlagSignaled | oracle.FlagInline, RAddr: RemoteAddr, RKey: RemoteKey, SGEs: sge0(1, 0, 40)})
	b.Send(0, oracle.SendWR{WRID: 202, Opcode: oracle.OpSend, Flags: oracle.FlagSignaled | oracle.FlagInline, SGEs: []oracle.SGE{{MR: 0, Off: 5, Len: 7}, {MR: 1, Off: 50, Len: 33}}})
	b.Send(0, oracle.SendWR{WRID: 203, Opcode: oracle.OpRDMARead, Flags: oracle.FlagSignaled | oracle.FlagInline, RAddr: RemoteAddr, RKey: RemoteKey, SGEs: sge0(1, 0, 40)})
	return b
}

// sqWrap posts through a small send queue in chains of four until its ring has gone
// round three times, the last WR of each chain signaled and completed: the valid bit
// flips each lap, each 128-quanta chunk is cleared ahead, 2-quanta inline WRs get NOPs at
// chunk ends, and the CQ wraps too.
func sqWrap(p Params) *Builder {
	caps := oracle.Caps{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInline: 39}
	b := NewBuilder("sq-wrap", p, 1).CQ(0, 15, false).QP(0, 0, caps)
	r := b.sq[0]
	for i, q := 0, uint32(0); q < 3*r.size; i++ {
		var ws []oracle.SendWR
		for j := 0; j < 4; j++ {
			w := oracle.SendWR{WRID: uint64(1000 + 4*i + j), Opcode: oracle.OpSend, SGEs: sge0(0, uint64(j), 8)}
			if (i+j)%3 == 1 {
				w.Flags |= oracle.FlagInline
				w.SGEs = sge0(0, 0, 30)
			}
			if j == 3 {
				w.Flags |= oracle.FlagSignaled
			}
			ws = append(ws, w)
		}
		before := r.head
		idx := b.Send(0, ws...)
		q += (r.head + r.size - before) % r.size
		b.CQE(0, b.Req(0, idx[3], OpSend))
		r.tail = (idx[3] + Quanta(ws[3])) % r.size
		b.Poll(0, 4)
	}
	return b
}

// cqeSuccess decodes successful CQEs of every kind: sends (an unsignaled one completed
// by a later one's CQE), receives with their length, with immediate data in an extension
// CQE, an RDMA WRITE with immediate, an invalidated STag; a CQE of a destroyed QP (no
// completion context) in between.
func cqeSuccess(p Params) *Builder {
	b := NewBuilder("cqe-success", p, 2).CQ(0, 31, false).QP(0, 0, stdCaps)
	var rs []oracle.RecvWR
	for i := 1; i <= 6; i++ {
		rs = append(rs, oracle.RecvWR{WRID: uint64(i), SGEs: sge0(1, uint64(512*i), 512)})
	}
	ri := b.Recv(0, rs...)
	s := b.Send(0, oracle.SendWR{WRID: 10, Opcode: oracle.OpSend, Flags: oracle.FlagSignaled, SGEs: sge0(0, 0, 8)})
	b.Send(0, oracle.SendWR{WRID: 11, Opcode: oracle.OpRDMAWrite, RAddr: RemoteAddr, RKey: RemoteKey, SGEs: sge0(0, 0, 16)})
	r := b.Send(0, oracle.SendWR{WRID: 12, Opcode: oracle.OpRDMARead, Flags: oracle.FlagSignaled, RAddr: RemoteAddr, RKey: RemoteKey, SGEs: sge0(0, 64, 64)})
	wi := b.Send(0, oracle.SendWR{WRID: 13, Opcode: oracle.OpRDMAWriteImm, Flags: oracle.FlagSignaled, Imm: 0x55, RAddr: RemoteAddr, RKey: RemoteKey, SGEs: sge0(0, 0, 16)})
	si := b.Send(0, oracle.SendWR{WRID: 14, Opcode: oracle.OpSendImm, Flags: oracle.FlagSignaled, Imm: 0x66, SGEs: sge0(0, 0, 16)})
	b.CQE(0, b.Req(0, s[0], OpSend))
	b.CQE(0, b.Req(0, r[0], OpRead)) // the unsignaled WRITE before it is done too
	b.CQE(0, b.Req(0, wi[0], OpWrite))
	b.CQE(0, b.Req(0, si[0], OpSend))
	b.Poll(0, 8)
	b.CQE(0, b.Resp(0, ri[0], 100))
	c := b.Resp(0, ri[1], 200)
	c.Op, c.HasImm, c.Imm = 0x05, true, 0x01020304 // SEND_ONLY_WITH_IMMEDIATE
	b.CQE(0, c)
	c = b.Resp(0, ri[2], 0)
	c.Op, c.HasImm, c.Imm = 0x0b, true, 0x0a0b0c0d // RDMA_WRITE_ONLY_WITH_IMMEDIATE
	b.CQE(0, c)
	c = b.Resp(0, ri[3], 400)
	c.Stag = 0xabcdef
	b.CQE(0, c)
	b.Poll(0, 2).Poll(0, 8)
	gone := b.Resp(0, ri[4], 1)
	gone.QP = -1
	b.CQE(0, gone)
	b.CQE(0, b.Resp(0, ri[4], 50))
	b.Poll(0, 8)
	return b
}

// cqeErrors: a flush CQE of every minor code, each for a QP of its own with three sends
// and two receives outstanding: the library completes the failed WQE with the code's
// status and every other with WR_FLUSH_ERR from the one CQE, read again; an error that is
// no flush (GENERAL_ERR, the codes as vendor_err); a receive flush CQE; a flush CQE of a
// queue with nothing left.
func cqeErrors(p Params) *Builder {
	b := NewBuilder("cqe-errors", p, 1).CQ(0, 63, false)
	caps := oracle.Caps{MaxSendWR: 8, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}
	for i, minor := range []uint16{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11} {
		b.QP(i, 0, caps)
		b.Recv(i, oracle.RecvWR{WRID: uint64(600 + i), SGEs: sge0(0, 0, 64)}, oracle.RecvWR{WRID: uint64(650 + i), SGEs: sge0(0, 64, 64)})
		idx := b.Send(i,
			oracle.SendWR{WRID: uint64(500 + i), Opcode: oracle.OpSend, Flags: oracle.FlagSignaled, SGEs: sge0(0, 0, 8)},
			oracle.SendWR{WRID: uint64(700 + i), Opcode: oracle.OpRDMAWrite, RAddr: RemoteAddr, RKey: RemoteKey, SGEs: sge0(0, 0, 8)},
			oracle.SendWR{WRID: uint64(800 + i), Opcode: oracle.OpRDMARead, Flags: oracle.FlagSignaled, RAddr: RemoteAddr, RKey: RemoteKey, SGEs: sge0(0, 0, 8)})
		c := b.Req(i, idx[0], OpSend)
		c.Error, c.Major, c.Minor = true, 1, minor
		b.CQE(0, c).Poll(0, 1).Poll(0, 8)
		r := b.Resp(i, 0, 0)
		r.Error, r.Major, r.Minor = true, 1, 1
		b.CQE(0, r).Poll(0, 8)
	}
	// An error that is not a flush: GENERAL_ERR, the codes in vendor_err; the WRs after
	// it stay until their own CQEs.
	n := 12
	b.QP(n, 0, caps)
	idx := b.Send(n, oracle.SendWR{WRID: 900, Opcode: oracle.OpSend, Flags: oracle.FlagSignaled, SGEs: sge0(0, 0, 8)},
		oracle.SendWR{WRID: 901, Opcode: oracle.OpSend, Flags: oracle.FlagSignaled, SGEs: sge0(0, 0, 8)})
	c := b.Req(n, idx[0], OpSend)
	c.Error, c.Major, c.Minor = true, 0x8029, 0x12
	b.CQE(0, c).CQE(0, b.Req(n, idx[1], OpSend)).Poll(0, 8)
	// A flush CQE of a receive queue with nothing posted: read, no completion.
	r := b.Resp(n, 0, 0)
	r.Error, r.Major, r.Minor = true, 1, 1
	b.CQE(0, r).Poll(0, 8)
	return b
}

// cqWrap: five laps over the smallest CQ (the valid bit flips each lap), polled dry and
// once more, and an extension CQE that lies across the ring's end.
func cqWrap(p Params) *Builder {
	b := NewBuilder("cq-wrap", p, 1).CQ(0, 1, false).QP(0, 0, oracle.Caps{MaxSendWR: 8, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1})
	wr := uint64(700)
	e := b.cqEntries[0]
	for lap := 0; lap < 5; lap++ {
		for i := 0; i < e; i++ {
			idx := b.Recv(0, oracle.RecvWR{WRID: wr, SGEs: sge0(0, 0, 256)})
			wr++
			b.CQE(0, b.Resp(0, idx[0], uint32(10*lap+i+1)))
			if i == 1 {
				b.Poll(0, 1)
			}
		}
		b.Poll(0, 8).Poll(0, 8)
	}
	// Three CQEs, then one with immediate whose extension is the next lap's slot 0.
	for i := 0; i < e-1; i++ {
		idx := b.Recv(0, oracle.RecvWR{WRID: wr, SGEs: sge0(0, 0, 256)})
		wr++
		b.CQE(0, b.Resp(0, idx[0], 7))
	}
	b.Poll(0, 8)
	idx := b.Recv(0, oracle.RecvWR{WRID: wr, SGEs: sge0(0, 0, 256)})
	c := b.Resp(0, idx[0], 9)
	c.Op, c.HasImm, c.Imm = 0x05, true, 0xfeedf00d
	b.CQE(0, c).Poll(0, 8).Poll(0, 8)
	return b
}

// arm: arms for all and for solicited completions, an arm while armed (widened or
// deferred to the event), events.
func arm(p Params) *Builder {
	b := NewBuilder("arm", p, 1).Add(oracle.Step{Kind: oracle.KChannel}).CQ(0, 15, true).QP(0, 0, stdCaps)
	b.Add(oracle.Step{Kind: oracle.KArm, ID: 0})
	idx := b.Send(0, oracle.SendWR{WRID: 1, Opcode: oracle.OpSend, Flags: oracle.FlagSignaled, SGEs: sge0(0, 0, 8)})
	b.CQE(0, b.Req(0, idx[0], OpSend))
	b.Add(oracle.Step{Kind: oracle.KEvent, ID: 0}).Poll(0, 4)
	b.Add(oracle.Step{Kind: oracle.KArm, ID: 0, Solicited: true})
	b.Add(oracle.Step{Kind: oracle.KArm, ID: 0})                  // widened now
	b.Add(oracle.Step{Kind: oracle.KArm, ID: 0, Solicited: true}) // deferred to the event
	idx = b.Send(0, oracle.SendWR{WRID: 2, Opcode: oracle.OpSend, Flags: oracle.FlagSignaled, SGEs: sge0(0, 0, 8)})
	b.CQE(0, b.Req(0, idx[0], OpSend))
	b.Add(oracle.Step{Kind: oracle.KEvent, ID: 0}).Poll(0, 4)
	b.Add(oracle.Step{Kind: oracle.KArm, ID: 0})
	b.Add(oracle.Step{Kind: oracle.KArm, ID: 0})
	for i := 0; i < 5; i++ {
		b.Add(oracle.Step{Kind: oracle.KArm, ID: 0}) // the sequence number wraps at 4
	}
	b.Poll(0, 4)
	return b
}

// twoQPs: two QPs share one CQ; completions of both interleave, found by their context.
func twoQPs(p Params) *Builder {
	b := NewBuilder("two-qps", p, 2).CQ(0, 31, false).QP(0, 0, stdCaps).QP(1, 0, stdCaps)
	r0 := b.Recv(0, oracle.RecvWR{WRID: 100, SGEs: sge0(0, 0, 256)}, oracle.RecvWR{WRID: 101, SGEs: sge0(0, 256, 256)})
	r1 := b.Recv(1, oracle.RecvWR{WRID: 200, SGEs: sge0(1, 0, 256)}, oracle.RecvWR{WRID: 201, SGEs: sge0(1, 256, 256)})
	for i := 0; i < 3; i++ {
		a := b.Send(0, oracle.SendWR{WRID: uint64(110 + i), Opcode: oracle.OpSend, Flags: oracle.FlagSignaled, SGEs: sge0(0, 0, 16)})
		c := b.Send(1, oracle.SendWR{WRID: uint64(210 + i), Opcode: oracle.OpRDMAWrite, Flags: oracle.FlagSignaled | oracle.FlagInline, RAddr: RemoteAddr, RKey: RemoteKey, SGEs: sge0(1, 0, 16)})
		b.CQE(0, b.Req(1, c[0], OpWrite))
		b.CQE(0, b.Req(0, a[0], OpSend))
	}
	b.CQE(0, b.Resp(1, r1[0], 11)).CQE(0, b.Resp(0, r0[0], 22)).CQE(0, b.Resp(0, r0[1], 33)).CQE(0, b.Resp(1, r1[1], 44))
	b.Poll(0, 3).Poll(0, 16)
	return b
}

// teardown: every object created, then destroyed in the usual order.
func teardown(p Params) *Builder {
	b := NewBuilder("teardown", p, 2).Add(oracle.Step{Kind: oracle.KChannel}).CQ(0, 15, true).CQ(1, 15, false)
	b.Add(oracle.Step{Kind: oracle.KQP, ID: 0, SendCQ: 0, RecvCQ: 1, Caps: stdCaps})
	b.Add(oracle.Step{Kind: oracle.KDestroyQP, ID: 0}, oracle.Step{Kind: oracle.KDestroyCQ, ID: 1}, oracle.Step{Kind: oracle.KDestroyCQ, ID: 0},
		oracle.Step{Kind: oracle.KDereg, ID: 1}, oracle.Step{Kind: oracle.KDereg, ID: 0}, oracle.Step{Kind: oracle.KDeallocPD})
	return b
}

// postErrors: a send on a QP not yet in RTS (the library posts it), posts it refuses (a
// full send queue, which it still rings for; too many SGEs; an RDMA WRITE inline beyond
// max_inline_data; a full receive queue), each between posts that succeed.
func postErrors(p Params) *Builder {
	caps := oracle.Caps{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInline: 16}
	b := NewBuilder("post-errors", p, 1).CQ(0, 15, false)
	b.rings(0, caps)
	b.Add(oracle.Step{Kind: oracle.KQP, ID: 0, SendCQ: 0, RecvCQ: 0, Caps: caps})
	b.Send(0, oracle.SendWR{WRID: 1, Opcode: oracle.OpSend, SGEs: sge0(0, 0, 8)})
	b.Add(oracle.Step{Kind: oracle.KRTS, ID: 0})
	send := func(id uint64, flags int, sges int) oracle.SendWR {
		w := oracle.SendWR{WRID: id, Opcode: oracle.OpSend, Flags: flags}
		for i := 0; i < sges; i++ {
			w.SGEs = append(w.SGEs, oracle.SGE{MR: 0, Off: uint64(64 * i), Len: 8})
		}
		return w
	}
	r := b.sq[0]
	var last []uint32
	for i := 0; ; i++ {
		free := int(r.size) - int(r.used()) - 257
		if free < 1 {
			break
		}
		last = b.Send(0, send(uint64(10+i), 0, 1))
	}
	b.Send(0, send(20, 0, 1)) // full: refused, and rung
	b.CQE(0, b.Req(0, last[0], OpSend)).Poll(0, 4)
	r.tail = (last[0] + 1) % r.size
	b.Add(oracle.Step{Kind: oracle.KSend, ID: 0, Sends: []oracle.SendWR{send(21, oracle.FlagSignaled, 2)}, WantErr: true})
	b.Add(oracle.Step{Kind: oracle.KSend, ID: 0, Sends: []oracle.SendWR{{WRID: 22, Opcode: oracle.OpRDMAWrite, Flags: oracle.FlagInline, RAddr: RemoteAddr, RKey: RemoteKey, SGEs: sge0(0, 0, 17)}}, WantErr: true})
	b.Send(0, send(23, oracle.FlagSignaled, 1))
	for i := 0; i < 5; i++ {
		b.Recv(0, oracle.RecvWR{WRID: uint64(30 + i), SGEs: sge0(0, 0, 64)})
	}
	return b
}

// qpDestroyClean: two QPs share a CQ; QP 0 is destroyed while CQEs of both are in it: the
// library clears QP 0's completion contexts, and polling returns QP 1's completions only.
func qpDestroyClean(p Params) *Builder {
	b := NewBuilder("qp-destroy-clean", p, 2).CQ(0, 7, false).QP(0, 0, stdCaps).QP(1, 0, stdCaps)
	var r0, r1 []oracle.RecvWR
	for i := 0; i < 4; i++ {
		r0 = append(r0, oracle.RecvWR{WRID: uint64(100 + i), SGEs: sge0(0, uint64(64*i), 64)})
		r1 = append(r1, oracle.RecvWR{WRID: uint64(200 + i), SGEs: sge0(1, uint64(64*i), 64)})
	}
	i0, i1 := b.Recv(0, r0...), b.Recv(1, r1...)
	s0 := b.Send(0, oracle.SendWR{WRID: 110, Opcode: oracle.OpSend, Flags: oracle.FlagSignaled, SGEs: sge0(0, 0, 8)})
	b.CQE(0, b.Resp(1, i1[0], 10)).CQE(0, b.Resp(0, i0[0], 11)).Poll(0, 1)
	b.CQE(0, b.Resp(0, i0[1], 12)).CQE(0, b.Req(0, s0[0], OpSend)).CQE(0, b.Resp(1, i1[1], 13))
	b.Add(oracle.Step{Kind: oracle.KDestroyQP, ID: 0})
	b.Poll(0, 8)
	return b
}

// pings is rping's exact sequence, for three pings, over two QPs (client 0, server 1) on
// CQs of their own, in event mode: the client's advert SEND and the server's RDMA READ,
// go-ahead SEND, RDMA WRITE and go-ahead, each completed by its CQE and the receive of the
// other side, every receive posted again, the CQs armed before each wait.
func pings(p Params) *Builder {
	caps := oracle.Caps{MaxSendWR: 16, MaxRecvWR: 2, MaxSendSGE: 1, MaxRecvSGE: 1}
	b := NewBuilder("pings", p, 4).Add(oracle.Step{Kind: oracle.KChannel}).CQ(0, 32, true).CQ(1, 32, true)
	b.QP2(0, 0, 0, caps).QP2(1, 1, 1, caps)
	recv := func(qp int, id uint64) uint32 { return b.Recv(qp, oracle.RecvWR{WRID: id, SGEs: sge0(qp*2, 0, 16)})[0] }
	send := func(qp int, w oracle.SendWR) uint32 { return b.Send(qp, w)[0] }
	advert := func(qp int, id uint64) uint32 {
		return send(qp, oracle.SendWR{WRID: id, Opcode: oracle.OpSend, Flags: oracle.FlagSignaled, SGEs: sge0(qp*2+1, 0, 16)})
	}
	wait := func(cq int) {
		b.Add(oracle.Step{Kind: oracle.KArm, ID: cq})
		b.Poll(cq, 16).Add(oracle.Step{Kind: oracle.KEvent, ID: cq})
	}
	srv := recv(1, 1)
	cli := recv(0, 2)
	for i := 0; i < 3; i++ {
		// Client: the advert of its start buffer.
		s := advert(0, 10)
		b.CQE(0, b.Req(0, s, OpSend))
		wait(0)
		b.Poll(0, 16)
		// Server: the advert arrives, it READs the buffer.
		b.CQE(1, b.Resp(1, srv, 16))
		wait(1)
		b.Poll(1, 16)
		srv = recv(1, 1)
		r := send(1, oracle.SendWR{WRID: 20, Opcode: oracle.OpRDMARead, Flags: oracle.FlagSignaled, RAddr: RemoteAddr, RKey: RemoteKey, SGEs: sge0(2, 0, 64)})
		b.CQE(1, b.Req(1, r, OpRead))
		b.Poll(1, 16)
		// The go-ahead.
		g := advert(1, 21)
		b.CQE(1, b.Req(1, g, OpSend))
		b.CQE(0, b.Resp(0, cli, 16))
		b.Poll(1, 16).Poll(0, 16)
		cli = recv(0, 2)
		// Client: the advert of its sink; server WRITEs and goes ahead.
		s = advert(0, 11)
		b.CQE(0, b.Req(0, s, OpSend))
		b.CQE(1, b.Resp(1, srv, 16))
		b.Poll(0, 16).Poll(1, 16)
		srv = recv(1, 1)
		w := send(1, oracle.SendWR{WRID: 22, Opcode: oracle.OpRDMAWrite, Flags: oracle.FlagSignaled, RAddr: RemoteAddr, RKey: RemoteKey, SGEs: sge0(2, 0, 64)})
		b.CQE(1, b.Req(1, w, OpWrite))
		b.Poll(1, 16)
		g = advert(1, 23)
		b.CQE(1, b.Req(1, g, OpSend))
		b.CQE(0, b.Resp(0, cli, 16))
		b.Poll(1, 16)
		wait(0)
		b.Poll(0, 16)
		cli = recv(0, 2)
	}
	return b
}
