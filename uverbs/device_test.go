package uverbs

import (
	"encoding/binary"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/gorping/gorping/internal/hostenv"
	"github.com/gorping/gorping/internal/hostenv/hostenvtest"
	"github.com/gorping/gorping/internal/netlink"
	"github.com/gorping/gorping/internal/wire"
	"golang.org/x/sys/unix"
)

func TestSysfsDevices(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	hostenvtest.WriteTree(t, root, map[string]string{
		"class/infiniband_verbs/abi_version":          "6\n",
		"class/infiniband_verbs/uverbs0/ibdev":        "rxe0\n",
		"class/infiniband_verbs/uverbs0/abi_version":  "2\n",
		"class/infiniband_verbs/uverbs0/dev":          "231:192\n",
		"class/infiniband/rxe0/node_guid":             "5054:00ff:fe96:b707\n",
		"class/infiniband/rxe0/node_type":             "1: CA\n",
		"class/infiniband/rxe0/parent":                "d0\n",
		"class/infiniband_verbs/uverbs10/ibdev":       "mlx5_0\n",
		"class/infiniband_verbs/uverbs10/abi_version": "1\n",
		"bus/pci/drivers/mlx5_core/.keep":             "",
		"class/infiniband/mlx5_0/node_guid":           "0c42:a103:0065:1234\n",
		"class/infiniband/mlx5_0/node_type":           "1: CA\n",
		"class/infiniband/mlx5_0/device/driver":       "->" + filepath.Join(root, "bus/pci/drivers/mlx5_core"),
		"class/infiniband_verbs/uverbs2/ibdev":        "siw0\n",
		"class/infiniband_verbs/uverbs2/abi_version":  "1\n",
		"class/infiniband/siw0/node_guid":             "0250:b6ff:fe00:0001\n",
		"class/infiniband/siw0/node_type":             "4: RNIC\n",
		"class/infiniband_verbs/uverbs3/ibdev":        "odd0\n",
		"class/infiniband_verbs/uverbs3/abi_version":  "junk\n",
		"class/infiniband/odd0/node_type":             "1: CA\n",
		"class/infiniband_verbs/uverbs4/abi_version":  "1\n", // no ibdev: skipped
	})
	reg := shippedLike(t)
	env := hostenv.Env{Sysfs: root, Dev: "/dev/infiniband"}
	got, err := sysfsDevices(reg, env)
	if err != nil {
		t.Fatal(err)
	}
	want := []Device{
		{Name: "rxe0", Index: -1, Uverbs: "uverbs0", Path: "/dev/infiniband/uverbs0", NodeGUID: 0x505400fffe96b707, Driver: "rxe", DriverID: 14, ABI: 2, sysfs: root},
		{Name: "siw0", Index: -1, Uverbs: "uverbs2", Path: "/dev/infiniband/uverbs2", NodeGUID: 0x0250b6fffe000001, Driver: "siw", DriverID: 18, ABI: 1, sysfs: root},
		{Name: "odd0", Index: -1, Uverbs: "uverbs3", Path: "/dev/infiniband/uverbs3", sysfs: root},
		{Name: "mlx5_0", Index: -1, Uverbs: "uverbs10", Path: "/dev/infiniband/uverbs10", NodeGUID: 0x0c42a10300651234, Driver: "mlx5", DriverID: 1, ABI: 1, sysfs: root},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("sysfsDevices =\n%+v\nwant\n%+v", got, want)
	}

	// No infiniband_verbs class at all: no devices, no error.
	got, err = sysfsDevices(reg, hostenv.Env{Sysfs: t.TempDir()})
	if err != nil || got == nil || len(got) != 0 {
		t.Errorf("empty sysfs: %v, %v; want an empty non-nil list", got, err)
	}
}

func nlAttrBytes(typ uint16, data []byte) []byte { return netlink.AppendAttr(nil, typ, data) }

func u32b(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }
func u64b(v uint64) []byte { return binary.NativeEndian.AppendUint64(nil, v) }

