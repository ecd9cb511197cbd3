package rdmacm

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorping/gorping/uverbs"
	"golang.org/x/sys/unix"
)

// fakeDev scripts the rdma_cm device: it records every command, answers
// CREATE_ID / DESTROY_ID / INIT_QP_ATTR like the kernel would, and hands out
// events the test queues. Like the kernel it counts events per uid when
// GET_EVENT returns them, for DESTROY_ID's events_reported.
type fakeDev struct {
	t      *testing.T
	mu     sync.Mutex
	log    *opLog
	cmds   []fakeCmd
	handle uint32
	uidOf  map[uint32]uint64                // kernel handle → uid (CREATE_ID, ACCEPT valid=1)
	given  map[uint64]uint32                // events handed out per uid
	fail   map[uint32]error                 // command → error to return
	attrs  map[uverbs.QPState]uverbs.QPAttr // INIT_QP_ATTR answers by state
	answer map[uint32][]byte                // other responses by command
	respIn map[uint32][]byte                // response buffers as handed in (pre-filled defaults)
	errs   chan error                       // a GET_EVENT failure to report

	events chan []byte
	gate   chan struct{} // if non-nil, getEvent waits on it after taking an event
	closed chan struct{}
	once   sync.Once
}

type fakeCmd struct {
	cmd  uint32
	body []byte
}

// opLog is the ordered record of commands and QP modifies that the
// hidden-step tests assert on.
type opLog struct {
	mu  sync.Mutex
	ops []string
}

func (l *opLog) add(s string) {
	l.mu.Lock()
	l.ops = append(l.ops, s)
	l.mu.Unlock()
}

func (l *opLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	ops := l.ops
	l.ops = nil
	return ops
}

func newFakeDev(t *testing.T) *fakeDev {
	return &fakeDev{
		t: t, log: &opLog{}, handle: 100,
		uidOf: map[uint32]uint64{}, given: map[uint64]uint32{}, fail: map[uint32]error{},
		attrs: map[uverbs.QPState]uverbs.QPAttr{}, answer: map[uint32][]byte{}, respIn: map[uint32][]byte{},
		errs:   make(chan error, 1),
		events: make(chan []byte, 64), closed: make(chan struct{}),
	}
}

var cmdNames = map[uint32]string{
	cmdCreateID: "CREATE_ID", cmdDestroyID: "DESTROY_ID", cmdResolveRoute: "RESOLVE_ROUTE",
	cmdConnect: "CONNECT", cmdListen: "LISTEN", cmdAccept: "ACCEPT", cmdReject: "REJECT",
	cmdDisconnect: "DISCONNECT", cmdInitQPAttr: "INIT_QP_ATTR", cmdQuery: "QUERY",
	cmdBind: "BIND", cmdResolveAddr: "RESOLVE_ADDR",
}

func (f *fakeDev) exec(cmd uint32, body []byte, respOff int, resp []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cmds = append(f.cmds, fakeCmd{cmd, append([]byte(nil), body...)})
	ne := binary.NativeEndian
	op := cmdNames[cmd]
	switch cmd {
	case cmdInitQPAttr:
		op = fmt.Sprintf("INIT_QP_ATTR(%d)", ne.Uint32(body[12:]))
	case cmdAccept:
		op = fmt.Sprintf("ACCEPT valid=%d", body[8+271])
	}
	f.log.add(op)
	if resp != nil {
		f.respIn[cmd] = append([]byte(nil), resp...)
	}
	if a, ok := f.answer[cmd]; ok {
		copy(resp, a)
	}
	if err := f.fail[cmd]; err != nil {
		return err
	}
	switch cmd {
	case cmdCreateID:
		f.handle++
		f.uidOf[f.handle] = ne.Uint64(body[0:])
		ne.PutUint32(resp, f.handle)
	case cmdAccept:
		if body[8+271] == 1 {
			f.uidOf[ne.Uint32(body[280:])] = ne.Uint64(body[0:])
		}
	case cmdDestroyID:
		h := ne.Uint32(body[8:])
		ne.PutUint32(resp, f.given[f.uidOf[h]])
		delete(f.uidOf, h)
	case cmdInitQPAttr:
		state := uverbs.QPState(ne.Uint32(body[12:]))
		a, ok := f.attrs[state]
		if !ok {
			return unix.EINVAL
		}
		b, _ := a.MarshalBinary()
		copy(resp, b)
	}
	return nil
}

