package netlink

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseRouteReply(t *testing.T) {
	body := make([]byte, unix.SizeofRtMsg)
	body = AppendAttr(body, unix.RTA_OIF, binary.NativeEndian.AppendUint32(nil, 7))
	body = AppendAttr(body, unix.RTA_PREFSRC, []byte{192, 0, 2, 1})
	dgram := AppendMessage(nil, unix.RTM_NEWROUTE, 0, routeSeq, body)
	msgs, err := ParseMessages(dgram)
	if err != nil {
		t.Fatal(err)
	}
	r, done, err := parseRouteReply(msgs)
	if err != nil || !done || r.Ifindex != 7 || r.Src != netip.MustParseAddr("192.0.2.1") {
		t.Errorf("parseRouteReply = %+v, %v, %v; want ifindex 7 src 192.0.2.1", r, done, err)
	}
	// struct nlmsgerr with -ENETUNREACH
	e := AppendMessage(nil, unix.NLMSG_ERROR, 0, routeSeq, binary.NativeEndian.AppendUint32(make([]byte, 0, 20), uint32(0xffffffff-unix.ENETUNREACH+1)))
	msgs, _ = ParseMessages(e)
	if _, done, err := parseRouteReply(msgs); !done || !errors.Is(err, unix.ENETUNREACH) {
		t.Errorf("error reply: done %v err %v, want ENETUNREACH", done, err)
	}
	if _, done, err := parseRouteReply(nil); done || err != nil {
		t.Errorf("no messages: done %v err %v", done, err)
	}
	short := []Message{{Type: unix.RTM_NEWROUTE, Payload: []byte{1, 2}}}
	if _, _, err := parseRouteReply(short); err == nil {
		t.Error("short rtmsg accepted")
	}
}

// The kernel routes 127.0.0.1 through lo, on any Linux host.
func TestLookupRoute(t *testing.T) {
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Fatalf("no lo: %v", err)
	}
	r, err := LookupRoute(Dial, netip.MustParseAddr("127.0.0.1"), netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Ifindex != lo.Index || r.Src != netip.MustParseAddr("127.0.0.1") {
		t.Errorf("route to 127.0.0.1: %+v, want ifindex %d src 127.0.0.1", r, lo.Index)
	}
}

func TestRouteRequestLayout(t *testing.T) {
	req := routeRequest(netip.MustParseAddr("198.51.100.2"), netip.MustParseAddr("192.0.2.1"))
	// nlmsghdr 16 + rtmsg 12 + two 8-byte attributes
	if len(req) != 16+12+8+8 {
		t.Fatalf("length %d", len(req))
	}
	if got := int(req[16]); got != unix.AF_INET {
		t.Errorf("family %d", got)
	}
	if req[17] != 32 || req[18] != 32 {
		t.Errorf("dst_len %d src_len %d", req[17], req[18])
	}
	if !bytes.Equal(req[32:36], []byte{198, 51, 100, 2}) || !bytes.Equal(req[40:44], []byte{192, 0, 2, 1}) {
		t.Errorf("addresses % x", req[28:])
	}
	req6 := routeRequest(netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("192.0.2.1"))
	if len(req6) != 16+12+20 || req6[16] != unix.AF_INET6 || req6[17] != 128 || req6[18] != 0 {
		t.Errorf("IPv6 request with an IPv4 source: % x", req6)
	}
}
