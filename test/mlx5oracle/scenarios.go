package mlx5oracle

import (
	"fmt"
	"math/bits"
)

// Fixed addresses of the scenarios' registered buffers (MAP_FIXED in the harness), so
// data segments compare between runs. MR i is at MRBase + i·MRStride, MRLen bytes,
// byte j filled with j·7+i.
const (
	MRBase   = 0x7e0000000000
	MRStride = 0x100000
	MRLen    = 4096
	// RemoteAddr and RemoteKey are what RDMA WRITE/READ scenarios name as the peer's
	// buffer.
	RemoteAddr = 0x7f1122334000
	RemoteKey  = 0x2a2b2c
)

// Syndromes of error CQEs that libmlx5 maps to a specific ibv_wc_status, plus two it
// does not know (0x07, 0xff → IBV_WC_GENERAL_ERR).
var Syndromes = []uint8{0x01, 0x02, 0x04, 0x05, 0x06, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x22, 0x07, 0xff}

// Builder assembles a scenario and keeps the bookkeeping its CQE steps need: which
// slot and owner bit the n-th CQE of a CQ has, and which SQ index (wqe_counter) each
// posted send WQE got.
type Builder struct {
	Sc        Scenario
	cqEntries map[int]int // cq id → entries
	cqWritten map[int]int // cq id → CQEs written so far
	sqPost    map[int]int // qp id → producer counter in WQEBBs
	sqCount   map[int]int // qp id → SQ size in WQEBBs (as libmlx5 sizes it; see sqWQEBBs)
	qpn       map[int]uint32
	uidx      map[int]uint32 // libmlx5's user index of each QP: creation order
	nQP       int
}

// NewBuilder starts a scenario with open, pd and MRs mr0..mr(nMR-1).
func NewBuilder(name string, p Params, nMR int) *Builder {
	b := &Builder{Sc: Scenario{Name: name, Params: p},
		cqEntries: map[int]int{}, cqWritten: map[int]int{}, sqPost: map[int]int{},
		sqCount: map[int]int{}, qpn: map[int]uint32{}, uidx: map[int]uint32{}}
	b.Add(Step{Kind: KOpen}, Step{Kind: KPD})
	for i := 0; i < nMR; i++ {
		b.Add(Step{Kind: KMR, ID: i, Addr: MRBase + uint64(i)*MRStride, Len: MRLen,
			Access: AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead})
	}
	return b
}

// Add appends steps verbatim.
func (b *Builder) Add(s ...Step) *Builder { b.Sc.Steps = append(b.Sc.Steps, s...); return b }

// CQ creates CQ id with depth cqe.
func (b *Builder) CQ(id, cqe int, withChannel bool) *Builder {
	b.cqEntries[id] = 1 << bits.Len(uint(cqe)) // roundup_pow2(cqe+1), as libmlx5 sizes it
	return b.Add(Step{Kind: KCQ, ID: id, CQE: cqe, WithChannel: withChannel})
}

// sqWQEBBs is libmlx5 44's RC send queue size in 64-byte blocks for caps c (the RC
// default reserves room for UMR: 192 bytes of overhead), used only to place CQEs.
func sqWQEBBs(c Caps) int {
	const overhead = 192
	size := max(overhead+16*int(c.MaxSendSGE), overhead+align(4+int(c.MaxInline), 16))
	size = align(size, 64)
	n := int(c.MaxSendWR) * size
	return 1 << bits.Len(uint(n-1)) / 64
}

func align(n, a int) int { return (n + a - 1) / a * a }

// QP creates RC QP id on cq (send and receive) and moves it to RTS.
func (b *Builder) QP(id, cq int, c Caps) *Builder {
	b.sqCount[id] = sqWQEBBs(c)
	b.qpn[id] = b.Sc.Params.FirstQPN + uint32(b.nQP)
	b.uidx[id] = uint32(b.nQP)
	b.nQP++
	return b.Add(Step{Kind: KQP, ID: id, SendCQ: cq, RecvCQ: cq, Caps: c}, Step{Kind: KRTS, ID: id})
}

// wqebbs is the size of a send WQE in 64-byte blocks.
func wqebbs(w SendWR) int {
	n := 16
	if w.Opcode == OpRDMAWrite || w.Opcode == OpRDMAWriteImm || w.Opcode == OpRDMARead {
		n += 16
	}
	if w.Flags&FlagInline != 0 {
		l := 0
		for _, g := range w.SGEs {
			l += int(g.Len)
		}
		if l > 0 {
			n += align(4+l, 16)
		}
	} else {
		for _, g := range w.SGEs {
			if g.Len > 0 {
				n += 16
			}
		}
	}
	return align(n, 64) / 64
}

