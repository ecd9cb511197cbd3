package mlx5oracle

import (
	"bytes"
	"encoding/binary"
	"testing"
)

const mrAddr = 0x7e0000000000

// TestOracleHarnessBasicRC runs the reference's RC sequence (16/16 WRs, 1 SGE, inline
// 64) and checks the facts the mlx5-oracle reference measured with libmlx5 44.
func TestOracleHarnessBasicRC(t *testing.T) {
	p := DefaultParams()
	sc := Scenario{Name: "basic", Params: p, Steps: []Step{
		{Kind: KOpen}, {Kind: KPD},
		{Kind: KMR, ID: 0, Addr: mrAddr, Len: 4096, Access: 7},
		{Kind: KCQ, ID: 0, CQE: 15},
		{Kind: KQP, ID: 0, Caps: Caps{16, 16, 1, 1, 64}},
		{Kind: KRTS, ID: 0},
		{Kind: KRecv, ID: 0, Recvs: []RecvWR{{WRID: 7, SGEs: []SGE{{0, 0, 4096}}}}},
		{Kind: KSend, ID: 0, Sends: []SendWR{{WRID: 8, Opcode: OpSend, Flags: FlagSignaled, SGEs: []SGE{{0, 0, 8}}}}},
	}}
	rec := MustRun(t, sc)
	if len(rec.Steps) != len(sc.Steps) {
		t.Fatalf("%d step records for %d steps", len(rec.Steps), len(sc.Steps))
	}
	for i, s := range rec.Steps {
		if s.Result.Ret != 0 {
			t.Fatalf("step %d %q: ret %d errno %d", i, s.Line, s.Result.Ret, s.Result.Errno)
		}
	}
	// GET_CONTEXT: DEVX refused at 48, 40, 32 bytes of request, then 48 without DEVX.
	var gc []Cmd
	for _, c := range rec.Steps[0].Cmds {
		if c.Num == CmdGetContext && !c.Ex {
			gc = append(gc, c)
		}
	}
	wantWords := []int{12, 10, 8, 12}
	if len(gc) != len(wantWords) {
		t.Fatalf("GET_CONTEXT sent %d times, want %d", len(gc), len(wantWords))
	}
	for i, c := range gc {
		devx := binary.LittleEndian.Uint32(c.Driver[8:])&1 != 0
		if c.InWords != wantWords[i] || devx != (i < 3) || (c.Errno != 0) != (i < 3) {
			t.Errorf("GET_CONTEXT %d: in_words %d devx %v errno %d", i, c.InWords, devx, c.Errno)
		}
	}
	qp := rec.Steps[4]
	if r := qp.Result; r.QPN != p.FirstQPN || r.MaxSendWR != 25 || r.MaxInline != 124 {
		t.Errorf("qp result %+v", r)
	}
	var cq Cmd
	for _, c := range qp.Cmds {
		if c.Num == CmdCreateQP {
			cq = c
		}
	}
	d := binary.LittleEndian
	if got := []uint32{d.Uint32(cq.Driver[16:]), d.Uint32(cq.Driver[20:]), d.Uint32(cq.Driver[24:]), d.Uint32(cq.Driver[28:])}; got[0] != 128 || got[1] != 16 || got[2] != 4 || got[3] != 2 {
		t.Errorf("CREATE_QP sq/rq/shift/flags = %v, want 128 16 4 2", got)
	}
	recv := rec.Steps[6].Mem["qp0"][:16]
	if want := []byte{0, 0, 0x10, 0, 0, 0x11, 0, 0x07, 0, 0, 0x7e, 0, 0, 0, 0, 0}; !bytes.Equal(recv, want) {
		t.Errorf("RECV WQE % x, want % x", recv, want)
	}
	send := rec.Steps[7].Mem["qp0"][0x100 : 0x100+16]
	if want := []byte{0, 0, 0, 0x0a, 0, 0x01, 0xa2, 0x02, 0, 0, 0, 0x08, 0, 0, 0, 0}; !bytes.Equal(send, want) {
		t.Errorf("SEND ctrl % x, want % x", send, want)
	}
	if rec.SingleStep {
		st := rec.Steps[7].Stores
		if len(st) != 8 || st[0].Page != "uar6" || st[0].Off != 0x800 || !bytes.Equal(st[0].Bytes, send[:8]) {
			t.Errorf("BlueFlame stores %+v", st)
		}
	}
}
