//go:build guest

package guest

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// swTimeNote is what a gorping client reporting round trips (--stats, --trace) says once
// on rxe, which has no NIC completion timestamps.
var rttRecord = regexp.MustCompile(`^trace +\d+\.\d+ rtt +ping seq=`)

const swTimeNote = "gorping: rxe0: no NIC completion timestamps (the rxe driver has none); round-trip times are software time (ts_source=sw)"

// TestTimestampsFallback: on rxe (no completion timestamps: QUERY_DEVICE_EX reports a
// zero mask) a gorping client against stock rping says so exactly once and reports
// software time only: --stats keeps rping-like per-ping lines and the usual summary;
// --json labels the connection, every ping and the summary ts_source "sw" with no NIC
// fields; --trace's per-ping record says ts_source=sw.
func TestTimestampsFallback(t *testing.T) {
	addr := IPv4(t)
	t.Run("Stats", func(t *testing.T) {
		srv, cli := pingOnce(t, stockImpl(t), nil, gorpingImpl(t), []string{"-C", "5", "--stats"}, 2*time.Minute)
		CheckStockExit(t, "stock server", srv)
		clientOK(t, "client", cli)
		if n := strings.Count(cli.Stderr, swTimeNote+"\n"); n != 1 {
			t.Errorf("the software-time note %d times in stderr %q", n, cli.Stderr)
		}
		pings, _, received, _ := statsOutput(t, cli.Stdout, false, addr)
		if pings != 5 || received != 5 || strings.Contains(cli.Stdout, "nic") {
			t.Errorf("%d pings, %d received, stdout:\n%s", pings, received, cli.Stdout)
		}
	})
	t.Run("JSON", func(t *testing.T) {
		srv, cli := pingOnce(t, stockImpl(t), nil, gorpingImpl(t), []string{"-C", "5", "--json", "--stats"}, 2*time.Minute)
		CheckStockExit(t, "stock server", srv)
		if cli.Code != 0 || strings.Contains(cli.Stderr, "timestamps") {
			t.Fatalf("exit %d, stderr %q (with --json the connection record says it)", cli.Code, cli.Stderr)
		}
		seen := map[string]int{}
		for _, o := range jsonLines(t, cli.Stdout) {
			typ, _ := o["type"].(string)
			switch typ {
			case "connection":
				if o["ts_source"] != "sw" || o["ts_note"] != "the rxe driver has none" {
					t.Errorf("connection %v: want ts_source sw, ts_note the rxe driver has none", o)
				}
			case "ping", "summary":
				if o["ts_source"] != "sw" || o["nic_rtt_ns"] != nil || o["host_ns"] != nil || o["nic_pings"] != nil {
					t.Errorf("%s %v: want ts_source sw and no NIC fields", typ, o)
				}
			}
			seen[typ]++
		}
		if seen["connection"] != 1 || seen["ping"] != 5 || seen["summary"] != 1 {
			t.Errorf("records %v", seen)
		}
	})
	t.Run("Trace", func(t *testing.T) {
		srv, cli := pingOnce(t, stockImpl(t), nil, gorpingImpl(t), []string{"-C", "3", "--trace"}, 2*time.Minute)
		CheckStockExit(t, "stock server", srv)
		if cli.Code != 0 || strings.Count(cli.Stderr, swTimeNote+"\n") != 1 {
			t.Fatalf("exit %d; want the note once in stderr:\n%s", cli.Code, tailText(cli.Stderr))
		}
		rtts := 0
		for _, l := range strings.Split(cli.Stderr, "\n") {
			if rttRecord.MatchString(l) {
				rtts++
				if !strings.Contains(l, "ts_source=sw") || strings.Contains(l, "nic_rtt_ns") {
					t.Errorf("trace %q: want ts_source=sw", l)
				}
			}
		}
		if rtts != 3 {
			t.Errorf("%d per-ping rtt records, want 3", rtts)
		}
	})
}

// TestKernelPageSize: the guest runs with the page size its kernel flavour promises
// (Debian's -16k and -64k arm64 kernels; 4 KiB elsewhere), so a tier meant to catch
// page-size assumptions (make guest-16k) really runs on 16 KiB pages.
func TestKernelPageSize(t *testing.T) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	release := unix.ByteSliceToString(u.Release[:])
	want := 4096
	switch {
	case strings.HasSuffix(release, "-16k"):
		want = 16 << 10
	case strings.HasSuffix(release, "-64k"):
		want = 64 << 10
	}
	if got := os.Getpagesize(); got != want {
		t.Errorf("kernel %s: page size %d, want %d", release, got, want)
	}
	t.Logf("kernel %s, page size %d", release, os.Getpagesize())
}
