package mlx5oracle

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
	"strings"
	"sync"
	"testing"

	"github.com/gorping/gorping/test/oracle"
	"golang.org/x/sys/unix"
)

// These tests check the harness itself: that it ran Debian's libmlx5 and recorded
// what that library is known to do (facts measured with libmlx5 44), with expectations
// computed from the scenario inputs where possible, so a harness that records nothing
// or garbage fails.

var (
	recMu    sync.Mutex
	recCache = map[string]*Record{}
)

// scenario runs the named scenario of Scenarios() once per test process.
func scenario(t *testing.T, name string) (Scenario, *Record) {
	t.Helper()
	for _, sc := range Scenarios() {
		if sc.Name != name {
			continue
		}
		recMu.Lock()
		rec, ok := recCache[name]
		recMu.Unlock()
		if !ok {
			rec = MustRun(t, sc)
			recMu.Lock()
			recCache[name] = rec
			recMu.Unlock()
		}
		if len(rec.Steps) != len(sc.Steps) {
			t.Fatalf("%s: %d step records for %d steps", name, len(rec.Steps), len(sc.Steps))
		}
		for i, s := range rec.Steps {
			if (s.Result.Ret != 0) != s.Step.WantErr {
				t.Fatalf("%s step %d %q: ret %d errno %d (want error: %v)", name, i, s.Line, s.Result.Ret, s.Result.Errno, s.Step.WantErr)
			}
		}
		return sc, rec
	}
	t.Fatalf("no scenario %q", name)
	return Scenario{}, nil
}

func cmdsOf(rec *Record, num uint32) []Cmd {
	var out []Cmd
	for _, c := range rec.Cmds {
		if c.Num == num && !c.Ex {
			out = append(out, c)
		}
	}
	return out
}

func symAt(c Cmd, part string, off int) string {
	for _, y := range c.Syms {
		if y.Part == part && y.Off == off {
			return y.Name
		}
	}
	return ""
}

var (
	lu = binary.LittleEndian
	bu = binary.BigEndian
)

func TestOracleHarnessEveryScenarioRuns(t *testing.T) {
	seen := map[string]bool{}
	for _, sc := range Scenarios() {
		if seen[sc.Name] {
			t.Errorf("duplicate scenario name %q", sc.Name)
		}
		seen[sc.Name] = true
		t.Run(sc.Name, func(t *testing.T) {
			_, rec := scenario(t, sc.Name)
			if !bytes.Contains([]byte(rec.Steps[0].Result.Name), []byte("mlx5")) {
				t.Errorf("opened %q, not the fake mlx5 device", rec.Steps[0].Result.Name)
			}
			if rec.Stderr != "" {
				t.Logf("harness stderr: %s", rec.Stderr)
			}
		})
	}
}

// TestOracleHarnessContext: GET_CONTEXT is refused while DEVX is asked (at 48, 40 and
// 32 bytes), then accepted at 48 bytes without DEVX; every static UAR page is mapped.
func TestOracleHarnessContext(t *testing.T) {
	sc, rec := scenario(t, "context")
	gc := cmdsOf(rec, CmdGetContext)
	wantWords := []int{12, 10, 8, 12}
	if len(gc) != len(wantWords) {
		t.Fatalf("GET_CONTEXT sent %d times, want %d", len(gc), len(wantWords))
	}
	for i, c := range gc {
		devx := lu.Uint32(c.Driver[8:])&1 != 0
		if c.InWords != wantWords[i] || devx != (i < 3) || (c.Errno != 0) != (i < 3) || c.OutWords != 20 {
			t.Errorf("GET_CONTEXT %d: in_words %d out_words %d devx %v errno %d", i, c.InWords, c.OutWords, devx, c.Errno)
		}
	}
	d := gc[3].Driver
	if len(d) != 32 || lu.Uint32(d[0:]) != 16 || lu.Uint32(d[4:]) != 4 || d[16] != 1 || lu.Uint64(d[24:]) != 3 {
		t.Errorf("GET_CONTEXT driver request % x: want bfregs 16, low latency 4, cqe version 1, lib_caps 3", d)
	}
	mm := rec.Steps[0].Mmaps
	if want := int(sc.Params.TotBFRegs / 2); len(mm) != want {
		t.Fatalf("%d UAR mmaps, want %d", len(mm), want)
	}
	for i, m := range mm {
		if m.Off != uint64(i)*4096 || m.Len != 4096 || m.Prot != 2 || m.Flags != 1 {
			t.Errorf("mmap %d: %+v, want offset %#x, 4096 bytes, PROT_WRITE, MAP_SHARED", i, m, i*4096)
		}
	}
	if n := rec.Steps[0].Result.Ioctls; n != 3 {
		t.Errorf("%d ioctls refused during open, want 3 (probe, device method, DEVX caps)", n)
	}
	if n := len(cmdsOf(rec, CmdQueryPort)); n != 2 {
		t.Errorf("%d QUERY_PORTs, want one at open and one asked", n)
	}
	if r := rec.Steps[2].Result; r.State != 4 || r.LinkLayer != int(sc.Params.LinkLayer) || r.LID != 1 {
		t.Errorf("query_port result %+v", r)
	}
}

