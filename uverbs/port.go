package uverbs

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Read-only port facts from sysfs: what `gorping devices` shows without a uverbs context.
// sysfs carries the same values RDMA netlink's port query returns (state, physical state)
// plus what netlink lacks (link layer, rate, the GID table with types and netdevs). The
// active MTU is not in sysfs; it needs QUERY_PORT on a context (Context.QueryPort).

// PhysState is a port's physical state (the number sysfs prints before the name).
type PhysState uint8

// Names as iproute2's `rdma link` prints them.
var physStateNames = [...]string{
	"NOP", "SLEEP", "POLLING", "DISABLED", "PORT_CONFIGURATION_TRAINING", "LINK_UP",
	"LINK_ERROR_RECOVERY", "PHY_TEST",
}

func (p PhysState) String() string {
	if int(p) < len(physStateNames) {
		return physStateNames[p]
	}
	return "PhysState(" + strconv.Itoa(int(p)) + ")"
}

// GIDTypeName returns "IB", "RoCE v1" or "RoCE v2".
func GIDTypeName(t GIDType) string {
	switch t {
	case GIDTypeIB:
		return "IB"
	case GIDTypeRoCEv1:
		return "RoCE v1"
	case GIDTypeRoCEv2:
		return "RoCE v2"
	}
	return "GIDType(" + strconv.FormatUint(uint64(t), 10) + ")"
}

// PortGID is one valid entry of a port's GID table.
type PortGID struct {
	Index  int
	GID    netip.Addr // the 16 GID bytes as an IPv6 address (IPv4-mapped for RoCE v2 over IPv4)
	Type   GIDType
	Netdev string // "" if none (InfiniBand)
}

// PortInfo is one port as sysfs describes it.
type PortInfo struct {
	Port      int
	State     PortState
	PhysState PhysState
	LinkLayer LinkLayer
	Rate      string // e.g. "10 Gb/sec (1X QDR)"; "" if unreadable
	LID       uint16 // InfiniBand only
	SMLID     uint16
	Netdev    string    // the port's network device (RoCE, iWARP); "" if none
	GIDs      []PortGID // only when asked for
}

// DeviceInfo are device attributes sysfs has beyond Device.
type DeviceInfo struct {
	NodeType     string // "CA", "RNIC", ...
	FWVersion    string
	SysImageGUID uint64
	NodeDesc     string
}

func readDeviceInfo(root, ibdev string) DeviceInfo {
	base := filepath.Join(root, "class", "infiniband", ibdev)
	var di DeviceInfo
	if s, err := readSysfs(filepath.Join(base, "node_type")); err == nil {
		_, di.NodeType = splitNumName(s)
	}
	di.FWVersion, _ = readSysfs(filepath.Join(base, "fw_ver"))
	di.NodeDesc, _ = readSysfs(filepath.Join(base, "node_desc"))
	if s, err := readSysfs(filepath.Join(base, "sys_image_guid")); err == nil {
		di.SysImageGUID, _ = parseGUID(s)
	}
	return di
}

