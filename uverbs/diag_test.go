package uverbs

import (
	"strings"
	"testing"
)

func TestWCStatusCause(t *testing.T) {
	t.Parallel()
	for s, words := range map[WCStatus][]string{
		WCRetryExcErr:    {"RETRY_EXC_ERR (12)", "route", "RoCE v1 vs v2", "MTU", "PFC"},
		WCRemAccessErr:   {"REM_ACCESS_ERR (10)", "rkey", "length"},
		WCLocLenErr:      {"LOC_LEN_ERR (1)", "buffer sizes"},
		WCRNRRetryExcErr: {"RNR_RETRY_EXC_ERR (13)", "no receive posted"},
		WCWRFlushErr:     {"WR_FLUSH_ERR (5)", "first completion"},
		WCStatus(99):     {"WCStatus(99) (99)", "unknown"},
	} {
		c := s.Cause()
		for _, w := range words {
			if !strings.Contains(c, w) {
				t.Errorf("%d.Cause() = %q, lacks %q", s, c, w)
			}
		}
	}
	// Every status uverbs names has its own sentence: one line, no copy-paste.
	seen := map[string]WCStatus{}
	for s := WCSuccess; s <= WCGeneralErr; s++ {
		c := s.Cause()
		if strings.Contains(c, "\n") || strings.Contains(c, "unknown completion status") {
			t.Errorf("%s: %q", s, c)
		}
		_, text, _ := strings.Cut(c, ": ")
		if o, dup := seen[text]; dup {
			t.Errorf("%s and %s share the text %q", s, o, text)
		}
		seen[text] = s
	}
}

func TestCheckMTU(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		f     MTUFacts
		words []string // "" = no warning
	}{
		{"rxe default", MTUFacts{PathMTU: MTU1024, ActiveMTU: MTU1024, LinkLayer: LinkLayerEthernet, Netdev: "d0", NetdevMTU: 1500}, nil},
		{"exact fit", MTUFacts{PathMTU: MTU1024, ActiveMTU: MTU1024, LinkLayer: LinkLayerEthernet, Netdev: "d0", NetdevMTU: 1024 + 80}, nil},
		{"one byte short", MTUFacts{PathMTU: MTU1024, ActiveMTU: MTU1024, LinkLayer: LinkLayerEthernet, Netdev: "d0", NetdevMTU: 1103},
			[]string{"path MTU 1024", "80 bytes", "d0's MTU 1103", "larger than 1023 bytes", "at least 1104", "at most 512"}},
		{"netdev lowered after connect", MTUFacts{PathMTU: MTU1024, ActiveMTU: MTU256, LinkLayer: LinkLayerEthernet, Netdev: "d0", NetdevMTU: 600},
			[]string{"path MTU 1024 exceeds the port's active MTU 256", "d0's MTU 600", "at most 512"}},
		{"no path MTU: active", MTUFacts{ActiveMTU: MTU4096, LinkLayer: LinkLayerEthernet, Netdev: "eth1", NetdevMTU: 4096},
			[]string{"active MTU 4096", "eth1's MTU 4096", "at most 2048"}},
		{"tiny netdev", MTUFacts{PathMTU: MTU256, LinkLayer: LinkLayerEthernet, NetdevMTU: 300},
			[]string{"the netdev's MTU 300", "at least 336 (no IB MTU fits it now)"}},
		{"infiniband ignores netdev", MTUFacts{PathMTU: MTU4096, ActiveMTU: MTU4096, LinkLayer: LinkLayerInfiniBand, NetdevMTU: 1500}, nil},
		{"infiniband path above active", MTUFacts{PathMTU: MTU4096, ActiveMTU: MTU2048, LinkLayer: LinkLayerInfiniBand},
			[]string{"path MTU 4096 exceeds the port's active MTU 2048"}},
		{"nothing known", MTUFacts{LinkLayer: LinkLayerEthernet}, nil},
	} {
		w := CheckMTU(tc.f)
		if len(tc.words) == 0 {
			if w != "" {
				t.Errorf("%s: unexpected warning %q", tc.name, w)
			}
			continue
		}
		for _, word := range tc.words {
			if !strings.Contains(w, word) {
				t.Errorf("%s: %q lacks %q", tc.name, w, word)
			}
		}
	}
}
