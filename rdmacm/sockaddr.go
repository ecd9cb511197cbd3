package rdmacm

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"strconv"

	"golang.org/x/sys/unix"
)

// putSockaddr writes addr as a struct sockaddr_in (IPv4) or sockaddr_in6 into
// dst (a __kernel_sockaddr_storage) and returns the size the kernel expects
// for that family. sin*_family is host order, port and flowinfo network order,
// sin6_scope_id host order (uapi linux/in.h, linux/in6.h).
func putSockaddr(dst *[sockaddrSize]byte, addr netip.AddrPort) (uint16, error) {
	*dst = [sockaddrSize]byte{}
	ip := addr.Addr()
	switch {
	case ip.Is4():
		binary.NativeEndian.PutUint16(dst[0:], unix.AF_INET)
		binary.BigEndian.PutUint16(dst[2:], addr.Port())
		a := ip.As4()
		copy(dst[4:8], a[:])
		return sizeofSockIn, nil
	case ip.Is6():
		scope, err := zoneIndex(ip.Zone())
		if err != nil {
			return 0, err
		}
		binary.NativeEndian.PutUint16(dst[0:], unix.AF_INET6)
		binary.BigEndian.PutUint16(dst[2:], addr.Port())
		a := ip.As16()
		copy(dst[8:24], a[:])
		binary.NativeEndian.PutUint32(dst[24:], scope)
		return sizeofSockIn6, nil
	default:
		return 0, fmt.Errorf("rdmacm: invalid address %v: %w", addr, unix.EINVAL)
	}
}

// zoneIndex turns a netip zone ("3" or "eth0") into a sin6_scope_id.
func zoneIndex(zone string) (uint32, error) {
	if zone == "" {
		return 0, nil
	}
	if n, err := strconv.ParseUint(zone, 10, 32); err == nil {
		return uint32(n), nil
	}
	ifi, err := net.InterfaceByName(zone)
	if err != nil {
		return 0, fmt.Errorf("rdmacm: IPv6 zone %q: %w", zone, unix.EINVAL)
	}
	return uint32(ifi.Index), nil
}

// parseSockaddr decodes a sockaddr_in / sockaddr_in6 of the given size from a
// kernel response. Other families (AF_IB) and short sizes yield the zero
// AddrPort. A non-zero IPv6 scope id becomes a numeric zone.
func parseSockaddr(b []byte, size uint16) netip.AddrPort {
	if int(size) > len(b) || size < 2 {
		return netip.AddrPort{}
	}
	switch binary.NativeEndian.Uint16(b) {
	case unix.AF_INET:
		if size < sizeofSockIn {
			return netip.AddrPort{}
		}
		ip := netip.AddrFrom4([4]byte(b[4:8]))
		return netip.AddrPortFrom(ip, binary.BigEndian.Uint16(b[2:]))
	case unix.AF_INET6:
		if size < sizeofSockIn6 {
			return netip.AddrPort{}
		}
		ip := netip.AddrFrom16([16]byte(b[8:24]))
		if scope := binary.NativeEndian.Uint32(b[24:]); scope != 0 {
			ip = ip.WithZone(strconv.FormatUint(uint64(scope), 10))
		}
		return netip.AddrPortFrom(ip, binary.BigEndian.Uint16(b[2:]))
	}
	return netip.AddrPort{}
}

// FlowLabel is the RoCEv2 flow label rdma_cm gives the route of a connection from port
// src to dst (drivers/infiniband/core/cma.c, cma_get_roce_udp_flow_label, since Linux
// 5.8; gorping sets no IPv6 flowinfo, which would take its place). The driver derives
// the UDP source port from it (uverbs.Device.UDPSourcePort).
func FlowLabel(src, dst uint16) uint32 { return (uint32(src)*31 + uint32(dst)) & 0xFFFFF }
