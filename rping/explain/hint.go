// Package explain says why an RDMA connection failed or stalled, in the one line gorping
// adds after rping's own: device access, the locked-memory limit, an address without an
// RDMA device or without the GID a connection needs (from the host's devices, netdevs,
// addresses and routes), an unanswered connection request (from the port's counters) and
// a stalled ping. Every line starts with "gorping: " where it stands alone; rping's lines
// and exit statuses are rping's (package rping prints both).
package explain

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/gorping/gorping/internal/netlink"
	"github.com/gorping/gorping/uverbs"
	"github.com/gorping/gorping/uverbs/diag"
)

// The errors a user meets first on a new machine (device permissions, the
// locked-memory limit, an address without an RDMA device, a port without the
// GID a connection needs) get one line more than rping prints: a hint, after
// rping's own line, that says what to do. rping's lines and exit statuses
// stay as they are. Every hint starts with "gorping: ".

const (
	accessFix = `run as root or grant access (udev rule MODE="0666" for rdma_cm and uverbs*)`
	linkShow  = "rdma link show lists the RDMA devices and their netdevs"
)

// MACChanged explains an UNREACHABLE with -ETIMEDOUT on a connection that is
// up: no handshake timer runs then, and since Linux 6.0 the only source is rdma_cm's
// watch of the neighbour table, which ends every connection to an address whose MAC
// changed. role is the side that got it ("client" or "server").
func MACChanged(role string) string {
	peer := "server"
	if role == "server" {
		peer = "client"
	}
	return "gorping: the kernel ended the connection because this host's neighbour entry for the " + peer +
		" changed its MAC address (a MAC failover, a bond changing ports, or a forged or corrupted ARP reply; ip neigh shows the entry); a new connection uses the new address"
}

// CMOpen explains why /dev/infiniband/rdma_cm did not open; "" if the
// error is not about the device node.
func CMOpen(err error) string {
	var pe *fs.PathError
	if !errors.As(err, &pe) {
		return ""
	}
	switch {
	case errors.Is(pe.Err, unix.EACCES), errors.Is(pe.Err, unix.EPERM):
		return fmt.Sprintf("gorping: %s is not accessible: %s", pe.Path, accessFix)
	case errors.Is(pe.Err, unix.ENOENT):
		return fmt.Sprintf("gorping: %s does not exist: load the rdma_ucm kernel module (modprobe rdma_ucm)", pe.Path)
	}
	return ""
}

// VerbsOpen explains why dev's uverbs device could not be opened.
func VerbsOpen(dev uverbs.Device, err error) string {
	switch {
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return fmt.Sprintf("gorping: %s (%s) is not accessible: %s", dev.Path, dev.Name, accessFix)
	case errors.Is(err, unix.ENOENT):
		return fmt.Sprintf("gorping: %s (%s) does not exist: load the ib_uverbs kernel module (modprobe ib_uverbs)", dev.Path, dev.Name)
	}
	return "gorping: " + err.Error() // e.g. a driver gorping has no provider for
}

// Memlock explains a failed registration when the locked-memory limit is
// the likely cause, with uverbs' explanation (uverbs.MemlockError).
func Memlock(err error) string {
	var me *uverbs.MemlockError
	if !errors.As(err, &me) {
		return ""
	}
	return fmt.Sprintf("gorping: registering %d bytes failed: %s", me.Size, me.Advice())
}

// Net is what the address hints need to know about a host (HostNet); tests fake it.
type Net struct {
	route    func(dst, src netip.Addr) (netlink.Route, error)
	ifName   func(index int) string
	owner    func(a netip.Addr) string    // netdev holding address a, "" if none
	rdmaDevs func(netdev string) []string // RDMA devices on netdev ("rxe1")
	ibPort   func() bool                  // some RDMA port has InfiniBand link layer
	// rdmaNetdevs are the netdevs RDMA devices run on, addrs a netdev's
	// global-scope addresses.
	rdmaNetdevs func() []string
	addrs       func(netdev string) []netip.Addr
}