func readPorts(root, ibdev string, gids bool) ([]PortInfo, error) {
	base := filepath.Join(root, "class", "infiniband", ibdev)
	ents, err := os.ReadDir(filepath.Join(base, "ports"))
	if err != nil {
		return nil, fmt.Errorf("uverbs: %s ports: %w", ibdev, err)
	}
	var nums []int
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil && n > 0 {
			nums = append(nums, n)
		}
	}
	sort.Ints(nums)
	var out []PortInfo
	for _, n := range nums {
		p, err := readPort(root, ibdev, n, gids)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func readPort(root, ibdev string, port int, gids bool) (PortInfo, error) {
	base := filepath.Join(root, "class", "infiniband", ibdev)
	pdir := filepath.Join(base, "ports", strconv.Itoa(port))
	p := PortInfo{Port: port}
	s, err := readSysfs(filepath.Join(pdir, "state"))
	if err != nil {
		return p, fmt.Errorf("uverbs: %s port %d state: %w", ibdev, port, err)
	}
	n, _ := splitNumName(s)
	p.State = PortState(n)
	if s, err := readSysfs(filepath.Join(pdir, "phys_state")); err == nil {
		n, _ := splitNumName(s)
		p.PhysState = PhysState(n)
	}
	if s, err := readSysfs(filepath.Join(pdir, "link_layer")); err == nil {
		switch s {
		case "InfiniBand":
			p.LinkLayer = LinkLayerInfiniBand
		case "Ethernet":
			p.LinkLayer = LinkLayerEthernet
		}
	}
	p.Rate, _ = readSysfs(filepath.Join(pdir, "rate"))
	if p.LinkLayer == LinkLayerInfiniBand {
		p.LID = readHex16(filepath.Join(pdir, "lid"))
		p.SMLID = readHex16(filepath.Join(pdir, "sm_lid"))
	}
	all, err := readPortGIDs(pdir, p.LinkLayer, gids)
	if err != nil {
		return p, fmt.Errorf("uverbs: %s port %d GIDs: %w", ibdev, port, err)
	}
	if gids {
		p.GIDs = all
	}
	p.Netdev = portNetdev(base, all)
	return p, nil
}

// portNetdev finds a port's network device: the netdev of its first GID (what the kernel
// associates with the port), else rxe's parent attribute, else the single netdev of the
// parent bus device.
func portNetdev(base string, gids []PortGID) string {
	for _, g := range gids {
		if g.Netdev != "" {
			return g.Netdev
		}
	}
	if s, err := readSysfs(filepath.Join(base, "parent")); err == nil && s != "" {
		return s
	}
	if ents, err := os.ReadDir(filepath.Join(base, "device", "net")); err == nil && len(ents) == 1 {
		return ents[0].Name()
	}
	return ""
}

// readPortGIDs reads the valid GIDs of one port. Without all it stops at the first valid
// entry that names a netdev (enough for portNetdev; a GID table has up to 1024 slots).
func readPortGIDs(pdir string, ll LinkLayer, all bool) ([]PortGID, error) {
	ents, err := os.ReadDir(filepath.Join(pdir, "gids"))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var idx []int
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil && n >= 0 {
			idx = append(idx, n)
		}
	}
	sort.Ints(idx)
	_, attrsErr := os.Stat(filepath.Join(pdir, "gid_attrs"))
	var out []PortGID
	for _, i := range idx {
		si := strconv.Itoa(i)
		s, err := readSysfs(filepath.Join(pdir, "gids", si))
		if err != nil {
			continue // unreadable slot: empty
		}
		raw, err := parseGID(s)
		if err != nil || raw == ([16]byte{}) {
			continue
		}
		g := PortGID{Index: i, GID: netip.AddrFrom16(raw), Type: GIDTypeIB}
		if ll == LinkLayerEthernet {
			g.Type = GIDTypeRoCEv1
		}
		if attrsErr == nil {
			t, err := readSysfs(filepath.Join(pdir, "gid_attrs", "types", si))
			if err != nil {
				continue // the slot emptied between the two reads
			}
			if strings.Contains(t, "v2") {
				g.Type = GIDTypeRoCEv2
			}
			g.Netdev, _ = readSysfs(filepath.Join(pdir, "gid_attrs", "ndevs", si))
		}
		out = append(out, g)
		if !all && g.Netdev != "" {
			break
		}
	}
	return out, nil
}

func netdevMTU(root, netdev string) (int, error) {
	if netdev == "" || strings.ContainsAny(netdev, "/\x00") || netdev == "." || netdev == ".." {
		return 0, fmt.Errorf("uverbs: bad netdev name %q", netdev)
	}
	s, err := readSysfs(filepath.Join(root, "class", "net", netdev, "mtu"))
	if err != nil {
		return 0, fmt.Errorf("uverbs: %s MTU: %w", netdev, err)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("uverbs: %s MTU: bad value %q", netdev, s)
	}
	return n, nil
}

// splitNumName splits sysfs's "4: ACTIVE" into 4 and "ACTIVE".
func splitNumName(s string) (int, string) {
	num, name, ok := strings.Cut(s, ":")
	if !ok {
		return 0, strings.TrimSpace(s)
	}
	n, _ := strconv.Atoi(strings.TrimSpace(num))
	return n, strings.TrimSpace(name)
}

func readHex16(path string) uint16 {
	s, err := readSysfs(path)
	if err != nil {
		return 0
	}
	v, _ := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 16)
	return uint16(v)
}

// HasProvider reports whether a registered provider (one gorping ships) handles dev.
func HasProvider(dev Device) bool { return providers.find(dev) != nil }

// SupportedDrivers lists the drivers of the registered providers, sorted.
func SupportedDrivers() []string { return providers.drivers() }
