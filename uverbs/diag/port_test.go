package diag

import (
	"net/netip"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gorping/gorping/internal/hostenv"
	"github.com/gorping/gorping/internal/hostenv/hostenvtest"
	"github.com/gorping/gorping/uverbs"
)

// rxeTree is a Soft-RoCE device as sysfs shows it, with a few GID slots: 0 and 1 valid,
// 2 empty (zeros, type unreadable), 3 valid IPv4-mapped.
func rxeTree(t *testing.T) string {
	root := t.TempDir()
	p := "class/infiniband/rxe0/ports/1/"
	hostenvtest.WriteTree(t, root, map[string]string{
		"class/infiniband/rxe0/node_type":      "1: CA\n",
		"class/infiniband/rxe0/fw_ver":         "0.0.0\n",
		"class/infiniband/rxe0/node_desc":      "rxe\n",
		"class/infiniband/rxe0/sys_image_guid": "5054:00ff:fe12:3456\n",
		"class/infiniband/rxe0/parent":         "d0\n",
		p + "state":                            "4: ACTIVE\n",
		p + "phys_state":                       "5: LinkUp\n",
		p + "link_layer":                       "Ethernet\n",
		p + "rate":                             "10 Gb/sec (1X QDR)\n",
		p + "lid":                              "0x0\n",
		p + "gids/0":                           "fe80:0000:0000:0000:5054:00ff:fe12:3456\n",
		p + "gids/1":                           "2001:0db8:0000:0000:0000:0000:0000:0001\n",
		p + "gids/2":                           "0000:0000:0000:0000:0000:0000:0000:0000\n",
		p + "gids/3":                           "0000:0000:0000:0000:0000:ffff:c000:0201\n",
		p + "gids/10":                          "0000:0000:0000:0000:0000:0000:0000:0000\n",
		p + "gids/11":                          "fe80:0000:0000:0000:5054:00ff:fe12:3456\n",
		p + "gid_attrs/types/11":               "IB/RoCE v1\n",
		p + "gid_attrs/ndevs/11":               "d0.5\n",
		p + "gid_attrs/types/0":                "RoCE v2\n",
		p + "gid_attrs/types/1":                "RoCE v2\n",
		p + "gid_attrs/types/3":                "RoCE v2\n",
		p + "gid_attrs/ndevs/0":                "d0\n",
		p + "gid_attrs/ndevs/1":                "d0\n",
		p + "gid_attrs/ndevs/3":                "d0\n",
		"class/net/d0/mtu":                     "1500\n",
	})
	return root
}

func TestReadPortsRxe(t *testing.T) {
	t.Parallel()
	root := rxeTree(t)
	ports, err := readPorts(root, "rxe0", true)
	if err != nil {
		t.Fatal(err)
	}
	want := []PortInfo{{
		Port: 1, State: uverbs.PortActive, PhysState: 5, LinkLayer: uverbs.LinkLayerEthernet,
		Rate: "10 Gb/sec (1X QDR)", Netdev: "d0",
		GIDs: []PortGID{
			{Index: 0, GID: netip.MustParseAddr("fe80::5054:ff:fe12:3456"), Type: uverbs.GIDTypeRoCEv2, Netdev: "d0"},
			{Index: 1, GID: netip.MustParseAddr("2001:db8::1"), Type: uverbs.GIDTypeRoCEv2, Netdev: "d0"},
			{Index: 3, GID: netip.MustParseAddr("::ffff:192.0.2.1"), Type: uverbs.GIDTypeRoCEv2, Netdev: "d0"},
			// "IB/RoCE v1" on an Ethernet port is RoCE v1 (mlx5 lists every address as v1 and v2).
			{Index: 11, GID: netip.MustParseAddr("fe80::5054:ff:fe12:3456"), Type: uverbs.GIDTypeRoCEv1, Netdev: "d0.5"},
		},
	}}
	if !reflect.DeepEqual(ports, want) {
		t.Errorf("readPorts =\n%+v\nwant\n%+v", ports, want)
	}
	if ports[0].PhysState.String() != "LINK_UP" || ports[0].State.String() != "ACTIVE" {
		t.Errorf("names %s %s", ports[0].PhysState, ports[0].State)
	}
	// Without the GID table the netdev is still found.
	ports, err = readPorts(root, "rxe0", false)
	if err != nil || len(ports) != 1 || ports[0].GIDs != nil || ports[0].Netdev != "d0" {
		t.Errorf("readPorts(no gids) = %+v, %v", ports, err)
	}
	di := readDeviceInfo(root, "rxe0")
	if di != (DeviceInfo{NodeType: "CA", FWVersion: "0.0.0", NodeDesc: "rxe", SysImageGUID: 0x505400fffe123456}) {
		t.Errorf("readDeviceInfo = %+v", di)
	}
	h := uverbs.NewHost(hostenv.Env{Sysfs: root})
	if mtu, err := NetdevMTU(h, "d0"); mtu != 1500 || err != nil {
		t.Errorf("NetdevMTU = %d, %v", mtu, err)
	}
	for _, bad := range []string{"", "..", "a/b", "nosuch"} {
		if _, err := NetdevMTU(h, bad); err == nil {
			t.Errorf("NetdevMTU(%q): no error", bad)
		}
	}
}

