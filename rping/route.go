package rping

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"syscall"

	"golang.org/x/sys/unix"
)

// route is what the kernel's routing table says about one destination (as
// `ip route get` shows it).
type route struct {
	ifindex int        // the netdev the packets leave through (lo for local addresses)
	src     netip.Addr // the source address the kernel picks; invalid if none
}

// lookupRoute asks the kernel (rtnetlink RTM_GETROUTE) how it would route a
// packet to dst, from src if src is valid. Only error paths use it, to say why
// rdma_cm found no RDMA device.
func lookupRoute(dst, src netip.Addr) (route, error) {
	dst, src = dst.Unmap(), src.Unmap()
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return route{}, fmt.Errorf("route to %s: netlink socket: %w", dst, err)
	}
	defer unix.Close(fd)
	if err := unix.Sendto(fd, routeRequest(dst, src), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return route{}, fmt.Errorf("route to %s: %w", dst, err)
	}
	buf := make([]byte, 8192)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return route{}, fmt.Errorf("route to %s: %w", dst, err)
		}
		r, done, err := parseRouteReply(buf[:n])
		if err != nil {
			return route{}, fmt.Errorf("route to %s: %w", dst, err)
		}
		if done {
			return r, nil
		}
	}
}

// routeRequest is an RTM_GETROUTE message for dst (and src): an nlmsghdr, a
// struct rtmsg (linux/rtnetlink.h) and RTA_DST/RTA_SRC attributes.
func routeRequest(dst, src netip.Addr) []byte {
	family := byte(unix.AF_INET6)
	if dst.Is4() {
		family = unix.AF_INET
	}
	addr := func(typ uint16, a netip.Addr) []byte {
		b := a.AsSlice()
		attr := make([]byte, unix.SizeofRtAttr, unix.SizeofRtAttr+len(b))
		binary.NativeEndian.PutUint16(attr[0:], uint16(unix.SizeofRtAttr+len(b)))
		binary.NativeEndian.PutUint16(attr[2:], typ)
		return append(attr, b...) // 4- and 16-byte addresses need no padding
	}
	rtm := make([]byte, unix.SizeofRtMsg)
	rtm[0] = family             // rtm_family
	rtm[1] = byte(dst.BitLen()) // rtm_dst_len
	body := append(rtm, addr(unix.RTA_DST, dst)...)
	if src.IsValid() && src.Is4() == dst.Is4() {
		body[2] = byte(src.BitLen()) // rtm_src_len
		body = append(body, addr(unix.RTA_SRC, src)...)
	}
	msg := make([]byte, unix.SizeofNlMsghdr, unix.SizeofNlMsghdr+len(body))
	binary.NativeEndian.PutUint32(msg[0:], uint32(unix.SizeofNlMsghdr+len(body)))
	binary.NativeEndian.PutUint16(msg[4:], unix.RTM_GETROUTE)
	binary.NativeEndian.PutUint16(msg[6:], unix.NLM_F_REQUEST)
	binary.NativeEndian.PutUint32(msg[8:], 1) // sequence number
	return append(msg, body...)
}

// parseRouteReply reads the RTM_NEWROUTE answer (RTA_OIF, RTA_PREFSRC) or the
// kernel's error; done is false for messages that are neither.
func parseRouteReply(b []byte) (r route, done bool, err error) {
	msgs, err := syscall.ParseNetlinkMessage(b)
	if err != nil {
		return route{}, false, fmt.Errorf("parse netlink reply: %w", err)
	}
	for _, m := range msgs {
		switch m.Header.Type {
		case unix.NLMSG_ERROR:
			if len(m.Data) < 4 {
				return route{}, false, errors.New("short netlink error")
			}
			if e := -int32(binary.NativeEndian.Uint32(m.Data)); e != 0 {
				return route{}, true, syscall.Errno(e)
			}
		case unix.RTM_NEWROUTE:
			attrs, err := syscall.ParseNetlinkRouteAttr(&m)
			if err != nil {
				return route{}, false, fmt.Errorf("parse route attributes: %w", err)
			}
			for _, a := range attrs {
				switch a.Attr.Type {
				case unix.RTA_OIF:
					if len(a.Value) >= 4 {
						r.ifindex = int(binary.NativeEndian.Uint32(a.Value))
					}
				case unix.RTA_PREFSRC:
					if ip, ok := netip.AddrFromSlice(a.Value); ok {
						r.src = ip
					}
				}
			}
			return r, true, nil
		}
	}
	return route{}, false, nil
}