// hostNet is the hints' view of host h: its devices, its netdevs (sysfs), its addresses
// and routing table (h's rtnetlink).
func HostNet(h uverbs.Host) Net {
	return Net{
		route: func(dst, src netip.Addr) (netlink.Route, error) {
			return netlink.LookupRoute(h.Env().Netlink, dst, src)
		},
		ifName: func(index int) string {
			if name, err := diag.NetdevByIndex(h, index); err == nil {
				return name
			}
			return fmt.Sprintf("interface %d", index)
		},
		owner:       func(a netip.Addr) string { return addrOwner(h, a) },
		rdmaDevs:    func(netdev string) []string { return rdmaDevsOn(h, netdev) },
		ibPort:      func() bool { return hasIBPort(h) },
		rdmaNetdevs: func() []string { return rdmaNetdevs(h) },
		addrs:       func(netdev string) []netip.Addr { return netdevAddrs(h, netdev) },
	}
}

// rdmaNetdevs lists the netdevs of every RDMA device's ports.
func rdmaNetdevs(h uverbs.Host) []string {
	devs, _ := h.Devices()
	var nds []string
	for _, d := range devs {
		for _, nd := range d.Netdevs() {
			if !slices.Contains(nds, nd) {
				nds = append(nds, nd)
			}
		}
	}
	return nds
}

// netdevAddrs are netdev's global unicast addresses on h.
func netdevAddrs(h uverbs.Host, netdev string) []netip.Addr {
	index, err := diag.NetdevStat(h, netdev, "ifindex")
	if err != nil {
		return nil
	}
	addrs, _ := netlink.ListAddrs(h.Env().Netlink)
	var out []netip.Addr
	for _, a := range addrs {
		if a.Ifindex == int(index) && a.Addr.IsGlobalUnicast() {
			out = append(out, a.Addr)
		}
	}
	return out
}

// Unreachable explains rdma_resolve_addr's ENETUNREACH: no route to dst.
// The common cause on a RoCE host: the RDMA netdev lost its address of dst's
// family, as IPv6 addresses go when a link goes down (unless the netdev's
// keep_addr_on_down sysctl is set).
func (v Net) Unreachable(dst netip.Addr) string {
	dst = dst.WithZone("").Unmap()
	for _, nd := range v.rdmaNetdevs() {
		has := false
		for _, a := range v.addrs(nd) {
			has = has || a.Is4() == dst.Is4()
		}
		if has {
			continue
		}
		fam := "IPv4"
		if dst.Is6() {
			fam = "IPv6"
			return fmt.Sprintf("gorping: no route to %s: %s, the netdev of %s, has no IPv6 address (a link that goes down loses its IPv6 addresses unless net.ipv6.conf.%s.keep_addr_on_down=1): add it back (ip addr add ADDR/PREFIX dev %s)",
				dst, nd, strings.Join(v.rdmaDevs(nd), ", "), nd, nd)
		}
		return fmt.Sprintf("gorping: no route to %s: %s, the netdev of %s, has no %s address: add one (ip addr add ADDR/PREFIX dev %s)",
			dst, nd, strings.Join(v.rdmaDevs(nd), ", "), fam, nd)
	}
	return fmt.Sprintf("gorping: no route to %s from this host (ip route get %s shows none)", dst, dst)
}

// rdmaDevsOn names the RDMA devices uverbs discovers on netdev.
func rdmaDevsOn(h uverbs.Host, netdev string) []string {
	devs, _ := h.Devices()
	var names []string
	for _, d := range devs {
		if slices.Contains(d.Netdevs(), netdev) {
			names = append(names, d.Name)
		}
	}
	return names
}

// hasIBPort reports whether some RDMA port has InfiniBand link layer (over
// which rdma_cm can loop back to a 127.0.0.1 listener).
func hasIBPort(h uverbs.Host) bool {
	devs, _ := h.Devices()
	for _, d := range devs {
		if slices.Contains(d.LinkLayers(), uverbs.LinkLayerInfiniBand) {
			return true
		}
	}
	return false
}

