package oracle

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gorping/gorping/uverbs"
	"golang.org/x/sys/unix"
)

// GoRun is gorping's side of a scenario: a Go provider driven through the same steps over
// a Backend answering with the same fake kernel the library saw.
type GoRun struct {
	T    *testing.T
	Be   *Backend
	Dev  uverbs.Device
	Opts []uverbs.Option // for Open (a provider with another page size)
	Ctx  *uverbs.Context
	PD   *uverbs.PD
	Ch   *uverbs.CompChannel
	MRs  map[int]*uverbs.MR
	Bufs map[int]*uverbs.Buffer
	CQs  map[int]*uverbs.CQ
	QPs  map[int]*uverbs.QP
}

// NewGoRun is a run of d's provider on device dev (as the fake sysfs names it).
func NewGoRun(t *testing.T, d Driver, dev uverbs.Device, opts ...uverbs.Option) *GoRun {
	return &GoRun{T: t, Be: NewBackend(d), Dev: dev, Opts: opts, MRs: map[int]*uverbs.MR{},
		Bufs: map[int]*uverbs.Buffer{}, CQs: map[int]*uverbs.CQ{}, QPs: map[int]*uverbs.QP{}}
}

// RTSAttrs are the harness's attributes for RESET→INIT→RTR→RTS (its modify_rts).
func RTSAttrs() []struct {
	A uverbs.QPAttr
	M uverbs.QPAttrMask
} {
	return []struct {
		A uverbs.QPAttr
		M uverbs.QPAttrMask
	}{
		{uverbs.QPAttr{State: uverbs.QPSInit, PortNum: 1, AccessFlags: uverbs.AccessLocalWrite | uverbs.AccessRemoteRead | uverbs.AccessRemoteWrite},
			uverbs.QPAttrState | uverbs.QPAttrPKeyIndex | uverbs.QPAttrPort | uverbs.QPAttrAccessFlags},
		{uverbs.QPAttr{State: uverbs.QPSRTR, PathMTU: uverbs.MTU1024, DestQPNum: 0x99, RQPSN: 0x1234, MaxDestRdAtomic: 1, MinRNRTimer: 12,
			AH: uverbs.AHAttr{DLID: 2, PortNum: 1}},
			uverbs.QPAttrState | uverbs.QPAttrAV | uverbs.QPAttrPathMTU | uverbs.QPAttrDestQPN | uverbs.QPAttrRQPSN | uverbs.QPAttrMaxDestRdAtomic | uverbs.QPAttrMinRNRTimer},
		{uverbs.QPAttr{State: uverbs.QPSRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, SQPSN: 0x5678, MaxRdAtomic: 1},
			uverbs.QPAttrState | uverbs.QPAttrTimeout | uverbs.QPAttrRetryCnt | uverbs.QPAttrRNRRetry | uverbs.QPAttrSQPSN | uverbs.QPAttrMaxQPRdAtomic},
	}
}