// Send posts ws as one chain on qp and returns the wqe_index of each.
func (b *Builder) Send(qp int, ws ...SendWR) []int {
	idx := make([]int, len(ws))
	for i, w := range ws {
		idx[i] = b.sqPost[qp] & 0xffff
		b.sqPost[qp] += wqebbs(w)
	}
	b.Add(Step{Kind: KSend, ID: qp, Sends: ws})
	return idx
}

// Recv posts ws as one chain on qp.
func (b *Builder) Recv(qp int, ws ...RecvWR) *Builder {
	return b.Add(Step{Kind: KRecv, ID: qp, Recvs: ws})
}

// CQE writes c as the next CQE of cq (slot and owner bit from the count so far).
func (b *Builder) CQE(cq int, c CQE) *Builder {
	n, e := b.cqWritten[cq], b.cqEntries[cq]
	if e == 0 {
		panic(fmt.Sprintf("mlx5oracle: cqe for unknown cq %d", cq))
	}
	c.Owner = uint8(n/e) & 1
	b.cqWritten[cq]++
	bytes := c.Bytes()
	return b.Add(Step{Kind: KCQE, ID: cq, Slot: n % e, Bytes: bytes[:]})
}

// ReqCQE is a successful requester CQE for the WQE at wqe_index idx of qp (libmlx5
// opcode wqeOp in the top byte of sop_drop_qpn), carrying the QP's user index.
func (b *Builder) ReqCQE(qp, idx int, wqeOp uint8, byteCnt uint32) CQE {
	return CQE{Opcode: CQEReq, SOpQPN: uint32(wqeOp)<<24 | b.qpn[qp], WQECount: uint16(idx), ByteCnt: byteCnt, UIdx: b.uidx[qp]}
}

// RespCQE is a responder CQE of opcode op for qp.
func (b *Builder) RespCQE(qp int, op uint8, byteCnt, imm uint32) CQE {
	return CQE{Opcode: op, SOpQPN: b.qpn[qp], ByteCnt: byteCnt, Imm: imm,
		FlagsRQPN: 0x99 | 3<<24, SLID: 2, UIdx: b.uidx[qp]}
}

// Poll polls cq for up to n completions.
func (b *Builder) Poll(cq, n int) *Builder { return b.Add(Step{Kind: KPoll, ID: cq, N: n}) }

// WQE opcodes (mlx5 ctrl segment) as they appear in requester CQEs.
const (
	WQERDMAWrite    = 0x08
	WQERDMAWriteImm = 0x09
	WQESend         = 0x0a
	WQESendImm      = 0x0b
	WQERDMARead     = 0x10
)

func sge0(mr int, off uint64, n uint32) []SGE { return []SGE{{MR: mr, Off: off, Len: n}} }

// stdCaps are the caps of the first oracle measurements: 16/16 WRs, 1 SGE, inline 64.
var stdCaps = Caps{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInline: 64}