// NoDevice explains why rdma_cm found no RDMA device for a client's
// connection to dst (from src, -I, if valid), or, with dst invalid, for a
// server bound to src.
func (v Net) NoDevice(dst, src netip.Addr) string {
	dst, src = dst.WithZone("").Unmap(), src.WithZone("").Unmap()
	notOn := func(a netip.Addr, netdev string) string {
		return fmt.Sprintf("gorping: %s is on %s, which has no RDMA device: %s; use an address of one of them", a, netdev, linkShow)
	}
	if src.IsValid() {
		if nd := v.owner(src); nd != "" {
			devs := v.rdmaDevs(nd)
			if len(devs) == 0 {
				return notOn(src, nd)
			}
			if !dst.IsValid() {
				return noGIDHint(devs, nd, src, src)
			}
		}
		if !dst.IsValid() {
			return fmt.Sprintf("gorping: %s is not on an RDMA device: %s; use an address of one of them", src, linkShow)
		}
	}
	// To a local address rdma_cm connects through the device of the netdev
	// holding it (the route itself says lo).
	if nd := v.owner(dst); nd != "" {
		devs := v.rdmaDevs(nd)
		if len(devs) == 0 {
			return notOn(dst, nd)
		}
		return noGIDHint(devs, nd, dst, dst)
	}
	if r, err := v.route(dst, src); err == nil && r.Ifindex != 0 {
		nd := v.ifName(r.Ifindex)
		devs := v.rdmaDevs(nd)
		if len(devs) == 0 {
			return fmt.Sprintf("gorping: the route to %s goes through %s, which has no RDMA device: %s; use an address reachable through one of them", dst, nd, linkShow)
		}
		return noGIDHint(devs, nd, r.Src, dst)
	}
	return fmt.Sprintf("gorping: no RDMA device reaches %s: %s; use an address reachable through one of them", dst, linkShow)
}

// Unbound explains a listener the kernel bound to addr without an RDMA device (a
// loopback address): "" where an InfiniBand port can loop back to it, else why no
// device serves addr.
func (v Net) Unbound(addr netip.Addr) string {
	if v.ibPort() {
		return ""
	}
	return v.NoDevice(netip.Addr{}, addr)
}

// noGIDHint: netdev has RDMA devices, but none has a GID for src (the
// address rdma_cm needs there), as when the netdev has no address of its own.
func noGIDHint(devs []string, netdev string, src, dst netip.Addr) string {
	d := strings.Join(devs, ", ")
	if !src.IsValid() {
		return fmt.Sprintf("gorping: %s (netdev %s) has no GID for a source address of the route to %s: add an address to %s (ip addr add ADDR dev %s)",
			d, netdev, dst, netdev, netdev)
	}
	if src == dst {
		return fmt.Sprintf("gorping: %s (netdev %s) has no GID for %s: re-add the address to %s (ip addr add ADDR dev %s) or use another one of its addresses",
			d, netdev, src, netdev, netdev)
	}
	return fmt.Sprintf("gorping: %s (netdev %s) has no GID for %s, the source address of the route to %s: add an address to %s (ip addr add ADDR dev %s) or pass one of its addresses with -I",
		d, netdev, src, dst, netdev, netdev)
}

// addrOwner is the name of the netdev of h that holds address a, or "".
func addrOwner(h uverbs.Host, a netip.Addr) string {
	addrs, _ := netlink.ListAddrs(h.Env().Netlink)
	for _, ad := range addrs {
		if ad.Addr == a {
			if name, err := diag.NetdevByIndex(h, ad.Ifindex); err == nil {
				return name
			}
		}
	}
	return ""
}

// IWARPSelfQP explains rdma_establish's EINVAL for a -q client on iWARP:
// iw_cm connects the QP itself, so there is nothing left to establish (stock
// rping fails the same way).
func IWARPSelfQP(dev string) string {
	return fmt.Sprintf("gorping: %s is an iWARP device: the kernel moves the QP to RTS while connecting, so a client cannot use -q there (a -q server can)", dev)
}