// TestOracleHarnessCQDepths: CREATE_CQ asks roundup_pow2(depth+1)−1 entries of 64
// bytes, the buffer starts with every op_own 0xF0, the channel is named only when given.
func TestOracleHarnessCQDepths(t *testing.T) {
	sc, rec := scenario(t, "cq-depths")
	cc := cmdsOf(rec, CmdCreateCQ)
	var depths []Step
	for _, s := range sc.Steps {
		if s.Kind == KCQ {
			depths = append(depths, s)
		}
	}
	if len(cc) != len(depths) {
		t.Fatalf("%d CREATE_CQ for %d cq steps", len(cc), len(depths))
	}
	for i, c := range cc {
		s := depths[i]
		entries := 1 << bits.Len(uint(s.CQE))
		if got := int(lu.Uint32(c.Core[16:])); got != entries-1 {
			t.Errorf("cq %d depth %d: core cqe %d, want %d", i, s.CQE, got, entries-1)
		}
		if lu.Uint32(c.Driver[16:]) != 64 || c.InWords != 18 || c.OutWords != 4 {
			t.Errorf("cq %d: cqe_size %d in %d out %d", i, lu.Uint32(c.Driver[16:]), c.InWords, c.OutWords)
		}
		if symAt(c, "driver", 0) != fmt.Sprintf("cq%d+0x0", i) || symAt(c, "driver", 8) == "" {
			t.Errorf("cq %d: symbolic fields %v", i, c.Syms)
		}
		hasFD := false
		for _, y := range c.Syms {
			hasFD = hasFD || y.Name == "fd"
		}
		if hasFD != s.WithChannel {
			t.Errorf("cq %d: channel fd named %v, want %v", i, hasFD, s.WithChannel)
		}
		var step StepRecord
		for _, st := range rec.Steps {
			if st.Step.Kind == KCQ && st.Step.ID == s.ID {
				step = st
			}
		}
		if step.Result.CQE != entries-1 {
			t.Errorf("cq %d: ibv_cq.cqe %d, want %d", i, step.Result.CQE, entries-1)
		}
		buf := step.Mem[fmt.Sprintf("cq%d", s.ID)]
		if len(buf) != entries*64 {
			t.Fatalf("cq %d buffer %d bytes, want %d", i, len(buf), entries*64)
		}
		for j := 63; j < len(buf); j += 64 {
			if buf[j] != 0xf0 {
				t.Fatalf("cq %d entry %d op_own %#x, want 0xf0", i, j/64, buf[j])
			}
		}
	}
}

// sizes of an RC QP as libmlx5 44 computes them (UMR reserve: 192 bytes overhead).
func qpSizes(c Caps) (sqCnt, wqe, rqCnt, rqShift int) {
	wqe = align(max(192+16*int(c.MaxSendSGE), 192+align(4+int(c.MaxInline), 16)), 64)
	sqCnt = sqWQEBBs(c)
	if c.MaxRecvWR == 0 {
		return sqCnt, wqe, 0, 0
	}
	rwqe := 1 << bits.Len(uint(16*max(int(c.MaxRecvSGE), 1)-1))
	rqBytes := max((1<<bits.Len(uint(c.MaxRecvWR-1)))*rwqe, 64)
	return sqCnt, wqe, rqBytes / rwqe, bits.TrailingZeros(uint(rwqe))
}

// TestOracleHarnessQPCaps: CREATE_QP geometry and the caps the library reports.
func TestOracleHarnessQPCaps(t *testing.T) {
	sc, rec := scenario(t, "qp-caps")
	cq := cmdsOf(rec, CmdCreateQP)
	i := 0
	for k, st := range rec.Steps {
		if st.Step.Kind != KQP {
			continue
		}
		c := st.Step.Caps
		sqCnt, wqe, rqCnt, rqShift := qpSizes(c)
		d := cq[i].Driver
		if len(d) != 56 || cq[i].InWords != 30 || cq[i].OutWords != 18 {
			t.Fatalf("qp %d: driver %d bytes, in %d out %d", i, len(d), cq[i].InWords, cq[i].OutWords)
		}
		got := []int{int(lu.Uint32(d[16:])), int(lu.Uint32(d[20:])), int(lu.Uint32(d[24:])), int(lu.Uint32(d[28:])), int(lu.Uint32(d[32:]))}
		want := []int{sqCnt, rqCnt, rqShift, 2, i}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("qp %d caps %+v: sq_wqe_count/rq_wqe_count/rq_wqe_shift/flags/uidx %v, want %v", i, c, got, want)
		}
		r := st.Result
		maxPost := sqCnt * 64 / wqe
		if r.MaxSendWR != uint32(maxPost) || r.MaxInline != uint32(wqe-192-4) || r.MaxRecvWR != uint32(rqCnt) || r.QPN != sc.Params.FirstQPN+uint32(i) {
			t.Errorf("qp %d caps %+v: reported %+v, want max_send_wr %d inline %d max_recv_wr %d", i, c, r, maxPost, wqe-196, rqCnt)
		}
		if n := len(rec.Steps[k].Mem[fmt.Sprintf("qp%d", i)]); n != rqCnt<<rqShift+sqCnt*64 {
			t.Errorf("qp %d buffer %d bytes", i, n)
		}
		i++
	}
	if i < 5 {
		t.Fatalf("only %d QPs", i)
	}
	// Doorbell records: the CQ's at +0 of a page, the first QP's at +0x40 of the same.
	want := []Sym{Sym{Part: "core", Off: 0, Name: "response"}, Sym{Part: "core", Off: 8, Name: "user_handle"}, Sym{Part: "driver", Off: 0, Name: "qp0+0x0"}, Sym{Part: "driver", Off: 8, Name: "dbrec0+0x40"}}
	if fmt.Sprint(cq[0].Syms) != fmt.Sprint(want) {
		t.Errorf("CREATE_QP symbolic fields %v, want %v", cq[0].Syms, want)
	}
	if s := symAt(cmdsOf(rec, CmdCreateCQ)[0], "driver", 8); s != "dbrec0+0x0" {
		t.Errorf("CREATE_CQ doorbell %q, want dbrec0+0x0", s)
	}
}

