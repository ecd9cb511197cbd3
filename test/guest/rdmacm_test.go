//go:build guest

package guest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gorping/gorping/rdmacm"
	"github.com/gorping/gorping/test/guesttest"
	"github.com/gorping/gorping/uverbs"
	_ "github.com/gorping/gorping/uverbs/rxe"
	"golang.org/x/sys/unix"
)

// The guest (test/vm) has rxe0 on dummy interface d0 with 192.0.2.1 and 2001:db8::1.
const guestDev = guesttest.DeviceName

// eventTimeout bounds each wait for an event or a completion: TCG guests are slow, never this slow.
const eventTimeout = 30 * time.Second

func guestAddrs(t *testing.T) map[string]netip.Addr {
	t.Helper()
	m := map[string]netip.Addr{}
	for name, def := range map[string]string{"ipv4": "192.0.2.1", "ipv6": "2001:db8::1"} {
		s := os.Getenv("GORPING_" + strings.ToUpper(name))
		if s == "" {
			s = def
		}
		a, err := netip.ParseAddr(strings.SplitN(s, "/", 2)[0])
		if err != nil {
			t.Fatalf("GORPING_%s=%q: %v", strings.ToUpper(name), s, err)
		}
		m[name] = a
	}
	return m
}

// cmIDs counts this process's rdma_cm ids the kernel tracks (`rdma resource
// show cm_id`; only ids bound to a device are listed). The listing's pid is
// the id of the thread that issued the command, which for Go is any thread
// of the process, so match the command name instead.
func cmIDs(t *testing.T) int {
	t.Helper()
	comm, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range guesttest.Resources(t, "cm_id") {
		if r.KV["comm"] == strings.TrimSpace(string(comm)) {
			n++
		}
	}
	return n
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

func waitEvent(t *testing.T, id *rdmacm.ID, want rdmacm.EventType) rdmacm.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
	defer cancel()
	ev, err := id.Event(ctx)
	if err != nil {
		t.Fatalf("waiting for %v: %v", want, err)
	}
	if ev.Type != want {
		t.Fatalf("got %v (status %d), want %v", ev.Type, ev.Status, want)
	}
	return ev
}

func openChannel(t *testing.T) *rdmacm.Channel {
	t.Helper()
	ch, err := rdmacm.Open()
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return ch
}

func createID(t *testing.T, ch *rdmacm.Channel) *rdmacm.ID {
	t.Helper()
	id, err := ch.CreateID()
	if err != nil {
		t.Fatalf("CreateID: %v", err)
	}
	return id
}

// listen binds a listener to addr with a kernel-chosen port and returns it
// with the port.
func listen(t *testing.T, ch *rdmacm.Channel, addr netip.Addr) (*rdmacm.ID, netip.AddrPort) {
	t.Helper()
	l := createID(t, ch)
	if err := l.Bind(netip.AddrPortFrom(addr, 0)); err != nil {
		t.Fatalf("Bind: %v", err)
	}
	if err := l.Listen(3); err != nil {
		t.Fatalf("Listen: %v", err)
	}
	info, err := l.Query()
	if err != nil {
		t.Fatalf("Query: %v", err)
	}
	if info.Src.Addr() != addr || info.Src.Port() == 0 {
		t.Fatalf("listener source %v, want %v with a port", info.Src, addr)
	}
	return l, info.Src
}

func resolve(t *testing.T, id *rdmacm.ID, dst netip.AddrPort) {
	t.Helper()
	if err := id.ResolveAddr(netip.AddrPort{}, dst, 2*time.Second); err != nil {
		t.Fatalf("ResolveAddr: %v", err)
	}
	waitEvent(t, id, rdmacm.EventAddrResolved)
	if err := id.ResolveRoute(2 * time.Second); err != nil {
		t.Fatalf("ResolveRoute: %v", err)
	}
	waitEvent(t, id, rdmacm.EventRouteResolved)
}