// Scenarios returns every named scenario the oracle tests run: context, cq-depths,
// qp-caps, recv, send-kinds-bf, send-kinds-nobf, send-kinds-shared, inline,
// sq-wrap-bf, sq-wrap-nobf, cqe-success, cqe-req-errors, cqe-resp-errors, cq-wrap,
// arm, two-qps, teardown, post-errors, qp-destroy-clean. Names are stable; new scenarios
// are only appended.
func Scenarios() []Scenario {
	p := DefaultParams()
	var out []Scenario

	// context: creation with the DEVX retry sequence, a port query, teardown.
	out = append(out, NewBuilder("context", p, 0).Add(Step{Kind: KQueryPort, Port: 1}, Step{Kind: KDeallocPD}).Sc)

	// cq-depths: CREATE_CQ for several depths, one with a completion channel.
	b := NewBuilder("cq-depths", p, 0).Add(Step{Kind: KChannel})
	for i, d := range []int{1, 2, 15, 16, 100, 255, 1000} {
		b.CQ(i, d, i == 3)
	}
	b.Add(Step{Kind: KDestroyCQ, ID: 0})
	out = append(out, b.Sc)

	// qp-caps: CREATE_QP sizing for several caps; more QPs than low-latency bfregs,
	// so later QPs share bfreg 0.
	b = NewBuilder("qp-caps", p, 0).CQ(0, 63, false)
	for i, c := range []Caps{stdCaps, Caps{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInline: 0}, Caps{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 2, MaxRecvSGE: 2, MaxInline: 0}, Caps{MaxSendWR: 100, MaxRecvWR: 0, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInline: 28},
		Caps{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 4, MaxRecvSGE: 4, MaxInline: 256}, Caps{MaxSendWR: 128, MaxRecvWR: 32, MaxSendSGE: 1, MaxRecvSGE: 3, MaxInline: 0}, Caps{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInline: 512}} {
		b.Add(Step{Kind: KQP, ID: i, SendCQ: 0, RecvCQ: 0, Caps: c, SigAll: i == 2})
	}
	b.Add(Step{Kind: KDestroyQP, ID: 1})
	out = append(out, b.Sc)

	// recv: RECV with one SGE, a chain, and three SGEs in a four-SGE RQ (terminated).
	b = NewBuilder("recv", p, 2).CQ(0, 15, false).QP(0, 0, stdCaps).QP(1, 0, Caps{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 4, MaxInline: 0})
	b.Recv(0, RecvWR{WRID: 1, SGEs: sge0(0, 0, 4096)})
	b.Recv(0, RecvWR{WRID: 2, SGEs: sge0(0, 64, 100)}, RecvWR{WRID: 3, SGEs: sge0(1, 0, 200)}, RecvWR{WRID: 4, SGEs: sge0(1, 8, 8)})
	b.Recv(1, RecvWR{WRID: 5, SGEs: []SGE{SGE{MR: 0, Off: 0, Len: 16}, SGE{MR: 1, Off: 32, Len: 48}, SGE{MR: 0, Off: 1024, Len: 1000}}})
	b.Recv(1, RecvWR{WRID: 6, SGEs: []SGE{SGE{MR: 0, Off: 0, Len: 16}, SGE{MR: 1, Off: 32, Len: 48}, SGE{MR: 0, Off: 1024, Len: 1000}, SGE{MR: 1, Off: 0, Len: 4096}}})
	out = append(out, b.Sc)

	// send-kinds and the same with BlueFlame off: signaled and unsignaled SEND, SEND
	// with immediate, solicited, fenced, two SGEs, RDMA WRITE (+imm), RDMA READ, a chain.
	// send-kinds-shared: BlueFlame registers exist but the QP gets the shared bfreg 0.
	for _, name := range []string{"send-kinds-bf", "send-kinds-nobf", "send-kinds-shared"} {
		pp := p
		switch name {
		case "send-kinds-nobf":
			pp.BFRegSize = 0
		case "send-kinds-shared":
			pp.LowLatBFRegs = nil
		}
		b = NewBuilder(name, pp, 2).CQ(0, 63, false).QP(0, 0, Caps{MaxSendWR: 32, MaxRecvWR: 16, MaxSendSGE: 2, MaxRecvSGE: 1, MaxInline: 64})
		b.Send(0, SendWR{WRID: 10, Opcode: OpSend, Flags: FlagSignaled, SGEs: sge0(0, 0, 8)})
		b.Send(0, SendWR{WRID: 11, Opcode: OpSend, SGEs: sge0(0, 16, 100)})
		b.Send(0, SendWR{WRID: 12, Opcode: OpSendImm, Flags: FlagSignaled | FlagSolicited, Imm: 0xdeadbeef, SGEs: sge0(1, 0, 64)})
		b.Send(0, SendWR{WRID: 13, Opcode: OpSend, Flags: FlagSignaled | FlagFence, SGEs: []SGE{SGE{MR: 0, Off: 0, Len: 32}, SGE{MR: 1, Off: 64, Len: 32}}})
		b.Send(0, SendWR{WRID: 14, Opcode: OpRDMAWrite, Flags: FlagSignaled, RAddr: RemoteAddr, RKey: RemoteKey, SGEs: sge0(0, 0, 4096)})
		b.Send(0, SendWR{WRID: 15, Opcode: OpRDMAWriteImm, Flags: FlagSignaled, Imm: 7, RAddr: RemoteAddr + 8, RKey: RemoteKey, SGEs: sge0(1, 0, 16)})
		b.Send(0, SendWR{WRID: 16, Opcode: OpRDMARead, Flags: FlagSignaled, RAddr: RemoteAddr, RKey: RemoteKey, SGEs: sge0(1, 128, 64)})
		b.Send(0, SendWR{WRID: 17, Opcode: OpSend, Flags: FlagSignaled, SGEs: sge0(0, 0, 0)})
		b.Send(0,
			SendWR{WRID: 18, Opcode: OpSend, SGEs: sge0(0, 0, 8)},
			SendWR{WRID: 19, Opcode: OpRDMAWrite, RAddr: RemoteAddr, RKey: RemoteKey, SGEs: sge0(0, 8, 8)},
			SendWR{WRID: 20, Opcode: OpSend, Flags: FlagSignaled, SGEs: sge0(0, 16, 8)})
		out = append(out, b.Sc)
	}

	// inline: SEND and RDMA WRITE inline of sizes from 0 to the QP's limit, several
	// of them spanning two or more WQEBBs; BlueFlame on.
	b = NewBuilder("inline", p, 2).CQ(0, 63, false).QP(0, 0, Caps{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 2, MaxRecvSGE: 1, MaxInline: 256})
	for i, n := range []uint32{0, 1, 12, 28, 29, 44, 60, 64, 100, 124, 200, 256} {
		b.Send(0, SendWR{WRID: uint64(100 + i), Opcode: OpSend, Flags: FlagSignaled | FlagInline, SGEs: sge0(0, uint64(i), n)})
	}
	b.Send(0, SendWR{WRID: 200, Opcode: OpSend, Flags: FlagSignaled | FlagInline, SGEs: []SGE{SGE{MR: 0, Off: 3, Len: 10}, SGE{MR: 1, Off: 5, Len: 30}}})
	b.Send(0, SendWR{WRID: 201, Opcode: OpRDMAWrite, Flags: FlagSignaled | FlagInline, RAddr: RemoteAddr, RKey: RemoteKey, SGEs: sge0(1, 0, 40)})
	out = append(out, b.Sc)

	out = append(out, sqWrap(p, 512), sqWrap(p, 0))
	out = append(out, cqeSuccess(p), cqeErrors(p, CQEReqErr), cqeErrors(p, CQERespErr), cqWrap(p), arm(p))
	out = append(out, twoQPs(p), teardown(p), postErrors(p))
	out = append(out, qpDestroyClean(p))
	out = append(out, timestamps(p))
	return out
}

