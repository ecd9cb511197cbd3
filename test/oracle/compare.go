package oracle

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
)

// DiffStep lists, one line each, how a provider's observation of one step differs
// from the oracle's record of it: the commands (number, header words, core and driver
// request bytes, symbolic fields, errno), every watched region's content, and the
// device-visible sequence (or, without single-stepping, every device page's content),
// with the driver's CheckOrder of the provider's own sequence. Callers drop the lines
// of deliberate, documented differences.
func DiffStep(d Driver, want StepRecord, got Observation) []string {
	var diff []string
	if len(want.Cmds) != len(got.Cmds) {
		diff = append(diff, fmt.Sprintf("%q: %d commands, oracle sent %d (%s vs %s)", want.Line, len(got.Cmds), len(want.Cmds), cmdNames(got.Cmds), cmdNames(want.Cmds)))
	}
	for i := 0; i < min(len(want.Cmds), len(got.Cmds)); i++ {
		w, g := want.Cmds[i], got.Cmds[i]
		pre := fmt.Sprintf("%q: command %d (%d)", want.Line, i, w.Num)
		if w.Num != g.Num || w.Ex != g.Ex {
			diff = append(diff, fmt.Sprintf("%s: got command %d ex=%v, want %d ex=%v", pre, g.Num, g.Ex, w.Num, w.Ex))
			continue
		}
		if w.InWords != g.InWords || w.OutWords != g.OutWords || w.ProvIn != g.ProvIn || w.ProvOut != g.ProvOut {
			diff = append(diff, fmt.Sprintf("%s: words in/out/prov %d/%d/%d/%d, want %d/%d/%d/%d", pre,
				g.InWords, g.OutWords, g.ProvIn, g.ProvOut, w.InWords, w.OutWords, w.ProvIn, w.ProvOut))
		}
		if !bytes.Equal(w.Core, g.Core) {
			diff = append(diff, fmt.Sprintf("%s: core % x, want % x", pre, g.Core, w.Core))
		}
		if !bytes.Equal(w.Driver, g.Driver) {
			diff = append(diff, fmt.Sprintf("%s: driver % x, want % x", pre, g.Driver, w.Driver))
		}
		if fmt.Sprint(w.Syms) != fmt.Sprint(g.Syms) {
			diff = append(diff, fmt.Sprintf("%s: symbolic fields %v, want %v", pre, g.Syms, w.Syms))
		}
		if w.Errno != g.Errno {
			diff = append(diff, fmt.Sprintf("%s: errno %d, want %d", pre, g.Errno, w.Errno))
		}
	}
	diff = append(diff, DiffMem(want.Line, "region", want.Mem, got.Mem)...)
	if want.Stepped && got.Ops != nil {
		// The store sequence holds every device store in order, so it decides; the pages'
		// content is its replay.
		mine := X86View(got.Ops)
		if !Traced(want.Step.Kind) {
			mine = storesOnly(mine) // the harness records fences of data-path verbs only
		}
		lib := LibView(want.Seq, want.Pages)
		if u, ok := d.(UncachedDoorbells); ok && u.UncachedDoorbells() {
			lib = libView(want.Seq, want.Pages, false)
		}
		diff = append(diff, DiffSeq(want.Line, lib, mine)...)
		diff = append(diff, d.CheckOrder(want.Line, got.Ops)...)
	} else {
		diff = append(diff, DiffMem(want.Line, "device page", want.Pages, got.Pages)...)
	}
	return diff
}

// DiffSeq lists where two store sequences (LibView and X86View) differ: the first
// position where they part, and both sequences from there.
func DiffSeq(line string, want, got []SeqEvent) []string {
	n := min(len(want), len(got))
	i := 0
	for i < n && want[i].String() == got[i].String() {
		i++
	}
	if i == n && len(want) == len(got) {
		return nil
	}
	return []string{fmt.Sprintf("%q: store sequence differs at event %d:\n\tgorping %v\n\tlibrary %v", line, i, got[i:], want[i:])}
}

