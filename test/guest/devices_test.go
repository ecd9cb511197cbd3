//go:build guest

package guest

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorping/gorping/uverbs"
	"github.com/gorping/gorping/uverbs/diag"
)

// The --json schema as gorping(1) (docs/gorping.1.md) documents it, typed out here independently of devices.go.
type devJSON struct {
	Devices []deviceJSON `json:"devices"`
}

type deviceJSON struct {
	Name         string     `json:"name"`
	Index        int        `json:"index"`
	Driver       string     `json:"driver"`
	DriverID     uint32     `json:"driver_id"`
	Provider     bool       `json:"provider"`
	Uverbs       string     `json:"uverbs"`
	Path         string     `json:"path"`
	ABI          int        `json:"abi"`
	NodeGUID     string     `json:"node_guid"`
	NodeType     string     `json:"node_type"`
	FWVersion    string     `json:"fw_ver"`
	SysImageGUID string     `json:"sys_image_guid"`
	Error        string     `json:"error"`
	Ports        []portJSON `json:"ports"`
}

type portJSON struct {
	Port       int    `json:"port"`
	State      string `json:"state"`
	PhysState  string `json:"physical_state"`
	LinkLayer  string `json:"link_layer"`
	ActiveMTU  int    `json:"active_mtu"`
	MaxMTU     int    `json:"max_mtu"`
	MTUError   string `json:"mtu_error"`
	Rate       string `json:"rate"`
	LID        *int   `json:"lid"`
	SMLID      *int   `json:"sm_lid"`
	Netdev     string `json:"netdev"`
	NetdevMTU  int    `json:"netdev_mtu"`
	MTUWarning string `json:"mtu_warning"`
	// Link-down count, CM message totals and the flap warning (devices.go).
	LinkDowned  *uint64 `json:"link_downed"`
	CMSent      *uint64 `json:"cm_sent"`
	CMReceived  *uint64 `json:"cm_received"`
	LinkWarning string  `json:"link_warning"`
	GIDs        []struct {
		Index  int    `json:"index"`
		GID    string `json:"gid"`
		Type   string `json:"type"`
		Netdev string `json:"netdev"`
	} `json:"gids"`
}

// gorpingDevices runs `gorping devices <args> --json` and decodes it with encoding/json.
func gorpingDevices(t *testing.T, args ...string) devJSON {
	t.Helper()
	r := Run(t, 30*time.Second, GorpingBin(t), append(append([]string{"devices"}, args...), "--json")...)
	if r.Code != 0 || r.Stderr != "" {
		t.Fatalf("gorping devices %v --json: exit %d\nstderr:\n%s", args, r.Code, r.Stderr)
	}
	var doc devJSON
	dec := json.NewDecoder(strings.NewReader(r.Stdout))
	dec.DisallowUnknownFields() // the documented schema is the whole schema
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("gorping devices --json does not parse: %v\n%s", err, r.Stdout)
	}
	if dec.More() {
		t.Fatalf("more than one JSON document:\n%s", r.Stdout)
	}
	return doc
}

func sysfs(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return strings.TrimSpace(string(b))
}

// rdmaLinks parses `rdma link show`: "link rxe0/1 state ACTIVE physical_state LINK_UP netdev d0".
func rdmaLinks(t *testing.T) map[string]map[string]string {
	t.Helper()
	out, err := exec.Command(RDMATool(t), "link", "show").CombinedOutput()
	if err != nil {
		t.Fatalf("rdma link show: %v\n%s", err, out)
	}
	links := map[string]map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "link" {
			t.Fatalf("unexpected rdma link line %q", line)
		}
		kv := map[string]string{}
		for i := 2; i+1 < len(f); i += 2 {
			kv[f[i]] = f[i+1]
		}
		links[f[1]] = kv
	}
	return links
}

// rdmaDevs parses `rdma dev show`: "0: rxe0: node_type ca fw 6.1.0 node_guid 5054:... sys_image_guid 5054:...".
func rdmaDevs(t *testing.T) map[string]map[string]string {
	t.Helper()
	out, err := exec.Command(RDMATool(t), "dev", "show").CombinedOutput()
	if err != nil {
		t.Fatalf("rdma dev show: %v\n%s", err, out)
	}
	devs := map[string]map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			t.Fatalf("unexpected rdma dev line %q", line)
		}
		kv := map[string]string{"index": strings.TrimSuffix(f[0], ":")}
		for i := 2; i+1 < len(f); i += 2 {
			kv[f[i]] = f[i+1]
		}
		devs[strings.TrimSuffix(f[1], ":")] = kv
	}
	return devs
}