func (f *fakeDev) getEvent(resp []byte) error {
	select {
	case ev := <-f.events:
		uid := binary.NativeEndian.Uint64(ev)
		f.mu.Lock()
		f.given[uid]++
		f.mu.Unlock()
		if f.gate != nil {
			select {
			case <-f.gate:
			case <-f.closed:
				return ErrClosed
			}
		}
		copy(resp, ev)
		return nil
	case err := <-f.errs:
		return err
	case <-f.closed:
		return fmt.Errorf("fake: %w", ErrClosed)
	}
}

func (f *fakeDev) close() error {
	f.once.Do(func() { close(f.closed) })
	return nil
}

// commands returns the recorded commands with the given number.
func (f *fakeDev) commands(cmd uint32) [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out [][]byte
	for _, c := range f.cmds {
		if c.cmd == cmd {
			out = append(out, c.body)
		}
	}
	return out
}

// last returns the body of the most recent command with that number.
func (f *fakeDev) last(cmd uint32) []byte {
	c := f.commands(cmd)
	if len(c) == 0 {
		f.t.Fatalf("no %s command was issued", cmdNames[cmd])
	}
	return c[len(c)-1]
}

// queue hands the channel one event, as the kernel's GET_EVENT would.
func (f *fakeDev) queue(uid uint64, handle uint32, typ EventType, status int32, p *connParam) {
	var r eventResp
	r.UID, r.ID, r.Event, r.Status = uid, handle, uint32(typ), status
	if p != nil {
		r.Param = *p
	}
	f.events <- append([]byte(nil), bytesOf(&r)...)
}

// fakeQP records modifies into the shared log.
type fakeQP struct {
	log     *opLog
	num     uint32
	failAt  uverbs.QPState // state whose modify fails with EINVAL (0: none)
	iw      bool           // an iWARP device's QP
	mu      sync.Mutex
	history []qpModify
}

type qpModify struct {
	attr uverbs.QPAttr
	mask uverbs.QPAttrMask
}

func (q *fakeQP) iwarp() bool { return q.iw }

func (q *fakeQP) modify(a *uverbs.QPAttr, mask uverbs.QPAttrMask) error {
	q.log.add(fmt.Sprintf("modify(%d, %#x)", uint32(a.State), uint32(mask)))
	q.mu.Lock()
	q.history = append(q.history, qpModify{*a, mask})
	q.mu.Unlock()
	if q.failAt != 0 && a.State == q.failAt {
		return unix.EINVAL
	}
	return nil
}

func (q *fakeQP) qpNum() uint32 { return q.num }

func (q *fakeQP) modifies() []qpModify {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]qpModify(nil), q.history...)
}

// Kernel-like INIT_QP_ATTR answers for an IB/RoCE id after the CM exchange.
func cmAttrs() map[uverbs.QPState]uverbs.QPAttr {
	return map[uverbs.QPState]uverbs.QPAttr{
		qpsInit: {AttrMask: 0x39, State: qpsInit, AccessFlags: 0x7, PortNum: 1},
		qpsRTR: {AttrMask: 0x1 | 0x80 | 0x100 | 0x100000 | 0x1000 | 0x20000 | 0x8000 | 0xE00000,
			State: qpsRTR, PathMTU: 3, DestQPNum: 0x11, RQPSN: 0x1234, MaxDestRdAtomic: 9, PortNum: 1},
		qpsRTS: {AttrMask: 0x1 | 0x10000 | 0x200 | 0x400 | 0x800 | 0x2000,
			State: qpsRTS, SQPSN: 0x5678, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 9},
	}
}

func newTestChannel(t *testing.T) (*Channel, *fakeDev) {
	t.Helper()
	f := newFakeDev(t)
	ch := newChannel(f)
	t.Cleanup(func() { ch.Close() })
	return ch, f
}

func mustID(t *testing.T, ch *Channel) *ID {
	t.Helper()
	id, err := ch.CreateID()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// nextEvent waits (with a deadline) for the ID's next event.
func nextEvent(t *testing.T, id *ID) Event {
	t.Helper()
	ctx, cancel := testCtx()
	defer cancel()
	ev, err := id.Event(ctx)
	if err != nil {
		t.Fatalf("waiting for an event: %v", err)
	}
	return ev
}

func wantOps(t *testing.T, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("operations:\n got  %q\n want %q", got, want)
	}
}

const testTimeout = 10 * time.Second

func testCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), testTimeout)
}
