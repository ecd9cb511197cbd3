package rdmacm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/gorping/gorping/uverbs"
	"golang.org/x/sys/unix"
)

var ne = binary.NativeEndian

// golden builds an expected command body: size zero bytes, then puts.
type golden []byte

func (g golden) u8(off int, v uint8) golden   { g[off] = v; return g }
func (g golden) u16(off int, v uint16) golden { ne.PutUint16(g[off:], v); return g }
func (g golden) u32(off int, v uint32) golden { ne.PutUint32(g[off:], v); return g }
func (g golden) u64(off int, v uint64) golden { ne.PutUint64(g[off:], v); return g }
func (g golden) be16(off int, v uint16) golden {
	binary.BigEndian.PutUint16(g[off:], v)
	return g
}
func (g golden) raw(off int, b ...byte) golden { copy(g[off:], b); return g }

// sin is a struct sockaddr_in at off (family in host order,
// port network order, address at +4).
func (g golden) sin(off int, port uint16, a ...byte) golden {
	return g.u16(off, unix.AF_INET).be16(off+2, port).raw(off+4, a...)
}

// sin6 is a struct sockaddr_in6 at off (address at +8, scope id at +24).
func (g golden) sin6(off int, port uint16, scope uint32, a ...byte) golden {
	return g.u16(off, unix.AF_INET6).be16(off+2, port).raw(off+8, a...).u32(off+24, scope)
}

func checkBody(t *testing.T, what string, got []byte, want golden) {
	t.Helper()
	if !bytes.Equal(got, want) {
		for i := range min(len(got), len(want)) {
			if got[i] != want[i] {
				t.Fatalf("%s: %d bytes, first difference at offset %d: got %#x want %#x\n got  % x\n want % x",
					what, len(got), i, got[i], want[i], got, []byte(want))
			}
		}
		t.Fatalf("%s: got %d bytes, want %d", what, len(got), len(want))
	}
}

var (
	ip4   = []byte{192, 0, 2, 1}
	ip6   = []byte{0x20, 0x01, 0x0d, 0xb8, 15: 1}
	addr4 = netip.MustParseAddrPort("192.0.2.1:7174")
	addr6 = netip.MustParseAddrPort("[2001:db8::1%3]:7174")
)