func dataSeg(g SGE, p Params) []byte {
	b := make([]byte, 16)
	bu.PutUint32(b[0:], g.Len)
	bu.PutUint32(b[4:], p.FirstLKey+uint32(g.MR)*0x100)
	bu.PutUint64(b[8:], MRBase+uint64(g.MR)*MRStride+g.Off)
	return b
}

// TestOracleHarnessRecv: RECV WQEs are data segments, terminated by an invalid-lkey
// segment when shorter than the stride; dbrec[0] is the RQ head.
func TestOracleHarnessRecv(t *testing.T) {
	sc, rec := scenario(t, "recv")
	head := map[int]int{}
	for _, st := range rec.Steps {
		if st.Step.Kind != KRecv {
			continue
		}
		q := st.Step.ID
		var caps Caps
		for _, s := range sc.Steps {
			if s.Kind == KQP && s.ID == q {
				caps = s.Caps
			}
		}
		_, _, rqCnt, shift := qpSizes(caps)
		buf := st.Mem[fmt.Sprintf("qp%d", q)]
		for _, w := range st.Step.Recvs {
			var want []byte
			for _, g := range w.SGEs {
				want = append(want, dataSeg(g, sc.Params)...)
			}
			if len(want) < 1<<shift {
				term := make([]byte, 16)
				bu.PutUint32(term[4:], 0x100)
				want = append(want, term...)
			}
			off := (head[q] & (rqCnt - 1)) << shift
			if got := buf[off : off+len(want)]; !bytes.Equal(got, want) {
				t.Errorf("qp%d RECV wr %d at +%#x:\n got % x\nwant % x", q, w.WRID, off, got, want)
			}
			head[q]++
		}
		db := st.Mem[fmt.Sprintf("qp%d.db", q)]
		if bu.Uint32(db) != uint32(head[q]) {
			t.Errorf("qp%d dbrec[0] % x, want head %d", q, db[:4], head[q])
		}
	}
}

// sendModel rebuilds the WQEs a send step must have written (ctrl, raddr, data or
// inline segments) and where; it is the format of the mlx5 user ABI, not the library.
type sendModel struct {
	p       Params
	qpn     uint32
	sqStart int
	sqCnt   int
	post    int
	bfOff   int
}

func (m *sendModel) wqe(w SendWR, mr func(g SGE) []byte) (b []byte, idx int) {
	idx = m.post & 0xffff
	ctrl := make([]byte, 16)
	op := map[int]byte{OpRDMAWrite: WQERDMAWrite, OpRDMAWriteImm: WQERDMAWriteImm, OpSend: WQESend, OpSendImm: WQESendImm, OpRDMARead: WQERDMARead}[w.Opcode]
	var segs []byte
	if w.Opcode == OpRDMAWrite || w.Opcode == OpRDMAWriteImm || w.Opcode == OpRDMARead {
		r := make([]byte, 16)
		bu.PutUint64(r, w.RAddr)
		bu.PutUint32(r[8:], w.RKey)
		segs = append(segs, r...)
	}
	if w.Flags&FlagInline != 0 {
		var data []byte
		for _, g := range w.SGEs {
			data = append(data, mr(g)...)
		}
		if len(data) > 0 {
			h := make([]byte, 4)
			bu.PutUint32(h, uint32(len(data))|0x80000000)
			seg := append(h, data...)
			seg = append(seg, make([]byte, align(len(seg), 16)-len(seg))...)
			segs = append(segs, seg...)
		}
	} else {
		for _, g := range w.SGEs {
			if g.Len > 0 {
				segs = append(segs, dataSeg(g, m.p)...)
			}
		}
	}
	ds := 1 + len(segs)/16
	bu.PutUint32(ctrl[0:], uint32(idx)<<8|uint32(op))
	bu.PutUint32(ctrl[4:], m.qpn<<8|uint32(ds))
	fm := byte(0)
	if w.Flags&FlagSignaled != 0 {
		fm |= 0x08
	}
	if w.Flags&FlagSolicited != 0 {
		fm |= 0x02
	}
	if w.Flags&FlagFence != 0 {
		fm |= 0x80
	}
	ctrl[11] = fm
	if w.Opcode == OpSendImm || w.Opcode == OpRDMAWriteImm {
		bu.PutUint32(ctrl[12:], w.Imm)
	}
	m.post += align(ds*16, 64) / 64
	return append(ctrl, segs...), idx
}

// sqBytes reads n bytes of the SQ starting at WQEBB idx, wrapping at the SQ end.
func (m *sendModel) sqBytes(buf []byte, idx, n int) []byte {
	var out []byte
	for off := 0; off < n; off += 16 {
		pos := (idx*64 + off) % (m.sqCnt * 64)
		out = append(out, buf[m.sqStart+pos:m.sqStart+pos+16]...)
	}
	return out[:n]
}

