package hns_test

import (
	"bytes"
	"fmt"
	"sort"
	"testing"

	"github.com/gorping/gorping/test/hnsoracle"
	"github.com/gorping/gorping/test/oracle"
	"github.com/gorping/gorping/uverbs"
	"github.com/gorping/gorping/uverbs/hns"
)

// The oracle tests run every scenario twice: through Debian's libhns over the oracle's
// fake kernel (oracle.MustRun), and through gorping's hns provider over the same fake
// answers in process (oracle.Backend), then compare per step the commands (the MODIFY_QP
// to ERR the poller sends among them), the CQE ring, the send queue, its extended SGE
// area and the receive queue, the doorbell records, the registered buffers, every store
// to the UAR page and every record store with the barriers around them, and what each
// verb returned. The deliberate differences are in differences below; the rest must be
// byte-identical.

var dev = uverbs.Device{Name: "hns_0", Uverbs: "uverbs0", Path: "/dev/infiniband/uverbs0", Driver: "hns", DriverID: 12, ABI: 1}

func TestOracleScenarios(t *testing.T) {
	oracle.RequireSequences(t)
	sets := hnsoracle.ParamSets()
	names := make([]string, 0, len(sets))
	for n := range sets {
		names = append(names, n)
	}
	sort.Strings(names)
	if testing.Short() {
		names = []string{"hip08"} // make check: the default device; make unit runs every set
	}
	for _, set := range names {
		for _, sc := range hnsoracle.Scenarios(set, sets[set]) {
			t.Run(sc.Name, func(t *testing.T) {
				rec := oracle.MustRun(t, sc)
				var opts []uverbs.Option
				if ps := sets[set].PageSize; ps != 0 {
					opts = append(opts, hns.WithPageSize(ps))
				}
				g := oracle.NewGoRun(t, sc.Driver, dev, opts...)
				defer g.Close()
				oracle.CompareRun(t, sc, rec, g, differences)
			})
		}
	}
}

// differences are gorping's documented differences from libhns:
//   - context creation is compared by compareOpen (libhns queries the device with the
//     extended QUERY_DEVICE, gorping with the legacy one: the same attributes);
//   - gorping creates CQs and QPs with the legacy CREATE_CQ and CREATE_QP, libhns with
//     the extended ones: the same request (user_handle, depth or capabilities, CQs, PD,
//     type; hns's driver data) in the other layout, which the kernel hands to the driver
//     alike (sameCommands);
//   - MODIFY_QP: libhns leaves the fields of ib_uverbs_modify_qp its attribute mask does
//     not select uninitialised (its stack), gorping sends zeros there; the kernel reads
//     what the mask selects, which must be the same (sameModify);
//   - a chain of send WRs: libhns writes them all and rings once, gorping posts (and
//     rings) one WR at a time: compareChain; a chain of receives: libhns writes the head
//     record (or rings the receive doorbell) once, gorping per WR, the last the same
//     (lastRecords).
var differences = oracle.Differences{Open: compareOpen, Normalize: sameCommands, Chain: compareChain}

func compareOpen(t *testing.T, want oracle.StepRecord, got oracle.Observation) {
	t.Helper()
	if fmt.Sprint(cmdNums(got.Cmds)) != fmt.Sprint(cmdNums(want.Cmds)) {
		t.Errorf("context creation: gorping sent commands %v, libhns %v", cmdNums(got.Cmds), cmdNums(want.Cmds))
	}
	for i := 0; i < min(len(got.Cmds), len(want.Cmds)); i++ {
		g, w := got.Cmds[i], want.Cmds[i]
		if g.Num == hnsoracle.CmdQueryDevice {
			continue
		}
		if g.InWords != w.InWords || g.OutWords != w.OutWords || !bytes.Equal(g.Driver, w.Driver) {
			t.Errorf("context creation command %d: words %d/%d driver % x, libhns %d/%d % x", g.Num, g.InWords, g.OutWords, g.Driver, w.InWords, w.OutWords, w.Driver)
		}
	}
	if fmt.Sprint(got.Mmaps) != fmt.Sprint(want.Mmaps) {
		t.Errorf("mmaps of the device file: gorping %+v, libhns %+v", got.Mmaps, want.Mmaps)
	}
}

func cmdNums(c []oracle.Cmd) []uint32 {
	var n []uint32
	for _, x := range c {
		n = append(n, x.Num)
	}
	return n
}

