package diag

import (
	"strings"
	"testing"

	"github.com/gorping/gorping/uverbs"
)

func TestCheckMTU(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		f     MTUFacts
		words []string // "" = no warning
	}{
		{"rxe default", MTUFacts{PathMTU: uverbs.MTU1024, ActiveMTU: uverbs.MTU1024, LinkLayer: uverbs.LinkLayerEthernet, Netdev: "d0", NetdevMTU: 1500}, nil},
		{"exact fit", MTUFacts{PathMTU: uverbs.MTU1024, ActiveMTU: uverbs.MTU1024, LinkLayer: uverbs.LinkLayerEthernet, Netdev: "d0", NetdevMTU: 1024 + 80}, nil},
		{"one byte short", MTUFacts{PathMTU: uverbs.MTU1024, ActiveMTU: uverbs.MTU1024, LinkLayer: uverbs.LinkLayerEthernet, Netdev: "d0", NetdevMTU: 1103},
			[]string{"path MTU 1024", "80 bytes", "d0's MTU 1103", "larger than 1023 bytes", "at least 1104", "at most 512"}},
		{"netdev lowered after connect", MTUFacts{PathMTU: uverbs.MTU1024, ActiveMTU: uverbs.MTU256, LinkLayer: uverbs.LinkLayerEthernet, Netdev: "d0", NetdevMTU: 600},
			[]string{"path MTU 1024 exceeds the port's active MTU 256", "d0's MTU 600", "at most 512"}},
		{"no path MTU: active", MTUFacts{ActiveMTU: uverbs.MTU4096, LinkLayer: uverbs.LinkLayerEthernet, Netdev: "eth1", NetdevMTU: 4096},
			[]string{"active MTU 4096", "eth1's MTU 4096", "at most 2048"}},
		{"tiny netdev", MTUFacts{PathMTU: uverbs.MTU256, LinkLayer: uverbs.LinkLayerEthernet, NetdevMTU: 300},
			[]string{"the netdev's MTU 300", "at least 336 (no IB MTU fits it now)"}},
		{"infiniband ignores netdev", MTUFacts{PathMTU: uverbs.MTU4096, ActiveMTU: uverbs.MTU4096, LinkLayer: uverbs.LinkLayerInfiniBand, NetdevMTU: 1500}, nil},
		{"infiniband path above active", MTUFacts{PathMTU: uverbs.MTU4096, ActiveMTU: uverbs.MTU2048, LinkLayer: uverbs.LinkLayerInfiniBand},
			[]string{"path MTU 4096 exceeds the port's active MTU 2048"}},
		{"nothing known", MTUFacts{LinkLayer: uverbs.LinkLayerEthernet}, nil},
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