// ibvDevinfoMTUs parses stock `ibv_devinfo -d dev`: port number → active and max MTU.
func ibvDevinfoMTUs(t *testing.T, dev string) map[int][2]int {
	t.Helper()
	bin, err := exec.LookPath("ibv_devinfo")
	if err != nil {
		t.Fatalf("ibv_devinfo (ibverbs-utils) not in the guest: %v", err)
	}
	out, err := exec.Command(bin, "-d", dev).CombinedOutput()
	if err != nil {
		t.Fatalf("ibv_devinfo -d %s: %v\n%s", dev, err, out)
	}
	res := map[int][2]int{}
	port := 0
	for _, line := range strings.Split(string(out), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, _ := strconv.Atoi(f[0])
		m := res[port]
		switch k {
		case "port":
			port = n
		case "active_mtu":
			m[0] = n
		case "max_mtu":
			m[1] = n
		}
		if port > 0 {
			res[port] = m
		}
	}
	if len(res) == 0 {
		t.Fatalf("no ports in ibv_devinfo output:\n%s", out)
	}
	return res
}

// sysfsGIDTable reads a port's valid GIDs straight from sysfs: index → "gid type netdev".
func sysfsGIDTable(t *testing.T, dev string, port int) map[int]string {
	t.Helper()
	dir := fmt.Sprintf("/sys/class/infiniband/%s/ports/%d", dev, port)
	ents, err := os.ReadDir(dir + "/gids")
	if err != nil {
		t.Fatal(err)
	}
	m := map[int]string{}
	for _, e := range ents {
		i, _ := strconv.Atoi(e.Name())
		raw := strings.ReplaceAll(sysfs(t, dir+"/gids/"+e.Name()), ":", "")
		if strings.Trim(raw, "0") == "" {
			continue
		}
		var b [16]byte
		for k := range b {
			v, err := strconv.ParseUint(raw[2*k:2*k+2], 16, 8)
			if err != nil {
				t.Fatalf("gid %d: %q", i, raw)
			}
			b[k] = byte(v)
		}
		typ := sysfs(t, dir+"/gid_attrs/types/"+e.Name())
		nd := sysfs(t, dir+"/gid_attrs/ndevs/"+e.Name())
		m[i] = fmt.Sprintf("%s %s %s", netip.AddrFrom16(b), typ, nd)
	}
	return m
}

