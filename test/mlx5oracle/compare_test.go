package mlx5oracle

import (
	"strings"
	"testing"
)

// TestDiffStepReportsGoOnlyRegions: a region that only gorping's side has (an object the
// provider created that libmlx5 did not, or memory it registered) is a difference, and so
// is a UAR page only gorping mapped.
func TestDiffStepReportsGoOnlyRegions(t *testing.T) {
	want := StepRecord{Line: "x", Mem: map[string][]byte{"cq0": {1}}, Pages: map[string][]byte{"uar0": {0}}}
	got := Observation{Mem: map[string][]byte{"cq0": {1}, "qp7": {2}}, Pages: map[string][]byte{"uar0": {0}, "uar9": {0}}}
	d := strings.Join(DiffStep(want, got), "\n")
	for _, w := range []string{"region qp7 exists only in gorping", "device page uar9 exists only in gorping"} {
		if !strings.Contains(d, w) {
			t.Errorf("DiffStep did not report %q; it said:\n%s", w, d)
		}
	}
}

func rec(target string, off int, b ...byte) SeqEvent {
	return SeqEvent{Target: target, Off: off, Width: len(b), Bytes: b}
}

// TestCheckOrder: the provider's own sequence must follow libmlx5's discipline: ToDevice
// before a QP's doorbell record, WCStart after it, the UAR stores, Flush; each mutation
// of a good send sequence is reported.
func TestCheckOrder(t *testing.T) {
	good := []SeqEvent{{Fence: "to_device"}, rec("qp0.db", 4, 0, 0, 0, 1), {Fence: "wc_start"},
		rec("uar6", 0x800, 0, 0, 0, 10, 0, 1, 0xa2, 2), {Fence: "flush"}}
	if d := CheckOrder("good", good); len(d) != 0 {
		t.Fatalf("good sequence flagged: %v", d)
	}
	for name, c := range map[string]struct {
		seq  []SeqEvent
		want string
	}{
		"no ToDevice":        {[]SeqEvent{good[1], good[2], good[3], good[4]}, "without ToDevice"},
		"no WCStart":         {[]SeqEvent{good[0], good[1], good[3], good[4]}, "without WCStart"},
		"no Flush":           {good[:4], "not followed by Flush"},
		"record after ring":  {[]SeqEvent{good[0], {Fence: "wc_start"}, good[3], good[4], good[0], good[1]}, "without a doorbell record"},
		"store outside":      {append(append([]SeqEvent{}, good...), rec("?mmio", 8, 1, 2, 3, 4, 5, 6, 7, 8)), "outside every doorbell record"},
		"record inside ring": {[]SeqEvent{good[0], good[1], good[2], good[3], good[0], good[1], good[4]}, "between UAR stores and their Flush"},
	} {
		d := strings.Join(CheckOrder(name, c.seq), "\n")
		if !strings.Contains(d, c.want) {
			t.Errorf("%s: CheckOrder said %q, want a line with %q", name, d, c.want)
		}
	}
}

// TestSequenceViews: libmlx5's own locks disappear from its view except the shared bfreg's
// spinlock before the doorbell, which stands for mmio_wc_start; gorping's barriers map to
// their x86-64 instructions and a BlueFlame chunk to eight 8-byte stores.
func TestSequenceViews(t *testing.T) {
	lib := LibView([]SeqEvent{{Fence: "locked"}, rec("qp0.db", 4, 0, 0, 0, 1), {Fence: "locked"},
		rec("uar6", 0x800, 1, 2, 3, 4, 5, 6, 7, 8), {Fence: "sfence"}, rec("dbpage", 0x40, 0, 0, 0, 0)})
	if got := ListString(lib); got != "qp0.db+0x4/4[00 00 00 01] sfence uar6+0x800/8[01 02 03 04 05 06 07 08] sfence" {
		t.Errorf("LibView: %s", got)
	}
	chunk := make([]byte, 64)
	chunk[8] = 9
	x := X86View([]SeqEvent{{Fence: "to_device"}, {Fence: "from_device"}, {Fence: "wc_start"}, rec("uar6", 0x900, chunk...), {Fence: "flush"}})
	if len(x) != 11 || x[0].Fence != "lfence" || x[1].Fence != "sfence" || x[3].Off != 0x908 || x[3].Bytes[0] != 9 || x[10].Fence != "sfence" {
		t.Errorf("X86View: %s", ListString(x))
	}
	if d := DiffSeq("l", lib, lib[:3]); len(d) != 1 || !strings.Contains(d[0], "differs at event 3") {
		t.Errorf("DiffSeq of a shortened sequence: %v", d)
	}
}
