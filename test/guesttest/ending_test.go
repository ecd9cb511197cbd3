package guesttest

import (
	"strings"
	"testing"
)

func TestKilledClientEnding(t *testing.T) {
	const (
		disc   = "server DISCONNECT EVENT...\n"
		failed = "rping server failed: -1\n"
	)
	for _, tc := range []struct {
		name  string
		stock bool
		code  int
		err   string
		ok    bool
		first string // the start of the ending's description
	}{
		// Endings seen in guests (docs/development.md, flaky tests).
		{"disconnect first", true, 0, disc + "wait for RDMA_WRITE_ADV state 10\n", true, "the disconnect came first (exit 0)"},
		{"gorping between pings", false, 0, disc, true, "the disconnect came first (exit 0)"},
		{"stock always prints a wait line", true, 0, disc, false, ""},
		{"completion overwrote the disconnect", true, 255, disc + "wait for RDMA_READ_ADV state 9\n" + failed, true, "the disconnect came first, and a completion"},
		{"failed completion, disconnect printed in teardown", true, 255,
			"cq completion failed status 10\nwait for RDMA_WRITE_COMPLETE state 11\n" + failed + disc, true, "a work request in flight failed first (exit 255)"},
		{"failed completion, no disconnect", false, 255,
			"cq completion failed status 11\nwait for RDMA_READ_COMPLETE state 11\n" + failed, true, "a work request in flight failed first (exit 255)"},
		{"failed completion, disconnect seen by the loop", true, 0,
			"cq completion failed status 11\n" + disc + "wait for RDMA_READ_ADV state 10\n", true, "a work request in flight failed first (exit 0)"},
		{"rping 44's spurious exit", true, 255, disc + "wait for RDMA_READ_ADV state 10\n" + V44SpuriousExit + "\n", true, "the disconnect came first (exit 0)"},

		// What rping's server cannot print.
		{"gorping has no spurious exit", false, 255, disc + "wait for RDMA_READ_ADV state 10\n" + V44SpuriousExit + "\n", false, ""},
		{"255 without the failed line", true, 255, disc + "wait for RDMA_READ_ADV state 10\n", false, ""},
		{"0 without the disconnect", false, 0, "cq completion failed status 12\nwait for RDMA_READ_COMPLETE state 11\n", false, ""},
		{"0 after the failed line", false, 0, disc + "wait for RDMA_READ_ADV state 9\n" + failed, false, ""},
		{"overwritten state without a disconnect", false, 255, "wait for RDMA_READ_ADV state 9\n" + failed, false, ""},
		{"state 10 before the disconnect line", false, 0, "wait for RDMA_READ_ADV state 10\n" + disc, false, ""},
		{"state 11 without a failed completion", false, 255, "wait for RDMA_READ_ADV state 11\n" + failed, false, ""},
		{"the state waited for", false, 255, disc + "wait for RDMA_READ_ADV state 6\n" + failed, false, ""},
		{"a state nothing sets", false, 255, disc + "wait for RDMA_READ_ADV state 5\n" + failed, false, ""},
		{"failed line before the wait line", false, 255, "cq completion failed status 10\n" + failed + "wait for RDMA_READ_ADV state 11\n", false, ""},
		{"a local error", false, 255, "cq completion failed status 4\nwait for RDMA_READ_COMPLETE state 11\n" + failed, false, ""},
		{"a line of its own", false, 0, disc + "wait for RDMA_WRITE_ADV state 10\npanic: oops\n", false, ""},
		{"disconnect twice", false, 0, disc + disc + "wait for RDMA_WRITE_ADV state 10\n", false, ""},
		{"another exit status", false, 1, disc + "wait for RDMA_WRITE_ADV state 10\n", false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ending, problems := KilledClientEnding(tc.stock, tc.code, tc.err)
			if ok := len(problems) == 0; ok != tc.ok {
				t.Errorf("accepted %v, want %v: %s; problems %q", ok, tc.ok, ending, problems)
			}
			if tc.first != "" && !strings.HasPrefix(ending, tc.first) {
				t.Errorf("ending %q, want it to start with %q", ending, tc.first)
			}
		})
	}
}