func TestNetlinkParsing(t *testing.T) {
	t.Parallel()
	// A dump datagram: two devices then DONE, as the kernel sends them.
	dev0 := append(nlAttrBytes(nldevAttrDevIndex, u32b(3)), nlAttrBytes(nldevAttrDevName, []byte("rxe0\x00"))...)
	dev0 = append(dev0, nlAttrBytes(0 /* PAD */, nil)...)
	dev0 = append(dev0, nlAttrBytes(nldevAttrNodeGUID, u64b(0x505400fffe96b707))...)
	dev0 = append(dev0, nlAttrBytes(67 /* DEV_PROTOCOL */, []byte("roce\x00"))...)
	dev1 := append(nlAttrBytes(nldevAttrDevIndex|0x8000 /* flag bits are masked */, u32b(4)), nlAttrBytes(nldevAttrDevName, []byte("mlx5_0"))...)
	var dgram []byte
	dgram = netlink.AppendMessage(dgram, nldevType(nldevCmdGet), unix.NLM_F_MULTI, 1, dev0)
	dgram = netlink.AppendMessage(dgram, nldevType(nldevCmdGet), unix.NLM_F_MULTI, 1, dev1)
	dgram = netlink.AppendMessage(dgram, unix.NLMSG_DONE, unix.NLM_F_MULTI, 1, u32b(0))
	msgs, err := netlink.ParseMessages(dgram)
	if err != nil || len(msgs) != 3 {
		t.Fatalf("parseNLMessages: %d msgs, %v", len(msgs), err)
	}
	if msgs[0].Type != nldevType(1) || msgs[0].Type != 5<<10+1 || msgs[2].Type != unix.NLMSG_DONE {
		t.Errorf("types %#x %#x", msgs[0].Type, msgs[2].Type)
	}
	d, err := parseNLDevice(msgs[0].Payload)
	if err != nil || d != (nlDevice{Index: 3, Name: "rxe0", NodeGUID: 0x505400fffe96b707}) {
		t.Errorf("device 0 = %+v, %v", d, err)
	}
	d, err = parseNLDevice(msgs[1].Payload)
	if err != nil || d != (nlDevice{Index: 4, Name: "mlx5_0"}) {
		t.Errorf("device 1 = %+v, %v", d, err)
	}
	if _, err := parseNLDevice(nlAttrBytes(nldevAttrDevName, []byte("x"))); err == nil {
		t.Error("device without index accepted")
	}

	cd := append(nlAttrBytes(nldevAttrChardevName, []byte("uverbs0\x00")), nlAttrBytes(0, nil)...)
	cd = append(cd, nlAttrBytes(nldevAttrChardevABI, u64b(2))...)
	cd = append(cd, nlAttrBytes(nldevAttrChardev, u64b(231<<8|192))...)
	cd = append(cd, nlAttrBytes(nldevAttrDriverID, u32b(14))...)
	c, err := parseNLChardev(cd)
	if err != nil || c != (nlChardev{Name: "uverbs0", ABI: 2, DriverID: 14, Devt: 231<<8 | 192}) {
		t.Errorf("chardev = %+v, %v", c, err)
	}
	// A u64 driver id (as the header comment says) works too.
	c, err = parseNLChardev(append(nlAttrBytes(nldevAttrChardevName, []byte("uverbs1")), nlAttrBytes(nldevAttrDriverID, u64b(18))...))
	if err != nil || c.DriverID != 18 {
		t.Errorf("u64 driver id: %+v, %v", c, err)
	}

	if err := netlink.Error(append(u32b(uint32(0xfffffffe)), zeros(16)...)); err != unix.ENOENT {
		t.Errorf("nlError = %v, want ENOENT", err)
	}
	if err := netlink.Error(u32b(0)); err != nil {
		t.Errorf("ACK decoded as %v", err)
	}

	// Truncations are errors, not panics.
	for _, b := range [][]byte{dgram[:10], dgram[:20], append(u32b(1000), zeros(12)...)} {
		if _, err := netlink.ParseMessages(b); err == nil {
			t.Errorf("truncated datagram % x accepted", b)
		}
	}
	if _, err := netlink.ParseAttrs([]byte{9, 0, 1, 0, 'a'}); err == nil {
		t.Error("attribute longer than payload accepted")
	}
}

func TestNetlinkRequests(t *testing.T) {
	t.Parallel()
	checkBytes(t, "dump", dumpRequest(1), le(uint32(16), uint16(5<<10+1), uint16(unix.NLM_F_REQUEST|unix.NLM_F_DUMP), uint32(1), uint32(0)))
	checkBytes(t, "chardev", chardevRequest(7, 3), le(uint32(16+8+12), uint16(5<<10+15), uint16(unix.NLM_F_REQUEST), uint32(7), uint32(0),
		uint16(8), uint16(1), uint32(3), uint16(11), uint16(69), []byte("uverbs\x00"), uint8(0)))
}