// Listen, resolve and query on rxe0 over IPv4 and IPv6; Device() maps both
// the listener and the resolved id to rxe0's uverbs node.
func TestGuestResolveQueryDevice(t *testing.T) {
	rxe := guesttest.RxeDevice(t)
	fds, ids := openFDs(t), cmIDs(t)
	for name, addr := range guestAddrs(t) {
		t.Run(name, func(t *testing.T) {
			ch := openChannel(t)
			defer ch.Close()
			l, lAddr := listen(t, ch, addr)
			c := createID(t, ch)
			if info, err := c.Query(); err != nil || info.NodeGUID != 0 {
				t.Fatalf("unbound id: %+v, %v", info, err)
			}
			if _, err := c.Device(); !errors.Is(err, unix.ENODEV) {
				t.Fatalf("Device of an unbound id: %v, want ENODEV", err)
			}
			resolve(t, c, lAddr)
			info, err := c.Query()
			if err != nil {
				t.Fatal(err)
			}
			// (PKey is 0 on RoCE: the kernel reads it from the netdev's broadcast address.)
			if info.NodeGUID != rxe.NodeGUID || info.PortNum != 1 ||
				info.IbdevIndex != rxe.Index || info.Src.Addr() != addr || info.Dst != lAddr {
				t.Errorf("Query after resolution: %+v\nrxe0: %+v", info, rxe)
			}
			for _, id := range []*rdmacm.ID{l, c} {
				d, err := id.Device()
				if err != nil {
					t.Fatalf("Device: %v", err)
				}
				if d != rxe || !strings.HasPrefix(d.Uverbs, "uverbs") {
					t.Errorf("Device() = %+v, want %+v", d, rxe)
				}
			}
			if n := cmIDs(t); n < ids+2 {
				t.Errorf("the kernel lists %d of our cm_ids (before: %d), want both bound ids", n, ids)
			}
		})
	}
	if n := cmIDs(t); n != ids {
		t.Errorf("cm_ids after Close: %d, before %d", n, ids)
	}
	if n := openFDs(t); n != fds {
		t.Errorf("open fds after Close: %d, before %d", n, fds)
	}
}

func TestGuestBindInUse(t *testing.T) {
	ch := openChannel(t)
	defer ch.Close()
	_, lAddr := listen(t, ch, guestAddrs(t)["ipv4"])
	second := createID(t, ch)
	if err := second.Bind(lAddr); !errors.Is(err, unix.EADDRINUSE) {
		t.Fatalf("Bind to %v in use: %v, want EADDRINUSE", lAddr, err)
	}
}

// verbs is one connection end's verbs objects on rxe0.
type verbs struct {
	cq  *uverbs.CQ
	qp  *uverbs.QP
	buf *uverbs.Buffer
	mr  *uverbs.MR
}

