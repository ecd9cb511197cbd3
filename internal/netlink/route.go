package netlink

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"
)

// Route is what the kernel's routing table says about one destination (as
// `ip route get` shows it).
type Route struct {
	Ifindex int        // the netdev the packets leave through (lo for local addresses)
	Src     netip.Addr // the source address the kernel picks; invalid if none
}

const routeSeq = 1

// LookupRoute asks the kernel (rtnetlink RTM_GETROUTE, on a socket from dial) how it would route a
// packet to dst, from src if src is valid. Only error paths use it (rping's hints say
// why rdma_cm found no RDMA device).
func LookupRoute(dial Dialer, dst, src netip.Addr) (Route, error) {
	dst, src = dst.Unmap(), src.Unmap()
	c, err := dial(unix.NETLINK_ROUTE)
	if err != nil {
		return Route{}, fmt.Errorf("route to %s: %w", dst, err)
	}
	defer c.Close()
	if err := c.Send(routeRequest(dst, src)); err != nil {
		return Route{}, fmt.Errorf("route to %s: %w", dst, err)
	}
	for {
		msgs, err := c.Recv(routeSeq)
		if err != nil {
			return Route{}, fmt.Errorf("route to %s: %w", dst, err)
		}
		r, done, err := parseRouteReply(msgs)
		if err != nil {
			return Route{}, fmt.Errorf("route to %s: %w", dst, err)
		}
		if done {
			return r, nil
		}
	}
}

// routeRequest is an RTM_GETROUTE message for dst (and src): a struct rtmsg
// (linux/rth) and RTA_DST/RTA_SRC attributes.
func routeRequest(dst, src netip.Addr) []byte {
	family := byte(unix.AF_INET6)
	if dst.Is4() {
		family = unix.AF_INET
	}
	rtm := make([]byte, unix.SizeofRtMsg)
	rtm[0] = family             // rtm_family
	rtm[1] = byte(dst.BitLen()) // rtm_dst_len
	body := AppendAttr(rtm, unix.RTA_DST, dst.AsSlice())
	if src.IsValid() && src.Is4() == dst.Is4() {
		body[2] = byte(src.BitLen()) // rtm_src_len
		body = AppendAttr(body, unix.RTA_SRC, src.AsSlice())
	}
	return AppendMessage(nil, unix.RTM_GETROUTE, unix.NLM_F_REQUEST, routeSeq, body)
}

// parseRouteReply reads the RTM_NEWROUTE answer (RTA_OIF, RTA_PREFSRC) or the
// kernel's error; done is false for messages that are neither.
func parseRouteReply(msgs []Message) (r Route, done bool, err error) {
	for _, m := range msgs {
		switch m.Type {
		case unix.NLMSG_ERROR:
			if err := Error(m.Payload); err != nil {
				return Route{}, true, err
			}
		case unix.RTM_NEWROUTE:
			if len(m.Payload) < unix.SizeofRtMsg {
				return Route{}, false, fmt.Errorf("short route message (%d bytes)", len(m.Payload))
			}
			attrs, err := ParseAttrs(m.Payload[unix.SizeofRtMsg:])
			if err != nil {
				return Route{}, false, fmt.Errorf("parse route attributes: %w", err)
			}
			for _, a := range attrs {
				switch a.Type {
				case unix.RTA_OIF:
					if v, ok := U32(a.Data); ok {
						r.Ifindex = int(v)
					}
				case unix.RTA_PREFSRC:
					if ip, ok := netip.AddrFromSlice(a.Data); ok {
						r.Src = ip
					}
				}
			}
			return r, true, nil
		}
	}
	return Route{}, false, nil
}

// IfAddr is one address of a netdev (RTM_NEWADDR, as `ip addr` shows it).
type IfAddr struct {
	Ifindex int
	Addr    netip.Addr
}

const addrSeq = 2

// ListAddrs asks the kernel (rtnetlink RTM_GETADDR dump, on a socket from dial) for every
// address of every netdev. Only error paths use it (rping's address hints).
func ListAddrs(dial Dialer) ([]IfAddr, error) {
	c, err := dial(unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("addresses: %w", err)
	}
	defer c.Close()
	req := AppendMessage(nil, unix.RTM_GETADDR, unix.NLM_F_REQUEST|unix.NLM_F_DUMP, addrSeq,
		make([]byte, unix.SizeofIfAddrmsg)) // struct ifaddrmsg, family AF_UNSPEC: all
	if err := c.Send(req); err != nil {
		return nil, fmt.Errorf("addresses: %w", err)
	}
	var out []IfAddr
	for {
		msgs, err := c.Recv(addrSeq)
		if err != nil {
			return nil, fmt.Errorf("addresses: %w", err)
		}
		for _, m := range msgs {
			switch m.Type {
			case unix.NLMSG_DONE:
				return out, nil
			case unix.NLMSG_ERROR:
				if err := Error(m.Payload); err != nil {
					return nil, fmt.Errorf("addresses: %w", err)
				}
			case unix.RTM_NEWADDR:
				if a, ok := parseAddr(m.Payload); ok {
					out = append(out, a)
				}
			}
		}
	}
}

// parseAddr reads one RTM_NEWADDR: struct ifaddrmsg (ifa_index at byte 4) and its
// IFA_LOCAL, else IFA_ADDRESS (they differ only on point-to-point links, where IFA_LOCAL
// is this host's).
func parseAddr(p []byte) (IfAddr, bool) {
	if len(p) < unix.SizeofIfAddrmsg {
		return IfAddr{}, false
	}
	attrs, err := ParseAttrs(p[unix.SizeofIfAddrmsg:])
	if err != nil {
		return IfAddr{}, false
	}
	a := IfAddr{Ifindex: int(binary.NativeEndian.Uint32(p[4:8]))}
	for _, at := range attrs {
		if ip, ok := netip.AddrFromSlice(at.Data); ok && (at.Type == unix.IFA_LOCAL || (at.Type == unix.IFA_ADDRESS && !a.Addr.IsValid())) {
			a.Addr = ip.Unmap()
		}
	}
	return a, a.Addr.IsValid()
}
