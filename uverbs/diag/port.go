package diag

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/gorping/gorping/internal/sysattr"
	"github.com/gorping/gorping/uverbs"
)

// Read-only port facts from sysfs: what `gorping devices` shows without a uverbs context.
// sysfs carries the same values RDMA netlink's port query returns (state, physical state)
// plus what netlink lacks (link layer, rate, the GID table with types and netdevs). The
// active MTU is not in sysfs; it needs QUERY_PORT on a context (Context.QueryPort).

// PortGID is one valid entry of a port's GID table.
type PortGID struct {
	Index  int
	GID    netip.Addr // the 16 GID bytes as an IPv6 address (IPv4-mapped for RoCE v2 over IPv4)
	Type   uverbs.GIDType
	Netdev string // "" if none (InfiniBand)
}

// PortInfo is one port as sysfs describes it.
type PortInfo struct {
	Port      int
	State     uverbs.PortState
	PhysState uverbs.PhysState
	LinkLayer uverbs.LinkLayer
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

// ReadDeviceInfo reads the device-wide sysfs attributes of ibdev on h. Missing attributes
// are left empty.
func ReadDeviceInfo(h uverbs.Host, ibdev string) DeviceInfo {
	return readDeviceInfo(h.Env().Sysfs, ibdev)
}

func readDeviceInfo(root, ibdev string) DeviceInfo {
	base := filepath.Join(root, "class", "infiniband", ibdev)
	var di DeviceInfo
	if s, err := sysattr.Read(filepath.Join(base, "node_type")); err == nil {
		_, di.NodeType = sysattr.SplitNumName(s)
	}
	di.FWVersion, _ = sysattr.Read(filepath.Join(base, "fw_ver"))
	di.NodeDesc, _ = sysattr.Read(filepath.Join(base, "node_desc"))
	if s, err := sysattr.Read(filepath.Join(base, "sys_image_guid")); err == nil {
		di.SysImageGUID, _ = sysattr.ParseGUID(s)
	}
	return di
}

// ReadPorts reads every port of ibdev from h's sysfs, in port order; with gids it also
// reads the valid GID table entries.
func ReadPorts(h uverbs.Host, ibdev string, gids bool) ([]PortInfo, error) {
	return readPorts(h.Env().Sysfs, ibdev, gids)
}

func readPorts(root, ibdev string, gids bool) ([]PortInfo, error) {
	base := filepath.Join(root, "class", "infiniband", ibdev)
	ents, err := os.ReadDir(filepath.Join(base, "ports"))
	if err != nil {
		return nil, fmt.Errorf("diag: %s ports: %w", ibdev, err)
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
	s, err := sysattr.Read(filepath.Join(pdir, "state"))
	if err != nil {
		return p, fmt.Errorf("diag: %s port %d state: %w", ibdev, port, err)
	}
	n, _ := sysattr.SplitNumName(s)
	p.State = uverbs.PortState(n)
	if s, err := sysattr.Read(filepath.Join(pdir, "phys_state")); err == nil {
		n, _ := sysattr.SplitNumName(s)
		p.PhysState = uverbs.PhysState(n)
	}
	if s, err := sysattr.Read(filepath.Join(pdir, "link_layer")); err == nil {
		switch s {
		case "InfiniBand":
			p.LinkLayer = uverbs.LinkLayerInfiniBand
		case "Ethernet":
			p.LinkLayer = uverbs.LinkLayerEthernet
		}
	}
	p.Rate, _ = sysattr.Read(filepath.Join(pdir, "rate"))
	if p.LinkLayer == uverbs.LinkLayerInfiniBand {
		p.LID = readHex16(filepath.Join(pdir, "lid"))
		p.SMLID = readHex16(filepath.Join(pdir, "sm_lid"))
	}
	all, err := readPortGIDs(pdir, p.LinkLayer, gids)
	if err != nil {
		return p, fmt.Errorf("diag: %s port %d GIDs: %w", ibdev, port, err)
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
	if s, err := sysattr.Read(filepath.Join(base, "parent")); err == nil && s != "" {
		return s
	}
	if ents, err := os.ReadDir(filepath.Join(base, "device", "net")); err == nil && len(ents) == 1 {
		return ents[0].Name()
	}
	return ""
}

// readPortGIDs reads the valid GIDs of one port. Without all it stops at the first valid
// entry that names a netdev (enough for portNetdev).
func readPortGIDs(pdir string, ll uverbs.LinkLayer, all bool) ([]PortGID, error) {
	raw, err := sysattr.PortGIDs(pdir, all)
	if err != nil {
		return nil, err
	}
	out := make([]PortGID, 0, len(raw))
	for _, g := range raw {
		out = append(out, PortGID{Index: g.Index, GID: netip.AddrFrom16(g.Raw), Type: gidType(g, ll), Netdev: g.Netdev})
	}
	return out, nil
}

// gidType is an entry's type: what gid_attrs says ("IB/RoCE v1" is RoCE v1 on an Ethernet
// port, IB on InfiniBand), else what the link layer implies.
func gidType(g sysattr.GID, ll uverbs.LinkLayer) uverbs.GIDType {
	switch {
	case strings.Contains(g.Type, "v2"):
		return uverbs.GIDTypeRoCEv2
	case ll == uverbs.LinkLayerEthernet:
		return uverbs.GIDTypeRoCEv1
	}
	return uverbs.GIDTypeIB
}

func readHex16(path string) uint16 {
	s, err := sysattr.Read(path)
	if err != nil {
		return 0
	}
	v, _ := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 16)
	return uint16(v)
}

// NetdevMTU reads netdev's MTU from h's sysfs (class/net/<netdev>/mtu).
func NetdevMTU(h uverbs.Host, netdev string) (int, error) {
	n, err := NetdevStat(h, netdev, "mtu")
	if err != nil || n == 0 {
		return 0, fmt.Errorf("diag: %s MTU: %w", netdev, orZero(err))
	}
	return int(n), nil
}

// NetdevStat reads netdev's attribute name ("mtu", "statistics/rx_packets") from h's
// sysfs as a number.
func NetdevStat(h uverbs.Host, netdev, name string) (uint64, error) {
	if netdev == "" || strings.ContainsAny(netdev, "/\x00") || netdev == "." || netdev == ".." {
		return 0, fmt.Errorf("diag: bad netdev name %q", netdev)
	}
	s, err := sysattr.Read(h.Env().Sys("class", "net", netdev, name))
	if err != nil {
		return 0, fmt.Errorf("diag: %s %s: %w", netdev, name, err)
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("diag: %s %s: bad value %q", netdev, name, s)
	}
	return n, nil
}

// orZero is err, or for a zero value read without error, an error saying so.
func orZero(err error) error {
	if err != nil {
		return err
	}
	return fmt.Errorf("zero")
}

// NetdevByIndex is the name of the netdev with interface index ifindex in h's sysfs
// (class/net/*/ifindex).
func NetdevByIndex(h uverbs.Host, ifindex int) (string, error) {
	ents, err := os.ReadDir(h.Env().Sys("class", "net"))
	if err != nil {
		return "", fmt.Errorf("diag: netdevs: %w", err)
	}
	for _, e := range ents {
		if n, err := NetdevStat(h, e.Name(), "ifindex"); err == nil && n == uint64(ifindex) {
			return e.Name(), nil
		}
	}
	return "", fmt.Errorf("diag: no netdev with index %d", ifindex)
}