func checkSends(t *testing.T, name string) {
	sc, rec := scenario(t, name)
	var caps Caps
	for _, s := range sc.Steps {
		if s.Kind == KQP && s.ID == 0 {
			caps = s.Caps
		}
	}
	sqCnt, _, rqCnt, rqShift := qpSizes(caps)
	m := &sendModel{p: sc.Params, qpn: sc.Params.FirstQPN, sqStart: rqCnt << rqShift, sqCnt: sqCnt}
	mrFill := func(g SGE) []byte {
		b := make([]byte, g.Len)
		for i := range b {
			b[i] = byte((int(g.Off)+i)*7 + g.MR)
		}
		return b
	}
	// The first QP's bfreg (gross index g): UAR page g/4, register 0x800 + (g%4)·size;
	// bfreg 0 never uses BlueFlame.
	g := 0
	if len(sc.Params.LowLatBFRegs) > 0 {
		g = int(sc.Params.LowLatBFRegs[0])
	}
	bfSize := int(sc.Params.BFRegSize)
	page, base := fmt.Sprintf("uar%d", g/4), 0x800+(g%4)*bfSize
	if g == 0 {
		bfSize = 0
	}
	sends := 0
	for _, st := range rec.Steps {
		if st.Step.Kind != KSend {
			continue
		}
		sends++
		buf := st.Mem["qp0"]
		var last []byte
		var lastIdx, lastLen int
		for _, w := range st.Step.Sends {
			want, idx := m.wqe(w, mrFill)
			if got := m.sqBytes(buf, idx, len(want)); !bytes.Equal(got, want) {
				t.Errorf("%s: wr %d WQE at index %d:\n got % x\nwant % x", name, w.WRID, idx, got, want)
			}
			last, lastIdx, lastLen = want, idx, len(want)
		}
		if db := st.Mem["qp0.db"]; bu.Uint32(db[4:]) != uint32(m.post&0xffff) {
			t.Errorf("%s: after wr %d dbrec[1] % x, want cur_post %d", name, st.Step.Sends[0].WRID, db[4:], m.post)
		}
		if !rec.SingleStep {
			continue
		}
		// BlueFlame: one WQE in the batch, ds > 1, fits half a register: the whole WQE
		// in 64-byte blocks (read from the SQ, wrapping); otherwise the first 8 bytes
		// of the last ctrl segment.
		var want []Store
		ds := lastLen / 16
		if bfSize > 0 && len(st.Step.Sends) == 1 && ds > 1 && ds*16 <= bfSize/2 {
			blocks := m.sqBytes(buf, lastIdx, align(lastLen, 64))
			for o := 0; o < len(blocks); o += 8 {
				want = append(want, Store{Page: page, Off: base + m.bfOff + o, Width: 8, Bytes: blocks[o : o+8]})
			}
		} else {
			want = []Store{{Page: page, Off: base + m.bfOff, Width: 8, Bytes: last[:8]}}
		}
		m.bfOff ^= bfSize / 2
		if fmt.Sprint(st.Stores) != fmt.Sprint(want) {
			t.Errorf("%s: wr %d UAR stores\n got %v\nwant %v", name, st.Step.Sends[0].WRID, st.Stores, want)
		}
	}
	if sends < 5 {
		t.Fatalf("%s: only %d send steps", name, sends)
	}
}

// TestOracleHarnessSend: every send WQE kind, the doorbell record and the UAR stores,
// with BlueFlame and without, inline of several sizes, and through SQ wraps.
func TestOracleHarnessSend(t *testing.T) {
	for _, name := range []string{"send-kinds-bf", "send-kinds-nobf", "send-kinds-shared", "inline", "sq-wrap-bf", "sq-wrap-nobf"} {
		t.Run(name, func(t *testing.T) { checkSends(t, name) })
	}
}

// wcStatus maps error CQE syndromes to ibv_wc_status (the mlx5 user ABI's table).
var wcStatus = map[uint8]int{0x01: 1, 0x02: 2, 0x04: 4, 0x05: 5, 0x06: 6, 0x10: 7, 0x11: 8,
	0x12: 9, 0x13: 10, 0x14: 11, 0x15: 12, 0x16: 13, 0x22: 16}

// TestOracleHarnessCQEErrors: every syndrome of requester and responder error CQEs
// decodes to its ibv_wc_status (unknown ones to GENERAL_ERR 21) with the WR's id.
func TestOracleHarnessCQEErrors(t *testing.T) {
	for _, name := range []string{"cqe-req-errors", "cqe-resp-errors"} {
		_, rec := scenario(t, name)
		var wcs []WC
		for _, st := range rec.Steps {
			if st.Step.Kind == KPoll {
				wcs = append(wcs, st.Result.WC...)
			}
		}
		if len(wcs) != len(Syndromes) {
			t.Fatalf("%s: %d completions for %d error CQEs", name, len(wcs), len(Syndromes))
		}
		base := uint64(500)
		if name == "cqe-resp-errors" {
			base = 600
		}
		for i, wc := range wcs {
			want, ok := wcStatus[Syndromes[i]]
			if !ok {
				want = 21
			}
			if wc.Status != want || wc.WRID != base+uint64(i) || wc.VendorErr != uint32(0x80+i) {
				t.Errorf("%s syndrome %#x: %+v, want status %d wr_id %d vendor_err %#x", name, Syndromes[i], wc, want, base+uint64(i), 0x80+i)
			}
		}
	}
}