func newVerbs(t *testing.T, pd *uverbs.PD) *verbs {
	t.Helper()
	ctx := pd.Context()
	v := &verbs{}
	var err error
	if v.cq, err = ctx.CreateCQ(32, nil, 0); err != nil {
		t.Fatal(err)
	}
	if v.buf, err = uverbs.NewBuffer(4096); err != nil {
		t.Fatal(err)
	}
	if v.mr, err = pd.RegMR(v.buf, uverbs.AccessLocalWrite); err != nil {
		t.Fatal(err)
	}
	if v.qp, err = pd.CreateQP(uverbs.QPInitAttr{SendCQ: v.cq, RecvCQ: v.cq, Type: uverbs.QPTypeRC,
		Cap: uverbs.QPCap{MaxSendWR: 16, MaxRecvWR: 2, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		t.Fatal(err)
	}
	return v
}

func (v *verbs) free(t *testing.T) {
	t.Helper()
	for _, err := range []error{v.qp.Destroy(), v.cq.Destroy(), v.mr.Dereg(), v.buf.Free()} {
		if err != nil {
			t.Error(err)
		}
	}
}

// poll waits (bounded) for one completion.
func (v *verbs) poll(t *testing.T) uverbs.WC {
	t.Helper()
	wc := make([]uverbs.WC, 1)
	deadline := time.Now().Add(eventTimeout)
	for {
		n, err := v.cq.Poll(wc)
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			return wc[0]
		}
		if time.Now().After(deadline) {
			t.Fatal("no completion")
		}
		time.Sleep(time.Millisecond)
	}
}

func (v *verbs) state(t *testing.T) uverbs.QPState {
	t.Helper()
	a, err := v.qp.Query(uverbs.QPAttrState)
	if err != nil {
		t.Fatal(err)
	}
	return a.State
}

// appModify is rping's -q rping_self_modify_qp: INIT, RTR, RTS straight from
// the kernel's attributes.
func appModify(t *testing.T, id *rdmacm.ID, qp *uverbs.QP, states ...uverbs.QPState) {
	t.Helper()
	for _, s := range states {
		a, mask, err := id.InitQPAttr(s)
		if err != nil {
			t.Fatalf("InitQPAttr(%v): %v", s, err)
		}
		if err := qp.Modify(a, mask); err != nil {
			t.Fatalf("modify to %v: %v", s, err)
		}
	}
}

// A full rping-style connection between two ids of one channel, with real
// rxe QPs: librdmacm-owned QPs (the hidden transitions) and the -q mode.
func TestGuestConnectAccept(t *testing.T) {
	rxe := guesttest.RxeDevice(t)
	fds, ids := openFDs(t), cmIDs(t)
	for _, tc := range []struct {
		name  string
		addr  string
		qMode bool
	}{{"ipv4", "ipv4", false}, {"ipv6", "ipv6", false}, {"ipv4-q", "ipv4", true}} {
		t.Run(tc.name, func(t *testing.T) {
			addr := guestAddrs(t)[tc.addr]
			vctx, err := uverbs.Open(rxe)
			if err != nil {
				t.Fatal(err)
			}
			defer vctx.Close()
			attr, err := vctx.QueryDevice()
			if err != nil {
				t.Fatal(err)
			}
			port, err := vctx.QueryPort(1)
			if err != nil {
				t.Fatal(err)
			}
			ib := port.LinkLayer == uverbs.LinkLayerInfiniBand
			pd, err := vctx.AllocPD()
			if err != nil {
				t.Fatal(err)
			}
			defer pd.Dealloc()

			ch := openChannel(t)
			defer ch.Close()
			l, lAddr := listen(t, ch, addr)
			c := createID(t, ch)
			resolve(t, c, lAddr)
			if d, err := c.Device(); err != nil || d != rxe {
				t.Fatalf("client Device() = %+v, %v", d, err)
			}

			cv := newVerbs(t, pd)
			defer cv.free(t)
			if tc.qMode {
				appModify(t, c, cv.qp, uverbs.QPSInit)
			} else if err := c.AttachQP(cv.qp, ib); err != nil {
				t.Fatalf("AttachQP: %v", err)
			}
			if s := cv.state(t); s != uverbs.QPSInit {
				t.Fatalf("client QP in %v before connecting, want INIT", s)
			}
			p := rdmacm.ConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7,
				QPNum: cv.qp.Num()}
			if err := c.Connect(p); err != nil {
				t.Fatalf("Connect: %v", err)
			}

			req := waitEvent(t, l, rdmacm.EventConnectRequest)
			s := req.Child
			if s == nil || req.Param.QPNum != cv.qp.Num() || req.Param.ResponderResources != 1 || req.Param.InitiatorDepth != 1 {
				t.Fatalf("CONNECT_REQUEST %+v", req)
			}
			if d, err := s.Device(); err != nil || d != rxe {
				t.Fatalf("child Device() = %+v, %v", d, err)
			}
			sv := newVerbs(t, pd)
			defer sv.free(t)
			if tc.qMode {
				appModify(t, s, sv.qp, uverbs.QPSInit)
			} else if err := s.AttachQP(sv.qp, ib); err != nil {
				t.Fatalf("child AttachQP: %v", err)
			}
			msg := []byte("rdma-ping-0: ABC")
			if err := sv.qp.PostRecv(&uverbs.RecvWR{ID: 1, SGE: []uverbs.SGE{{Addr: sv.mr.Addr, Length: 16, LKey: sv.mr.LKey}}}); err != nil {
				t.Fatal(err)
			}
			ap := rdmacm.ConnParam{ResponderResources: rdmacm.MaxRDAtomic, InitiatorDepth: rdmacm.MaxRDAtomic,
				RetryCount: 7, RNRRetryCount: 7,
				MaxResponderResources: uint8(min(attr.MaxQPRdAtom, 255)), MaxInitiatorDepth: uint8(min(attr.MaxQPInitRdAtom, 255))}
			if tc.qMode {
				appModify(t, s, sv.qp, uverbs.QPSInit, uverbs.QPSRTR, uverbs.QPSRTS)
				ap = p
				ap.QPNum = sv.qp.Num()
			}
			if err := s.Accept(ap); err != nil {
				t.Fatalf("Accept: %v", err)
			}
			if st := sv.state(t); st != uverbs.QPSRTS {
				t.Fatalf("server QP in %v after Accept, want RTS", st)
			}

			if tc.qMode {
				resp := waitEvent(t, c, rdmacm.EventConnectResponse)
				if resp.Param.QPNum != sv.qp.Num() {
					t.Errorf("CONNECT_RESPONSE names QP %#x, want %#x", resp.Param.QPNum, sv.qp.Num())
				}
				appModify(t, c, cv.qp, uverbs.QPSInit, uverbs.QPSRTR, uverbs.QPSRTS)
				if err := c.Establish(); err != nil {
					t.Fatalf("Establish: %v", err)
				}
			} else {
				est := waitEvent(t, c, rdmacm.EventEstablished)
				if est.Status != 0 || est.Param.QPNum != sv.qp.Num() {
					t.Errorf("client ESTABLISHED %+v", est)
				}
			}
			if st := cv.state(t); st != uverbs.QPSRTS {
				t.Fatalf("client QP in %v after ESTABLISHED, want RTS", st)
			}
			waitEvent(t, s, rdmacm.EventEstablished)
			if n := cmIDs(t); n < ids+3 {
				t.Errorf("the kernel lists %d of our cm_ids (before: %d), want listener, client and child", n, ids)
			}

			// The connection carries data.
			copy(cv.buf.Bytes(), msg)
			if err := cv.qp.PostSend(&uverbs.SendWR{ID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
				SGE: []uverbs.SGE{{Addr: cv.mr.Addr, Length: 16, LKey: cv.mr.LKey}}}); err != nil {
				t.Fatal(err)
			}
			if wc := cv.poll(t); wc.Status != uverbs.WCSuccess || wc.WRID != 2 {
				t.Fatalf("send completion %+v", wc)
			}
			if wc := sv.poll(t); wc.Status != uverbs.WCSuccess || wc.WRID != 1 || wc.ByteLen != 16 {
				t.Fatalf("recv completion %+v", wc)
			}
			if got := sv.buf.Bytes()[:16]; !bytes.Equal(got, msg) {
				t.Fatalf("received %q", got)
			}

			// Teardown as rping does it: the client disconnects (its QP goes to
			// ERR first), the server sees DISCONNECTED and answers.
			toErr := func(v *verbs) { // rping -q's own QP→ERR before rdma_disconnect
				a := uverbs.QPAttr{State: uverbs.QPSErr}
				if err := v.qp.Modify(&a, uverbs.QPAttrState); err != nil {
					t.Fatal(err)
				}
			}
			if tc.qMode {
				toErr(cv)
			}
			if err := sv.qp.PostRecv(&uverbs.RecvWR{ID: 3, SGE: []uverbs.SGE{{Addr: sv.mr.Addr, Length: 16, LKey: sv.mr.LKey}}}); err != nil {
				t.Fatal(err)
			}
			if err := c.Disconnect(); err != nil {
				t.Fatalf("Disconnect: %v", err)
			}
			if st := cv.state(t); st != uverbs.QPSErr {
				t.Errorf("client QP in %v after Disconnect, want ERR", st)
			}
			waitEvent(t, s, rdmacm.EventDisconnected)
			if tc.qMode {
				toErr(sv)
			}
			if err := s.Disconnect(); err != nil {
				t.Fatalf("server Disconnect: %v", err)
			}
			// The posted RECV flushes: how rping's CQ thread learns the end.
			if wc := sv.poll(t); wc.Status != uverbs.WCWRFlushErr || wc.WRID != 3 {
				t.Fatalf("flushed recv %+v", wc)
			}
			waitEvent(t, c, rdmacm.EventDisconnected)
			for _, id := range []*rdmacm.ID{s, c, l} {
				if err := id.Destroy(); err != nil {
					t.Errorf("Destroy: %v", err)
				}
			}
		})
	}
	if n := cmIDs(t); n != ids {
		t.Errorf("cm_ids after Close: %d, before %d", n, ids)
	}
	if n := openFDs(t); n != fds {
		t.Errorf("open fds after Close: %d, before %d", n, fds)
	}
}

