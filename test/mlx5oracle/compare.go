package mlx5oracle

import (
	"bytes"
	"fmt"
	"sort"
)

// DiffStep lists, one line each, how a provider's observation of one step differs
// from the oracle's record of it: the commands (number, header words, core and driver
// request bytes, symbolic fields, errno), every watched region's content, and every
// UAR page's content. Callers drop the lines of deliberate, documented differences.
func DiffStep(want StepRecord, got Observation) []string {
	var d []string
	if len(want.Cmds) != len(got.Cmds) {
		d = append(d, fmt.Sprintf("%q: %d commands, oracle sent %d (%s vs %s)", want.Line, len(got.Cmds), len(want.Cmds), cmdNames(got.Cmds), cmdNames(want.Cmds)))
	}
	for i := 0; i < min(len(want.Cmds), len(got.Cmds)); i++ {
		w, g := want.Cmds[i], got.Cmds[i]
		pre := fmt.Sprintf("%q: command %d (%d)", want.Line, i, w.Num)
		if w.Num != g.Num || w.Ex != g.Ex {
			d = append(d, fmt.Sprintf("%s: got command %d ex=%v, want %d ex=%v", pre, g.Num, g.Ex, w.Num, w.Ex))
			continue
		}
		if w.InWords != g.InWords || w.OutWords != g.OutWords || w.ProvIn != g.ProvIn || w.ProvOut != g.ProvOut {
			d = append(d, fmt.Sprintf("%s: words in/out/prov %d/%d/%d/%d, want %d/%d/%d/%d", pre,
				g.InWords, g.OutWords, g.ProvIn, g.ProvOut, w.InWords, w.OutWords, w.ProvIn, w.ProvOut))
		}
		if !bytes.Equal(w.Core, g.Core) {
			d = append(d, fmt.Sprintf("%s: core % x, want % x", pre, g.Core, w.Core))
		}
		if !bytes.Equal(w.Driver, g.Driver) {
			d = append(d, fmt.Sprintf("%s: driver % x, want % x", pre, g.Driver, w.Driver))
		}
		if fmt.Sprint(w.Syms) != fmt.Sprint(g.Syms) {
			d = append(d, fmt.Sprintf("%s: symbolic fields %v, want %v", pre, g.Syms, w.Syms))
		}
		if w.Errno != g.Errno {
			d = append(d, fmt.Sprintf("%s: errno %d, want %d", pre, g.Errno, w.Errno))
		}
	}
	d = append(d, diffMem(want.Line, "region", want.Mem, got.Mem)...)
	d = append(d, diffMem(want.Line, "UAR page", want.UAR, got.UAR)...)
	return d
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

func diffMem(line, what string, want, got map[string][]byte) []string {
	var d []string
	names := make([]string, 0, len(want))
	for k := range want {
		names = append(names, k)
	}
	sort.Strings(names)
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