// Golden bytes of every command body, offsets as in rdma/rdma_user_cm.h.
func TestCommandBodies(t *testing.T) {
	t.Parallel()
	ch, f := newTestChannel(t)
	id := mustID(t, ch)
	h := id.handle
	checkBody(t, "CREATE_ID", f.last(cmdCreateID),
		make(golden, 24).u64(0, id.uid).u16(16, 0x0106).u8(18, 2))
	if id.uid == 0 {
		t.Fatal("uid 0 handed to the kernel")
	}

	if err := id.Bind(addr4); err != nil {
		t.Fatal(err)
	}
	checkBody(t, "BIND v4", f.last(cmdBind),
		make(golden, 136).u32(0, h).u16(4, 16).sin(8, 7174, ip4...))
	if err := id.Bind(addr6); err != nil {
		t.Fatal(err)
	}
	checkBody(t, "BIND v6", f.last(cmdBind),
		make(golden, 136).u32(0, h).u16(4, 28).sin6(8, 7174, 3, ip6...))

	if err := id.ResolveAddr(netip.AddrPort{}, addr4, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	checkBody(t, "RESOLVE_ADDR no src", f.last(cmdResolveAddr),
		make(golden, 272).u32(0, h).u32(4, 2000).u16(10, 16).sin(144, 7174, ip4...))
	src := netip.MustParseAddrPort("[2001:db8::2]:0")
	if err := id.ResolveAddr(src, netip.MustParseAddrPort("[2001:db8::1]:7174"), 1500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	ip6b := append([]byte(nil), ip6...)
	ip6b[15] = 2
	checkBody(t, "RESOLVE_ADDR v6 src", f.last(cmdResolveAddr),
		make(golden, 272).u32(0, h).u32(4, 1500).u16(8, 28).u16(10, 28).
			sin6(16, 0, 0, ip6b...).sin6(144, 7174, 0, ip6...))

	if err := id.ResolveRoute(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	checkBody(t, "RESOLVE_ROUTE", f.last(cmdResolveRoute), make(golden, 8).u32(0, h).u32(4, 2000))

	if _, err := id.Query(); err != nil {
		t.Fatal(err)
	}
	checkBody(t, "QUERY", f.last(cmdQuery), make(golden, 16).u32(8, h).u32(12, 0))
	// librdmacm pre-fills ibdev_index with -1 for kernels that do not set it.
	if got := ne.Uint32(f.respIn[cmdQuery][272:]); got != 0xFFFFFFFF || len(f.respIn[cmdQuery]) != 280 {
		t.Fatalf("QUERY response buffer: %d bytes, ibdev_index pre-fill %#x", len(f.respIn[cmdQuery]), got)
	}

	if err := id.Listen(3); err != nil {
		t.Fatal(err)
	}
	checkBody(t, "LISTEN", f.last(cmdListen), make(golden, 8).u32(0, h).u32(4, 3))

	pd := []byte("hello")
	if err := id.Connect(ConnParam{PrivateData: pd, ResponderResources: 1, InitiatorDepth: 1,
		RetryCount: 7, RNRRetryCount: 7, QPNum: 0x1234, FlowControl: 1}); err != nil {
		t.Fatal(err)
	}
	checkBody(t, "CONNECT", f.last(cmdConnect), make(golden, 288).u32(0, 0x1234).raw(8, pd...).
		u8(264, 5).u8(266, 1).u8(267, 1).u8(268, 1).u8(269, 7).u8(270, 7).u8(271, 1).u32(272, h))

	if err := id.Accept(ConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7,
		RNRRetryCount: 7, QPNum: 0x4321, SRQ: true}); err != nil {
		t.Fatal(err)
	}
	checkBody(t, "ACCEPT", f.last(cmdAccept), make(golden, 296).u64(0, id.uid).u32(8, 0x4321).
		u8(8+265, 1).u8(8+266, 1).u8(8+267, 1).u8(8+269, 7).u8(8+270, 7).u8(8+271, 1).u32(280, h))

	if err := id.Establish(); err != nil {
		t.Fatal(err)
	}
	checkBody(t, "ACCEPT (establish)", f.last(cmdAccept), make(golden, 296).u32(280, h))

	if err := id.Reject(); err != nil {
		t.Fatal(err)
	}
	checkBody(t, "REJECT", f.last(cmdReject), make(golden, 264).u32(0, h))

	if err := id.Disconnect(); err != nil {
		t.Fatal(err)
	}
	checkBody(t, "DISCONNECT", f.last(cmdDisconnect), make(golden, 4).u32(0, h))

	f.attrs[qpsRTR] = uverbs.QPAttr{State: qpsRTR}
	if _, err := id.initQPAttr(qpsRTR); err != nil {
		t.Fatal(err)
	}
	checkBody(t, "INIT_QP_ATTR", f.last(cmdInitQPAttr), make(golden, 16).u32(8, h).u32(12, 2))
	if len(f.respIn[cmdInitQPAttr]) != 144 {
		t.Fatalf("INIT_QP_ATTR response buffer is %d bytes, want 144", len(f.respIn[cmdInitQPAttr]))
	}

	if err := id.Destroy(); err != nil {
		t.Fatal(err)
	}
	checkBody(t, "DESTROY_ID", f.last(cmdDestroyID), make(golden, 16).u32(8, h))
	if len(f.respIn[cmdDestroyID]) != 4 {
		t.Fatalf("DESTROY_ID response buffer is %d bytes, want 4", len(f.respIn[cmdDestroyID]))
	}
}

// frame is what the real device writes: header, body with the response
// pointer patched in, response buffer inside the (mmap'd) slot.
func TestFrame(t *testing.T) {
	t.Parallel()
	a, err := newArena()
	if err != nil {
		t.Fatal(err)
	}
	defer a.free()
	slot, err := a.get()
	if err != nil {
		t.Fatal(err)
	}
	defer a.put(slot)

	body := query{ID: 7, Option: queryAddr}
	resp := make([]byte, sizeofQueryAddrResp)
	resp[272] = 0xAA // a pre-filled default must reach the kernel's buffer
	calls := 0
	err = frame(slot, cmdQuery, bytesOf(&body), 0, resp, func(b []byte) (int, error) {
		calls++
		if calls == 1 {
			return 0, unix.EINTR // retried
		}
		want := make(golden, 24).u32(0, cmdQuery).u16(4, 16).u16(6, 280).
			u64(8, slot.addr+slotResp).u32(16, 7)
		checkBody(t, "QUERY frame", b, want)
		kbuf := b[:cap(b)][slotResp : slotResp+280] // what the kernel writes to
		if kbuf[272] != 0xAA {
			t.Errorf("response buffer was not pre-filled from resp")
		}
		kbuf[0], kbuf[279] = 0x50, 0x07
		return len(b), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls != 2 || resp[0] != 0x50 || resp[279] != 0x07 {
		t.Fatalf("calls %d, response not copied back: % x … % x", calls, resp[:2], resp[278:])
	}

	var ev getEvent
	err = frame(slot, cmdGetEvent, bytesOf(&ev), 0, make([]byte, sizeofEventResp), func(b []byte) (int, error) {
		checkBody(t, "GET_EVENT frame", b, make(golden, 16).u32(0, cmdGetEvent).u16(4, 8).u16(6, 336).
			u64(8, slot.addr+slotResp))
		return len(b) - 1, nil
	})
	if !errors.Is(err, unix.ENODATA) {
		t.Fatalf("short write: got %v, want ENODATA", err)
	}
	err = frame(slot, cmdDisconnect, make([]byte, 4), 0, nil, func(b []byte) (int, error) {
		checkBody(t, "DISCONNECT frame", b, make(golden, 12).u32(0, cmdDisconnect).u16(4, 4))
		return 0, unix.EADDRINUSE
	})
	if !errors.Is(err, unix.EADDRINUSE) {
		t.Fatalf("got %v, want the write's errno", err)
	}
}

func TestArenaFreeWaitsForSlots(t *testing.T) {
	t.Parallel()
	a, err := newArena()
	if err != nil {
		t.Fatal(err)
	}
	s, err := a.get()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- a.free() }()
	<-a.done // free has started
	select {
	case err := <-done:
		t.Fatalf("free returned (%v) while a slot was in use", err)
	default:
	}
	a.put(s)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(testTimeout):
		t.Fatal("free did not return after the slot came back")
	}
	if _, err := a.get(); !errors.Is(err, ErrClosed) {
		t.Fatalf("get after free: %v, want ErrClosed", err)
	}
}

func TestEventDecode(t *testing.T) {
	t.Parallel()
	b := make(golden, 336).u64(0, 0xDEADBEEF01).u32(8, 42).u32(12, 4).u32(16, 0xFFFFFFED).
		u32(20, 0x123456).u8(20+264, 3).raw(28, 'a', 'b', 'c').u8(20+265, 1).u8(20+266, 2).
		u8(20+267, 5).u8(20+268, 1).u8(20+269, 6).u8(20+270, 7).u8(20+271, 1)
	r := decodeEvent(b)
	want := rawEvent{uid: 0xDEADBEEF01, handle: 42, typ: EventConnectRequest, status: -19,
		param: ConnParam{PrivateData: []byte("abc"), ResponderResources: 2, InitiatorDepth: 5,
			FlowControl: 1, RetryCount: 6, RNRRetryCount: 7, SRQ: true, QPNum: 0x123456}}
	if r.uid != want.uid || r.handle != want.handle || r.typ != want.typ || r.status != want.status ||
		string(r.param.PrivateData) != "abc" || r.param.ResponderResources != 2 || r.param.InitiatorDepth != 5 ||
		r.param.FlowControl != 1 || r.param.RetryCount != 6 || r.param.RNRRetryCount != 7 ||
		!r.param.SRQ || r.param.QPNum != 0x123456 {
		t.Fatalf("decoded %+v\nwant %+v", r, want)
	}
	// No private data: nil, not an empty slice of garbage.
	if r := decodeEvent(make([]byte, 336)); r.param.PrivateData != nil {
		t.Fatalf("private data %v from a zero event", r.param.PrivateData)
	}
}

func TestQueryAddrDecode(t *testing.T) {
	t.Parallel()
	b := make(golden, 280).raw(0, 0x50, 0x54, 0x00, 0xff, 0xfe, 0x96, 0xb7, 0x07).u8(8, 1).
		raw(10, 0xff, 0xfe).u16(12, 16).u16(14, 28).sin(16, 7174, ip4...).
		sin6(144, 9, 5, ip6...).u32(272, 3)
	var r queryAddrResp
	copy(bytesOf(&r), b)
	got := decodeQueryAddr(&r)
	want := AddrInfo{NodeGUID: 0x505400fffe96b707, PortNum: 1, PKey: 0xfffe, IbdevIndex: 3,
		Src: addr4, Dst: netip.MustParseAddrPort("[2001:db8::1%5]:9")}
	if got != want {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
	ne.PutUint32(bytesOf(&r)[272:], 0xFFFFFFFF)
	if got := decodeQueryAddr(&r); got.IbdevIndex != -1 {
		t.Fatalf("ibdev_index 0xffffffff decoded as %d, want -1", got.IbdevIndex)
	}
}

func TestSockaddr(t *testing.T) {
	t.Parallel()
	var buf [sockaddrSize]byte
	for _, tc := range []struct {
		in   netip.AddrPort
		size uint16
	}{
		{addr4, 16},
		{addr6, 28},
		{netip.MustParseAddrPort("[::]:0"), 28},
		{netip.MustParseAddrPort("0.0.0.0:7174"), 16},
	} {
		n, err := putSockaddr(&buf, tc.in)
		if err != nil || n != tc.size {
			t.Fatalf("%v: size %d, %v; want %d", tc.in, n, err, tc.size)
		}
		if back := parseSockaddr(buf[:], n); back != tc.in {
			t.Fatalf("%v: round trip gave %v", tc.in, back)
		}
	}
	if _, err := putSockaddr(&buf, netip.AddrPort{}); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("zero address: got %v, want EINVAL", err)
	}
	if _, err := putSockaddr(&buf, netip.MustParseAddrPort("[fe80::1%no-such-if0]:1")); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("unknown zone: got %v, want EINVAL", err)
	}
	if got := parseSockaddr(make(golden, 128).u16(0, 27), 48); got.IsValid() {
		t.Fatalf("AF_IB decoded as %v", got)
	}
}

func TestEventTypeString(t *testing.T) {
	t.Parallel()
	for typ, want := range map[EventType]string{
		EventAddrResolved:    "RDMA_CM_EVENT_ADDR_RESOLVED",
		EventConnectResponse: "RDMA_CM_EVENT_CONNECT_RESPONSE",
		EventRejected:        "RDMA_CM_EVENT_REJECTED",
		EventTimewaitExit:    "RDMA_CM_EVENT_TIMEWAIT_EXIT",
		16:                   "UNKNOWN EVENT",
		0xFFFFFFFF:           "UNKNOWN EVENT",
	} {
		if got := typ.String(); got != want {
			t.Errorf("EventType(%d) = %q, want %q", uint32(typ), got, want)
		}
	}
	for typ := EventAddrResolved; typ <= EventTimewaitExit; typ++ {
		if s := typ.String(); !strings.HasPrefix(s, "RDMA_CM_EVENT_") {
			t.Errorf("EventType(%d) = %q, want a name", uint32(typ), s)
		}
	}
}

func FuzzDecodeEvent(f *testing.F) {
	f.Add(make([]byte, 336))
	f.Add([]byte(make(golden, 336).u8(20+264, 255)))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := decodeEvent(b)
		if len(r.param.PrivateData) > maxPrivateData {
			t.Fatalf("%d bytes of private data", len(r.param.PrivateData))
		}
		_ = r.typ.String()
	})
}