// Connecting to a port nobody listens on: the IB CM rejects with reason 8
// (invalid service id), and the attached QP is in ERR when the app sees it.
func TestGuestRejectedNoListener(t *testing.T) {
	rxe := guesttest.RxeDevice(t)
	addr := guestAddrs(t)["ipv4"]
	ch := openChannel(t)
	defer ch.Close()
	// A port that is certainly free: bind one, then drop it.
	probe, free := listen(t, ch, addr)
	if err := probe.Destroy(); err != nil {
		t.Fatal(err)
	}
	c := createID(t, ch)
	resolve(t, c, free)

	vctx, err := uverbs.Open(rxe)
	if err != nil {
		t.Fatal(err)
	}
	defer vctx.Close()
	pd, err := vctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Dealloc()
	v := newVerbs(t, pd)
	defer v.free(t)
	if err := c.AttachQP(v.qp, false); err != nil {
		t.Fatal(err)
	}
	if err := c.Connect(rdmacm.ConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7}); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	ev := waitEvent(t, c, rdmacm.EventRejected)
	if ev.Status != 8 {
		t.Errorf("REJECTED status %d, want 8", ev.Status)
	}
	if s := v.state(t); s != uverbs.QPSErr {
		t.Errorf("QP in %v after REJECTED, want ERR", s)
	}
	if got := fmt.Sprintf("cma event %s, error %d", ev.Type, ev.Status); got != "cma event RDMA_CM_EVENT_REJECTED, error 8" {
		t.Errorf("rping would print %q", got)
	}
}

