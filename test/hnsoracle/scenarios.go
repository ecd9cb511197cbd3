package hnsoracle

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

// CQE opcodes and statuses (the device's).
const (
	OpSend     = 0x0
	OpSendImm  = 0x2
	OpWrite    = 0x3
	OpWriteImm = 0x4
	OpRead     = 0x5

	RcvWriteImm = 0x0
	RcvSend     = 0x1
	RcvSendImm  = 0x2
	RcvSendInv  = 0x3

	StatusFlush = 0x05
)

// CQDepth is the ring of a CQ asked for cqe entries.
func CQDepth(cqe int) int { return int(max(64, roundupPow2(uint32(cqe)))) }

// Builder assembles a scenario and keeps what its CQEs need: each CQ's CQEs written,
// each QP's send queue head.
type Builder struct {
	Sc        oracle.Scenario
	P         Params
	cqDepth   map[int]int
	cqWritten map[int]int
	sqHead    map[int]uint32
}

// NewBuilder starts a scenario with open, pd and MRs mr0..mr(nMR-1).
func NewBuilder(name string, p Params, nMR int) *Builder {
	b := &Builder{Sc: oracle.Scenario{Name: name, Driver: Driver{p}}, P: p, cqDepth: map[int]int{}, cqWritten: map[int]int{}, sqHead: map[int]uint32{}}
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
	b.cqDepth[id] = CQDepth(cqe)
	return b.Add(oracle.Step{Kind: oracle.KCQ, ID: id, CQE: cqe, WithChannel: withChannel})
}

// QP creates RC QP id on cq and moves it to RTS.
func (b *Builder) QP(id, cq int, c oracle.Caps) *Builder { return b.QP2(id, cq, cq, c) }

// QP2 creates RC QP id with its send and receive CQs, and moves it to RTS.
func (b *Builder) QP2(id, scq, rcq int, c oracle.Caps) *Builder {
	return b.Add(oracle.Step{Kind: oracle.KQP, ID: id, SendCQ: scq, RecvCQ: rcq, Caps: c}, oracle.Step{Kind: oracle.KRTS, ID: id})
}

