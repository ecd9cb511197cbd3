package irdma_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/gorping/gorping/test/irdmaoracle"
	"github.com/gorping/gorping/test/oracle"
	"github.com/gorping/gorping/uverbs"
	_ "github.com/gorping/gorping/uverbs/irdma"
)

// The oracle tests run every scenario twice: through Debian's libirdma over the oracle's
// fake kernel (oracle.MustRun), and through gorping's irdma provider over the same fake
// answers in process (oracle.Backend), then compare per step the commands (the REG_MRs of
// the queue memory among them), the CQE ring and its shadow area, the QP's send queue,
// receive queue and shadow area, the registered buffers, every store to the doorbell page
// with the barriers around it, and what each verb returned. The deliberate differences
// are in differences below; the rest must be byte-identical.

var dev = uverbs.Device{Name: "irdma0", Uverbs: "uverbs0", Path: "/dev/infiniband/uverbs0", Driver: "irdma", DriverID: 9, ABI: 5}

func TestOracleScenarios(t *testing.T) {
	oracle.RequireSequences(t)
	sets := irdmaoracle.ParamSets()
	names := make([]string, 0, len(sets))
	for n := range sets {
		names = append(names, n)
	}
	sort.Strings(names)
	if testing.Short() {
		names = []string{"e810"} // make check: the default device; make unit runs every set
	}
	for _, set := range names {
		for _, sc := range irdmaoracle.Scenarios(set, sets[set]) {
			t.Run(sc.Name, func(t *testing.T) {
				rec := oracle.MustRun(t, sc)
				g := oracle.NewGoRun(t, sc.Driver, dev)
				defer g.Close()
				oracle.CompareRun(t, sc, rec, g, differences)
			})
		}
	}
}

// differences are gorping's documented differences from libirdma:
//   - context creation is compared by compareOpen;
//   - gorping creates a CQ with the legacy CREATE_CQ, libirdma with the extended one: the
//     same request (user_handle, depth, vector, channel; irdma's driver data) in the other
//     layout, which the kernel hands to the driver alike (sameCommands);
//   - gorping moves a QP with the legacy MODIFY_QP, libirdma (on a GEN_2 device, whose
//     QPs have push mode in their caps) with the extended one, whose driver data asks for
//     no flush and whose answer has no push page while the irdma driver's push mode is
//     off, as it is by default: the same attributes (sameCommands);
//   - REG_MR of an application buffer: libirdma leaves the driver request's page counts
//     uninitialised (its stack), gorping sends zeros; reg_type MEM, which the kernel reads
//     alone, is the same (sameCommands);
//   - a CQ's depth: gorping's CQ reports the ring the kernel granted (uverbs' CQ.CQE),
//     libirdma the depth asked (dropCQE);
//   - an RDMA WRITE with immediate received: gorping completes it as RECV_RDMA_WITH_IMM by
//     the CQE's IB opcode, libirdma 44 as RECV (it overwrites the opcode before it looks;
//     later rdma-core looks first) (dropCQE);
//   - a chain of send WRs: libirdma writes them all and rings the doorbell once, gorping
//     posts (and rings) one WR at a time: compareChain.
var differences = oracle.Differences{Open: compareOpen, Normalize: sameCommands, Drop: dropCQE, Chain: compareChain}

// compareOpen checks context creation: the same commands (GET_CONTEXT with the same
// driver request, the context's ALLOC_PD) and the doorbell page mapped as libirdma maps it.
func compareOpen(t *testing.T, want oracle.StepRecord, got oracle.Observation) {
	t.Helper()
	if fmt.Sprint(cmdNums(got.Cmds)) != fmt.Sprint(cmdNums(want.Cmds)) {
		t.Errorf("context creation: gorping sent commands %v, libirdma %v", cmdNums(got.Cmds), cmdNums(want.Cmds))
	}
	for i := 0; i < min(len(got.Cmds), len(want.Cmds)); i++ {
		g, w := got.Cmds[i], want.Cmds[i]
		if g.InWords != w.InWords || g.OutWords != w.OutWords || !bytes.Equal(g.Driver, w.Driver) || !bytes.Equal(g.Core, w.Core) {
			t.Errorf("context creation command %d: words %d/%d core % x driver % x, libirdma %d/%d % x % x", g.Num, g.InWords, g.OutWords, g.Core, g.Driver, w.InWords, w.OutWords, w.Core, w.Driver)
		}
	}
	if fmt.Sprint(got.Mmaps) != fmt.Sprint(want.Mmaps) {
		t.Errorf("mmaps of the device file: gorping %+v, libirdma %+v", got.Mmaps, want.Mmaps)
	}
}

