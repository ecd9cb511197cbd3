package rping

import (
	"bytes"
	"fmt"
	"github.com/gorping/gorping/rdmacm"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gorping/gorping/internal/hostenv/hostenvtest"
	"github.com/gorping/gorping/internal/netlink"
	"github.com/gorping/gorping/uverbs"
	"golang.org/x/sys/unix"
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
		if got := cmOpenHint(tc.err); got != tc.want {
			t.Errorf("cmOpenHint(%v) = %q, want %q", tc.err, got, tc.want)
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
		if got := verbsOpenHint(dev, tc.err); got != tc.want {
			t.Errorf("verbsOpenHint(%v) = %q, want %q", tc.err, got, tc.want)
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
		if got := memlockHint(tc.err); got != tc.want {
			t.Errorf("memlockHint(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func TestPrinterHint(t *testing.T) {
	var b bytes.Buffer
	out := &printer{stderr: &b}
	out.hint("")
	out.hint("gorping: x")
	if b.String() != "gorping: x\n" {
		t.Errorf("printed %q", b.String())
	}
}

// fakeHost is a host with lo (127.0.0.1), d0 (192.0.2.1, rxe0), d1 (rxe1, no
// address; 198.51.100.0/24 routed there with d0's source address), eth9
// (203.0.113.1, no RDMA device, default route).
func fakeHost(routeErr error) netView {
	owners := map[netip.Addr]string{
		netip.MustParseAddr("127.0.0.1"):   "lo",
		netip.MustParseAddr("::1"):         "lo",
		netip.MustParseAddr("192.0.2.1"):   "d0",
		netip.MustParseAddr("203.0.113.1"): "eth9",
	}
	names := map[int]string{1: "lo", 3: "d0", 4: "d1", 5: "eth9"}
	return netView{
		route: func(dst, src netip.Addr) (route, error) {
			if routeErr != nil {
				return route{}, routeErr
			}
			if netip.MustParsePrefix("198.51.100.0/24").Contains(dst) {
				if !src.IsValid() {
					src = netip.MustParseAddr("192.0.2.1")
				}
				return route{ifindex: 4, src: src}, nil
			}
			if dst == netip.MustParseAddr("198.18.0.1") { // a route without any source address
				return route{ifindex: 4}, nil
			}
			return route{ifindex: 5, src: netip.MustParseAddr("203.0.113.1")}, nil
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
	if got, want := v.unreachableHint(netip.MustParseAddr("2001:db8:3::2")),
		"gorping: no route to 2001:db8:3::2: d1, the netdev of rxe1, has no IPv6 address (a link that goes down loses its IPv6 addresses unless net.ipv6.conf.d1.keep_addr_on_down=1): add it back (ip addr add ADDR/PREFIX dev d1)"; got != want {
		t.Errorf("IPv6:\n got %q\nwant %q", got, want)
	}
	if got, want := v.unreachableHint(netip.MustParseAddr("10.9.9.9")),
		"gorping: no route to 10.9.9.9: d1, the netdev of rxe1, has no IPv4 address: add one (ip addr add ADDR/PREFIX dev d1)"; got != want {
		t.Errorf("IPv4:\n got %q\nwant %q", got, want)
	}
	v.rdmaNetdevs = func() []string { return []string{"d0"} }
	if got, want := v.unreachableHint(netip.MustParseAddr("2001:db8:3::2")),
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
			if got := fakeHost(tc.routeErr).noDeviceHint(tc.dst, tc.src); got != tc.want {
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
	hostNet := hostNet(uverbs.NewHost(env))
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

// The kernel routes 127.0.0.1 through lo, on any Linux host.
func TestLookupRoute(t *testing.T) {
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Fatalf("no lo: %v", err)
	}
	r, err := lookupRoute(netlink.Dial, netip.MustParseAddr("127.0.0.1"), netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	if r.ifindex != lo.Index || r.src != netip.MustParseAddr("127.0.0.1") {
		t.Errorf("route to 127.0.0.1: %+v, want ifindex %d src 127.0.0.1", r, lo.Index)
	}
	// The address dump, with the netdevs of a host whose sysfs has lo (ifindex as the
	// kernel says): the hints find the owner of 127.0.0.1 and lo's addresses there.
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
	if got := hostNet(h).ifName(lo.Index); got != "lo" {
		t.Errorf("ifName(%d) = %q, want lo", lo.Index, got)
	}
	if got := netdevAddrs(h, "lo"); len(got) != 0 {
		t.Errorf("lo's global addresses: %v, want none (loopback is not global unicast)", got)
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

// A REJECTED event is rping's line; a stale-connection reject (after the device was
// created anew) gets gorping's explanation too, other rejects do not.
func TestCMErrorStaleConnection(t *testing.T) {
	for _, tc := range []struct {
		status int32
		hint   bool
	}{{rejStaleConn, true}, {28, false}, {-111, false}} {
		var stderr bytes.Buffer
		out := &printer{stdout: &bytes.Buffer{}, stderr: &stderr}
		if !cmError(out, rdmacm.Event{Type: rdmacm.EventRejected, Status: tc.status}) {
			t.Fatalf("status %d: REJECTED is no error event", tc.status)
		}
		want := fmt.Sprintf("cma event RDMA_CM_EVENT_REJECTED, error %d\n", tc.status)
		if tc.hint {
			want += staleConnHint + "\n"
		}
		if got := stderr.String(); got != want {
			t.Errorf("status %d: stderr %q, want %q", tc.status, got, want)
		}
	}
}

// An UNREACHABLE with -ETIMEDOUT on a connection that is up gets rping's line and
// the neighbour-change hint naming the other side; other statuses get rping's line.
func TestCMCompletionMACChanged(t *testing.T) {
	for _, tc := range []struct {
		role, peer string
		status     int32
	}{{"client", "server", -int32(unix.ETIMEDOUT)}, {"server", "client", -int32(unix.ETIMEDOUT)}, {"client", "", -int32(unix.EHOSTUNREACH)}} {
		var stderr bytes.Buffer
		out := &printer{stdout: &bytes.Buffer{}, stderr: &stderr}
		comp, ok := cmCompletion(out, rdmacm.Event{Type: rdmacm.EventUnreachable, Status: tc.status}, tc.role)
		if !ok || comp.kind != compError {
			t.Fatalf("%s, status %d: completion %v %v, want an error", tc.role, tc.status, comp, ok)
		}
		want := fmt.Sprintf("cma event RDMA_CM_EVENT_UNREACHABLE, error %d\n", tc.status)
		if tc.peer != "" {
			want += macChangedHint(tc.role) + "\n"
			if !strings.Contains(want, "neighbour entry for the "+tc.peer+" changed its MAC address") {
				t.Errorf("%s: the hint does not name the %s: %q", tc.role, tc.peer, want)
			}
		}
		if got := stderr.String(); got != want {
			t.Errorf("%s, status %d: stderr %q, want %q", tc.role, tc.status, got, want)
		}
	}
}
