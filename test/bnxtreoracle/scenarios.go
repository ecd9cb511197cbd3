package bnxtreoracle

import (
	"encoding/binary"
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

// CQE types and statuses (the device's: libbnxt_re's enums).
const (
	TypeSend   = 0x0
	TypeRecvRC = 0x1
	TypeTerm   = 0xe

	FlagImm  = 0x02
	FlagInv  = 0x04
	FlagRDMA = 0x08
)

// ReqStatuses are the requester CQE statuses libbnxt_re maps (1..0x0b), and one it does
// not know; RspStatuses the responder's (0x08, HW_FLUSH, makes no completion).
var (
	ReqStatuses = []uint8{0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x3f}
	RspStatuses = []uint8{0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x2e}
)

// Builder assembles a scenario and keeps what its CQEs need: each CQ's slot and phase,
// each QP's software index of the next send (the CQE's con_indx).
type Builder struct {
	Sc        oracle.Scenario
	P         Params
	cqEntries map[int]int
	cqWritten map[int]int
	sent      map[int]int // qp → sends posted
	nwr       map[int]int // qp → software entries of its send queue
}

// NewBuilder starts a scenario with open, pd and MRs mr0..mr(nMR-1).
func NewBuilder(name string, p Params, nMR int) *Builder {
	b := &Builder{Sc: oracle.Scenario{Name: name, Driver: Driver{p}}, P: p,
		cqEntries: map[int]int{}, cqWritten: map[int]int{}, sent: map[int]int{}, nwr: map[int]int{}}
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
	b.cqEntries[id] = int(b.P.CQEntries(uint32(cqe)))
	return b.Add(oracle.Step{Kind: oracle.KCQ, ID: id, CQE: cqe, WithChannel: withChannel})
}

// QP creates RC QP id on cq (send and receive) and moves it to RTS.
func (b *Builder) QP(id, cq int, c oracle.Caps) *Builder {
	return b.QP2(id, cq, cq, c)
}

// QP2 creates RC QP id with its send and receive CQs, and moves it to RTS.
func (b *Builder) QP2(id, scq, rcq int, c oracle.Caps) *Builder {
	b.nwr[id] = int(b.P.SQSize(c.MaxSendWR, c.MaxSendSGE, c.MaxInline).NWR)
	return b.Add(oracle.Step{Kind: oracle.KQP, ID: id, SendCQ: scq, RecvCQ: rcq, Caps: c}, oracle.Step{Kind: oracle.KRTS, ID: id})
}

// Send posts ws as one chain on qp and returns the con_indx a CQE completing each of them
// (and those before it) carries.
func (b *Builder) Send(qp int, ws ...oracle.SendWR) []uint32 {
	idx := make([]uint32, len(ws))
	for i := range ws {
		b.sent[qp]++
		idx[i] = uint32(b.sent[qp] % b.nwr[qp])
	}
	b.Add(oracle.Step{Kind: oracle.KSend, ID: qp, Sends: ws})
	return idx
}

// Recv posts ws as one chain on qp.
func (b *Builder) Recv(qp int, ws ...oracle.RecvWR) *Builder {
	return b.Add(oracle.Step{Kind: oracle.KRecv, ID: qp, Recvs: ws})
}

// Poll polls cq for up to n completions.
func (b *Builder) Poll(cq, n int) *Builder {
	return b.Add(oracle.Step{Kind: oracle.KPoll, ID: cq, N: n})
}

// CQE is one 32-byte CQE: a requester's (Send: qp_handle, con_indx) or a responder's
// (length, immediate, qp_handle), and the bcqe word (phase from the CQ's lap).
type CQE struct {
	Type   uint8
	Status uint8
	Flags  uint16
	ConIdx uint32 // requester
	Length uint32 // responder
	Imm    uint32 // responder: imm_key (host order)
	QP     int    // whose handle it carries; -1: none (a stale CQE)
	Handle uint64 // with QP -1: the qp_handle as is
}

// CQE writes c as the next CQE of cq.
func (b *Builder) CQE(cq int, c CQE) *Builder {
	n, e := b.cqWritten[cq], b.cqEntries[cq]
	if e == 0 {
		panic(fmt.Sprintf("bnxtreoracle: cqe for unknown cq %d", cq))
	}
	b.cqWritten[cq]++
	phase := uint32(1) ^ uint32(n/e)&1
	bs := make([]byte, 32)
	le := binary.LittleEndian
	switch c.Type {
	case TypeSend, TypeTerm:
		le.PutUint64(bs[0:], c.Handle)
		le.PutUint32(bs[8:], c.ConIdx)
	default:
		le.PutUint32(bs[0:], c.Length)
		le.PutUint32(bs[4:], c.Imm)
		le.PutUint64(bs[8:], c.Handle)
	}
	le.PutUint32(bs[24:], phase|uint32(c.Type)<<1|uint32(c.Status)<<8|uint32(c.Flags)<<16)
	return b.Add(oracle.Step{Kind: oracle.KCQE, ID: cq, Slot: n % e, Bytes: bs, Ref: c.QP})
}

// Req is a successful requester CQE of qp completing up to con_indx idx.
func Req(qp int, idx uint32) CQE { return CQE{Type: TypeSend, ConIdx: idx, QP: qp} }

// Resp is a responder CQE of qp.
func Resp(qp int, length uint32, flags uint16, imm uint32) CQE {
	return CQE{Type: TypeRecvRC, Length: length, Flags: flags, Imm: imm, QP: qp}
}

func sge0(mr int, off uint64, n uint32) []oracle.SGE {
	return []oracle.SGE{{MR: mr, Off: off, Len: n}}
}

var stdCaps = oracle.Caps{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInline: 64}

// ParamSets are the devices every scenario runs on: a Thor in static and in variable WQE
// mode, a gen P4 chip (BCM57414, 8-byte PSN search entries), and the Thor at 16 and 64
// KiB pages.
func ParamSets() map[string]Params {
	p5 := DefaultParams()
	v := p5
	v.Variable = true
	p4 := p5
	p4.Chip = 0x16d7
	k16, k64 := p5, v
	k16.PageSize, k64.PageSize = 16<<10, 64<<10
	return map[string]Params{"thor": p5, "thor-variable": v, "p4": p4, "thor@16k": k16, "thor-variable@64k": k64}
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

	// cq-depths: CREATE_CQ for several depths, one with a completion channel.
	b := NewBuilder("cq-depths", p, 0).Add(oracle.Step{Kind: oracle.KChannel})
	for i, d := range []int{1, 2, 15, 16, 100, 255, 1000} {
		b.CQ(i, d, i == 3)
	}
	b.Add(oracle.Step{Kind: oracle.KDestroyCQ, ID: 0})
	add(b)

	// qp-caps: CREATE_QP sizing for several caps (SGEs, inline data, depths).
	b = NewBuilder("qp-caps", p, 0).CQ(0, 63, false)
	for i, c := range []oracle.Caps{stdCaps, {MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1},
		{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 2, MaxRecvSGE: 2}, {MaxSendWR: 100, MaxSendSGE: 3, MaxRecvSGE: 1, MaxInline: 28},
		{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 4, MaxRecvSGE: 4, MaxInline: 96}, {MaxSendWR: 128, MaxRecvWR: 32, MaxSendSGE: 6, MaxRecvSGE: 5},
		{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInline: 1}} {
		b.Add(oracle.Step{Kind: oracle.KQP, ID: i, SendCQ: 0, RecvCQ: 0, Caps: c, SigAll: i == 2})
	}
	b.Add(oracle.Step{Kind: oracle.KDestroyQP, ID: 1})
	add(b)

	// recv: RECV with one SGE, a chain, and three SGEs in a four-SGE RQ.
	b = NewBuilder("recv", p, 2).CQ(0, 15, false).QP(0, 0, stdCaps).QP(1, 0, oracle.Caps{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 4})
	b.Recv(0, oracle.RecvWR{WRID: 1, SGEs: sge0(0, 0, 4096)})
	b.Recv(0, oracle.RecvWR{WRID: 2, SGEs: sge0(0, 64, 100)}, oracle.RecvWR{WRID: 3, SGEs: sge0(1, 0, 200)}, oracle.RecvWR{WRID: 4, SGEs: sge0(1, 8, 8)})
	b.Recv(1, oracle.RecvWR{WRID: 5, SGEs: []oracle.SGE{{MR: 0, Off: 0, Len: 16}, {MR: 1, Off: 32, Len: 48}, {MR: 0, Off: 1024, Len: 1000}}})
	add(b)

	// send-kinds: signaled and unsignaled SEND, SEND with immediate, solicited, fenced,
	// two SGEs, RDMA WRITE (+imm), RDMA READ, a zero-length SEND, a chain.
	b = NewBuilder("send-kinds", p, 2).CQ(0, 63, false).QP(0, 0, oracle.Caps{MaxSendWR: 32, MaxRecvWR: 16, MaxSendSGE: 2, MaxRecvSGE: 1, MaxInline: 64})
	b.Send(0, oracle.SendWR{WRID: 10, Opcode: oracle.OpSend, Flags: oracle.FlagSignaled, SGEs: sge0(0, 0, 8)})
	b.Send(0, oracle.SendWR{WRID: 11, Opcode: oracle.OpSend, SGEs: sge0(0, 16, 100)})
	b.Send(0, oracle.SendWR{WRID: 12, Opcode: oracle.OpSendImm, Flags: oracle.FlagSignaled | oracle.FlagSolicited, Imm: 0xdeadbeef, SGEs: sge0(1, 0, 64)})
	b.Send(0, oracle.SendWR{WRID: 13, Opcode: oracle.OpSend, Flags: oracle.FlagSignaled | oracle.FlagFence, SGEs: []oracle.SGE{{MR: 0, Off: 0, Len: 32}, {MR: 1, Off: 64, Len: 32}}})
	b.Send(0, oracle.SendWR{WRID: 14, Opcode: oracle.OpRDMAWrite, Flags: oracle.FlagSignaled, RAddr: RemoteAddr, RKey: RemoteKey, SGEs: sge0(0, 0, 4096)})
	b.Send(0, oracle.SendWR{WRID: 15, Opcode: oracle.OpRDMAWriteImm, Flags: oracle.FlagSignaled, Imm: 7, RAddr: RemoteAddr + 8, RKey: RemoteKey, SGEs: sge0(1, 0, 16)})
	b.Send(0, oracle.SendWR{WRID: 16, Opcode: oracle.OpRDMARead, Flags: oracle.FlagSignaled, RAddr: RemoteAddr, RKey: RemoteKey, SGEs: sge0(1, 128, 64)})
	b.Send(0, oracle.SendWR{WRID: 17, Opcode: oracle.OpSend, Flags: oracle.FlagSignaled, SGEs: sge0(0, 0, 0)})
	b.Send(0,
		oracle.SendWR{WRID: 18, Opcode: oracle.OpSend, SGEs: sge0(0, 0, 8)},
		oracle.SendWR{WRID: 19, Opcode: oracle.OpRDMAWrite, RAddr: RemoteAddr, RKey: RemoteKey, SGEs: sge0(0, 8, 8)},
		oracle.SendWR{WRID: 20, Opcode: oracle.OpSend, Flags: oracle.FlagSignaled, SGEs: sge0(0, 16, 8)})
	add(b)

	// inline: SEND and RDMA WRITE inline of sizes up to the QP's limit (one SGE).
	b = NewBuilder("inline", p, 2).CQ(0, 63, false).QP(0, 0, oracle.Caps{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 2, MaxRecvSGE: 1, MaxInline: 96})
	for i, n := range []uint32{0, 1, 12, 16, 17, 28, 44, 60, 64, 95, 96} {
		b.Send(0, oracle.SendWR{WRID: uint64(100 + i), Opcode: oracle.OpSend, Flags: oracle.FlagSignaled | oracle.FlagInline, SGEs: sge0(0, uint64(i), n)})
	}
	b.Send(0, oracle.SendWR{WRID: 201, Opcode: oracle.OpRDMAWrite, Flags: oracle.FlagSignaled | oracle.FlagInline, RAddr: RemoteAddr, RKey: RemoteKey, SGEs: sge0(1, 0, 40)})
	add(b)

	add(sqWrap(p))
	add(cqeSuccess(p))
	add(cqeReqErrors(p))
	add(cqeRespErrors(p))
	add(cqWrap(p))
	add(arm(p))
	add(twoQPs(p))
	add(teardown(p))
	add(postErrors(p))
	add(qpDestroyClean(p))
	add(pings(p))
	return out
}

// sqWrap posts through a small send queue many times over, completing each send, so
// the ring and the software entries wrap several laps.
func sqWrap(p Params) *Builder {
	b := NewBuilder("sq-wrap", p, 1).CQ(0, 15, false).QP(0, 0, oracle.Caps{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInline: 32})
	laps := 3 * b.nwr[0]
	if laps > 300 {
		laps = 300 // static mode: 256 entries (and 2048 slots) a lap
	}
	for i := 0; i < laps; i++ {
		w := oracle.SendWR{WRID: uint64(1000 + i), Opcode: oracle.OpSend, Flags: oracle.FlagSignaled, SGEs: sge0(0, uint64(i%64), 8)}
		if i%5 == 4 {
			w.Flags |= oracle.FlagInline
			w.SGEs = sge0(0, 0, 30)
		}
		idx := b.Send(0, w)
		if i%4 == 3 || i == laps-1 {
			b.CQE(0, Req(0, idx[0])).Poll(0, 4)
		}
	}
	return b
}

// cqeSuccess decodes successful CQEs of every kind, and a requester CQE that completes
// several WQEs (unsignaled ones before a signaled one).
func cqeSuccess(p Params) *Builder {
	b := NewBuilder("cqe-success", p, 2).CQ(0, 31, false).QP(0, 0, stdCaps)
	var rs []oracle.RecvWR
	for i := 1; i <= 6; i++ {
		rs = append(rs, oracle.RecvWR{WRID: uint64(i), SGEs: sge0(1, uint64(512*i), 512)})
	}
	b.Recv(0, rs...)
	s := b.Send(0, oracle.SendWR{WRID: 10, Opcode: oracle.OpSend, Flags: oracle.FlagSignaled, SGEs: sge0(0, 0, 8)})
	b.Send(0, oracle.SendWR{WRID: 11, Opcode: oracle.OpRDMAWrite, RAddr: RemoteAddr, RKey: RemoteKey, SGEs: sge0(0, 0, 16)})
	r := b.Send(0, oracle.SendWR{WRID: 12, Opcode: oracle.OpRDMARead, Flags: oracle.FlagSignaled, RAddr: RemoteAddr, RKey: RemoteKey, SGEs: sge0(0, 64, 64)})
	wi := b.Send(0, oracle.SendWR{WRID: 13, Opcode: oracle.OpRDMAWriteImm, Flags: oracle.FlagSignaled, Imm: 0x55, RAddr: RemoteAddr, RKey: RemoteKey, SGEs: sge0(0, 0, 16)})
	si := b.Send(0, oracle.SendWR{WRID: 14, Opcode: oracle.OpSendImm, Flags: oracle.FlagSignaled, Imm: 0x66, SGEs: sge0(0, 0, 16)})
	b.CQE(0, Req(0, s[0]))
	b.CQE(0, Req(0, r[0])) // completes the unsignaled WRITE too
	b.CQE(0, Req(0, wi[0]))
	b.CQE(0, Req(0, si[0]))
	b.Poll(0, 8)
	b.CQE(0, Resp(0, 100, 0, 0))
	b.CQE(0, Resp(0, 200, FlagImm, 0x01020304))
	b.CQE(0, Resp(0, 0, FlagImm|FlagRDMA, 0x0a0b0c0d))
	b.CQE(0, Resp(0, 400, FlagInv, 0x00abcdef))
	b.Poll(0, 2).Poll(0, 8)
	// A CQE of a QP that is gone (its handle cleared) and one of a type nothing reads.
	b.CQE(0, CQE{Type: TypeSend, QP: -1})
	b.CQE(0, CQE{Type: 0x3, QP: -1})
	b.CQE(0, Resp(0, 50, 0, 0))
	b.Poll(0, 8)
	return b
}

// cqeReqErrors: a requester error CQE of every status, each on a QP of its own; the
// error moves the QP to error and its other work requests are flushed by the library.
func cqeReqErrors(p Params) *Builder {
	b := NewBuilder("cqe-req-errors", p, 1).CQ(0, 63, false)
	for i, st := range ReqStatuses {
		b.QP(i, 0, oracle.Caps{MaxSendWR: 8, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1})
		b.Recv(i, oracle.RecvWR{WRID: uint64(600 + i), SGEs: sge0(0, 0, 64)})
		b.Send(i, oracle.SendWR{WRID: uint64(500 + i), Opcode: oracle.OpSend, Flags: oracle.FlagSignaled, SGEs: sge0(0, 0, 8)})
		idx := b.Send(i, oracle.SendWR{WRID: uint64(700 + i), Opcode: oracle.OpRDMAWrite, RAddr: RemoteAddr, RKey: RemoteKey, SGEs: sge0(0, 0, 8)})
		_ = idx
		c := Req(i, 0)
		c.Status = st
		b.CQE(0, c).Poll(0, 1).Poll(0, 8)
		// Posting on a QP in error is refused.
		b.Add(oracle.Step{Kind: oracle.KSend, ID: i, Sends: []oracle.SendWR{{WRID: 9, Opcode: oracle.OpSend, SGEs: sge0(0, 0, 8)}}, WantErr: true})
	}
	return b
}

// cqeRespErrors: a responder error CQE of every status; HW_FLUSH (0x08) makes no
// completion and leaves the receive to the flush list.
func cqeRespErrors(p Params) *Builder {
	b := NewBuilder("cqe-resp-errors", p, 1).CQ(0, 63, false)
	for i, st := range RspStatuses {
		b.QP(i, 0, oracle.Caps{MaxSendWR: 8, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1})
		b.Recv(i, oracle.RecvWR{WRID: uint64(600 + i), SGEs: sge0(0, 0, 64)}, oracle.RecvWR{WRID: uint64(650 + i), SGEs: sge0(0, 64, 64)})
		c := Resp(i, 0, 0, 0)
		c.Status = st
		b.CQE(0, c).Poll(0, 1).Poll(0, 8)
	}
	return b
}

// cqWrap: five laps over a four-entry CQ (the phase bit flips each lap), polled dry and
// once more, with one CQE of the previous lap left behind.
func cqWrap(p Params) *Builder {
	b := NewBuilder("cq-wrap", p, 1).CQ(0, 3, false).QP(0, 0, oracle.Caps{MaxSendWR: 8, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1})
	wr := uint64(700)
	e := b.cqEntries[0]
	for lap := 0; lap < 5; lap++ {
		for i := 0; i < e; i++ {
			b.Recv(0, oracle.RecvWR{WRID: wr, SGEs: sge0(0, 0, 256)})
			wr++
		}
		for i := 0; i < e; i++ {
			b.CQE(0, Resp(0, uint32(10*lap+i+1), 0, 0))
			if i == 1 {
				b.Poll(0, 1)
			}
		}
		b.Poll(0, 8).Poll(0, 8)
	}
	return b
}

// arm: the first arm rings at once; later arms ring at the end of the next poll, with
// the consumer index then; solicited arms; events.
func arm(p Params) *Builder {
	b := NewBuilder("arm", p, 1).Add(oracle.Step{Kind: oracle.KChannel}).CQ(0, 15, true).QP(0, 0, stdCaps)
	b.Add(oracle.Step{Kind: oracle.KArm, ID: 0})
	idx := b.Send(0, oracle.SendWR{WRID: 1, Opcode: oracle.OpSend, Flags: oracle.FlagSignaled, SGEs: sge0(0, 0, 8)})
	b.CQE(0, Req(0, idx[0]))
	b.Add(oracle.Step{Kind: oracle.KEvent, ID: 0}).Poll(0, 4)
	b.Add(oracle.Step{Kind: oracle.KArm, ID: 0, Solicited: true})
	b.Poll(0, 4)
	idx = b.Send(0, oracle.SendWR{WRID: 2, Opcode: oracle.OpSend, Flags: oracle.FlagSignaled, SGEs: sge0(0, 0, 8)})
	b.CQE(0, Req(0, idx[0]))
	b.Add(oracle.Step{Kind: oracle.KEvent, ID: 0}).Poll(0, 4)
	b.Add(oracle.Step{Kind: oracle.KArm, ID: 0})
	b.Add(oracle.Step{Kind: oracle.KArm, ID: 0, Solicited: true})
	b.Poll(0, 4)
	return b
}

// twoQPs: two QPs share one CQ; completions of both interleave, found by their handles.
func twoQPs(p Params) *Builder {
	b := NewBuilder("two-qps", p, 2).CQ(0, 31, false).QP(0, 0, stdCaps).QP(1, 0, stdCaps)
	b.Recv(0, oracle.RecvWR{WRID: 100, SGEs: sge0(0, 0, 256)}, oracle.RecvWR{WRID: 101, SGEs: sge0(0, 256, 256)})
	b.Recv(1, oracle.RecvWR{WRID: 200, SGEs: sge0(1, 0, 256)}, oracle.RecvWR{WRID: 201, SGEs: sge0(1, 256, 256)})
	for i := 0; i < 3; i++ {
		a := b.Send(0, oracle.SendWR{WRID: uint64(110 + i), Opcode: oracle.OpSend, Flags: oracle.FlagSignaled, SGEs: sge0(0, 0, 16)})
		c := b.Send(1, oracle.SendWR{WRID: uint64(210 + i), Opcode: oracle.OpRDMAWrite, Flags: oracle.FlagSignaled | oracle.FlagInline, RAddr: RemoteAddr, RKey: RemoteKey, SGEs: sge0(1, 0, 16)})
		b.CQE(0, Req(1, c[0]))
		b.CQE(0, Req(0, a[0]))
	}
	b.CQE(0, Resp(1, 11, 0, 0)).CQE(0, Resp(0, 22, 0, 0)).CQE(0, Resp(0, 33, 0, 0)).CQE(0, Resp(1, 44, 0, 0))
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

// postErrors: posts the library refuses (a full send queue, too many SGEs, a full
// receive queue, a QP not in RTS), each between posts that succeed.
func postErrors(p Params) *Builder {
	caps := oracle.Caps{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}
	b := NewBuilder("post-errors", p, 1).CQ(0, 15, false)
	// A QP in INIT takes no send.
	b.Add(oracle.Step{Kind: oracle.KQP, ID: 0, SendCQ: 0, RecvCQ: 0, Caps: caps})
	b.Add(oracle.Step{Kind: oracle.KSend, ID: 0, Sends: []oracle.SendWR{{WRID: 1, Opcode: oracle.OpSend, SGEs: sge0(0, 0, 8)}}, WantErr: true})
	b.nwr[0] = int(b.P.SQSize(caps.MaxSendWR, caps.MaxSendSGE, caps.MaxInline).NWR)
	b.Add(oracle.Step{Kind: oracle.KRTS, ID: 0})
	send := func(id uint64, flags int, sges int) oracle.SendWR {
		w := oracle.SendWR{WRID: id, Opcode: oracle.OpSend, Flags: flags}
		for i := 0; i < sges; i++ {
			w.SGEs = append(w.SGEs, oracle.SGE{MR: 0, Off: uint64(64 * i), Len: 8})
		}
		return w
	}
	// Fill the send queue until the library's full check refuses (static mode keeps 128
	// WQEs' room free; variable mode fills the ring's slots).
	var last uint32
	for i := 0; i < p.SendsUntilFull(caps, 1); i++ {
		last = b.Send(0, send(uint64(10+i), 0, 1))[0]
	}
	b.Add(oracle.Step{Kind: oracle.KSend, ID: 0, Sends: []oracle.SendWR{send(20, 0, 1)}, WantErr: true})
	b.CQE(0, Req(0, last)).Poll(0, 4)
	b.Add(oracle.Step{Kind: oracle.KSend, ID: 0, Sends: []oracle.SendWR{send(21, oracle.FlagSignaled, 2)}, WantErr: true})
	b.Send(0, send(22, oracle.FlagSignaled, 1))
	for i := 0; i < 4; i++ {
		b.Recv(0, oracle.RecvWR{WRID: uint64(30 + i), SGEs: sge0(0, 0, 64)})
	}
	b.Add(oracle.Step{Kind: oracle.KRecv, ID: 0, Recvs: []oracle.RecvWR{{WRID: 34, SGEs: sge0(0, 0, 64)}}, WantErr: true})
	return b
}

// qpDestroyClean: two QPs share a CQ; QP 0 is destroyed while CQEs of both are in it: the
// library clears QP 0's handles, and polling returns QP 1's completions only.
func qpDestroyClean(p Params) *Builder {
	b := NewBuilder("qp-destroy-clean", p, 2).CQ(0, 7, false).QP(0, 0, stdCaps).QP(1, 0, stdCaps)
	var r0, r1 []oracle.RecvWR
	for i := 0; i < 4; i++ {
		r0 = append(r0, oracle.RecvWR{WRID: uint64(100 + i), SGEs: sge0(0, uint64(64*i), 64)})
		r1 = append(r1, oracle.RecvWR{WRID: uint64(200 + i), SGEs: sge0(1, uint64(64*i), 64)})
	}
	b.Recv(0, r0...).Recv(1, r1...)
	s0 := b.Send(0, oracle.SendWR{WRID: 110, Opcode: oracle.OpSend, Flags: oracle.FlagSignaled, SGEs: sge0(0, 0, 8)})
	b.CQE(0, Resp(1, 10, 0, 0)).CQE(0, Resp(0, 11, 0, 0)).Poll(0, 1)
	b.CQE(0, Resp(0, 12, 0, 0)).CQE(0, Req(0, s0[0])).CQE(0, Resp(1, 13, 0, 0))
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
	recv := func(qp int, id uint64) { b.Recv(qp, oracle.RecvWR{WRID: id, SGEs: sge0(qp*2, 0, 16)}) }
	advert := func(qp int, id uint64) uint32 {
		return b.Send(qp, oracle.SendWR{WRID: id, Opcode: oracle.OpSend, Flags: oracle.FlagSignaled, SGEs: sge0(qp*2+1, 0, 16)})[0]
	}
	wait := func(cq int) {
		b.Add(oracle.Step{Kind: oracle.KArm, ID: cq})
		b.Poll(cq, 16).Add(oracle.Step{Kind: oracle.KEvent, ID: cq})
	}
	recv(1, 1)
	recv(0, 2)
	for i := 0; i < 3; i++ {
		// Client: the advert of its start buffer.
		s := advert(0, 10)
		b.CQE(0, Req(0, s))
		wait(0)
		b.Poll(0, 16)
		// Server: the advert arrives, it READs the buffer.
		b.CQE(1, Resp(1, 16, 0, 0))
		wait(1)
		b.Poll(1, 16)
		recv(1, 1)
		r := b.Send(1, oracle.SendWR{WRID: 20, Opcode: oracle.OpRDMARead, Flags: oracle.FlagSignaled, RAddr: RemoteAddr, RKey: RemoteKey, SGEs: sge0(2, 0, 64)})[0]
		b.CQE(1, Req(1, r))
		b.Poll(1, 16)
		// The go-ahead.
		g := advert(1, 21)
		b.CQE(1, Req(1, g))
		b.CQE(0, Resp(0, 16, 0, 0))
		b.Poll(1, 16).Poll(0, 16)
		recv(0, 2)
		// Client: the advert of its sink; server WRITEs and goes ahead.
		s = advert(0, 11)
		b.CQE(0, Req(0, s))
		b.CQE(1, Resp(1, 16, 0, 0))
		b.Poll(0, 16).Poll(1, 16)
		recv(1, 1)
		w := b.Send(1, oracle.SendWR{WRID: 22, Opcode: oracle.OpRDMAWrite, Flags: oracle.FlagSignaled, RAddr: RemoteAddr, RKey: RemoteKey, SGEs: sge0(2, 0, 64)})[0]
		b.CQE(1, Req(1, w))
		b.Poll(1, 16)
		g = advert(1, 23)
		b.CQE(1, Req(1, g))
		b.CQE(0, Resp(0, 16, 0, 0))
		b.Poll(1, 16)
		wait(0)
		b.Poll(0, 16)
		recv(0, 2)
	}
	return b
}