func cmdNums(c []oracle.Cmd) []string {
	var n []string
	for _, x := range c {
		s := fmt.Sprint(x.Num)
		if x.Ex {
			s += "ex"
		}
		n = append(n, s)
	}
	return n
}

var le = binary.LittleEndian

// sameCommands replaces gorping's legacy CREATE_CQ and MODIFY_QP by libirdma's extended
// ones where they carry the same request.
func sameCommands(want oracle.StepRecord, got oracle.Observation) oracle.Observation {
	if len(got.Cmds) != len(want.Cmds) {
		return got
	}
	cmds := append([]oracle.Cmd(nil), got.Cmds...)
	for i, w := range want.Cmds {
		g := cmds[i]
		if w.Num == irdmaoracle.CmdRegMR && !w.Ex && !g.Ex && g.Num == w.Num && bytes.Equal(g.Core, w.Core) &&
			len(g.Driver) == 8 && len(w.Driver) == 8 && allZero(g.Driver) && allZero(w.Driver[:2]) {
			cmds[i] = w // an application buffer: the page counts are libirdma's stack
			continue
		}
		if !w.Ex || g.Ex || w.Num != g.Num || g.Errno != w.Errno {
			continue
		}
		switch w.Num {
		case irdmaoracle.CmdCreateCQ:
			// legacy: response, user_handle, cqe, comp_vector, comp_channel; extended:
			// user_handle, cqe, comp_vector, comp_channel, comp_mask, flags.
			if len(g.Core) == 32 && len(w.Core) == 32 && bytes.Equal(g.Core[16:28], w.Core[8:20]) &&
				allZero(w.Core[20:]) && bytes.Equal(g.Driver, w.Driver) && symsAt(g, 8) == symsAt(w, 0) {
				cmds[i] = w
			}
		case irdmaoracle.CmdModifyQP:
			if len(g.Core) == 112 && len(w.Core) == 120 && bytes.Equal(g.Core, w.Core[:112]) && allZero(w.Core[112:]) &&
				len(g.Driver) == 0 && allZero(w.Driver) {
				cmds[i] = w
			}
		}
	}
	got.Cmds = cmds
	return got
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// symsAt is a command's symbolic fields but the user_handle's place, which moves.
func symsAt(c oracle.Cmd, uh int) string {
	var s []string
	for _, x := range c.Syms {
		if x.Part == "core" && (x.Off == uh || x.Name == "fd") {
			s = append(s, x.Part+":"+x.Name)
			continue
		}
		s = append(s, fmt.Sprintf("%s:%d:%s", x.Part, x.Off, x.Name))
	}
	return fmt.Sprint(s)
}

// dropCQE drops the deliberate differences in what a verb returned: a CQ's depth, and the
// opcode of a received RDMA WRITE with immediate.
func dropCQE(i int, s oracle.Step, line string) bool {
	switch s.Kind {
	case oracle.KCQ:
		return strings.Contains(line, ": cqe ")
	case oracle.KPoll:
		// gorping: opcode 129 (IBV_WC_RECV_RDMA_WITH_IMM), libirdma 44: 128 (IBV_WC_RECV).
		return strings.Contains(line, ": wc[") && strings.Contains(line, "Opcode:129") && strings.Contains(line, "Opcode:128")
	}
	return false
}

// compareChain checks a send step of n WRs: gorping rang n doorbells, each the QP's id at
// offset 0 like libirdma's one.
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
		t.Errorf("step %d %q: chain of %d: gorping's doorbells %v, libirdma's %v", i, want.Line, n, mine, lib)
	}
}