// Step runs one step on gorping's side and returns its outcome in the oracle's terms.
func (g *GoRun) Step(s Step) (Result, error) {
	var r Result
	fail := func(err error) (Result, error) {
		r.Ret = -1
		return r, err
	}
	switch s.Kind {
	case KOpen:
		c, err := uverbs.OpenBackend(g.Dev, g.Be, g.Opts...)
		if err != nil {
			return fail(err)
		}
		g.Ctx = c
	case KQueryPort:
		pa, err := g.Ctx.QueryPort(uint8(s.Port))
		if err != nil {
			return fail(err)
		}
		r.State, r.LID, r.LinkLayer, r.ActiveMTU = int(pa.State), int(pa.LID), int(pa.LinkLayer), int(pa.ActiveMTU)
	case KPD:
		pd, err := g.Ctx.AllocPD()
		if err != nil {
			return fail(err)
		}
		g.PD = pd
	case KMR:
		b, err := uverbs.BufferAt(s.Addr, int(s.Len))
		if err != nil {
			return fail(err)
		}
		for i := range b.Bytes() {
			b.Bytes()[i] = byte(i*7 + s.ID) // the harness's fill
		}
		mr, err := g.PD.RegMR(b, uverbs.AccessFlags(s.Access))
		if err != nil {
			b.Free()
			return fail(err)
		}
		g.Bufs[s.ID], g.MRs[s.ID] = b, mr
		r.LKey, r.RKey = mr.LKey, mr.RKey
	case KChannel:
		ch, err := g.Ctx.CreateCompChannel()
		if err != nil {
			return fail(err)
		}
		g.Ch = ch
	case KCQ:
		var ch *uverbs.CompChannel
		if s.WithChannel {
			ch = g.Ch
		}
		cq, err := g.Ctx.CreateCQ(s.CQE, ch, 0)
		if err != nil {
			return fail(err)
		}
		g.CQs[s.ID] = cq
		r.CQE = cq.CQE()
	case KQP:
		qp, err := g.PD.CreateQP(uverbs.QPInitAttr{SendCQ: g.CQs[s.SendCQ], RecvCQ: g.CQs[s.RecvCQ], Type: uverbs.QPTypeRC,
			SigAll: s.SigAll, Cap: uverbs.QPCap{MaxSendWR: s.Caps.MaxSendWR, MaxRecvWR: s.Caps.MaxRecvWR,
				MaxSendSGE: s.Caps.MaxSendSGE, MaxRecvSGE: s.Caps.MaxRecvSGE, MaxInlineData: s.Caps.MaxInline}})
		if err != nil {
			return fail(err)
		}
		g.QPs[s.ID] = qp
		c := qp.Cap()
		r.QPN, r.MaxSendWR, r.MaxRecvWR, r.MaxSendSGE, r.MaxRecvSGE, r.MaxInline = qp.Num(), c.MaxSendWR, c.MaxRecvWR, c.MaxSendSGE, c.MaxRecvSGE, c.MaxInlineData
	case KRTS:
		for _, st := range RTSAttrs() {
			if err := g.QPs[s.ID].Modify(&st.A, st.M); err != nil {
				return fail(err)
			}
		}
	case KRecv:
		r.Bad = -1
		for i, w := range s.Recvs {
			if err := g.QPs[s.ID].PostRecv(&uverbs.RecvWR{ID: w.WRID, SGE: g.sges(w.SGEs)}); err != nil {
				r.Bad = i
				return fail(err)
			}
		}
	case KSend:
		r.Bad = -1
		for i, w := range s.Sends {
			wr := uverbs.SendWR{ID: w.WRID, Opcode: uverbs.WROpcode(w.Opcode), Flags: uverbs.SendFlags(w.Flags),
				SGE: g.sges(w.SGEs), RemoteAddr: w.RAddr, RKey: w.RKey, Imm: bits.ReverseBytes32(w.Imm)}
			if err := g.QPs[s.ID].PostSend(&wr); err != nil {
				r.Bad = i
				return fail(err)
			}
		}
	case KCQE:
		if err := g.Be.Poke(s); err != nil {
			return fail(err)
		}
	case KPoll:
		wc := make([]uverbs.WC, s.N)
		n, err := g.CQs[s.ID].Poll(wc)
		if err != nil {
			return fail(err)
		}
		r.N = n
		for _, w := range wc[:n] {
			r.WC = append(r.WC, OracleWC(w))
		}
	case KArm:
		if err := g.CQs[s.ID].Arm(s.Solicited); err != nil {
			return fail(err)
		}
	case KEvent:
		if err := g.Be.CompEvent(s.ID); err != nil {
			return fail(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		cq, err := g.Ch.Wait(ctx)
		cancel()
		if err != nil {
			return fail(err)
		}
		cq.Ack(1)
		r.CQ = -1
		for id, c := range g.CQs {
			if c == cq {
				r.CQ = id
			}
		}
	case KDestroyQP:
		if err := g.QPs[s.ID].Destroy(); err != nil {
			return fail(err)
		}
		delete(g.QPs, s.ID)
	case KDestroyCQ:
		if err := g.CQs[s.ID].Destroy(); err != nil {
			return fail(err)
		}
		delete(g.CQs, s.ID)
	case KDereg:
		if err := g.MRs[s.ID].Dereg(); err != nil {
			return fail(err)
		}
	case KDeallocPD:
		if err := g.PD.Dealloc(); err != nil {
			return fail(err)
		}
	default:
		return fail(fmt.Errorf("step kind %q not driven", s.Kind))
	}
	return r, nil
}

// OracleWC is a completion as the harness prints libibverbs' ibv_wc: imm_data in host
// order, and libibverbs' flag values (WITH_INV is 8 there, 4 in the kernel's ib_uverbs_wc
// that uverbs.WC mirrors).
func OracleWC(w uverbs.WC) WC {
	flags := uint32(w.Flags &^ uverbs.WCFlagWithInv)
	var inv uint32
	if w.Flags&uverbs.WCFlagWithInv != 0 {
		flags |= 8
		inv = w.Imm
	}
	return WC{WRID: w.WRID, Status: int(w.Status), Opcode: int(w.Opcode), VendorErr: w.VendorErr,
		ByteLen: w.ByteLen, ImmData: bits.ReverseBytes32(w.Imm), QPNum: w.QPNum, SrcQP: w.SrcQP, WCFlags: flags,
		InvalidatedRKey: inv, PKeyIndex: w.PKeyIndex, SLID: w.SLID, SL: w.SL, DLIDPathBits: w.DLIDPathBits}
}

func (g *GoRun) sges(s []SGE) []uverbs.SGE {
	out := make([]uverbs.SGE, len(s))
	for i, x := range s {
		out[i] = uverbs.SGE{Addr: g.Bufs[x.MR].Addr() + x.Off, Length: x.Len, LKey: g.MRs[x.MR].LKey}
	}
	return out
}

// Close releases what the run still holds.
func (g *GoRun) Close() {
	for _, q := range g.QPs {
		q.Destroy()
	}
	for _, c := range g.CQs {
		c.Destroy()
	}
	for id, m := range g.MRs {
		m.Dereg()
		g.Bufs[id].Free()
	}
	if g.Ch != nil {
		g.Ch.Close()
	}
	if g.Ctx != nil {
		g.Ctx.Close()
	}
	g.Be.Close()
}

// Forget drops a destroyed object's regions (name and name.<part>) from what the fake
// observes, and from rec's later steps: the provider unmapped the memory.
func (g *GoRun) Forget(name string, rec *Record, from int) {
	var keep []Region
	for _, r := range g.Be.Fake.Regions {
		if !regionOf(r.Name, name) {
			keep = append(keep, r)
		}
	}
	g.Be.Fake.Regions = keep
	for j := from; j < len(rec.Steps); j++ {
		m := map[string][]byte{}
		for k, v := range rec.Steps[j].Mem {
			if !regionOf(k, name) {
				m[k] = v
			}
		}
		rec.Steps[j].Mem = m
	}
}

func regionOf(region, obj string) bool {
	return region == obj || strings.HasPrefix(region, obj+".")
}

// Differences is what a driver's test says of the deliberate differences from its
// library, for CompareRun.
type Differences struct {
	// Open compares the context creation step, where a provider differs on purpose (one
	// GET_CONTEXT, the legacy device query, no port query); nil: compared as any step.
	Open func(t *testing.T, want StepRecord, got Observation)
	// Normalize may replace gorping's commands of a step by the library's where they
	// differ only as documented.
	Normalize func(want StepRecord, got Observation) Observation
	// Drop reports whether a difference line of step i (of its commands, memory and
	// sequence, or of what it returned) is deliberate.
	Drop func(i int, s Step, line string) bool
	// Chain compares a send step that posted n > 1 WRs, which the library rings once and
	// gorping once per WR; nil: the store sequence is not compared for chains.
	Chain func(t *testing.T, i, n int, want StepRecord, got Observation)
}

// RequireSequences fails (CI=true) or says loudly that the store sequences cannot be
// compared: the test binary needs the mmio recorder (make unit builds with it).
func RequireSequences(t *testing.T) {
	t.Helper()
	if Recording() {
		return
	}
	msg := "store sequences NOT compared: this test binary has no mmio recorder (build with -tags mmiorecord, as make unit does)"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Log("*** " + msg + " ***")
}

// CompareRun runs sc's steps on g and compares each with rec (the library's run): the
// outcome, the errno of a refused step, the commands, every region, and the
// device-visible sequence, minus the differences d declares.
func CompareRun(t *testing.T, sc Scenario, rec *Record, g *GoRun, d Differences) {
	t.Helper()
	compared := 0
	for i, s := range sc.Steps {
		want := rec.Steps[i]
		res, err := g.Step(s)
		if s.Kind == KDestroyQP || s.Kind == KDestroyCQ {
			g.Forget(fmt.Sprintf("%s%d", strings.TrimPrefix(s.Kind, "destroy_"), s.ID), rec, i)
			want = rec.Steps[i]
		}
		obs := g.Be.Observe()
		if (err != nil) != (want.Result.Ret != 0) {
			t.Fatalf("step %d %q: gorping error %v, library ret %d errno %d", i, want.Line, err, want.Result.Ret, want.Result.Errno)
		}
		if err != nil {
			var errno unix.Errno
			if !errors.As(err, &errno) || int(errno) != want.Result.Errno {
				t.Errorf("step %d %q: gorping error %v, library errno %d", i, want.Line, err, want.Result.Errno)
			}
		}
		if s.Kind == KOpen && d.Open != nil {
			d.Open(t, want, obs)
			continue
		}
		for _, line := range resultDiffs(i, s, want, res) {
			if d.Drop == nil || !d.Drop(i, s, line) {
				t.Error(line)
			}
		}
		n := len(s.Sends)
		if want.Result.Bad >= 0 {
			n = want.Result.Bad
		}
		chain := s.Kind == KSend && n > 1
		if chain && want.Stepped && obs.Ops != nil && d.Chain != nil {
			d.Chain(t, i, n, want, obs)
		}
		if d.Normalize != nil {
			obs = d.Normalize(want, obs)
		}
		for _, line := range DiffStep(sc.Driver, want, obs) {
			if chain && (strings.Contains(line, "store sequence differs") || strings.Contains(line, "device page")) {
				continue // the chain: d.Chain
			}
			if d.Drop != nil && d.Drop(i, s, line) {
				continue
			}
			t.Errorf("step %d: %s", i, line)
		}
		compared++
	}
	if compared == 0 {
		t.Fatal("no step compared")
	}
}

// CompareResult compares what a step returned on both sides.
func CompareResult(t *testing.T, i int, s Step, want StepRecord, r Result) {
	t.Helper()
	for _, line := range resultDiffs(i, s, want, r) {
		t.Error(line)
	}
}

// resultDiffs lists how a step's outcome differs, one line each ("step 3 \"cq 0 15\":
// cqe 32, library 15"); CompareRun passes each through Differences.Drop.
func resultDiffs(i int, s Step, want StepRecord, r Result) []string {
	w := want.Result
	var diffs []string
	check := func(name string, got, want any) {
		if fmt.Sprint(got) != fmt.Sprint(want) {
			diffs = append(diffs, fmt.Sprintf("%s %v, library %v", name, got, want))
		}
	}
	switch s.Kind {
	case KQueryPort:
		check("port", []int{r.State, r.LID, r.LinkLayer, r.ActiveMTU}, []int{w.State, w.LID, w.LinkLayer, w.ActiveMTU})
	case KMR:
		check("keys", []uint32{r.LKey, r.RKey}, []uint32{w.LKey, w.RKey})
	case KCQ, KCQEx:
		check("cqe", r.CQE, w.CQE)
	case KQP:
		check("qp", []uint32{r.QPN, r.MaxSendWR, r.MaxRecvWR, r.MaxSendSGE, r.MaxRecvSGE, r.MaxInline},
			[]uint32{w.QPN, w.MaxSendWR, w.MaxRecvWR, w.MaxSendSGE, w.MaxRecvSGE, w.MaxInline})
	case KRecv, KSend:
		check("bad_wr", r.Bad, w.Bad)
	case KPoll:
		check("polled", r.N, w.N)
		for j := 0; j < min(len(r.WC), len(w.WC)); j++ {
			check(fmt.Sprintf("wc[%d]", j), fmt.Sprintf("%+v", r.WC[j]), fmt.Sprintf("%+v", w.WC[j]))
		}
	case KEvent:
		check("event cq", r.CQ, w.CQ)
	case KRTS:
		check("modify", []int{r.Init, r.RTR, r.RTS}, []int{w.Init, w.RTR, w.RTS})
	}
	out := make([]string, len(diffs))
	for j, d := range diffs {
		out[j] = fmt.Sprintf("step %d %q: %s", i, want.Line, d)
	}
	return out
}
