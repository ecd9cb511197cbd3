package bnxtre_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/gorping/gorping/test/bnxtreoracle"
	"github.com/gorping/gorping/test/oracle"
	"github.com/gorping/gorping/uverbs"
	_ "github.com/gorping/gorping/uverbs/bnxtre"
)

// The oracle tests run every scenario twice: through Debian's libbnxt_re over the
// oracle's fake kernel (oracle.MustRun), and through gorping's bnxt_re provider over the
// same fake answers in process (oracle.Backend), then compare per step the commands, the
// CQE ring, the send queue (slots and PSN search entries), the receive queue, the
// registered buffers, every store to the doorbell page with the barriers around it, and
// what each verb returned. The deliberate differences are in differences below; the
// rest must be byte-identical.

var dev = uverbs.Device{Name: "bnxt_re0", Uverbs: "uverbs0", Path: "/dev/infiniband/uverbs0", Driver: "bnxt_re", DriverID: 6, ABI: 1}

func TestOracleScenarios(t *testing.T) {
	oracle.RequireSequences(t)
	sets := bnxtreoracle.ParamSets()
	names := make([]string, 0, len(sets))
	for n := range sets {
		names = append(names, n)
	}
	sort.Strings(names)
	if testing.Short() {
		names = []string{"thor"} // make check: the default device; make unit runs every set
	}
	for _, set := range names {
		for _, sc := range bnxtreoracle.Scenarios(set, sets[set]) {
			t.Run(sc.Name, func(t *testing.T) {
				rec := oracle.MustRun(t, sc)
				g := oracle.NewGoRun(t, sc.Driver, dev)
				defer g.Close()
				oracle.CompareRun(t, sc, rec, g, differences)
			})
		}
	}
}

// differences are gorping's documented differences from libbnxt_re:
//   - context creation is compared by compareOpen;
//   - a chain of send WRs: libbnxt_re writes them all and rings the send doorbell once,
//     gorping posts (and rings) one WR at a time: compareChain.
var differences = oracle.Differences{Open: compareOpen, Chain: compareChain}

// compareOpen checks context creation: the same GET_CONTEXT (no driver data) and device
// query, and the shared page mapped as libbnxt_re maps it.
func compareOpen(t *testing.T, want oracle.StepRecord, got oracle.Observation) {
	t.Helper()
	if fmt.Sprint(cmdNums(got.Cmds)) != fmt.Sprint(cmdNums(want.Cmds)) {
		t.Errorf("context creation: gorping sent commands %v, libbnxt_re %v", cmdNums(got.Cmds), cmdNums(want.Cmds))
	}
	for i := 0; i < min(len(got.Cmds), len(want.Cmds)); i++ {
		g, w := got.Cmds[i], want.Cmds[i]
		if g.InWords != w.InWords || g.OutWords != w.OutWords || string(g.Driver) != string(w.Driver) {
			t.Errorf("context creation command %d: words %d/%d driver % x, libbnxt_re %d/%d % x", g.Num, g.InWords, g.OutWords, g.Driver, w.InWords, w.OutWords, w.Driver)
		}
	}
	if fmt.Sprint(got.Mmaps) != fmt.Sprint(want.Mmaps) {
		t.Errorf("mmaps of the device file: gorping %+v, libbnxt_re %+v", got.Mmaps, want.Mmaps)
	}
}

func cmdNums(c []oracle.Cmd) []uint32 {
	var n []uint32
	for _, x := range c {
		n = append(n, x.Num)
	}
	return n
}

// compareChain checks a send step of n WRs: gorping rang n doorbells, each one store to
// the doorbell page, the last carrying libbnxt_re's one doorbell (the index after the
// last WQE).
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
		t.Errorf("step %d %q: chain of %d: gorping's doorbells %v, libbnxt_re's %v", i, want.Line, n, mine, lib)
	}
}

var _ = strings.Contains