// Close wakes an Event caller parked on the real device, and nothing leaks
// across many channels.
func TestGuestCloseWakesAndReleases(t *testing.T) {
	fds, ids := openFDs(t), cmIDs(t)
	addr := guestAddrs(t)["ipv4"]
	for range 20 {
		ch := openChannel(t)
		l, _ := listen(t, ch, addr)
		done := make(chan error, 1)
		go func() {
			_, err := l.Event(context.Background())
			done <- err
		}()
		if err := ch.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		select {
		case err := <-done:
			if !errors.Is(err, rdmacm.ErrClosed) {
				t.Fatalf("parked Event returned %v, want ErrClosed", err)
			}
		case <-time.After(eventTimeout):
			t.Fatal("Close did not wake a parked Event")
		}
	}
	if n := cmIDs(t); n != ids {
		t.Errorf("cm_ids after Close: %d, before %d", n, ids)
	}
	if n := openFDs(t); n != fds {
		t.Errorf("open fds: %d, before %d", n, fds)
	}
}

// freePort returns a port no rdma_cm id uses on addr right now.
func freePort(t *testing.T, ch *rdmacm.Channel, addr netip.Addr) uint16 {
	t.Helper()
	probe, a := listen(t, ch, addr)
	if err := probe.Destroy(); err != nil {
		t.Fatal(err)
	}
	return a.Port()
}

// stockRping starts the guest's librdmacm rping with args; wait returns its
// exit error and output once it exits (bounded).
func stockRping(t *testing.T, args ...string) (wait func() (error, string)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*eventTimeout)
	cmd := exec.CommandContext(ctx, "rping", args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("rping %v: %v", args, err)
	}
	return func() (error, string) {
		defer cancel()
		err := cmd.Wait()
		if ctx.Err() != nil {
			t.Errorf("rping %v did not exit in time:\n%s", args, out.String())
		}
		return err, out.String()
	}
}

// waitListening polls the kernel's cm_id table until somebody listens on a.
func waitListening(t *testing.T, a netip.AddrPort) {
	t.Helper()
	guesttest.WaitListening(t, a.String(), eventTimeout, nil, nil)
}

