package rdmacm

import (
	"bytes"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/gorping/gorping/internal/trace"
)

// Commands are decoded from the ABI structs (socket addresses as addresses), and events
// the reader fetches are records too; the text stays one record per line.
func TestTraceCommandsAndEvents(t *testing.T) {
	t.Parallel()
	f := newFakeDev(t)
	var b lockedBuf
	ch := newChannel(f, WithTracer(trace.New(&b, false)))
	t.Cleanup(func() { ch.Close() })
	id := mustID(t, ch)
	if err := id.Bind(netip.MustParseAddrPort("192.0.2.1:7174")); err != nil {
		t.Fatal(err)
	}
	if err := id.Listen(3); err != nil {
		t.Fatal(err)
	}
	spare := mustID(t, ch)
	f.queue(id.uid, id.handle, EventAddrResolved, 0, nil)
	syncReader(t, f, spare)
	nextEvent(t, id)
	out := b.String()
	for _, want := range []string{
		"rdmacm   CREATE_ID uid=1 ps=262 qp_type=2 => id=",
		"rdmacm   BIND id=",
		"addr=192.0.2.1:7174",
		"rdmacm   LISTEN id=",
		"backlog=3",
		"cm_event RDMA_CM_EVENT_ADDR_RESOLVED uid=1",
		"cm_event RDMA_CM_EVENT_TIMEWAIT_EXIT",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("trace lacks %q:\n%s", want, out)
		}
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasPrefix(l, "trace ") {
			t.Errorf("not a trace line: %q", l)
		}
	}
}

type lockedBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
