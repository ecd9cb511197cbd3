package rping

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gorping/gorping/internal/netlink"
)

func TestParseRouteReply(t *testing.T) {
	body := make([]byte, unix.SizeofRtMsg)
	body = netlink.AppendAttr(body, unix.RTA_OIF, binary.NativeEndian.AppendUint32(nil, 7))
	body = netlink.AppendAttr(body, unix.RTA_PREFSRC, []byte{192, 0, 2, 1})
	dgram := netlink.AppendMessage(nil, unix.RTM_NEWROUTE, 0, routeSeq, body)
	msgs, err := netlink.ParseMessages(dgram)
	if err != nil {
		t.Fatal(err)
	}
	r, done, err := parseRouteReply(msgs)
	if err != nil || !done || r.ifindex != 7 || r.src != netip.MustParseAddr("192.0.2.1") {
		t.Errorf("parseRouteReply = %+v, %v, %v; want ifindex 7 src 192.0.2.1", r, done, err)
	}
	// struct nlmsgerr with -ENETUNREACH
	e := netlink.AppendMessage(nil, unix.NLMSG_ERROR, 0, routeSeq, binary.NativeEndian.AppendUint32(make([]byte, 0, 20), uint32(0xffffffff-unix.ENETUNREACH+1)))
	msgs, _ = netlink.ParseMessages(e)
	if _, done, err := parseRouteReply(msgs); !done || !errors.Is(err, unix.ENETUNREACH) {
		t.Errorf("error reply: done %v err %v, want ENETUNREACH", done, err)
	}
	if _, done, err := parseRouteReply(nil); done || err != nil {
		t.Errorf("no messages: done %v err %v", done, err)
	}
	short := []netlink.Message{{Type: unix.RTM_NEWROUTE, Payload: []byte{1, 2}}}
	if _, _, err := parseRouteReply(short); err == nil {
		t.Error("short rtmsg accepted")
	}
}