// TestOracleHarnessCQESuccess: requester completions by WQE opcode, responder ones by
// CQE opcode, scatter-to-CQE payload copied into the receive buffer.
func TestOracleHarnessCQESuccess(t *testing.T) {
	_, rec := scenario(t, "cqe-success")
	var wcs []WC
	var last StepRecord
	for _, st := range rec.Steps {
		if st.Step.Kind == KPoll {
			wcs = append(wcs, st.Result.WC...)
			last = st
		}
	}
	// wc_flags: WITH_IMM (2) also on requester completions of *_WITH_IMM WQEs (as
	// libmlx5 reports them), WITH_INV (8) for SEND with invalidate.
	type w struct {
		id           uint64
		opcode       int
		byteLen, imm uint32
		flags        uint32
		srcQP        uint32
	}
	want := []w{{10, 0, 0, 0, 0, 0}, {11, 1, 0, 0, 0, 0}, {12, 2, 64, 0, 0, 0},
		{13, 1, 0, 0, 2, 0}, {14, 0, 0, 0, 2, 0},
		{1, 128, 100, 0, 0, 0x99}, {2, 128, 200, 0x01020304, 2, 0x99},
		{3, 129, 300, 0x0a0b0c0d, 2, 0x99}, {4, 128, 400, 0, 8, 0x99},
		// The 32-byte payload overlays flags_rqpn ("stuv" at 24): GRH bits set too.
		{5, 128, 20, 0, 0, 0}, {6, 128, 32, 0x77, 3, 0}}
	if len(wcs) != len(want) {
		t.Fatalf("%d completions, want %d", len(wcs), len(want))
	}
	if g := wcs[8]; g.InvalidatedRKey != 0x00abcdef {
		t.Errorf("SEND with invalidate: rkey %#x, want 0xabcdef", g.InvalidatedRKey)
	}
	for i, x := range want {
		g := wcs[i]
		if g.WRID != x.id || g.Opcode != x.opcode || g.ByteLen != x.byteLen || g.Status != 0 ||
			g.WCFlags != x.flags || (x.imm != 0 && g.ImmData != x.imm) || (x.srcQP != 0 && g.SrcQP != x.srcQP) {
			t.Errorf("completion %d: %+v, want %+v", i, g, x)
		}
	}
	// The two scatter-to-CQE payloads land at the RECVs' buffers (mr1 + 512·wr_id).
	mr1 := last.Mem["mr1"]
	if got := mr1[512*5 : 512*5+20]; string(got) != "scatter-to-cqe-bytes" {
		t.Errorf("scatter-to-CQE 20 bytes: %q", got)
	}
	if got := mr1[512*6 : 512*6+32]; string(got) != "0123456789abcdefghijklmnopqrstuv" {
		t.Errorf("scatter-to-CQE 32 bytes: %q", got)
	}
	if db := last.Mem["cq0.db"]; bu.Uint32(db) != uint32(len(want)) {
		t.Errorf("CQ set_ci % x, want %d", db[:4], len(want))
	}
}

// TestOracleHarnessCQWrap: over five laps of a four-entry CQ every CQE is consumed
// once (owner bit per lap), stale entries are ignored, set_ci counts up.
func TestOracleHarnessCQWrap(t *testing.T) {
	_, rec := scenario(t, "cq-wrap")
	next := uint64(700)
	consumed := 0
	empty := 0
	for _, st := range rec.Steps {
		if st.Step.Kind != KPoll {
			continue
		}
		if st.Result.N == 0 {
			empty++
		}
		for _, wc := range st.Result.WC {
			if wc.WRID != next || wc.Status != 0 || wc.Opcode != 128 {
				t.Errorf("completion %d: %+v, want wr_id %d", consumed, wc, next)
			}
			lap, i := consumed/4, consumed%4
			if wc.ByteLen != uint32(10*lap+i+1) {
				t.Errorf("completion %d byte_len %d", consumed, wc.ByteLen)
			}
			next++
			consumed++
		}
		if db := st.Mem["cq0.db"]; bu.Uint32(db) != uint32(consumed) {
			t.Errorf("set_ci % x after %d completions", db[:4], consumed)
		}
	}
	if consumed != 20 || empty != 5 {
		t.Errorf("%d completions, %d empty polls; want 20 and 5", consumed, empty)
	}
}

// TestOracleHarnessArm: each arm writes dbrec[1] = sn<<28 | solicited<<24 | ci and one
// 8-byte store of that word and the cqn to UAR page 0 + 0x20; sn counts events.
func TestOracleHarnessArm(t *testing.T) {
	sc, rec := scenario(t, "arm")
	sn, ci := 0, 0
	arms := 0
	for _, st := range rec.Steps {
		switch st.Step.Kind {
		case KEvent:
			if st.Result.CQ != 0 {
				t.Errorf("event for cq %d, want 0", st.Result.CQ)
			}
			sn++
		case KPoll:
			ci += st.Result.N
		case KArm:
			arms++
			word := uint32(sn&3)<<28 | uint32(ci&0xffffff)
			if st.Step.Solicited {
				word |= 1 << 24
			}
			if db := st.Mem["cq0.db"]; bu.Uint32(db[4:]) != word {
				t.Errorf("arm %d: dbrec[1] % x, want %08x", arms, db[4:], word)
			}
			if !rec.SingleStep {
				continue
			}
			v := make([]byte, 8)
			bu.PutUint32(v, word)
			bu.PutUint32(v[4:], sc.Params.FirstCQN)
			want := []Store{{Page: "uar0", Off: 0x20, Width: 8, Bytes: v}}
			if fmt.Sprint(st.Stores) != fmt.Sprint(want) {
				t.Errorf("arm %d: stores %v, want %v", arms, st.Stores, want)
			}
		}
	}
	if arms != 4 || sn != 3 {
		t.Errorf("%d arms, %d events", arms, sn)
	}
}

