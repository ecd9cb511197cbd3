//go:build guest

package guest

import (
	"fmt"
	"github.com/gorping/gorping/test/guesttest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorping/gorping/rping"
)

// TestStockRpingOverRxe proves the guest itself: stock rping, server and client,
// ping-pongs over rxe0 on IPv4 and IPv6 and prints exactly what rping prints.
// If this fails, no gorping test in this guest means anything.
func TestStockRpingOverRxe(t *testing.T) {
	const pings = 10
	for _, tc := range []struct {
		name string
		addr string
		port int // one port per case, so WaitListening cannot see the other's server
	}{
		{"IPv4", IPv4(t), 7174},
		{"IPv6", IPv6(t), 7175},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := StockRping(t)
			port := strconv.Itoa(tc.port)
			srv := Start(t, bin, "-s", "-a", tc.addr, "-p", port)
			WaitListening(t, srv, tc.addr, tc.port, 30*time.Second)

			cli := Run(t, 60*time.Second, bin, "-c", "-a", tc.addr, "-p", port, "-C", strconv.Itoa(pings), "-v", "-V")
			srvCode := srv.Wait(t, 30*time.Second)

			if want := ExpectedPingLines(pings, rping.DefaultSize); cli.Stdout != want {
				t.Errorf("client stdout:\n%s\nwant:\n%s", cli.Stdout, want)
			}
			CheckStockExit(t, "client", cli)
			if srvCode != 0 {
				t.Errorf("server exit status %d, want 0\nstderr:\n%s", srvCode, srv.Stderr())
			}
			if out := srv.Stdout(); out != "" {
				t.Errorf("server without -v printed on stdout:\n%s", out)
			}
		})
	}
}

// ExpectedPingLines is what `rping -c -v -S size -C count` prints on stdout.
func ExpectedPingLines(count, size int) string {
	var b strings.Builder
	for i := range count {
		fmt.Fprintf(&b, "ping data: %s\n", rping.PayloadString(i, size))
	}
	return b.String()
}

// v44SpuriousExit is rdma-core v44's spurious-exit line (see guesttest).
const v44SpuriousExit = guesttest.V44SpuriousExit

// CheckStockExit fails the test unless a stock rping run exited 0, or exited 255
// with nothing on stderr but the known v44 message (and the racy, harmless
// "... DISCONNECT EVENT..." line): the caller has checked stdout, so in that case
// the run did everything it should and only the exit code is the known bug.
func CheckStockExit(t testing.TB, who string, r Result) {
	t.Helper()
	ok, bug := guesttest.StockExitOK(r.Code, r.Stderr)
	switch {
	case ok && bug:
		t.Logf("%s: exit 255 from the known rping v44 bug (%q), accepted", who, v44SpuriousExit)
	case !ok:
		t.Errorf("%s exit status %d, want 0\nstderr:\n%s", who, r.Code, r.Stderr)
	}
}