// Send posts ws as one chain on qp and returns each WQE's index (what a CQE completing it
// names).
func (b *Builder) Send(qp int, ws ...oracle.SendWR) []uint32 {
	var idx []uint32
	for range ws {
		idx = append(idx, b.sqHead[qp])
		b.sqHead[qp]++
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

// CQE is one CQE as the engine writes it.
type CQE struct {
	Recv      bool
	Op        uint8
	Status    uint8
	SubStatus uint8
	WQEIdx    uint32
	QP        int // its QPN is FirstQPN+QP
	QPN       uint32
	ByteCnt   uint32
	ImmKey    uint32 // immediate (host order) or invalidated rkey
	Inline    bool   // RQ inline: the data is in the receive WQE
}

// CQE writes c as the next CQE of cq, the owner bit of its lap.
func (b *Builder) CQE(cq int, c CQE) *Builder {
	n, depth := b.cqWritten[cq], b.cqDepth[cq]
	if depth == 0 {
		panic(fmt.Sprintf("hnsoracle: cqe for unknown cq %d", cq))
	}
	b.cqWritten[cq]++
	bs := make([]byte, b.P.CQESize)
	w := uint32(c.Op&0x1f) | uint32(c.Status)<<8 | (c.WQEIdx&0xffff)<<16
	if (n/depth)%2 == 0 {
		w |= 1 << 7
	}
	if c.Recv {
		w |= 1 << 6
	}
	if c.Inline {
		w |= 1 << 5
	}
	qpn := c.QPN
	if qpn == 0 {
		qpn = b.P.FirstQPN + uint32(c.QP)
	}
	le.PutUint32(bs[0:], w)
	le.PutUint32(bs[4:], c.ImmKey)
	le.PutUint32(bs[12:], qpn|uint32(c.SubStatus)<<24)
	le.PutUint32(bs[16:], c.ByteCnt)
	return b.Add(oracle.Step{Kind: oracle.KCQE, ID: cq, Slot: n % depth, Bytes: bs, Ref: -1})
}

// Req is a successful send CQE of qp for the WQE at idx with opcode op.
func Req(qp int, idx uint32, op uint8) CQE { return CQE{Op: op, WQEIdx: idx, QP: qp} }

// Resp is a receive CQE of qp.
func Resp(qp int, op uint8, n uint32) CQE { return CQE{Recv: true, Op: op, QP: qp, ByteCnt: n} }

func sge0(mr int, off uint64, n uint32) []oracle.SGE {
	return []oracle.SGE{{MR: mr, Off: off, Len: n}}
}

var stdCaps = oracle.Caps{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInline: 32}

// ParamSets are the engines every scenario runs on: a HIP08 with record doorbells, one
// without (receive and consumer-index doorbells), a HIP09 (64-byte CQEs, no reserved
// receive SGE, the owner-bit barrier), the HIP09 at 16 KiB pages and the HIP08 at 64 KiB.
func ParamSets() map[string]Params {
	h8 := DefaultParams()
	nodb := h8
	nodb.QPCaps, nodb.CQCaps = 0, 0
	h9 := h8
	h9.HwVer, h9.CQESize, h9.QPCaps = 0x130, 64, 3|4
	k16, k64 := h9, h8
	k16.PageSize, k64.PageSize = 16<<10, 64<<10
	return map[string]Params{"hip08": h8, "hip08-nodb": nodb, "hip09": h9, "hip09@16k": k16, "hip08@64k": k64}
}

// Scenarios returns every scenario on p, named "<set>/<name>"; on a set with larger pages
// those whose sizing or layout the page size can change.
func Scenarios(set string, p Params) []oracle.Scenario {
	var out []oracle.Scenario
	add := func(b *Builder) {
		switch name := b.Sc.Name; {
		case p.PageSize > 4096 && name != "context" && name != "cq-depths" && name != "qp-caps" && name != "send-kinds" && name != "pings" && name != "qp-destroy-clean":
			return
		default:
			b.Sc.Name = set + "/" + name
			out = append(out, b.Sc)
		}
	}

	add(NewBuilder("context", p, 0).Add(oracle.Step{Kind: oracle.KQueryPort, Port: 1}, oracle.Step{Kind: oracle.KDeallocPD}))

	// cq-depths: depths below the minimum, powers of two and not; doorbell records shared.
	b := NewBuilder("cq-depths", p, 0).Add(oracle.Step{Kind: oracle.KChannel})
	for i, d := range []int{1, 63, 64, 65, 100, 255, 1000} {
		b.CQ(i, d, i == 3)
	}
	b.Add(oracle.Step{Kind: oracle.KDestroyCQ, ID: 0})
	if p.PageSize == 0 {
		// Takes the freed record. (Not at a faked page size: libhns finds a record's page
		// by rounding its address down to the page size, and the harness's mmap gives 4
		// KiB alignment only, so the library would not free it there.)
		b.CQ(7, 16, false)
	}
	add(b)

	// qp-caps: sizing for several caps (extended SGEs beyond two, receive SGEs rounded
	// up with the reserved one), records, one destroyed.
	b = NewBuilder("qp-caps", p, 0).CQ(0, 63, false)
	for i, c := range []oracle.Caps{stdCaps, {MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1},
		{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 2, MaxRecvSGE: 2}, {MaxSendWR: 100, MaxRecvWR: 100, MaxSendSGE: 3, MaxRecvSGE: 3, MaxInline: 28},
		{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 6, MaxRecvSGE: 4, MaxInline: 64}, {MaxSendWR: 600, MaxRecvWR: 200, MaxSendSGE: 16, MaxRecvSGE: 7}} {
		b.Add(oracle.Step{Kind: oracle.KQP, ID: i, SendCQ: 0, RecvCQ: 0, Caps: c, SigAll: i == 2})
	}
	b.Add(oracle.Step{Kind: oracle.KDestroyQP, ID: 1})
	add(b)

	// recv: one SGE, a chain, zero-length SGEs skipped, three SGEs in a four-SGE queue.
	b = NewBuilder("recv", p, 2).CQ(0, 15, false).QP(0, 0, stdCaps).QP(1, 0, oracle.Caps{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 3})
	b.Recv(0, oracle.RecvWR{WRID: 1, SGEs: sge0(0, 0, 4096)})
	b.Recv(0, oracle.RecvWR{WRID: 2, SGEs: sge0(0, 64, 100)}, oracle.RecvWR{WRID: 3, SGEs: sge0(1, 0, 200)}, oracle.RecvWR{WRID: 4, SGEs: sge0(1, 8, 0)})
	b.Recv(1, oracle.RecvWR{WRID: 5, SGEs: []oracle.SGE{{MR: 0, Off: 0, Len: 16}, {MR: 1, Off: 32, Len: 48}, {MR: 0, Off: 1024, Len: 1000}}})
	b.Recv(1, oracle.RecvWR{WRID: 6, SGEs: []oracle.SGE{{MR: 0, Off: 0, Len: 0}, {MR: 1, Off: 32, Len: 48}}})
	add(b)

	add(sendKinds(p))
	add(inline(p))
	add(sqWrap(p))
	add(cqeSuccess(p))
	add(cqeErrors(p, "cqe-errors", []uint8{0x01, 0x02, 0x04, 0x05, 0x06, 0x10, 0x11, 0x12}))
	add(cqeErrors(p, "cqe-errors2", []uint8{0x13, 0x14, 0x15, 0x16, 0x22, 0x23, 0x24, 0x7f}))
	add(cqWrap(p))
	add(arm(p))
	add(twoQPs(p))
	add(teardown(p))
	add(postErrors(p))
	add(qpDestroyClean(p))
	add(pings(p))
	return out
}

func sendKinds(p Params) *Builder {
	b := NewBuilder("send-kinds", p, 2).CQ(0, 63, false).QP(0, 0, oracle.Caps{MaxSendWR: 32, MaxRecvWR: 16, MaxSendSGE: 4, MaxRecvSGE: 1, MaxInline: 32})
	b.Send(0, oracle.SendWR{WRID: 10, Opcode: oracle.OpSend, Flags: oracle.FlagSignaled, SGEs: sge0(0, 0, 8)})
	b.Send(0, oracle.SendWR{WRID: 11, Opcode: oracle.OpSend, SGEs: sge0(0, 16, 100)})
	b.Send(0, oracle.SendWR{WRID: 12, Opcode: oracle.OpSendImm, Flags: oracle.FlagSignaled | oracle.FlagSolicited, Imm: 0xdeadbeef, SGEs: sge0(1, 0, 64)})
	b.Send(0, oracle.SendWR{WRID: 13, Opcode: oracle.OpSend, Flags: oracle.FlagSignaled | oracle.FlagFence, SGEs: []oracle.SGE{{MR: 0, Off: 0, Len: 32}, {MR: 1, Off: 64, Len: 32}}})
	b.Send(0, oracle.SendWR{WRID: 14, Opcode: oracle.OpRDMAWrite, Flags: oracle.FlagSignaled, RAddr: RemoteAddr, RKey: RemoteKey, SGEs: sge0(0, 0, 4096)})
	b.Send(0, oracle.SendWR{WRID: 15, Opcode: oracle.OpRDMAWriteImm, Flags: oracle.FlagSignaled, Imm: 7, RAddr: RemoteAddr + 8, RKey: RemoteKey, SGEs: sge0(1, 0, 16)})
	b.Send(0, oracle.SendWR{WRID: 16, Opcode: oracle.OpRDMARead, Flags: oracle.FlagSignaled, RAddr: RemoteAddr, RKey: RemoteKey, SGEs: sge0(1, 128, 64)})
	b.Send(0, oracle.SendWR{WRID: 17, Opcode: oracle.OpSend, Flags: oracle.FlagSignaled, SGEs: sge0(0, 0, 0)})
	b.Send(0, oracle.SendWR{WRID: 18, Opcode: oracle.OpSend, Flags: oracle.FlagSignaled, SGEs: []oracle.SGE{{MR: 0, Off: 0, Len: 8}, {MR: 1, Off: 8, Len: 0},
		{MR: 0, Off: 100, Len: 9}, {MR: 1, Off: 200, Len: 10}}}) // the third and fourth in the extended area
	b.Send(0, oracle.SendWR{WRID: 19, Opcode: oracle.OpRDMAWrite, RAddr: RemoteAddr, RKey: RemoteKey, SGEs: []oracle.SGE{{MR: 0, Off: 0, Len: 1},
		{MR: 0, Off: 1, Len: 2}, {MR: 0, Off: 3, Len: 3}, {MR: 0, Off: 6, Len: 4}}})
	b.Send(0,
		oracle.SendWR{WRID: 20, Opcode: oracle.OpSend, SGEs: sge0(0, 0, 8)},
		oracle.SendWR{WRID: 21, Opcode: oracle.OpRDMAWrite, RAddr: RemoteAddr, RKey: RemoteKey, SGEs: sge0(0, 8, 8)},
		oracle.SendWR{WRID: 22, Opcode: oracle.OpSend, Flags: oracle.FlagSignaled, SGEs: sge0(0, 16, 8)})
	return b
}

// inline: inline data in the WQE (up to 32 bytes) and in the extended SGE area (beyond).
func inline(p Params) *Builder {
	b := NewBuilder("inline", p, 2).CQ(0, 63, false).QP(0, 0, oracle.Caps{MaxSendWR: 32, MaxRecvWR: 16, MaxSendSGE: 6, MaxRecvSGE: 1, MaxInline: 96})
	for i, n := range []uint32{0, 1, 12, 16, 31, 32, 33, 48, 64, 95, 96} {
		b.Send(0, oracle.SendWR{WRID: uint64(100 + i), Opcode: oracle.OpSend, Flags: oracle.FlagSignaled | oracle.FlagInline, SGEs: sge0(0, uint64(i), n)})
	}
	b.Send(0, oracle.SendWR{WRID: 200, Opcode: oracle.OpRDMAWrite, Flags: oracle.FlagSignaled | oracle.FlagInline, RAddr: RemoteAddr, RKey: RemoteKey, SGEs: []oracle.SGE{{MR: 1, Off: 0, Len: 20}, {MR: 0, Off: 7, Len: 30}}})
	b.Add(oracle.Step{Kind: oracle.KSend, ID: 0, Sends: []oracle.SendWR{{WRID: 201, Opcode: oracle.OpSend, Flags: oracle.FlagInline, SGEs: sge0(0, 0, 97)}}, WantErr: true})
	b.Add(oracle.Step{Kind: oracle.KSend, ID: 0, Sends: []oracle.SendWR{{WRID: 202, Opcode: oracle.OpRDMARead, Flags: oracle.FlagInline, RAddr: RemoteAddr, RKey: RemoteKey, SGEs: sge0(0, 0, 8)}}, WantErr: true})
	return b
}

// sqWrap posts through a 64-WQE send queue three times over, every fourth WR signaled
// (its CQE completes the three before it): the owner bit flips each lap.
func sqWrap(p Params) *Builder {
	b := NewBuilder("sq-wrap", p, 1).CQ(0, 15, false).QP(0, 0, oracle.Caps{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 3, MaxRecvSGE: 1, MaxInline: 32})
	for i := 0; i < 3*64; i++ {
		w := oracle.SendWR{WRID: uint64(1000 + i), Opcode: oracle.OpSend, SGEs: sge0(0, uint64(i%64), 8)}
		switch i % 7 {
		case 3:
			w.Flags |= oracle.FlagInline
			w.SGEs = sge0(0, 0, 30)
		case 5:
			w.SGEs = append(w.SGEs, oracle.SGE{MR: 0, Off: 200, Len: 3}, oracle.SGE{MR: 0, Off: 300, Len: 4})
		}
		if i%4 == 3 {
			w.Flags |= oracle.FlagSignaled
		}
		idx := b.Send(0, w)
		if i%4 == 3 {
			b.CQE(0, Req(0, idx[0], OpSend)).Poll(0, 4)
		}
	}
	return b
}

// cqeSuccess: send CQEs of each kind (an unsignaled one completed by a later CQE),
// receives of each opcode (immediate, invalidated rkey, RDMA WRITE with immediate), and
// an inline receive the library copies out of the WQE.
func cqeSuccess(p Params) *Builder {
	b := NewBuilder("cqe-success", p, 2).CQ(0, 31, false).QP(0, 0, oracle.Caps{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 2, MaxInline: 32})
	var rs []oracle.RecvWR
	for i := 1; i <= 6; i++ {
		rs = append(rs, oracle.RecvWR{WRID: uint64(i), SGEs: []oracle.SGE{{MR: 1, Off: uint64(512 * i), Len: 20}, {MR: 1, Off: uint64(512*i + 100), Len: 200}}})
	}
	b.Recv(0, rs...)
	s := b.Send(0, oracle.SendWR{WRID: 10, Opcode: oracle.OpSend, Flags: oracle.FlagSignaled, SGEs: sge0(0, 0, 8)})
	b.Send(0, oracle.SendWR{WRID: 11, Opcode: oracle.OpRDMAWrite, RAddr: RemoteAddr, RKey: RemoteKey, SGEs: sge0(0, 0, 16)})
	r := b.Send(0, oracle.SendWR{WRID: 12, Opcode: oracle.OpRDMARead, Flags: oracle.FlagSignaled, RAddr: RemoteAddr, RKey: RemoteKey, SGEs: sge0(0, 64, 64)})
	wi := b.Send(0, oracle.SendWR{WRID: 13, Opcode: oracle.OpRDMAWriteImm, Flags: oracle.FlagSignaled, Imm: 0x55, RAddr: RemoteAddr, RKey: RemoteKey, SGEs: sge0(0, 0, 16)})
	si := b.Send(0, oracle.SendWR{WRID: 14, Opcode: oracle.OpSendImm, Flags: oracle.FlagSignaled, Imm: 0x66, SGEs: sge0(0, 0, 16)})
	b.CQE(0, Req(0, s[0], OpSend))
	c := Req(0, r[0], OpRead)
	c.ByteCnt = 64
	b.CQE(0, c)
	b.CQE(0, Req(0, wi[0], OpWriteImm)).CQE(0, Req(0, si[0], OpSendImm))
	b.Poll(0, 8)
	b.CQE(0, Resp(0, RcvSend, 100))
	c = Resp(0, RcvSendImm, 200)
	c.ImmKey = 0x01020304
	b.CQE(0, c)
	c = Resp(0, RcvWriteImm, 0)
	c.ImmKey = 0x0a0b0c0d
	b.CQE(0, c)
	c = Resp(0, RcvSendInv, 40)
	c.ImmKey = 0xabcdef
	b.CQE(0, c)
	b.Poll(0, 2).Poll(0, 8)
	c = Resp(0, RcvSend, 24) // inline: the first SGE and 4 bytes of the second, from the WQE
	c.Inline, c.WQEIdx = true, 4
	b.CQE(0, c).Poll(0, 8)
	return b
}

// cqeErrors: an error CQE of every status, each for a QP of its own with more work
// posted: libhns moves the QP to ERR (MODIFY_QP from the poller) except for a flush and a
// general error; the flush CQEs of the rest; a post on the QP in ERR moves it again.
func cqeErrors(p Params, name string, statuses []uint8) *Builder {
	b := NewBuilder(name, p, 1).CQ(0, 255, false)
	caps := oracle.Caps{MaxSendWR: 8, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}
	for i, st := range statuses {
		b.QP(i, 0, caps)
		b.Recv(i, oracle.RecvWR{WRID: uint64(600 + i), SGEs: sge0(0, 0, 64)})
		idx := b.Send(i,
			oracle.SendWR{WRID: uint64(500 + i), Opcode: oracle.OpSend, Flags: oracle.FlagSignaled, SGEs: sge0(0, 0, 8)},
			oracle.SendWR{WRID: uint64(700 + i), Opcode: oracle.OpRDMAWrite, Flags: oracle.FlagSignaled, RAddr: RemoteAddr, RKey: RemoteKey, SGEs: sge0(0, 0, 8)})
		c := Req(i, idx[0], OpSend)
		c.Status, c.SubStatus = st, uint8(i)
		b.CQE(0, c).Poll(0, 1)
		f := Req(i, idx[1], OpWrite)
		f.Status = StatusFlush
		r := Resp(i, RcvSend, 0)
		r.Status = StatusFlush
		b.CQE(0, f).CQE(0, r).Poll(0, 8)
		if st != 0x05 && st != 0x23 {
			b.Send(i, oracle.SendWR{WRID: uint64(800 + i), Opcode: oracle.OpSend, SGEs: sge0(0, 0, 8)})
		}
	}
	return b
}

// cqWrap: three laps over a 64-entry CQ (the owner bit flips each lap), polled in steps.
func cqWrap(p Params) *Builder {
	b := NewBuilder("cq-wrap", p, 1).CQ(0, 3, false).QP(0, 0, oracle.Caps{MaxSendWR: 8, MaxRecvWR: 64, MaxSendSGE: 1, MaxRecvSGE: 1})
	wr := uint64(700)
	for lap := 0; lap < 3; lap++ {
		for i := 0; i < 64; i += 8 {
			var rs []oracle.RecvWR
			for j := 0; j < 8; j++ {
				rs = append(rs, oracle.RecvWR{WRID: wr, SGEs: sge0(0, 0, 256)})
				wr++
			}
			b.Recv(0, rs...)
			for j := 0; j < 8; j++ {
				b.CQE(0, Resp(0, RcvSend, uint32(lap*64+i+j+1)))
			}
			b.Poll(0, 3).Poll(0, 8)
		}
	}
	return b
}

// arm: arms for all and for solicited completions with the sequence number the events
// count up, events.
func arm(p Params) *Builder {
	b := NewBuilder("arm", p, 1).Add(oracle.Step{Kind: oracle.KChannel}).CQ(0, 15, true).QP(0, 0, stdCaps)
	b.Add(oracle.Step{Kind: oracle.KArm, ID: 0})
	idx := b.Send(0, oracle.SendWR{WRID: 1, Opcode: oracle.OpSend, Flags: oracle.FlagSignaled, SGEs: sge0(0, 0, 8)})
	b.CQE(0, Req(0, idx[0], OpSend))
	b.Add(oracle.Step{Kind: oracle.KEvent, ID: 0}).Poll(0, 4)
	b.Add(oracle.Step{Kind: oracle.KArm, ID: 0, Solicited: true})
	idx = b.Send(0, oracle.SendWR{WRID: 2, Opcode: oracle.OpSend, Flags: oracle.FlagSignaled, SGEs: sge0(0, 0, 8)})
	b.CQE(0, Req(0, idx[0], OpSend))
	b.Add(oracle.Step{Kind: oracle.KEvent, ID: 0}).Poll(0, 4)
	for i := 0; i < 4; i++ {
		b.Add(oracle.Step{Kind: oracle.KArm, ID: 0}, oracle.Step{Kind: oracle.KEvent, ID: 0})
	}
	b.Add(oracle.Step{Kind: oracle.KArm, ID: 0})
	return b
}

// twoQPs: two QPs share one CQ; completions of both interleave, found by their QPNs.
func twoQPs(p Params) *Builder {
	b := NewBuilder("two-qps", p, 2).CQ(0, 31, false).QP(0, 0, stdCaps).QP(1, 0, stdCaps)
	b.Recv(0, oracle.RecvWR{WRID: 100, SGEs: sge0(0, 0, 256)}, oracle.RecvWR{WRID: 101, SGEs: sge0(0, 256, 256)})
	b.Recv(1, oracle.RecvWR{WRID: 200, SGEs: sge0(1, 0, 256)}, oracle.RecvWR{WRID: 201, SGEs: sge0(1, 256, 256)})
	for i := 0; i < 3; i++ {
		a := b.Send(0, oracle.SendWR{WRID: uint64(110 + i), Opcode: oracle.OpSend, Flags: oracle.FlagSignaled, SGEs: sge0(0, 0, 16)})
		c := b.Send(1, oracle.SendWR{WRID: uint64(210 + i), Opcode: oracle.OpRDMAWrite, Flags: oracle.FlagSignaled | oracle.FlagInline, RAddr: RemoteAddr, RKey: RemoteKey, SGEs: sge0(1, 0, 16)})
		b.CQE(0, Req(1, c[0], OpWrite))
		b.CQE(0, Req(0, a[0], OpSend))
	}
	b.CQE(0, Resp(1, RcvSend, 11)).CQE(0, Resp(0, RcvSend, 22)).CQE(0, Resp(0, RcvSend, 33)).CQE(0, Resp(1, RcvSend, 44))
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

// postErrors: posts the library refuses (a send before RTR, a receive in RESET, a full
// send queue, too many SGEs, a full receive queue), each between posts that succeed.
func postErrors(p Params) *Builder {
	caps := oracle.Caps{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}
	b := NewBuilder("post-errors", p, 1).CQ(0, 255, false)
	b.Add(oracle.Step{Kind: oracle.KQP, ID: 0, SendCQ: 0, RecvCQ: 0, Caps: caps})
	b.Add(oracle.Step{Kind: oracle.KSend, ID: 0, Sends: []oracle.SendWR{{WRID: 1, Opcode: oracle.OpSend, SGEs: sge0(0, 0, 8)}}, WantErr: true})
	b.Add(oracle.Step{Kind: oracle.KRecv, ID: 0, Recvs: []oracle.RecvWR{{WRID: 2, SGEs: sge0(0, 0, 64)}}, WantErr: true}) // nor a receive in RESET
	b.Add(oracle.Step{Kind: oracle.KRTS, ID: 0})
	send := func(id uint64, flags int, sges int) oracle.SendWR {
		w := oracle.SendWR{WRID: id, Opcode: oracle.OpSend, Flags: flags}
		for i := 0; i < sges; i++ {
			w.SGEs = append(w.SGEs, oracle.SGE{MR: 0, Off: uint64(64 * i), Len: 8})
		}
		return w
	}
	var last uint32
	for i := 0; i < 64; i++ {
		last = b.Send(0, send(uint64(10+i), 0, 1))[0]
	}
	b.Add(oracle.Step{Kind: oracle.KSend, ID: 0, Sends: []oracle.SendWR{send(200, 0, 1)}, WantErr: true})
	b.CQE(0, Req(0, last, OpSend)).Poll(0, 4) // completes all 64: unsignaled, the CQE names the last
	b.Add(oracle.Step{Kind: oracle.KSend, ID: 0, Sends: []oracle.SendWR{send(201, oracle.FlagSignaled, 2)}, WantErr: true})
	b.Send(0, send(202, oracle.FlagSignaled, 1))
	for i := 0; i < 64; i++ {
		b.Recv(0, oracle.RecvWR{WRID: uint64(30 + i), SGEs: sge0(0, 0, 64)})
	}
	b.Add(oracle.Step{Kind: oracle.KRecv, ID: 0, Recvs: []oracle.RecvWR{{WRID: 99, SGEs: sge0(0, 0, 64)}}, WantErr: true})
	return b
}

// qpDestroyClean: two QPs share a CQ; QP 0 is destroyed while CQEs of both are in it: the
// library moves QP 1's CQEs over QP 0's and tells the engine the consumer index.
func qpDestroyClean(p Params) *Builder {
	b := NewBuilder("qp-destroy-clean", p, 2).CQ(0, 7, false).QP(0, 0, stdCaps).QP(1, 0, stdCaps)
	var r0, r1 []oracle.RecvWR
	for i := 0; i < 4; i++ {
		r0 = append(r0, oracle.RecvWR{WRID: uint64(100 + i), SGEs: sge0(0, uint64(64*i), 64)})
		r1 = append(r1, oracle.RecvWR{WRID: uint64(200 + i), SGEs: sge0(1, uint64(64*i), 64)})
	}
	b.Recv(0, r0...).Recv(1, r1...)
	s0 := b.Send(0, oracle.SendWR{WRID: 110, Opcode: oracle.OpSend, Flags: oracle.FlagSignaled, SGEs: sge0(0, 0, 8)})
	b.CQE(0, Resp(1, RcvSend, 10)).CQE(0, Resp(0, RcvSend, 11)).Poll(0, 1)
	b.CQE(0, Resp(0, RcvSend, 12)).CQE(0, Req(0, s0[0], OpSend)).CQE(0, Resp(1, RcvSend, 13)).CQE(0, Resp(0, RcvSend, 14)).CQE(0, Resp(1, RcvSend, 15))
	b.Add(oracle.Step{Kind: oracle.KDestroyQP, ID: 0})
	b.Poll(0, 8)
	return b
}

// pings is rping's exact sequence, for three pings, as in the other oracles.
func pings(p Params) *Builder {
	caps := oracle.Caps{MaxSendWR: 16, MaxRecvWR: 2, MaxSendSGE: 1, MaxRecvSGE: 1}
	b := NewBuilder("pings", p, 4).Add(oracle.Step{Kind: oracle.KChannel}).CQ(0, 32, true).CQ(1, 32, true)
	b.QP2(0, 0, 0, caps).QP2(1, 1, 1, caps)
	recv := func(qp int, id uint64) { b.Recv(qp, oracle.RecvWR{WRID: id, SGEs: sge0(qp*2, 0, 16)}) }
	send := func(qp int, w oracle.SendWR) uint32 { return b.Send(qp, w)[0] }
	advert := func(qp int, id uint64) uint32 {
		return send(qp, oracle.SendWR{WRID: id, Opcode: oracle.OpSend, Flags: oracle.FlagSignaled, SGEs: sge0(qp*2+1, 0, 16)})
	}
	wait := func(cq int) {
		b.Add(oracle.Step{Kind: oracle.KArm, ID: cq})
		b.Poll(cq, 16).Add(oracle.Step{Kind: oracle.KEvent, ID: cq})
	}
	recv(1, 1)
	recv(0, 2)
	for i := 0; i < 3; i++ {
		s := advert(0, 10)
		b.CQE(0, Req(0, s, OpSend))
		wait(0)
		b.Poll(0, 16)
		b.CQE(1, Resp(1, RcvSend, 16))
		wait(1)
		b.Poll(1, 16)
		recv(1, 1)
		r := send(1, oracle.SendWR{WRID: 20, Opcode: oracle.OpRDMARead, Flags: oracle.FlagSignaled, RAddr: RemoteAddr, RKey: RemoteKey, SGEs: sge0(2, 0, 64)})
		c := Req(1, r, OpRead)
		c.ByteCnt = 64
		b.CQE(1, c)
		b.Poll(1, 16)
		g := advert(1, 21)
		b.CQE(1, Req(1, g, OpSend))
		b.CQE(0, Resp(0, RcvSend, 16))
		b.Poll(1, 16).Poll(0, 16)
		recv(0, 2)
		s = advert(0, 11)
		b.CQE(0, Req(0, s, OpSend))
		b.CQE(1, Resp(1, RcvSend, 16))
		b.Poll(0, 16).Poll(1, 16)
		recv(1, 1)
		w := send(1, oracle.SendWR{WRID: 22, Opcode: oracle.OpRDMAWrite, Flags: oracle.FlagSignaled, RAddr: RemoteAddr, RKey: RemoteKey, SGEs: sge0(2, 0, 64)})
		b.CQE(1, Req(1, w, OpWrite))
		b.Poll(1, 16)
		g = advert(1, 23)
		b.CQE(1, Req(1, g, OpSend))
		b.CQE(0, Resp(0, RcvSend, 16))
		b.Poll(1, 16)
		wait(0)
		b.Poll(0, 16)
		recv(0, 2)
	}
	return b
}