// TestOracleHarnessUARWithoutSingleStep: the fallback of hosts that cannot single-step
// (pages left writable, content recorded after each step) sees the same UAR content
// as the stores replayed from a single-stepped run.
func TestOracleHarnessUARWithoutSingleStep(t *testing.T) {
	for _, name := range []string{"send-kinds-bf", "sq-wrap-bf", "arm"} {
		t.Run(name, func(t *testing.T) {
			sc, rec := scenario(t, name)
			if !rec.SingleStep {
				t.Skip("this host does not single-step; nothing to compare with")
			}
			plain := MustRunWith(t, sc, Options{NoSingleStep: true})
			if plain.SingleStep || len(plain.Steps) != len(rec.Steps) {
				t.Fatalf("no-single-step run: single_step %v, %d steps", plain.SingleStep, len(plain.Steps))
			}
			stored := 0
			for i, st := range plain.Steps {
				if len(st.Stores) != 0 {
					t.Fatalf("step %d: stores recorded without single-stepping", i)
				}
				stored += len(rec.Steps[i].Stores)
				for _, d := range oracle.DiffMem(st.Line, "UAR page", rec.Steps[i].Pages, st.Pages) {
					t.Error(d)
				}
			}
			if stored == 0 || len(rec.Steps[len(rec.Steps)-1].Pages) != int(sc.Params.TotBFRegs/2) {
				t.Errorf("%d stores, %d UAR pages", stored, len(rec.Steps[len(rec.Steps)-1].Pages))
			}
		})
	}
}

// TestOracleHarnessTwoQPs: two QPs on one CQ; each completion is matched to its QP by
// the CQE's user index and takes that QP's wr_id; the second QP rings its own bfreg
// (gross 25: the second register of UAR page 6, at 0xa00).
func TestOracleHarnessTwoQPs(t *testing.T) {
	sc, rec := scenario(t, "two-qps")
	var wcs []WC
	for _, st := range rec.Steps {
		switch st.Step.Kind {
		case KPoll:
			wcs = append(wcs, st.Result.WC...)
		case KSend:
			if st.Step.ID != 1 || !rec.SingleStep {
				continue
			}
			g := int(sc.Params.LowLatBFRegs[1])
			if len(st.Stores) == 0 || st.Stores[0].Page != fmt.Sprintf("uar%d", g/4) ||
				st.Stores[0].Off&^int(sc.Params.BFRegSize/2) != 0x800+(g%4)*int(sc.Params.BFRegSize) {
				t.Errorf("qp1 send %d: stores %v", st.Step.Sends[0].WRID, st.Stores)
			}
		}
	}
	wantIDs := []uint64{210, 110, 211, 111, 212, 112, 200, 100, 101, 201}
	if len(wcs) != len(wantIDs) {
		t.Fatalf("%d completions, want %d", len(wcs), len(wantIDs))
	}
	for i, wc := range wcs {
		qpn := sc.Params.FirstQPN + uint32(wc.WRID/100-1)
		if wc.WRID != wantIDs[i] || wc.QPNum != qpn || wc.Status != 0 {
			t.Errorf("completion %d: %+v, want wr_id %d on qpn %#x", i, wc, wantIDs[i], qpn)
		}
	}
}

// TestOracleHarnessTeardown: the destroy commands name the handles the fake gave.
func TestOracleHarnessTeardown(t *testing.T) {
	_, rec := scenario(t, "teardown")
	handle := func(c Cmd) uint32 { return lu.Uint32(c.Out) }
	qp := cmdsOf(rec, CmdCreateQP)
	cq := cmdsOf(rec, CmdCreateCQ)
	mr := cmdsOf(rec, CmdRegMR)
	pd := cmdsOf(rec, CmdAllocPD)
	if len(qp) != 1 || len(cq) != 2 || len(mr) != 2 || len(pd) != 1 {
		t.Fatalf("creates: %d qp %d cq %d mr %d pd", len(qp), len(cq), len(mr), len(pd))
	}
	type want struct {
		num    uint32
		off    int
		handle uint32
	}
	var got []want
	for _, c := range rec.Steps[len(rec.Steps)-6].Cmds {
		got = append(got, want{c.Num, 8, lu.Uint32(c.Core[8:])})
	}
	for _, st := range rec.Steps[len(rec.Steps)-5:] {
		for _, c := range st.Cmds {
			off := 8
			if c.Num == CmdDeregMR || c.Num == CmdDeallocPD {
				off = 0
			}
			got = append(got, want{c.Num, off, lu.Uint32(c.Core[off:])})
		}
	}
	exp := []want{{CmdDestroyQP, 8, handle(qp[0])}, {CmdDestroyCQ, 8, handle(cq[1])}, {CmdDestroyCQ, 8, handle(cq[0])},
		{CmdDeregMR, 0, handle(mr[1])}, {CmdDeregMR, 0, handle(mr[0])}, {CmdDeallocPD, 0, handle(pd[0])}}
	if fmt.Sprint(got) != fmt.Sprint(exp) {
		t.Errorf("teardown commands %v, want %v", got, exp)
	}
	// Destroyed objects' memory is no longer watched (it may be gone).
	if m := rec.Steps[len(rec.Steps)-1].Mem; len(m) != 0 {
		t.Errorf("regions still watched after teardown: %d", len(m))
	}
	if _, ok := rec.Steps[len(rec.Steps)-7].Mem["qp0"]; !ok {
		t.Errorf("qp0 not watched before teardown")
	}
}