// TimestampClock is the fake kernel's clock_info page of the timestamps scenario: a
// 156.25 MHz device clock (6.4 ns per cycle = mult/2^shift), 63-bit, snapshot at
// Cycles/Nsec with a fraction carried.
var TimestampClock = ClockInfo{Nsec: 1_700_000_000_123_456_789, Cycles: 0x123456789abc, Frac: 0x1234567,
	Mult: 3435973837, Shift: 29, Mask: 1<<63 - 1}

// timestamps: a context with the clock_info page, ibv_query_device_ex, a CQ created with
// completion timestamps (ibv_create_cq_ex), a QP on it, and completions stamped before
// and after the clock's snapshot, read back raw and converted (mlx5dv_ts_to_ns).
func timestamps(p Params) Scenario {
	ci := TimestampClock
	p.ClockInfo, p.TimestampMask, p.HCACoreClockKHz = &ci, 1<<63-1, 156250
	b := NewBuilder("timestamps", p, 2).Add(Step{Kind: KQueryDeviceEx}, Step{Kind: KChannel})
	b.cqEntries[0] = 16
	b.Add(Step{Kind: KCQEx, ID: 0, CQE: 15, WithChannel: true, TS: true})
	b.QP(0, 0, stdCaps)
	b.Recv(0, RecvWR{WRID: 1, SGEs: sge0(1, 0, 64)}, RecvWR{WRID: 2, SGEs: sge0(1, 64, 64)})
	s := b.Send(0, SendWR{WRID: 10, Opcode: OpSend, Flags: FlagSignaled, SGEs: sge0(0, 0, 16)})
	w := b.Send(0, SendWR{WRID: 11, Opcode: OpRDMAWrite, Flags: FlagSignaled, RAddr: RemoteAddr, RKey: RemoteKey, SGEs: sge0(0, 0, 16)})
	for i, c := range []CQE{
		b.ReqCQE(0, s[0], WQESend, 0),
		b.RespCQE(0, CQERespSend, 16, 0),
		b.ReqCQE(0, w[0], WQERDMAWrite, 0),
		b.RespCQE(0, CQERespSend, 16, 0),
	} {
		// after the snapshot, after, before it (older: the negative branch), far after
		c.Timestamp = ci.Cycles + []uint64{1000, 5_000_000, -3000 & (1<<64 - 1), 1 << 40}[i]
		b.CQE(0, c)
	}
	// (No empty extended poll: libmlx5's writes no consumer index then, its legacy poll
	// and gorping's always do.)
	b.Add(Step{Kind: KPollTS, ID: 0, N: 2}, Step{Kind: KPollTS, ID: 0, N: 8})
	b.Add(Step{Kind: KDestroyQP, ID: 0}, Step{Kind: KDestroyCQ, ID: 0})
	return b.Sc
}