func TestReadPortsInfiniBandAndMissing(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	p := "class/infiniband/mlx5_0/ports/"
	hostenvtest.WriteTree(t, root, map[string]string{
		p + "1/state":      "1: DOWN\n",
		p + "1/phys_state": "3: Disabled\n",
		p + "1/link_layer": "InfiniBand\n",
		p + "1/lid":        "0x1a\n",
		p + "1/sm_lid":     "0x1\n",
		p + "1/gids/0":     "fe80:0000:0000:0000:0c42:a103:0065:1234\n",
		p + "2/state":      "4: ACTIVE\n",
		p + "2/link_layer": "InfiniBand\n",
		p + "10/state":     "2: INIT\n",
		p + "junk/state":   "4: ACTIVE\n",
		"class/infiniband/mlx5_0/device/net/ib0/x": "",
	})
	ports, err := readPorts(root, "mlx5_0", true)
	if err != nil {
		t.Fatal(err)
	}
	if len(ports) != 3 || ports[0].Port != 1 || ports[1].Port != 2 || ports[2].Port != 10 {
		t.Fatalf("ports %+v", ports)
	}
	p1 := ports[0]
	// No gid_attrs: a v1 entry on InfiniBand is an IB GID. The netdev comes from the bus device.
	if p1.State != uverbs.PortDown || p1.PhysState.String() != "DISABLED" || p1.LID != 0x1a || p1.SMLID != 1 ||
		len(p1.GIDs) != 1 || p1.GIDs[0].Type != uverbs.GIDTypeIB || p1.Netdev != "ib0" {
		t.Errorf("port 1 = %+v", p1)
	}
	if _, err := readPorts(root, "nosuch", false); err == nil || !strings.Contains(err.Error(), "nosuch") {
		t.Errorf("missing device: %v", err)
	}
	hostenvtest.WriteTree(t, root, map[string]string{"class/infiniband/bad0/ports/1/rate": "x"})
	if _, err := readPorts(root, "bad0", false); err == nil {
		t.Error("port without state: no error")
	}
}

func TestReadPortsFollowsSymlinkedRoot(t *testing.T) {
	t.Parallel()
	// sysfs class entries are symlinks into /sys/devices; reading through one must work.
	real := rxeTree(t)
	root := t.TempDir()
	hostenvtest.WriteTree(t, root, map[string]string{"class/infiniband/rxe0": "->" + filepath.Join(real, "class/infiniband/rxe0")})
	if ports, err := readPorts(root, "rxe0", false); err != nil || len(ports) != 1 {
		t.Errorf("through symlink: %+v, %v", ports, err)
	}
}