func TestSysfsGIDs(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	p := "class/infiniband/rxe0/ports/1/"
	hostenvtest.WriteTree(t, root, map[string]string{
		p + "gids/0":               "fe80:0000:0000:0000:5054:00ff:fe12:3456\n",
		p + "gids/1":               "0000:0000:0000:0000:0000:ffff:c000:0201\n",
		p + "gids/2":               "0000:0000:0000:0000:0000:0000:0000:0000\n",
		p + "gid_attrs/types/0":    "RoCE v2\n",
		p + "gid_attrs/types/1":    "RoCE v2\n",
		p + "gid_attrs/ndevs/0":    "d0\n",
		p + "gid_attrs/ndevs/1":    "d0\n",
		"class/net/d0/ifindex":     "5\n",
		"class/infiniband/x/.keep": "",
	})
	got, err := sysfsGIDs(root, "rxe0", 1, 1024, LinkLayerEthernet)
	if err != nil {
		t.Fatal(err)
	}
	want := []GIDEntry{
		{GID: [16]byte{0xfe, 0x80, 8: 0x50, 0x54, 0x00, 0xff, 0xfe, 0x12, 0x34, 0x56}, Index: 0, Port: 1, Type: GIDTypeRoCEv2, IfIndex: 5},
		{GID: [16]byte{10: 0xff, 0xff, 192, 0, 2, 1}, Index: 1, Port: 1, Type: GIDTypeRoCEv2, IfIndex: 5},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("sysfsGIDs =\n%+v\nwant\n%+v", got, want)
	}
}

func TestParseGIDEntries(t *testing.T) {
	t.Parallel()
	gid := [16]byte{0xfe, 0x80, 15: 1}
	ent := le(gid[:], uint32(0), uint32(1), uint32(2), uint32(5))
	got, err := parseGIDEntries(1, append(ent, zeros(32)...))
	want := []GIDEntry{{GID: [16]byte{0xfe, 0x80, 15: 1}, Index: 0, Port: 1, Type: GIDTypeRoCEv2, IfIndex: 5}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("parseGIDEntries = %+v, %v", got, err)
	}
	if _, err := parseGIDEntries(3, ent); err == nil {
		t.Error("count beyond buffer accepted")
	}
}

// QUERY_GID_TABLE on rxe for N entries, byte by byte.
func TestGIDTableIoctlGolden(t *testing.T) {
	t.Parallel()
	const n, base = 4, 0x7f0000001000
	q := buildGIDTableIoctl(base, n, 14)
	mem := wire.Bytes(&q)
	want := le(uint16(88), uint16(0), uint16(5), uint16(4), uint64(0), uint32(14), uint32(0),
		uint16(0), uint16(8), uint16(1), uint16(0), uint64(32),
		uint16(1), uint16(4), uint16(0), uint16(0), uint64(0),
		uint16(2), uint16(32*n), uint16(1), uint16(0), uint64(base+96),
		uint16(3), uint16(8), uint16(1), uint16(0), uint64(base+88))
	checkBytes(t, "QUERY_GID_TABLE", mem[:88], want)
}

// Netdevs and LinkLayers read sysfs of the environment: rxe0 on d0 (parent file), mlx5_0
// on eth0 (device/net), siw0 known only by its GID table, ib0 with an InfiniBand port.
func TestDeviceNetdevs(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	hostenvtest.WriteTree(t, root, map[string]string{
		"class/infiniband/rxe0/parent":                       "d0\n",
		"class/infiniband/rxe0/ports/1/link_layer":           "Ethernet\n",
		"class/infiniband/mlx5_0/device/net/eth0/ifindex":    "2\n",
		"class/infiniband/mlx5_0/ports/1/link_layer":         "Ethernet\n",
		"class/infiniband/siw0/ports/1/gid_attrs/ndevs/0":    "eth1\n",
		"class/infiniband/siw0/ports/1/gid_attrs/ndevs/2":    "eth1\n",
		"class/infiniband/siw0/ports/1/gid_attrs/ndevs/1/.x": "", // unused entry: unreadable
		"class/infiniband/ib0/ports/1/link_layer":            "InfiniBand\n",
		"class/infiniband/ib0/ports/2/link_layer":            "Ethernet\n",
	})
	for dev, want := range map[string][]string{"rxe0": {"d0"}, "mlx5_0": {"eth0"}, "siw0": {"eth1"}, "ib0": nil, "gone": nil} {
		if got := (Device{Name: dev, sysfs: root}).Netdevs(); !slices.Equal(got, want) {
			t.Errorf("%s.Netdevs() = %q, want %q", dev, got, want)
		}
	}
	if got := (Device{Name: "ib0", sysfs: root}).LinkLayers(); !slices.Equal(got, []LinkLayer{LinkLayerInfiniBand, LinkLayerEthernet}) {
		t.Errorf("ib0.LinkLayers() = %v", got)
	}
	if got := (Device{Name: "gone", sysfs: root}).LinkLayers(); got != nil {
		t.Errorf("missing device: %v", got)
	}
}
