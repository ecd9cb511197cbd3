package cli

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestIsDevicesCommand(t *testing.T) {
	for argv, want := range map[string]bool{
		"devices":                    true,
		"devices -v":                 true,
		"devices --json":             true,
		"devices -v --json --json":   true,
		"devices --verbose -h":       true,
		"devices --help":             true,
		"":                           false,
		"device":                     false,
		"Devices":                    false,
		"devices -s":                 false,
		"devices -v -s":              false,
		"devices -vV":                false,
		"devices -x":                 false,
		"devices --js":               false,
		"devices --json=1":           false,
		"devices x":                  false,
		"devices --":                 false,
		"-s devices":                 false,
		"-v devices":                 false,
		"devices -c -a 192.0.2.1 -v": false,
	} {
		var args []string
		if argv != "" {
			args = strings.Fields(argv)
		}
		if got := isDevicesCommand(args); got != want {
			t.Errorf("isDevicesCommand(%q) = %v, want %v", argv, got, want)
		}
	}
}

// sampleDoc is what collectDevices makes of an rxe device and a device without a provider.
var sampleDoc = devicesDoc{Devices: []deviceDoc{
	{
		Name: "rxe0", Index: 0, Driver: "rxe", DriverID: 14, Provider: true, Uverbs: "uverbs0",
		Path: "/dev/infiniband/uverbs0", ABI: 2, NodeGUID: "5054:00ff:fe12:3456", NodeType: "CA",
		FWVersion: "0.0.0", SysImageGUID: "5054:00ff:fe12:3456",
		Ports: []portDoc{{
			Port: 1, State: "ACTIVE", PhysState: "LINK_UP", LinkLayer: "Ethernet", ActiveMTU: 1024,
			MaxMTU: 4096, Rate: "10 Gb/sec (1X QDR)", Netdev: "d0", NetdevMTU: 1500,
			GIDs: []gidDoc{
				{Index: 0, GID: "fe80::5054:ff:fe12:3456", Type: "RoCE v2", Netdev: "d0"},
				{Index: 1, GID: "::ffff:192.0.2.1", Type: "RoCE v2", Netdev: "d0"},
			},
		}},
	},
	{
		Name: "mlx4_0", Index: 1, Driver: "mlx4", DriverID: 2, Uverbs: "uverbs1",
		Path: "/dev/infiniband/uverbs1", ABI: 1, NodeGUID: "0002:c903:0000:0001",
		Ports: []portDoc{{
			Port: 1, State: "DOWN", PhysState: "DISABLED", LinkLayer: "InfiniBand",
			MTUError: "needs a uverbs context; gorping has no provider for driver mlx4",
			LID:      new(uint16), SMLID: new(uint16),
		}},
	},
}}

func TestWriteDevices(t *testing.T) {
	var b bytes.Buffer
	writeDevices(&b, sampleDoc, true)
	out := b.String()
	for _, line := range []string{
		"rxe0\n",
		"\n  driver          rxe (driver id 14)\n",
		"\n  provider        yes\n",
		"\n  uverbs          /dev/infiniband/uverbs0 (ABI 2)\n",
		"\n  node_guid       5054:00ff:fe12:3456\n",
		"\n  fw_ver          0.0.0\n",
		"\n  port 1\n",
		"\n    state           ACTIVE\n",
		"\n    physical_state  LINK_UP\n",
		"\n    link_layer      Ethernet\n",
		"\n    active_mtu      1024 (max 4096)\n",
		"\n    rate            10 Gb/sec (1X QDR)\n",
		"\n    netdev          d0 (mtu 1500)\n",
		"\n    gids            2 valid\n",
		"\n      index  gid                      type     netdev\n",
		"\n      0      fe80::5054:ff:fe12:3456  RoCE v2  d0\n",
		"\n      1      ::ffff:192.0.2.1         RoCE v2  d0\n",
		"\n\nmlx4_0\n",
		"\n  provider        no (supported: ", // the registered providers follow
		"\n    active_mtu      unknown: needs a uverbs context; gorping has no provider for driver mlx4\n",
		"\n    lid             0x0\n",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("output lacks %q:\n%s", line, out)
		}
	}
	if strings.Contains(out, " \n") {
		t.Errorf("trailing blanks:\n%s", out)
	}
	b.Reset()
	writeDevices(&b, sampleDoc, false)
	if s := b.String(); strings.Contains(s, "gids") || strings.Contains(s, "fw_ver") || strings.Contains(s, "lid") {
		t.Errorf("non-verbose output has verbose fields:\n%s", s)
	}
}

func TestDevicesJSONRoundTrip(t *testing.T) {
	b, err := json.Marshal(sampleDoc)
	if err != nil {
		t.Fatal(err)
	}
	var back devicesDoc
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, sampleDoc) {
		t.Errorf("round trip changed the document:\n%+v\n%+v", back, sampleDoc)
	}
	// The schema's key names, as gorping(1) (docs/gorping.1.md) documents them.
	var generic map[string][]map[string]any
	if err := json.Unmarshal(b, &generic); err != nil {
		t.Fatal(err)
	}
	dev := generic["devices"][0]
	for _, k := range []string{"name", "index", "driver", "driver_id", "provider", "uverbs", "path", "abi", "node_guid", "node_type", "fw_ver", "sys_image_guid", "ports"} {
		if _, ok := dev[k]; !ok {
			t.Errorf("device lacks %q: %v", k, dev)
		}
	}
	port := dev["ports"].([]any)[0].(map[string]any)
	for _, k := range []string{"port", "state", "physical_state", "link_layer", "active_mtu", "max_mtu", "rate", "netdev", "netdev_mtu", "gids"} {
		if _, ok := port[k]; !ok {
			t.Errorf("port lacks %q: %v", k, port)
		}
	}
	gid := port["gids"].([]any)[0].(map[string]any)
	if gid["index"] != 0.0 || gid["gid"] != "fe80::5054:ff:fe12:3456" || gid["type"] != "RoCE v2" || gid["netdev"] != "d0" {
		t.Errorf("gid %v", gid)
	}
}

func TestFormatGUID(t *testing.T) {
	if s := formatGUID(0x505400fffe96b707); s != "5054:00ff:fe96:b707" {
		t.Errorf("formatGUID = %q", s)
	}
	if s := formatGUID(0); s != "0000:0000:0000:0000" {
		t.Errorf("formatGUID(0) = %q", s)
	}
}