// TestDevicesMatchRdmaTool: `gorping devices -v --json` against the guest's rxe0 says what
// `rdma link`, `rdma dev`, ibv_devinfo and sysfs say; the text form carries the same facts.
func TestDevicesMatchRdmaTool(t *testing.T) {
	doc := gorpingDevices(t, "-v")
	links, devs := rdmaLinks(t), rdmaDevs(t)
	if len(doc.Devices) != len(devs) {
		t.Errorf("gorping lists %d devices, rdma dev show %d", len(doc.Devices), len(devs))
	}
	text := Run(t, 30*time.Second, GorpingBin(t), "devices", "-v")
	if text.Code != 0 || text.Stderr != "" {
		t.Fatalf("gorping devices -v: exit %d stderr %q", text.Code, text.Stderr)
	}
	line := func(indent int, key, val string) {
		t.Helper()
		want := fmt.Sprintf("\n%s%-16s%s\n", strings.Repeat("  ", indent), key, val)
		if !strings.Contains(text.Stdout, want) {
			t.Errorf("gorping devices -v lacks %q:\n%s", want, text.Stdout)
		}
	}
	seenRxe := false
	for _, d := range doc.Devices {
		rd, ok := devs[d.Name]
		if !ok {
			t.Errorf("%s not in rdma dev show: %v", d.Name, devs)
			continue
		}
		if d.NodeGUID != rd["node_guid"] || d.SysImageGUID != rd["sys_image_guid"] || strconv.Itoa(d.Index) != rd["index"] {
			t.Errorf("%s: guid %s sys %s index %d; rdma dev: %v", d.Name, d.NodeGUID, d.SysImageGUID, d.Index, rd)
		}
		if !strings.EqualFold(d.NodeType, rd["node_type"]) || d.FWVersion != rd["fw"] {
			t.Errorf("%s: node_type %q fw %q; rdma dev: %v", d.Name, d.NodeType, d.FWVersion, rd)
		}
		if d.Name != "rxe0" {
			continue
		}
		seenRxe = true
		if d.Driver != "rxe" || d.DriverID != 14 || !d.Provider || d.Path != "/dev/infiniband/"+d.Uverbs || d.Error != "" {
			t.Errorf("rxe0: %+v", d)
		}
		if abi := sysfs(t, "/sys/class/infiniband_verbs/"+d.Uverbs+"/abi_version"); strconv.Itoa(d.ABI) != abi {
			t.Errorf("rxe0 abi %d, sysfs %s", d.ABI, abi)
		}
		line(1, "node_guid", d.NodeGUID)
		line(1, "provider", "yes")
		mtus := ibvDevinfoMTUs(t, d.Name)
		if len(d.Ports) != len(mtus) {
			t.Errorf("rxe0: %d ports, ibv_devinfo %d", len(d.Ports), len(mtus))
		}
		for _, p := range d.Ports {
			link := links[fmt.Sprintf("%s/%d", d.Name, p.Port)]
			if link == nil {
				t.Errorf("%s/%d not in rdma link show: %v", d.Name, p.Port, links)
				continue
			}
			if p.State != link["state"] || p.PhysState != link["physical_state"] || p.Netdev != link["netdev"] {
				t.Errorf("port %d: state %s phys %s netdev %s; rdma link: %v", p.Port, p.State, p.PhysState, p.Netdev, link)
			}
			pdir := fmt.Sprintf("/sys/class/infiniband/%s/ports/%d/", d.Name, p.Port)
			if p.LinkLayer != sysfs(t, pdir+"link_layer") || p.Rate != sysfs(t, pdir+"rate") {
				t.Errorf("port %d: link_layer %q rate %q; sysfs %q %q", p.Port, p.LinkLayer, p.Rate, sysfs(t, pdir+"link_layer"), sysfs(t, pdir+"rate"))
			}
			if nm := sysfs(t, "/sys/class/net/"+p.Netdev+"/mtu"); strconv.Itoa(p.NetdevMTU) != nm {
				t.Errorf("port %d: netdev_mtu %d, sysfs %s", p.Port, p.NetdevMTU, nm)
			}
			if m := mtus[p.Port]; p.ActiveMTU != m[0] || p.MaxMTU != m[1] || p.MTUError != "" || p.MTUWarning != "" {
				t.Errorf("port %d: active_mtu %d max_mtu %d (%q, %q); ibv_devinfo %v", p.Port, p.ActiveMTU, p.MaxMTU, p.MTUError, p.MTUWarning, m)
			}
			// link_downed and the CM totals are sysfs's own counters; the guest's
			// link never went down, so there is no flap warning.
			if p.LinkDowned == nil || strconv.FormatUint(*p.LinkDowned, 10) != sysfs(t, pdir+"hw_counters/link_downed") || p.LinkWarning != "" {
				t.Errorf("port %d: link_downed %v, warning %q; sysfs %s", p.Port, p.LinkDowned, p.LinkWarning, sysfs(t, pdir+"hw_counters/link_downed"))
			}
			if p.CMSent == nil || p.CMReceived == nil {
				t.Errorf("port %d: no CM message totals", p.Port)
			}
			want := sysfsGIDTable(t, d.Name, p.Port)
			got := map[int]string{}
			for _, g := range p.GIDs {
				got[g.Index] = fmt.Sprintf("%s %s %s", g.GID, g.Type, g.Netdev)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) || len(want) == 0 {
				t.Errorf("port %d GIDs:\n%v\nsysfs:\n%v", p.Port, got, want)
			}
			// The guest's addresses are there as RoCE v2 GIDs.
			for _, a := range []string{"::ffff:" + IPv4(t), IPv6(t)} {
				found := false
				for _, g := range p.GIDs {
					found = found || (g.GID == netip.MustParseAddr(a).String() && g.Type == "RoCE v2")
				}
				if !found {
					t.Errorf("port %d: no RoCE v2 GID %s in %v", p.Port, a, got)
				}
			}
			line(2, "state", p.State)
			line(2, "physical_state", p.PhysState)
			line(2, "link_layer", p.LinkLayer)
			line(2, "active_mtu", fmt.Sprintf("%d (max %d)", p.ActiveMTU, p.MaxMTU))
			line(2, "netdev", fmt.Sprintf("%s (mtu %d)", p.Netdev, p.NetdevMTU))
			line(2, "gids", fmt.Sprintf("%d valid", len(p.GIDs)))
			for _, g := range p.GIDs {
				re := regexp.MustCompile(fmt.Sprintf(`\n {6}%d +%s +%s +%s\n`, g.Index, regexp.QuoteMeta(g.GID), regexp.QuoteMeta(g.Type), regexp.QuoteMeta(g.Netdev)))
				if !re.MatchString(text.Stdout) {
					t.Errorf("text output lacks GID row %d %s", g.Index, g.GID)
				}
			}
		}
	}
	if !seenRxe {
		t.Fatalf("rxe0 not listed: %+v", doc)
	}
	// Without -v: the same ports, no GID table.
	short := gorpingDevices(t)
	for _, d := range short.Devices {
		for _, p := range d.Ports {
			if p.GIDs != nil || d.NodeType != "" || d.SysImageGUID != "" {
				t.Errorf("%s/%d: verbose fields without -v", d.Name, p.Port)
			}
		}
	}
}