// sameCommands replaces gorping's legacy CREATE_CQ and CREATE_QP by libhns's extended
// ones where they carry the same request.
func sameCommands(want oracle.StepRecord, got oracle.Observation) oracle.Observation {
	if len(got.Cmds) != len(want.Cmds) {
		return got
	}
	got.Ops = lastRecords(want, got.Ops)
	cmds := append([]oracle.Cmd(nil), got.Cmds...)
	for i, w := range want.Cmds {
		g := cmds[i]
		if w.Num == hnsoracle.CmdModifyQP && !w.Ex && !g.Ex && g.Num == w.Num && g.Errno == w.Errno && sameModify(g.Core, w.Core) {
			cmds[i] = w // libhns leaves the fields its mask does not select uninitialised
			continue
		}
		if !w.Ex || g.Ex || w.Num != g.Num || g.Errno != w.Errno || !bytes.Equal(g.Driver, w.Driver) || syms(g, 8) != syms(w, 0) {
			continue
		}
		switch w.Num {
		case hnsoracle.CmdCreateCQ:
			// legacy: response, user_handle, cqe, comp_vector, comp_channel; extended:
			// user_handle, cqe, comp_vector, comp_channel, comp_mask, flags.
			if len(g.Core) == 32 && len(w.Core) == 32 && bytes.Equal(g.Core[16:28], w.Core[8:20]) && allZero(w.Core[20:]) {
				cmds[i] = w
			}
		case hnsoracle.CmdCreateQP:
			// legacy: response, user_handle, pd, cqs, srq, caps, sig_all, type, is_srq;
			// extended: user_handle, the same from pd to is_srq, comp_mask, flags, ...
			if len(g.Core) == 56 && len(w.Core) == 64 && bytes.Equal(g.Core[16:55], w.Core[8:47]) && allZero(w.Core[48:]) {
				cmds[i] = w
			}
		}
	}
	got.Cmds = cmds
	return got
}

// modifyFields are the bytes of ib_uverbs_modify_qp each attribute mask bit selects.
var modifyFields = map[uint32][][2]int{
	1 << 0: {{96, 97}}, 1 << 1: {{97, 98}}, 1 << 2: {{100, 101}}, 1 << 3: {{88, 92}}, 1 << 4: {{92, 94}},
	1 << 5: {{104, 105}}, 1 << 6: {{72, 76}}, 1 << 7: {{0, 23}, {24, 31}}, 1 << 8: {{98, 99}}, 1 << 9: {{105, 106}},
	1 << 10: {{106, 107}}, 1 << 11: {{107, 108}}, 1 << 12: {{76, 80}}, 1 << 13: {{101, 102}},
	1 << 14: {{32, 55}, {56, 63}, {94, 96}, {108, 110}}, 1 << 15: {{103, 104}}, 1 << 16: {{80, 84}},
	1 << 17: {{102, 103}}, 1 << 18: {{99, 100}}, 1 << 20: {{84, 88}},
}

// sameModify: two MODIFY_QPs of the same QP and mask with the same attributes where the
// mask selects them.
func sameModify(g, w []byte) bool {
	if len(g) != 112 || len(w) != 112 || !bytes.Equal(g[64:72], w[64:72]) {
		return false
	}
	mask := uint32(g[68]) | uint32(g[69])<<8 | uint32(g[70])<<16 | uint32(g[71])<<24
	for bit, spans := range modifyFields {
		if mask&bit == 0 {
			continue
		}
		for _, r := range spans {
			if !bytes.Equal(g[r[0]:r[1]], w[r[0]:r[1]]) {
				return false
			}
		}
	}
	return true
}

// lastRecords keeps, of a receive chain's record stores (or receive doorbells), the last
// to each target: libhns posts the chain and writes the head once, gorping posts one WR
// at a time, each with its record.
func lastRecords(want oracle.StepRecord, ops []oracle.SeqEvent) []oracle.SeqEvent {
	if want.Step.Kind != oracle.KRecv || len(want.Step.Recvs) < 2 {
		return ops
	}
	last := map[string]int{}
	for i, e := range ops {
		if e.Fence == "" {
			last[e.Target] = i
		}
	}
	var out []oracle.SeqEvent
	for i, e := range ops {
		if e.Fence != "" || last[e.Target] == i {
			out = append(out, e)
		}
	}
	return out
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// syms is a command's symbolic fields, the user_handle's place (which moves) left out.
func syms(c oracle.Cmd, uh int) string {
	var s []string
	for _, x := range c.Syms {
		if x.Part == "core" && (x.Off == uh || x.Name == "fd") {
			s = append(s, x.Name)
			continue
		}
		s = append(s, fmt.Sprintf("%s:%d:%s", x.Part, x.Off, x.Name))
	}
	return fmt.Sprint(s)
}

// compareChain checks a send step of n WRs: gorping rang n doorbells, each to the UAR
// page's doorbell register, the last carrying libhns's one (the head after the last WQE).
func compareChain(t *testing.T, i, n int, want oracle.StepRecord, got oracle.Observation) {
	t.Helper()
	var lib, mine []oracle.SeqEvent
	for _, e := range want.Seq {
		if e.Target == "db" {
			lib = append(lib, e)
		}
	}
	for _, e := range got.Ops {
		if e.Target == "db" {
			mine = append(mine, e)
		}
	}
	if len(lib) != 1 || len(mine) != n || mine[n-1].String() != lib[0].String() {
		t.Errorf("step %d %q: chain of %d: gorping's doorbells %v, libhns's %v", i, want.Line, n, mine, lib)
	}
}
