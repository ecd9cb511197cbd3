package explain

import (
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gorping/gorping/internal/hostenv/hostenvtest"
	"github.com/gorping/gorping/internal/netlink"
	"github.com/gorping/gorping/uverbs"
)

const (
	wantAccessRDMACM = `gorping: /dev/infiniband/rdma_cm is not accessible: run as root or grant access (udev rule MODE="0666" for rdma_cm and uverbs*)`
	wantAccessUverbs = `gorping: /dev/infiniband/uverbs0 (rxe0) is not accessible: run as root or grant access (udev rule MODE="0666" for rdma_cm and uverbs*)`
)

func TestCMOpenHint(t *testing.T) {
	open := func(e error) error {
		return fmt.Errorf("rdmacm: %w", &fs.PathError{Op: "open", Path: "/dev/infiniband/rdma_cm", Err: e})
	}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{open(unix.EACCES), wantAccessRDMACM},
		{open(unix.EPERM), wantAccessRDMACM},
		{open(unix.ENOENT), "gorping: /dev/infiniband/rdma_cm does not exist: load the rdma_ucm kernel module (modprobe rdma_ucm)"},
		{open(unix.EMFILE), ""},
		// The ABI check's EPERM is not about access to the node.
		{fmt.Errorf("rdmacm: /sys/class/misc/rdma_cm/abi_version is \"3\", need 4: %w", unix.EPERM), ""},
	} {
		if got := CMOpen(tc.err); got != tc.want {
			t.Errorf("CMOpen(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func TestVerbsOpenHint(t *testing.T) {
	dev := uverbs.Device{Name: "rxe0", Path: "/dev/infiniband/uverbs0"}
	unsupported := &uverbs.UnsupportedDriverError{Device: "mlx5_0", Driver: "mlx5", DriverID: 1, Supported: []string{"rxe"}}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("uverbs: open /dev/infiniband/uverbs0: %w", unix.EACCES), wantAccessUverbs},
		{unix.EPERM, wantAccessUverbs},
		{unix.ENOENT, "gorping: /dev/infiniband/uverbs0 (rxe0) does not exist: load the ib_uverbs kernel module (modprobe ib_uverbs)"},
		{unsupported, "gorping: " + unsupported.Error()},
	} {
		if got := VerbsOpen(dev, tc.err); got != tc.want {
			t.Errorf("VerbsOpen(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func TestMemlockHint(t *testing.T) {
	me := func(size int, limit uint64) error {
		return fmt.Errorf("wrapped: %w", &uverbs.MemlockError{Device: "rxe0", Size: size, Limit: limit, Err: unix.ENOMEM})
	}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{me(16, 0), "gorping: registering 16 bytes failed: RLIMIT_MEMLOCK is 0 bytes; raise it with ulimit -l or systemd LimitMEMLOCK="},
		{me(65536, 65536), "gorping: registering 65536 bytes failed: RLIMIT_MEMLOCK is 65536 bytes; raise it with ulimit -l or systemd LimitMEMLOCK="},
		{fmt.Errorf("uverbs: rxe0: register 16 bytes: %w", unix.ENOMEM), ""}, // uverbs did not blame the limit
		{unix.EFAULT, ""},
	} {
		if got := Memlock(tc.err); got != tc.want {
			t.Errorf("Memlock(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// fakeHost is a host with lo (127.0.0.1), d0 (192.0.2.1, rxe0), d1 (rxe1, no
// address; 198.51.100.0/24 routed there with d0's source address), eth9
// (203.0.113.1, no RDMA device, default route).
func fakeHost(routeErr error) Net {
	owners := map[netip.Addr]string{
		netip.MustParseAddr("127.0.0.1"):   "lo",
		netip.MustParseAddr("::1"):         "lo",
		netip.MustParseAddr("192.0.2.1"):   "d0",
		netip.MustParseAddr("203.0.113.1"): "eth9",
	}
	names := map[int]string{1: "lo", 3: "d0", 4: "d1", 5: "eth9"}
	return Net{
		route: func(dst, src netip.Addr) (netlink.Route, error) {
			if routeErr != nil {
				return netlink.Route{}, routeErr
			}
			if netip.MustParsePrefix("198.51.100.0/24").Contains(dst) {
				if !src.IsValid() {
					src = netip.MustParseAddr("192.0.2.1")
				}
				return netlink.Route{Ifindex: 4, Src: src}, nil
			}
			if dst == netip.MustParseAddr("198.18.0.1") { // a route without any source address
				return netlink.Route{Ifindex: 4}, nil
			}
			return netlink.Route{Ifindex: 5, Src: netip.MustParseAddr("203.0.113.1")}, nil
		},
		ifName: func(i int) string { return names[i] },
		owner:  func(a netip.Addr) string { return owners[a] },
		rdmaDevs: func(nd string) []string {
			return map[string][]string{"d0": {"rxe0"}, "d1": {"rxe1"}}[nd]
		},
		ibPort:      func() bool { return false },
		rdmaNetdevs: func() []string { return []string{"d0", "d1"} },
		addrs: func(nd string) []netip.Addr {
			if nd == "d0" {
				return []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1")}
			}
			return nil
		},
	}
}

func TestUnreachableHint(t *testing.T) {
	v := fakeHost(nil)
	// d1 (rxe1) has no address at all: the first RDMA netdev without one of
	// the family is named.
	if got, want := v.Unreachable(netip.MustParseAddr("2001:db8:3::2")),
		"gorping: no route to 2001:db8:3::2: d1, the netdev of rxe1, has no IPv6 address (a link that goes down loses its IPv6 addresses unless net.ipv6.conf.d1.keep_addr_on_down=1): add it back (ip addr add ADDR/PREFIX dev d1)"; got != want {
		t.Errorf("IPv6:\n got %q\nwant %q", got, want)
	}
	if got, want := v.Unreachable(netip.MustParseAddr("10.9.9.9")),
		"gorping: no route to 10.9.9.9: d1, the netdev of rxe1, has no IPv4 address: add one (ip addr add ADDR/PREFIX dev d1)"; got != want {
		t.Errorf("IPv4:\n got %q\nwant %q", got, want)
	}
	v.rdmaNetdevs = func() []string { return []string{"d0"} }
	if got, want := v.Unreachable(netip.MustParseAddr("2001:db8:3::2")),
		"gorping: no route to 2001:db8:3::2 from this host (ip route get 2001:db8:3::2 shows none)"; got != want {
		t.Errorf("addressed netdevs:\n got %q\nwant %q", got, want)
	}
}

func TestNoDeviceHint(t *testing.T) {
	const (
		linkHint = "rdma link show lists the RDMA devices and their netdevs"
		loopback = "gorping: 127.0.0.1 is on lo, which has no RDMA device: " + linkHint + "; use an address of one of them"
	)
	a := netip.MustParseAddr
	var none netip.Addr
	for _, tc := range []struct {
		name     string
		dst, src netip.Addr
		routeErr error
		want     string
	}{
		{"client to loopback", a("127.0.0.1"), none, nil, loopback},
		{"client from loopback (-I)", a("192.0.2.1"), a("127.0.0.1"), nil, loopback},
		{"server on loopback", none, a("127.0.0.1"), nil, loopback},
		{"server on IPv6 loopback", none, a("::1"), nil, "gorping: ::1 is on lo, which has no RDMA device: " + linkHint + "; use an address of one of them"},
		{"server on a netdev without RDMA", none, a("203.0.113.1"), nil,
			"gorping: 203.0.113.1 is on eth9, which has no RDMA device: " + linkHint + "; use an address of one of them"},
		{"client to a local address without RDMA", a("203.0.113.1"), none, nil,
			"gorping: 203.0.113.1 is on eth9, which has no RDMA device: " + linkHint + "; use an address of one of them"},
		{"IPv4-mapped", a("::ffff:127.0.0.1"), none, nil, loopback},
		{"route through a netdev without RDMA", a("10.1.2.3"), none, nil,
			"gorping: the route to 10.1.2.3 goes through eth9, which has no RDMA device: " + linkHint + "; use an address reachable through one of them"},
		{"route through an RDMA netdev without the GID", a("198.51.100.2"), none, nil,
			"gorping: rxe1 (netdev d1) has no GID for 192.0.2.1, the source address of the route to 198.51.100.2: add an address to d1 (ip addr add ADDR dev d1) or pass one of its addresses with -I"},
		{"-I address of another RDMA netdev", a("198.51.100.2"), a("192.0.2.1"), nil,
			"gorping: rxe1 (netdev d1) has no GID for 192.0.2.1, the source address of the route to 198.51.100.2: add an address to d1 (ip addr add ADDR dev d1) or pass one of its addresses with -I"},
		{"route without a source address", a("198.18.0.1"), none, nil,
			"gorping: rxe1 (netdev d1) has no GID for a source address of the route to 198.18.0.1: add an address to d1 (ip addr add ADDR dev d1)"},
		{"local address of an RDMA netdev", a("192.0.2.1"), none, nil,
			"gorping: rxe0 (netdev d0) has no GID for 192.0.2.1: re-add the address to d0 (ip addr add ADDR dev d0) or use another one of its addresses"},
		{"server on an RDMA netdev's address", none, a("192.0.2.1"), nil,
			"gorping: rxe0 (netdev d0) has no GID for 192.0.2.1: re-add the address to d0 (ip addr add ADDR dev d0) or use another one of its addresses"},
		{"server on an address of no netdev", none, a("198.51.100.9"), nil,
			"gorping: 198.51.100.9 is not on an RDMA device: " + linkHint + "; use an address of one of them"},
		{"no route", a("10.1.2.3"), none, unix.ENETUNREACH,
			"gorping: no RDMA device reaches 10.1.2.3: " + linkHint + "; use an address reachable through one of them"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fakeHost(tc.routeErr).NoDevice(tc.dst, tc.src); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// The hints ask uverbs' discovery (here of an injected host with rxe0 on d0),
// not sysfs of their own.
func TestHostNetUsesDiscovery(t *testing.T) {
	t.Parallel()
	env := hostenvtest.NoRDMA(t)
	hostNet := HostNet(uverbs.NewHost(env))
	if got := hostNet.rdmaDevs("d0"); got != nil {
		t.Errorf("no devices: rdmaDevs(d0) = %q", got)
	}
	hostenvtest.AddRxe(t, env, "rxe0", "uverbs0")
	if got := hostNet.rdmaDevs("d0"); !slices.Equal(got, []string{"rxe0"}) {
		t.Errorf("rdmaDevs(d0) = %q, want [rxe0]", got)
	}
	if got := hostNet.rdmaDevs("eth0"); got != nil {
		t.Errorf("rdmaDevs(eth0) = %q, want none", got)
	}
	if hostNet.ibPort() {
		t.Error("ibPort: true without an InfiniBand port")
	}
	p := filepath.Join(env.Sysfs, "class/infiniband/rxe0/ports/1/link_layer")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("InfiniBand\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !hostNet.ibPort() {
		t.Error("ibPort: false with an InfiniBand port")
	}
}

// The address dump, with the netdevs of a host whose sysfs has lo (ifindex as the
// kernel says): the hints find the owner of 127.0.0.1 and lo's addresses there.
func TestHostNetAddresses(t *testing.T) {
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Fatalf("no lo: %v", err)
	}
	env := hostenvtest.NoRDMA(t)
	p := filepath.Join(env.Sysfs, "class/net/lo/ifindex")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(strconv.Itoa(lo.Index)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := uverbs.NewHost(env)
	if owner := addrOwner(h, netip.MustParseAddr("127.0.0.1")); owner != "lo" {
		t.Errorf("addrOwner(127.0.0.1) = %q, want lo", owner)
	}
	if owner := addrOwner(h, netip.MustParseAddr("192.0.2.99")); owner != "" {
		t.Errorf("addrOwner(192.0.2.99) = %q, want none", owner)
	}
	if got := HostNet(h).ifName(lo.Index); got != "lo" {
		t.Errorf("ifName(%d) = %q, want lo", lo.Index, got)
	}
	if got := netdevAddrs(h, "lo"); len(got) != 0 {
		t.Errorf("lo's global addresses: %v, want none (loopback is not global unicast)", got)
	}
}