// qpDestroyClean: two QPs share one eight-entry CQ; after the CQ has wrapped once, QP 0 is
// destroyed while CQEs of both QPs (receive and send) are still in it, across the wrap.
// libmlx5 removes QP 0's CQEs, moving QP 1's over them (keeping each slot's owner bit),
// and advances the consumer index. A new QP then gets QP 0's user index again; polling
// must return QP 1's completions and the new QP's, never QP 0's stale ones.
func qpDestroyClean(p Params) Scenario {
	b := NewBuilder("qp-destroy-clean", p, 2).CQ(0, 7, false).QP(0, 0, stdCaps).QP(1, 0, stdCaps)
	var r0, r1 []RecvWR
	for i := 0; i < 6; i++ {
		r0 = append(r0, RecvWR{WRID: uint64(100 + i), SGEs: sge0(0, uint64(64*i), 64)})
		r1 = append(r1, RecvWR{WRID: uint64(200 + i), SGEs: sge0(1, uint64(64*i), 64)})
	}
	b.Recv(0, r0...).Recv(1, r1...)
	s0 := b.Send(0, SendWR{WRID: 110, Opcode: OpSend, Flags: FlagSignaled, SGEs: sge0(0, 0, 8)})
	// Lap 0: five CQEs, all polled.
	for i, qp := range []int{1, 0, 1, 0, 1} {
		b.CQE(0, b.RespCQE(qp, CQERespSend, uint32(10+i), 0))
	}
	b.Poll(0, 8)
	// Slots 5, 6, 7 and, on lap 1, 0 and 1: one of them polled before the destroy.
	b.CQE(0, b.RespCQE(0, CQERespSend, 20, 0))
	b.CQE(0, b.RespCQE(1, CQERespSend, 21, 0))
	b.CQE(0, b.ReqCQE(0, s0[0], WQESend, 0))
	b.CQE(0, b.RespCQE(1, CQERespSend, 22, 0))
	b.CQE(0, b.RespCQE(0, CQERespSend, 23, 0))
	b.Poll(0, 1)
	b.Add(Step{Kind: KDestroyQP, ID: 0})
	// QP 2 takes the freed user index 0 (libmlx5 hands out the lowest free one).
	b.qpn[2], b.uidx[2], b.sqCount[2] = b.Sc.Params.FirstQPN+2, 0, sqWQEBBs(stdCaps)
	b.nQP++
	b.Add(Step{Kind: KQP, ID: 2, SendCQ: 0, RecvCQ: 0, Caps: stdCaps}, Step{Kind: KRTS, ID: 2})
	b.Recv(2, RecvWR{WRID: 300, SGEs: sge0(0, 0, 64)})
	b.CQE(0, b.RespCQE(2, CQERespSend, 30, 0))
	b.Poll(0, 8)
	return b.Sc
}

// sqWrap posts through a small SQ (16 WQEBBs) several times, completing signaled sends so the
// library frees space, with a two-WQEBB inline WQE placed at the last slot so it wraps.
func sqWrap(p Params, bf uint32) Scenario {
	p.BFRegSize = bf
	name := "sq-wrap-bf"
	if bf == 0 {
		name = "sq-wrap-nobf"
	}
	caps := Caps{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInline: 0} // 4 WQEs of 256 B: 16 WQEBBs
	b := NewBuilder(name, p, 1).CQ(0, 15, false).QP(0, 0, caps)
	sq := b.sqCount[0]
	wr := uint64(1000)
	for lap := 0; lap < 3; lap++ {
		// Fill up to the last slot with one-WQEBB sends, completing each.
		for b.sqPost[0]%sq != sq-1 {
			idx := b.Send(0, SendWR{WRID: wr, Opcode: OpSend, Flags: FlagSignaled, SGEs: sge0(0, wr%64, 8)})
			b.CQE(0, b.ReqCQE(0, idx[0], WQESend, 0)).Poll(0, 4)
			wr++
		}
		// A two-WQEBB inline WQE at the wrap point.
		idx := b.Send(0, SendWR{WRID: wr, Opcode: OpSend, Flags: FlagSignaled | FlagInline, SGEs: sge0(0, 0, 60)})
		b.CQE(0, b.ReqCQE(0, idx[0], WQESend, 0)).Poll(0, 4)
		wr++
	}
	return b.Sc
}