// TestDevicesCounterDiff: a stock rping run over rxe0 moves rxe's packet counters, and the
// snapshot diff (which names no counter itself) reports them.
func TestDevicesCounterDiff(t *testing.T) {
	const pings = 20
	before, err := diag.ReadCounters(uverbs.Host{}, "rxe0", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(before.Values) == 0 {
		t.Fatalf("no counters under rxe0 port 1 (unreadable: %v)", before.Unreadable)
	}
	bin := StockRping(t)
	port := freshPort()
	srv := Start(t, bin, "-s", "-a", IPv4(t), "-p", strconv.Itoa(port))
	WaitListening(t, srv, IPv4(t), port, 30*time.Second)
	cli := Run(t, 60*time.Second, bin, "-c", "-a", IPv4(t), "-p", strconv.Itoa(port), "-C", strconv.Itoa(pings))
	CheckStockExit(t, "client", cli)
	srv.Wait(t, 30*time.Second)

	// The kernel serves hw_counters from a cache refreshed at most every `lifespan` ms, so
	// wait (with a deadline) for the run to show rather than read once.
	var after diag.CounterSnapshot
	byName := map[string]uint64{}
	deadline := time.Now().Add(10 * time.Second)
	for polls := 1; ; polls++ {
		if after, err = diag.ReadCounters(uverbs.Host{}, "rxe0", 1); err != nil {
			t.Fatal(err)
		}
		clear(byName)
		for _, d := range diag.DiffCounters(before, after) {
			byName[d.Name] = d.Delta()
		}
		// Each ping is at least a SEND each way; client and server share rxe0, so both
		// counters see every packet of both sides.
		sent, rcvd := byName["ports/1/hw_counters/sent_pkts"], byName["ports/1/hw_counters/rcvd_pkts"]
		if sent >= 2*pings && rcvd >= 2*pings {
			t.Logf("after %d reads: moved %v", polls, byName)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %d reads over 10s: sent_pkts moved by %d, rcvd_pkts by %d over %d pings, want at least %d each\nbefore %v\nafter %v",
				polls, sent, rcvd, pings, 2*pings, before.Values, after.Values)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(diag.DiffCounters(after, after)) != 0 {
		t.Error("a snapshot differs from itself")
	}
}

// setMTU sets netdev's MTU with iproute2's ip (busybox's applet is not used).
func setMTU(t *testing.T, netdev string, mtu int) {
	t.Helper()
	ip := filepath.Join(filepath.Dir(RDMATool(t)), "ip")
	if out, err := exec.Command(ip, "link", "set", "dev", netdev, "mtu", strconv.Itoa(mtu)).CombinedOutput(); err != nil {
		t.Fatalf("%s link set dev %s mtu %d: %v\n%s", ip, netdev, mtu, err, out)
	}
}

// rxePort1 is rxe0's port 1 in doc.
func rxePort1(t *testing.T, doc devJSON) portJSON {
	t.Helper()
	for _, d := range doc.Devices {
		if d.Name == "rxe0" && len(d.Ports) > 0 && d.Ports[0].Port == 1 {
			return d.Ports[0]
		}
	}
	t.Fatalf("no rxe0 port 1 in %+v", doc)
	return portJSON{}
}

// activeMTU waits until rxe0 port 1 reports want (rxe follows its netdev's MTU).
func activeMTU(t *testing.T, want int) portJSON {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		p := rxePort1(t, gorpingDevices(t))
		if p.ActiveMTU == want {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("rxe0 port 1 active MTU never became %d: %+v", want, p)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestDevicesMTUCheck forces a mismatch: a path MTU of 4096 (what a connection made while
// d0 had a 9000-byte MTU got) after d0 went down to 1400 (still above IPv6's 1280, so the
// guest keeps its addresses). The check must flag it; the consistent states must not be.
func TestDevicesMTUCheck(t *testing.T) {
	p0 := rxePort1(t, gorpingDevices(t))
	netdev, orig, origActive := p0.Netdev, p0.NetdevMTU, p0.ActiveMTU
	if netdev == "" || orig == 0 || origActive == 0 {
		t.Fatalf("rxe0 port 1: netdev %q mtu %d active %d", netdev, orig, origActive)
	}
	t.Cleanup(func() {
		setMTU(t, netdev, orig)
		activeMTU(t, origActive)
	})

	setMTU(t, netdev, 9000)
	if p := activeMTU(t, 4096); p.NetdevMTU != 9000 || p.MTUWarning != "" {
		t.Errorf("at 9000: %+v", p)
	}
	pathMTU := uverbs.MTU4096 // what rdma_cm gives a connection now

	setMTU(t, netdev, 1400)
	small := activeMTU(t, 1024)
	nd, err := diag.NetdevMTU(uverbs.Host{}, netdev)
	if err != nil || nd != 1400 {
		t.Fatalf("NetdevMTU(%s) = %d, %v", netdev, nd, err)
	}
	if p := small; p.MTUWarning != "" || p.NetdevMTU != 1400 {
		t.Errorf("consistent port at 1400: %+v", p)
	}
	w := diag.CheckMTU(diag.MTUFacts{PathMTU: pathMTU, ActiveMTU: uverbs.MTU1024, LinkLayer: uverbs.LinkLayerEthernet, Netdev: netdev, NetdevMTU: nd})
	t.Logf("warning: %s", w)
	for _, want := range []string{"path MTU 4096 exceeds the port's active MTU 1024", netdev + "'s MTU 1400", "larger than 1320 bytes", "at least 4176", "at most 1024"} {
		if !strings.Contains(w, want) {
			t.Errorf("warning %q lacks %q", w, want)
		}
	}
	if w := diag.CheckMTU(diag.MTUFacts{PathMTU: uverbs.MTU1024, ActiveMTU: uverbs.MTU1024, LinkLayer: uverbs.LinkLayerEthernet, Netdev: netdev, NetdevMTU: nd}); w != "" {
		t.Errorf("fitting path flagged: %q", w)
	}
}

// TestDevicesGIDsMatchIoctl: the sysfs GID table `gorping devices -v` shows is the one the
// kernel returns through QUERY_GID_TABLE (index, GID, type, netdev by ifindex).
func TestDevicesGIDsMatchIoctl(t *testing.T) {
	dev := uverbs.Device{}
	devs, err := uverbs.Host{}.Devices()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range devs {
		if d.Name == "rxe0" {
			dev = d
		}
	}
	if dev.Name == "" {
		t.Fatalf("no rxe0 in %+v", devs)
	}
	ctx, err := uverbs.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()
	ents, err := ctx.GIDTable()
	if err != nil {
		t.Fatal(err)
	}
	ports, err := diag.ReadPorts(uverbs.Host{}, dev.Name, true)
	if err != nil {
		t.Fatal(err)
	}
	fromSysfs := map[string]bool{}
	for _, p := range ports {
		for _, g := range p.GIDs {
			ifi := sysfs(t, "/sys/class/net/"+g.Netdev+"/ifindex")
			fromSysfs[fmt.Sprintf("%d/%d %s %d %s", p.Port, g.Index, g.GID, g.Type, ifi)] = true
		}
	}
	fromIoctl := map[string]bool{}
	for _, e := range ents {
		fromIoctl[fmt.Sprintf("%d/%d %s %d %d", e.Port, e.Index, netip.AddrFrom16(e.GID), e.Type, e.IfIndex)] = true
	}
	if len(fromIoctl) == 0 || fmt.Sprint(fromSysfs) != fmt.Sprint(fromIoctl) {
		t.Errorf("sysfs GIDs:\n%v\nQUERY_GID_TABLE:\n%v", fromSysfs, fromIoctl)
	}
}