// LibView is the library's sequence as it is compared: stores to doorbell-record pages
// outside any known record (the library initialising a new slot) dropped, and the
// library's own locks (its spinlocks' LOCK-prefixed instructions, which gorping's Go
// mutexes stand for) dropped, except a lock taken directly before a device store (one of
// pages): that is a shared doorbell's spinlock (mlx5's shared bfreg), which on x86 orders
// what came before the write-combining stores in place of mmio_wc_start's sfence, and
// counts as that sfence.
func LibView(seq []SeqEvent, pages map[string][]byte) []SeqEvent { return libView(seq, pages, true) }

// UncachedDoorbells is a Driver whose device pages are mapped uncached, not
// write-combining (irdma's doorbell page): no lock of the library's stands for a
// write-combining fence there, and LibView drops them all.
type UncachedDoorbells interface {
	UncachedDoorbells() bool
}

func libView(seq []SeqEvent, pages map[string][]byte, lockFence bool) []SeqEvent {
	var out []SeqEvent
	for i, e := range seq {
		switch {
		case e.Target == "dbpage":
		case e.Fence == "locked":
			if lockFence && i+1 < len(seq) && pages[seq[i+1].Target] != nil {
				out = append(out, SeqEvent{Fence: "sfence"})
			}
		default:
			out = append(out, e)
		}
	}
	return out
}

// X86View is a provider's operation sequence (Observation.Ops) as an x86-64 trace shows
// it, which is how the library's is recorded: internal/mmio's amd64 barriers (ToDevice
// is a compiler barrier only, FromDevice LFENCE, WCStart and Flush SFENCE) and its
// 64-byte copy as eight 8-byte stores.
func X86View(ops []SeqEvent) []SeqEvent {
	var out []SeqEvent
	for _, e := range ops {
		switch e.Fence {
		case "to_device":
			continue
		case "from_device":
			out = append(out, SeqEvent{Fence: "lfence"})
			continue
		case "wc_start", "flush":
			out = append(out, SeqEvent{Fence: "sfence"})
			continue
		}
		if e.Width == 64 {
			for o := 0; o < 64; o += 8 {
				out = append(out, SeqEvent{Target: e.Target, Off: e.Off + o, Width: 8, Bytes: e.Bytes[o : o+8]})
			}
			continue
		}
		out = append(out, e)
	}
	return out
}

func cmdNames(c []Cmd) string {
	s := ""
	for i, x := range c {
		if i > 0 {
			s += ","
		}
		s += fmt.Sprint(x.Num)
	}
	return "[" + s + "]"
}

func DiffMem(line, what string, want, got map[string][]byte) []string {
	var d []string
	names := make([]string, 0, len(want))
	for k := range want {
		names = append(names, k)
	}
	sort.Strings(names)
	var extra []string
	for k := range got {
		if _, ok := want[k]; !ok {
			extra = append(extra, k)
		}
	}
	sort.Strings(extra)
	for _, k := range extra {
		d = append(d, fmt.Sprintf("%q: %s %s exists only in gorping (%d bytes)", line, what, k, len(got[k])))
	}
	for _, k := range names {
		w, g := want[k], got[k]
		if g == nil {
			d = append(d, fmt.Sprintf("%q: %s %s missing", line, what, k))
			continue
		}
		if len(w) != len(g) {
			d = append(d, fmt.Sprintf("%q: %s %s is %d bytes, want %d", line, what, k, len(g), len(w)))
			continue
		}
		for off := 0; off < len(w); off += 16 {
			e := min(off+16, len(w))
			if !bytes.Equal(w[off:e], g[off:e]) {
				d = append(d, fmt.Sprintf("%q: %s %s+%#x: % x, want % x", line, what, k, off, g[off:e], w[off:e]))
			}
		}
	}
	return d
}

// ListString prints a sequence on one line, events separated by spaces.
func ListString(seq []SeqEvent) string {
	s := make([]string, len(seq))
	for i, e := range seq {
		s[i] = e.String()
	}
	return strings.Join(s, " ")
}

// Traced reports whether the harness single-steps steps of kind (and so records their
// fences, not only their stores).
func Traced(kind string) bool {
	return kind == KSend || kind == KRecv || kind == KPoll || kind == KArm || kind == KPollTS
}

func storesOnly(seq []SeqEvent) []SeqEvent {
	var out []SeqEvent
	for _, e := range seq {
		if e.Fence == "" {
			out = append(out, e)
		}
	}
	return out
}