// cqeSuccess decodes a successful CQE of every kind.
func cqeSuccess(p Params) Scenario {
	b := NewBuilder("cqe-success", p, 2).CQ(0, 31, false).QP(0, 0, stdCaps)
	var rs []RecvWR
	for i := 1; i <= 6; i++ {
		rs = append(rs, RecvWR{WRID: uint64(i), SGEs: sge0(1, uint64(512*i), 512)})
	}
	b.Recv(0, rs...)
	s := b.Send(0, SendWR{WRID: 10, Opcode: OpSend, Flags: FlagSignaled, SGEs: sge0(0, 0, 8)})
	w := b.Send(0, SendWR{WRID: 11, Opcode: OpRDMAWrite, Flags: FlagSignaled, RAddr: RemoteAddr, RKey: RemoteKey, SGEs: sge0(0, 0, 16)})
	r := b.Send(0, SendWR{WRID: 12, Opcode: OpRDMARead, Flags: FlagSignaled, RAddr: RemoteAddr, RKey: RemoteKey, SGEs: sge0(0, 64, 64)})
	wi := b.Send(0, SendWR{WRID: 13, Opcode: OpRDMAWriteImm, Flags: FlagSignaled, Imm: 0x55, RAddr: RemoteAddr, RKey: RemoteKey, SGEs: sge0(0, 0, 16)})
	si := b.Send(0, SendWR{WRID: 14, Opcode: OpSendImm, Flags: FlagSignaled, Imm: 0x66, SGEs: sge0(0, 0, 16)})
	b.CQE(0, b.ReqCQE(0, s[0], WQESend, 0))
	b.CQE(0, b.ReqCQE(0, w[0], WQERDMAWrite, 0))
	b.CQE(0, b.ReqCQE(0, r[0], WQERDMARead, 64))
	b.CQE(0, b.ReqCQE(0, wi[0], WQERDMAWriteImm, 0))
	b.CQE(0, b.ReqCQE(0, si[0], WQESendImm, 0))
	b.Poll(0, 8)
	b.CQE(0, b.RespCQE(0, CQERespSend, 100, 0))
	b.CQE(0, b.RespCQE(0, CQERespSendIm, 200, 0x01020304))
	b.CQE(0, b.RespCQE(0, CQERespWRImm, 300, 0x0a0b0c0d))
	b.CQE(0, b.RespCQE(0, CQERespSendIv, 400, 0x00abcdef))
	b.Poll(0, 2).Poll(0, 8)
	// Scatter-to-CQE responder: 20 and 32 bytes of payload carried in the CQE.
	sc1 := b.RespCQE(0, CQERespSend, 20, 0)
	sc1.Inline, sc1.Data = 1, []byte("scatter-to-cqe-bytes")
	b.CQE(0, sc1)
	sc2 := b.RespCQE(0, CQERespSendIm, 32, 0x77)
	sc2.Inline, sc2.Data = 1, []byte("0123456789abcdefghijklmnopqrstuv")
	b.CQE(0, sc2)
	b.Poll(0, 8).Poll(0, 8)
	return b.Sc
}

// cqeErrors decodes an error CQE (opcode 13 requester or 14 responder) of every
// syndrome, each for its own posted WQE.
func cqeErrors(p Params, op uint8) Scenario {
	name := "cqe-req-errors"
	if op == CQERespErr {
		name = "cqe-resp-errors"
	}
	b := NewBuilder(name, p, 1).CQ(0, 63, false).QP(0, 0, Caps{MaxSendWR: 32, MaxRecvWR: 32, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInline: 0})
	for i, syn := range Syndromes {
		var c CQE
		if op == CQEReqErr {
			idx := b.Send(0, SendWR{WRID: uint64(500 + i), Opcode: OpSend, Flags: FlagSignaled, SGEs: sge0(0, 0, 8)})
			c = CQE{Opcode: op, SOpQPN: uint32(WQESend)<<24 | b.qpn[0], WQECount: uint16(idx[0])}
		} else {
			b.Recv(0, RecvWR{WRID: uint64(600 + i), SGEs: sge0(0, 0, 64)})
			c = CQE{Opcode: op, SOpQPN: b.qpn[0]}
		}
		c.Syndrome, c.VendorErr = syn, uint8(0x80+i)
		b.CQE(0, c).Poll(0, 2)
	}
	return b.Sc
}