// Interoperation with librdmacm: stock rping as the peer of the CM handshake
// (REQ/REP/RTU with rdmacm's hidden QP steps on our side) and of one SEND.
func TestGuestInteropStockRping(t *testing.T) {
	if _, err := exec.LookPath("rping"); err != nil {
		t.Fatalf("stock rping not in the guest: %v", err)
	}
	rxe := guesttest.RxeDevice(t)
	addr := guestAddrs(t)["ipv4"]
	setup := func(t *testing.T) (*uverbs.PD, uverbs.DeviceAttr) {
		vctx, err := uverbs.Open(rxe)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { vctx.Close() })
		attr, err := vctx.QueryDevice()
		if err != nil {
			t.Fatal(err)
		}
		pd, err := vctx.AllocPD()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pd.Dealloc() })
		return pd, attr
	}

	t.Run("our-client", func(t *testing.T) {
		pd, _ := setup(t)
		ch := openChannel(t)
		defer ch.Close()
		dst := netip.AddrPortFrom(addr, freePort(t, ch, addr))
		wait := stockRping(t, "-s", "-d", "-a", addr.String(), "-p", fmt.Sprint(dst.Port()), "-C", "1")
		waitListening(t, dst)
		c := createID(t, ch)
		resolve(t, c, dst)
		v := newVerbs(t, pd)
		defer v.free(t)
		if err := c.AttachQP(v.qp, false); err != nil {
			t.Fatal(err)
		}
		if err := c.Connect(rdmacm.ConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7}); err != nil {
			t.Fatal(err)
		}
		waitEvent(t, c, rdmacm.EventEstablished)
		if err := c.Disconnect(); err != nil {
			t.Fatal(err)
		}
		err, out := wait()
		t.Logf("stock rping server: %v\n%s", err, out)
		// The server only reports ESTABLISHED after our RTU (ACCEPT valid=0).
		for _, want := range []string{"RDMA_CM_EVENT_ESTABLISHED", "server DISCONNECT EVENT..."} {
			if !strings.Contains(out, want) {
				t.Errorf("stock server output lacks %q", want)
			}
		}
	})

	t.Run("our-server", func(t *testing.T) {
		pd, attr := setup(t)
		ch := openChannel(t)
		defer ch.Close()
		l, la := listen(t, ch, addr)
		wait := stockRping(t, "-c", "-d", "-a", addr.String(), "-p", fmt.Sprint(la.Port()), "-C", "1", "-S", "100")
		req := waitEvent(t, l, rdmacm.EventConnectRequest)
		s := req.Child
		v := newVerbs(t, pd)
		defer v.free(t)
		if err := s.AttachQP(v.qp, false); err != nil {
			t.Fatal(err)
		}
		if err := v.qp.PostRecv(&uverbs.RecvWR{ID: 1, SGE: []uverbs.SGE{{Addr: v.mr.Addr, Length: 16, LKey: v.mr.LKey}}}); err != nil {
			t.Fatal(err)
		}
		if err := s.Accept(rdmacm.ConnParam{ResponderResources: rdmacm.MaxRDAtomic, InitiatorDepth: rdmacm.MaxRDAtomic,
			RetryCount: 7, RNRRetryCount: 7, MaxResponderResources: uint8(min(attr.MaxQPRdAtom, 255)),
			MaxInitiatorDepth: uint8(min(attr.MaxQPInitRdAtom, 255))}); err != nil {
			t.Fatal(err)
		}
		waitEvent(t, s, rdmacm.EventEstablished)
		// The client's first SEND is its advert: {buf be64, rkey be32, size be32}.
		wc := v.poll(t)
		if wc.Status != uverbs.WCSuccess || wc.ByteLen != 16 {
			t.Fatalf("advert completion %+v", wc)
		}
		if size := v.buf.Bytes()[12:16]; !bytes.Equal(size, []byte{0, 0, 0, 100}) {
			t.Errorf("advert size field % x, want 100", size)
		}
		if err := s.Disconnect(); err != nil {
			t.Fatal(err)
		}
		err, out := wait()
		t.Logf("stock rping client: %v\n%s", err, out)
		for _, want := range []string{"RDMA_CM_EVENT_ESTABLISHED", "client DISCONNECT EVENT..."} {
			if !strings.Contains(out, want) {
				t.Errorf("stock client output lacks %q", want)
			}
		}
	})
}