func FuzzDecodeQueryAddr(f *testing.F) {
	f.Add(make([]byte, 280))
	f.Add([]byte(make(golden, 280).u16(12, 16).u16(14, 28).sin(16, 1, ip4...).sin6(144, 2, 3, ip6...)))
	f.Add([]byte(make(golden, 280).u16(12, 0xFFFF).u16(14, 1)))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r queryAddrResp
		copy(bytesOf(&r), b)
		info := decodeQueryAddr(&r)
		for _, a := range []netip.AddrPort{info.Src, info.Dst} {
			if a.IsValid() {
				var buf [sockaddrSize]byte
				n, err := putSockaddr(&buf, a)
				if err != nil {
					t.Fatalf("decoded %v does not encode: %v", a, err)
				}
				if back := parseSockaddr(buf[:], n); back != a {
					t.Fatalf("%v re-encodes as %v", a, back)
				}
			}
		}
	})
}

func TestMatchDevice(t *testing.T) {
	t.Parallel()
	devs := []uverbs.Device{
		{Name: "siw0", Index: 1, NodeGUID: 0x505400fffe96b707},
		{Name: "rxe0", Index: 2, NodeGUID: 0x505400fffe96b707},
		{Name: "mlx5_0", Index: -1, NodeGUID: 0x1122334455667788},
	}
	for _, tc := range []struct {
		guid  uint64
		index int
		want  string
	}{
		{0x505400fffe96b707, 2, "rxe0"}, // shared GUID: the index decides
		{0x505400fffe96b707, 1, "siw0"},
		{0x505400fffe96b707, -1, "siw0"},  // kernel without ibdev_index: GUID alone
		{0x1122334455667788, 7, "mlx5_0"}, // device index unknown: GUID alone
	} {
		d, err := matchDevice(devs, AddrInfo{NodeGUID: tc.guid, IbdevIndex: tc.index})
		if err != nil || d.Name != tc.want {
			t.Errorf("GUID %x index %d: got %q, %v; want %q", tc.guid, tc.index, d.Name, err, tc.want)
		}
	}
	for _, info := range []AddrInfo{{NodeGUID: 0x505400fffe96b707, IbdevIndex: 3}, {NodeGUID: 1, IbdevIndex: -1}} {
		if _, err := matchDevice(devs, info); !errors.Is(err, unix.ENODEV) {
			t.Errorf("%+v: got %v, want ENODEV", info, err)
		}
	}
}

// rdma_cm's RoCEv2 flow label, worked by hand from cma_get_roce_udp_flow_label.
func TestFlowLabel(t *testing.T) {
	for _, c := range []struct {
		src, dst uint16
		fl       uint32
	}{
		{40000, 7174, 0x307C6},  // 40000*31+7174 = 1247174, & 0xFFFFF = 0x307C6
		{65535, 65535, 0xFFFE0}, // 65535*32 & 0xFFFFF
		{0, 0, 0},
	} {
		if fl := FlowLabel(c.src, c.dst); fl != c.fl {
			t.Errorf("FlowLabel(%d, %d) = %#x, want %#x", c.src, c.dst, fl, c.fl)
		}
	}
}