// TestOracleHarnessPostErrors: libmlx5 44 refuses a post to a full SQ or RQ, with too
// many SGEs or too much inline data, with ENOMEM, and rings nothing for it; in a chain
// the WRs before the bad one are posted and rung, bad_wr pointing at the bad one.
func TestOracleHarnessPostErrors(t *testing.T) {
	_, rec := scenario(t, "post-errors")
	refused := 0
	var prev StepRecord
	for _, st := range rec.Steps {
		if st.Step.WantErr {
			refused++
			if st.Result.Errno != int(unix.ENOMEM) {
				t.Errorf("%q: errno %d, want ENOMEM", st.Line, st.Result.Errno)
			}
			chain := len(st.Step.Sends) > 1
			db, pdb := st.Mem["qp0.db"], prev.Mem["qp0.db"]
			if !chain && (!bytes.Equal(db, pdb) || len(st.Stores) != 0) {
				t.Errorf("%q: refused post changed dbrec % x → % x or stored %v", st.Line, pdb, db, st.Stores)
			}
			if chain && (st.Result.Bad != 1 || bu.Uint32(db[4:]) != bu.Uint32(pdb[4:])+1 || len(st.Stores) == 0) {
				t.Errorf("%q: bad_wr %d, dbrec % x → % x, %d stores; want the first WR posted and rung", st.Line, st.Result.Bad, pdb, db, len(st.Stores))
			}
		}
		prev = st
	}
	if refused != 5 {
		t.Errorf("%d refused posts, want 5", refused)
	}
}

// TestOracleHarnessSequences pins the order of libmlx5's device-visible events, as the
// single-stepping harness records them, for every data-path step of every scenario: a
// send writes the QP's send doorbell record, then an sfence (or, on a shared bfreg, the
// bfreg spinlock's locked instruction), the doorbell or BlueFlame stores, an sfence; a
// receive writes only the receive record; a poll has one lfence per CQE it consumed and
// then the consumer index (also when it found none); an arm writes the arm word, sfence,
// one 8-byte store at UAR page 0 + 0x20, sfence. A harness that stopped seeing fences or
// record stores fails here.
func TestOracleHarnessSequences(t *testing.T) {
	checked := map[string]int{}
	for _, sc0 := range Scenarios() {
		sc, rec := scenario(t, sc0.Name)
		if !rec.SingleStep {
			t.Skip("this host does not single-step; no sequences recorded")
		}
		for _, st := range rec.Steps {
			if st.Result.Ret != 0 {
				continue
			}
			seq := LibView(st.Seq)
			shape := ""
			for _, e := range seq {
				switch {
				case e.Fence != "":
					shape += e.Fence[:1] // s, l, m
				case strings.HasSuffix(e.Target, ".db"):
					shape += fmt.Sprintf("R%d", e.Off)
				case strings.HasPrefix(e.Target, "uar") && e.Width == 8:
					shape += "U"
				default:
					shape += "?"
				}
			}
			var want string
			switch st.Step.Kind {
			case KSend:
				n := len(st.Stores) // one doorbell, or 8 per 64-byte BlueFlame block
				if n != 1 && (n%8 != 0 || n > 8*int(sc.Params.BFRegSize/2/64)) {
					t.Errorf("%s %q: %d UAR stores", sc.Name, st.Line, n)
				}
				want = "R4s" + strings.Repeat("U", n) + "s"
			case KRecv:
				want = "R0"
			case KPoll:
				want = strings.Repeat("l", st.Result.N) + "R0"
			case KArm:
				want = "R4sUs"
				if len(st.Stores) != 1 || st.Stores[0].Off != 0x20 || st.Stores[0].Page != "uar0" {
					t.Errorf("%s %q: arm stores %v", sc.Name, st.Line, st.Stores)
				}
			default:
				continue
			}
			if shape != want {
				t.Errorf("%s %q: sequence %s (%v), want %s", sc.Name, st.Line, shape, seq, want)
			}
			checked[st.Step.Kind]++
		}
	}
	for _, k := range []string{KSend, KRecv, KPoll, KArm} {
		if checked[k] < 3 {
			t.Errorf("only %d %s steps checked", checked[k], k)
		}
	}
}

// TestOracleHarnessQPDestroyClean: destroying a QP removes its CQEs from the shared CQ
// (two of the four not yet polled, across the wrap), moving the other QP's over them
// with each slot's owner bit kept, and advances set_ci by the number removed; the QP
// created next reuses user index 0 and the last poll returns only live QPs' work.
func TestOracleHarnessQPDestroyClean(t *testing.T) {
	sc, rec := scenario(t, "qp-destroy-clean")
	var destroy, last StepRecord
	for _, st := range rec.Steps {
		switch st.Step.Kind {
		case KDestroyQP:
			destroy = st
		case KPoll:
			last = st
		}
	}
	if db := destroy.Mem["cq0.db"]; bu.Uint32(db) != 8 {
		t.Errorf("set_ci after the destroy % x, want 8 (6 polled + 2 removed)", db[:4])
	}
	cq := destroy.Mem["cq0"]
	for slot, want := range map[int]struct{ byteCnt, owner byte }{0: {21, 1}, 1: {22, 1}} {
		c := cq[slot*64 : slot*64+64]
		if c[47] != want.byteCnt || c[63]&1 != want.owner || c[63]>>4 != CQERespSend {
			t.Errorf("slot %d after the clean: byte_cnt %d op_own %#x, want %d with owner %d", slot, c[47], c[63], want.byteCnt, want.owner)
		}
	}
	var ids []uint64
	for _, w := range last.Result.WC {
		ids = append(ids, w.WRID)
	}
	if fmt.Sprint(ids) != "[203 204 300]" || last.Result.WC[2].QPNum != sc.Params.FirstQPN+2 {
		t.Errorf("last poll %+v, want wr 203, 204 (QP 1) and 300 (QP 2)", last.Result.WC)
	}
	if qp2 := cmdsOf(rec, CmdCreateQP)[2]; lu.Uint32(qp2.Driver[32:]) != 0 {
		t.Errorf("QP 2 created with uidx %d, want the freed 0", lu.Uint32(qp2.Driver[32:]))
	}
}

