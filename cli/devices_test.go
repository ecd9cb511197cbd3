package cli

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// The subcommand rule on devices' command lines: its own (ok), its usage errors, or
// rping's.
func TestDevicesMatch(t *testing.T) {
	const ok, bad, rping = "ok", "usage error", "rping's"
	for argv, want := range map[string]string{
		"devices":                    ok,
		"devices -v":                 ok,
		"devices --json":             ok,
		"devices -v --json --json":   ok,
		"devices --verbose -h":       ok,
		"devices --help":             ok,
		"devices -x":                 bad,
		"devices --verb":             bad,   // no prefixes: a script's word means what it says
		"devices --js":               rping, // rping's --json (gorping's option there)
		"devices --json=1":           bad,
		"devices x":                  bad,
		"devices -vx":                bad,
		"devices -s":                 rping,
		"devices -v -s":              rping,
		"devices -vV":                rping,
		"devices -x -s":              rping,
		"devices --":                 rping,
		"devices --st":               rping, // rping's --stats
		"devices -c -a 192.0.2.1 -v": rping,
		"":                           rping,
		"device":                     rping,
		"Devices":                    rping,
		"-s devices":                 rping,
		"-v devices":                 rping,
	} {
		var args []string
		if argv != "" {
			args = strings.Fields(argv)
		}
		ours, w, errLine := command("devices").match(args)
		got := rping
		switch {
		case ours && errLine == "":
			got = ok
		case ours && w.has("help"):
			got = ok
		case ours:
			got = bad
		}
		if got != want {
			t.Errorf("%q: %s (error %q), want %s", argv, got, errLine, want)
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
