package rping

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/gorping/gorping/rdmacm"
	"github.com/gorping/gorping/rping/explain"
	"golang.org/x/sys/unix"
)

func TestPrinterHint(t *testing.T) {
	var b bytes.Buffer
	out := &printer{stderr: &b}
	out.hint("")
	out.hint("gorping: x")
	if b.String() != "gorping: x\n" {
		t.Errorf("printed %q", b.String())
	}
}

// A REJECTED event is rping's line; a stale-connection reject (after the device was
// created anew) gets gorping's explanation too, other rejects do not.
func TestCMErrorStaleConnection(t *testing.T) {
	for _, tc := range []struct {
		status int32
		hint   bool
	}{{rejStaleConn, true}, {28, false}, {-111, false}} {
		var stderr bytes.Buffer
		out := &printer{stdout: &bytes.Buffer{}, stderr: &stderr}
		if !cmError(out, rdmacm.Event{Type: rdmacm.EventRejected, Status: tc.status}) {
			t.Fatalf("status %d: REJECTED is no error event", tc.status)
		}
		want := fmt.Sprintf("cma event RDMA_CM_EVENT_REJECTED, error %d\n", tc.status)
		if tc.hint {
			want += staleConnHint + "\n"
		}
		if got := stderr.String(); got != want {
			t.Errorf("status %d: stderr %q, want %q", tc.status, got, want)
		}
	}
}

// An UNREACHABLE with -ETIMEDOUT on a connection that is up gets rping's line and
// the neighbour-change hint naming the other side; other statuses get rping's line.
func TestCMCompletionMACChanged(t *testing.T) {
	for _, tc := range []struct {
		role, peer string
		status     int32
	}{{"client", "server", -int32(unix.ETIMEDOUT)}, {"server", "client", -int32(unix.ETIMEDOUT)}, {"client", "", -int32(unix.EHOSTUNREACH)}} {
		var stderr bytes.Buffer
		out := &printer{stdout: &bytes.Buffer{}, stderr: &stderr}
		comp, ok := cmCompletion(out, rdmacm.Event{Type: rdmacm.EventUnreachable, Status: tc.status}, tc.role)
		if !ok || comp.kind != compError {
			t.Fatalf("%s, status %d: completion %v %v, want an error", tc.role, tc.status, comp, ok)
		}
		want := fmt.Sprintf("cma event RDMA_CM_EVENT_UNREACHABLE, error %d\n", tc.status)
		if tc.peer != "" {
			want += explain.MACChanged(tc.role) + "\n"
			if !strings.Contains(want, "neighbour entry for the "+tc.peer+" changed its MAC address") {
				t.Errorf("%s: the hint does not name the %s: %q", tc.role, tc.peer, want)
			}
		}
		if got := stderr.String(); got != want {
			t.Errorf("%s, status %d: stderr %q, want %q", tc.role, tc.status, got, want)
		}
	}
}
