package explain

import (
	"strings"
	"testing"
	"time"
)

func TestCMCause(t *testing.T) {
	// The advice is the provider's (uverbs/driver.LinkDownAdvisor): here a stand-in.
	fix := "the driver's advice"
	rxe := cmFacts{peer: "the server", known: true, dev: "rxe0", port: 1, netdev: "eth0", waited: 19 * time.Second, advice: fix}
	for _, tc := range []struct {
		name string
		f    func(f *cmFacts)
		want string
	}{
		{"unknown", func(f *cmFacts) { f.known = false }, "the server's host is down, its link is down, the network between is partitioned, or its connection manager cannot receive"},
		{"peer silent", func(f *cmFacts) { f.sent = 4 }, "4 connection manager messages sent, none answered: the server's host is down"},
		{"peer silent, kernel 6.1's slow retries", func(f *cmFacts) { f.sent = 3 }, "3 connection manager messages sent, none answered"},
		// The same counts after a link flap are still a silent peer: the CM
		// sent its retries and nothing came in.
		{"flapped but peer silent", func(f *cmFacts) { f.sent, f.linkDowned = 4, 1 }, "4 connection manager messages sent, none answered"},
		{"flap: deaf QP1", func(f *cmFacts) { f.sent, f.linkDowned, f.netdevRx, f.netdevRxKnown = 4, 1, 7, true },
			"rxe0 received nothing while eth0 got 7 packets since its link went down (link_downed 1): the driver's advice"},
		{"flap: mute QP1 (kernel 6.12)", func(f *cmFacts) { f.sent, f.linkDowned = 2, 1 },
			"rxe0 sent 2 connection manager message(s) in 19.0 s since its link went down (link_downed 1): the driver's advice"},
		{"flap: nothing sent", func(f *cmFacts) { f.linkDowned = 2 }, "rxe0 sent 0 connection manager message(s)"},
		{"mute, no flap", func(f *cmFacts) { f.sent = 2 }, "this host's connection manager sent only 2 message(s) in 19.0 s"},
		{"answered", func(f *cmFacts) { f.sent, f.heard = 2, 1 }, "the server's connection manager answered (1 messages) but the connection did not complete"},
		{"no advice", func(f *cmFacts) { f.advice, f.sent, f.linkDowned, f.netdevRx, f.netdevRxKnown = "", 4, 1, 7, true }, "4 connection manager messages sent, none answered"},
	} {
		f := rxe
		tc.f(&f)
		got := cmCause(f)
		if !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q\nwant it to contain %q", tc.name, got, tc.want)
		}
		if strings.Contains(tc.name, "flap:") != strings.HasSuffix(got, fix) {
			t.Errorf("%s: the fix is %s: %q", tc.name, map[bool]string{true: "missing", false: "wrongly given"}[strings.Contains(tc.name, "flap:")], got)
		}
	}
}