// TestOracleHarnessPageSizes: with sysconf answering 16 or 64 KiB, libmlx5 asks for as
// many bfregs as one page's UARs hold (16 at 16 KiB, 32 at 64 KiB; low-latency ones
// max(4, total-12)), maps each static UAR page with that length at index·page, and rings
// a QP's bfreg inside the large mapping (gross bfreg 24: UAR 6 of the page, +0x800).
func TestOracleHarnessPageSizes(t *testing.T) {
	for _, c := range []struct {
		page, total, low, pages int
	}{{16 << 10, 16, 4, 2}, {64 << 10, 32, 20, 1}} {
		for _, sc := range PageScenarios(c.page) {
			if !strings.HasPrefix(sc.Name, "send-kinds-bf@") {
				continue
			}
			rec := MustRun(t, sc)
			var ctx Cmd
			for _, x := range cmdsOf(rec, CmdGetContext) {
				if x.Errno == 0 {
					ctx = x
				}
			}
			if tot, low := lu.Uint32(ctx.Driver), lu.Uint32(ctx.Driver[4:]); int(tot) != c.total || int(low) != c.low {
				t.Errorf("%s: GET_CONTEXT asks %d bfregs, %d low-latency; want %d, %d", sc.Name, tot, low, c.total, c.low)
			}
			var uars []Mmap
			for _, m := range rec.Steps[0].Mmaps {
				if (m.Off/uint64(c.page))>>8 == 0 {
					uars = append(uars, m)
				}
			}
			if len(uars) != c.pages {
				t.Errorf("%s: %d UAR mappings %+v, want %d", sc.Name, len(uars), uars, c.pages)
			}
			for i, m := range uars {
				if m.Off != uint64(i*c.page) || m.Len != c.page {
					t.Errorf("%s: UAR mapping %d at %#x, %d bytes; want %#x, %d", sc.Name, i, m.Off, m.Len, i*c.page, c.page)
				}
			}
			nupp := c.page / 4096
			g := 24 // the first low-latency bfreg, as the fake hands it out
			page, off := fmt.Sprintf("uar%d", g/4/nupp), (g/4%nupp)*4096+0x800
			rung := 0
			for _, st := range rec.Steps {
				if st.Step.Kind == KSend && len(st.Stores) > 0 {
					rung++
					if s := st.Stores[0]; s.Page != page || s.Off&^0x100 != off {
						t.Errorf("%s %q: rang %s+%#x, want %s+%#x", sc.Name, st.Line, s.Page, s.Off, page, off)
					}
				}
			}
			if rec.SingleStep && rung < 5 {
				t.Errorf("%s: %d rings seen", sc.Name, rung)
			}
		}
	}
}

// TestOracleHarnessTimestamps: with clock_info_versions 1 libmlx5 maps the clock_info page
// read-only at command 7, index 0; ibv_create_cq_ex with completion timestamps goes out
// over the write interface as the legacy CREATE_CQ, flag dropped (libmlx5 passes
// CREATE_CQ_CMD_FLAGS_TS_IGNORED_EX); the extended poll returns each CQE's timestamp and
// mlx5dv_ts_to_ns converts it with the page: 1000 cycles after the snapshot are
// (1000·mult + frac) >> shift ns after its time.
func TestOracleHarnessTimestamps(t *testing.T) {
	sc, rec := scenario(t, "timestamps")
	ci := sc.Params.ClockInfo
	found := false
	for _, m := range rec.Steps[0].Mmaps {
		if m.Off == 7<<8*4096 && m.Len == 4096 && m.Prot == int(unix.PROT_READ) {
			found = true
		}
	}
	if !found {
		t.Errorf("no read-only clock_info mapping at command 7: %+v", rec.Steps[0].Mmaps)
	}
	var polled []WC
	for _, st := range rec.Steps {
		switch st.Step.Kind {
		case KQueryDeviceEx:
			if st.Result.TSMask != sc.Params.TimestampMask || st.Result.HCAClock != sc.Params.HCACoreClockKHz {
				t.Errorf("query_device_ex: mask %#x clock %d", st.Result.TSMask, st.Result.HCAClock)
			}
		case KCQEx:
			if len(st.Cmds) != 1 || st.Cmds[0].Num != CmdCreateCQ || st.Cmds[0].Ex {
				t.Errorf("cq_ex sent %+v, want one legacy CREATE_CQ", st.Cmds)
			}
		case KPollTS:
			if st.Result.ClockErr != 0 {
				t.Errorf("mlx5dv_get_clock_info: %d", st.Result.ClockErr)
			}
			polled = append(polled, st.Result.WC...)
		}
	}
	if len(polled) != 4 {
		t.Fatalf("%d timestamped completions, want 4", len(polled))
	}
	if w := polled[0]; w.TS != ci.Cycles+1000 || w.NS != ci.Nsec+(1000*uint64(ci.Mult)+ci.Frac)>>ci.Shift {
		t.Errorf("first completion ts %d ns %d", w.TS, w.NS)
	}
	if w := polled[2]; w.TS != ci.Cycles-3000 || w.NS != ci.Nsec-(3000*uint64(ci.Mult)-ci.Frac)>>ci.Shift {
		t.Errorf("completion stamped before the snapshot: ts %d ns %d", w.TS, w.NS)
	}
}