// cqWrap runs five laps over a four-entry CQ: each lap fills it with responder CQEs,
// polls it dry (and once more, to see the stale previous-lap entries ignored).
func cqWrap(p Params) Scenario {
	b := NewBuilder("cq-wrap", p, 1).CQ(0, 3, false).QP(0, 0, Caps{MaxSendWR: 8, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInline: 0})
	wr := uint64(700)
	for lap := 0; lap < 5; lap++ {
		for i := 0; i < 4; i++ {
			b.Recv(0, RecvWR{WRID: wr, SGEs: sge0(0, 0, 256)})
			wr++
		}
		for i := 0; i < 4; i++ {
			b.CQE(0, b.RespCQE(0, CQERespSend, uint32(10*lap+i+1), 0))
			if i == 1 {
				b.Poll(0, 1)
			}
		}
		b.Poll(0, 8).Poll(0, 8)
	}
	return b.Sc
}

// arm: arm (not solicited), completion event, poll, re-arm solicited, event, re-arm.
func arm(p Params) Scenario {
	b := NewBuilder("arm", p, 1).Add(Step{Kind: KChannel}).CQ(0, 15, true).QP(0, 0, stdCaps)
	b.Add(Step{Kind: KArm, ID: 0})
	idx := b.Send(0, SendWR{WRID: 1, Opcode: OpSend, Flags: FlagSignaled, SGEs: sge0(0, 0, 8)})
	b.CQE(0, b.ReqCQE(0, idx[0], WQESend, 0))
	b.Add(Step{Kind: KEvent, ID: 0}).Poll(0, 4)
	b.Add(Step{Kind: KArm, ID: 0, Solicited: true})
	idx = b.Send(0, SendWR{WRID: 2, Opcode: OpSend, Flags: FlagSignaled, SGEs: sge0(0, 0, 8)})
	b.CQE(0, b.ReqCQE(0, idx[0], WQESend, 0))
	b.Add(Step{Kind: KEvent, ID: 0}).Poll(0, 4)
	b.Add(Step{Kind: KArm, ID: 0})
	b.Add(Step{Kind: KEvent, ID: 0})
	b.Add(Step{Kind: KArm, ID: 0, Solicited: true})
	return b.Sc
}

// twoQPs: two QPs share one CQ (and one send CQ), each on its own low-latency bfreg;
// completions of both interleave, found by user index.
func twoQPs(p Params) Scenario {
	b := NewBuilder("two-qps", p, 2).CQ(0, 31, false).QP(0, 0, stdCaps).QP(1, 0, stdCaps)
	b.Recv(0, RecvWR{WRID: 100, SGEs: sge0(0, 0, 256)}, RecvWR{WRID: 101, SGEs: sge0(0, 256, 256)})
	b.Recv(1, RecvWR{WRID: 200, SGEs: sge0(1, 0, 256)}, RecvWR{WRID: 201, SGEs: sge0(1, 256, 256)})
	for i := 0; i < 3; i++ {
		a := b.Send(0, SendWR{WRID: uint64(110 + i), Opcode: OpSend, Flags: FlagSignaled, SGEs: sge0(0, 0, 16)})
		c := b.Send(1, SendWR{WRID: uint64(210 + i), Opcode: OpRDMAWrite, Flags: FlagSignaled | FlagInline, RAddr: RemoteAddr, RKey: RemoteKey, SGEs: sge0(1, 0, 16)})
		b.CQE(0, b.ReqCQE(1, c[0], WQERDMAWrite, 0))
		b.CQE(0, b.ReqCQE(0, a[0], WQESend, 0))
	}
	b.CQE(0, b.RespCQE(1, CQERespSend, 11, 0)).CQE(0, b.RespCQE(0, CQERespSend, 22, 0))
	b.CQE(0, b.RespCQE(0, CQERespSend, 33, 0)).CQE(0, b.RespCQE(1, CQERespSend, 44, 0))
	b.Poll(0, 3).Poll(0, 16)
	return b.Sc
}

// teardown: every object created, then destroyed in the usual order.
func teardown(p Params) Scenario {
	b := NewBuilder("teardown", p, 2).Add(Step{Kind: KChannel}).CQ(0, 15, true).CQ(1, 15, false)
	b.Add(Step{Kind: KQP, ID: 0, SendCQ: 0, RecvCQ: 1, Caps: stdCaps})
	b.Add(Step{Kind: KDestroyQP, ID: 0}, Step{Kind: KDestroyCQ, ID: 1}, Step{Kind: KDestroyCQ, ID: 0},
		Step{Kind: KDereg, ID: 1}, Step{Kind: KDereg, ID: 0}, Step{Kind: KDeallocPD})
	return b.Sc
}

// postErrors: posts the library refuses — a full SQ, a full RQ, too many SGEs, inline
// data over the limit — each between posts that succeed, and a chain whose second WR
// is bad (the first is posted and rung).
func postErrors(p Params) Scenario {
	caps := Caps{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInline: 0}
	b := NewBuilder("post-errors", p, 1).CQ(0, 15, false).QP(0, 0, caps)
	send := func(id uint64, flags int, n uint32, sges int) SendWR {
		w := SendWR{WRID: id, Opcode: OpSend, Flags: flags}
		for i := 0; i < sges; i++ {
			w.SGEs = append(w.SGEs, SGE{MR: 0, Off: uint64(64 * i), Len: n})
		}
		return w
	}
	// max_post for these caps is 4 (see TestOracleHarnessQPCaps): the fifth is refused.
	for i := 0; i < 4; i++ {
		b.Send(0, send(uint64(i), 0, 8, 1))
	}
	b.Add(Step{Kind: KSend, ID: 0, Sends: []SendWR{send(4, 0, 8, 1)}, WantErr: true})
	// One CQE for the last WQE frees the SQ (it covers the unsignaled ones before it).
	b.CQE(0, b.ReqCQE(0, 3, WQESend, 0)).Poll(0, 4)
	b.Add(Step{Kind: KSend, ID: 0, Sends: []SendWR{send(6, FlagSignaled, 8, 2)}, WantErr: true})              // 2 SGEs > 1
	b.Add(Step{Kind: KSend, ID: 0, Sends: []SendWR{send(7, FlagSignaled|FlagInline, 200, 1)}, WantErr: true}) // inline > limit
	b.Add(Step{Kind: KSend, ID: 0, Sends: []SendWR{send(8, FlagSignaled, 8, 1), send(9, FlagSignaled, 8, 3)}, WantErr: true})
	for i := 0; i < 4; i++ {
		b.Recv(0, RecvWR{WRID: uint64(20 + i), SGEs: sge0(0, 0, 64)})
	}
	b.Add(Step{Kind: KRecv, ID: 0, Recvs: []RecvWR{{WRID: 24, SGEs: sge0(0, 0, 64)}}, WantErr: true})
	return b.Sc
}

// PageScenarios returns every scenario of Scenarios again as on a kernel with pageSize-byte
// pages (16 or 64 KiB: arm64's large-page kernels), named "<name>@<n>k": the harness's
// sysconf answers pageSize, and the fake kernel answers GET_CONTEXT as mlx5_ib does there
// (pageSize/4096 UARs per mapping, the bfregs asked for rounded up to whole mappings) and
// hands out low-latency bfregs in the kernel's order for the count libmlx5 asks.
func PageScenarios(pageSize int) []Scenario {
	// libmlx5 asks max(16, 2 UARs' bfregs per 4 KiB of a page) bfregs, of which
	// max(4, total-12) low-latency ones; the kernel gives those from net index
	// total-low upwards, in gross numbering net/2·4 + net%2.
	tot := max(16, pageSize/4096*2)
	low := max(4, tot-12)
	var gross []uint32
	for net := tot - low; net < tot; net++ {
		gross = append(gross, uint32(net/2*4+net%2))
	}
	var out []Scenario
	for _, sc := range Scenarios() {
		sc.Name = fmt.Sprintf("%s@%dk", sc.Name, pageSize/1024)
		sc.Params.PageSize = pageSize
		sc.Params.TotBFRegs = 0
		if sc.Params.LowLatBFRegs != nil {
			sc.Params.LowLatBFRegs = gross
		}
		out = append(out, sc)
	}
	return out
}
