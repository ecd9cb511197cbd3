package uverbs

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gorping/gorping/internal/sysattr"
	"github.com/gorping/gorping/internal/umem"
	"github.com/gorping/gorping/internal/wire"
	"golang.org/x/sys/unix"
)

// maxGIDEntries bounds one QUERY_GID_TABLE: the attribute length is a u16.
const maxGIDEntries = 0xffff / sizeofGidEntry

// GIDTable returns the valid GID entries of all ports. It uses the QUERY_GID_TABLE ioctl and
// falls back to sysfs on kernels without it.
func (c *Context) GIDTable() ([]GIDEntry, error) {
	da, err := c.QueryDevice()
	if err != nil {
		return nil, err
	}
	n := 0
	for p := 1; p <= int(da.PhysPortCnt); p++ {
		pa, err := c.QueryPort(uint8(p))
		if err != nil {
			return nil, err
		}
		n += int(pa.GIDTableLen)
	}
	n = min(max(n, 1), maxGIDEntries)
	ents, ioErr := c.queryGIDTableIoctl(n)
	if ioErr == nil {
		return ents, nil
	}
	if !errors.Is(ioErr, unix.ENOTTY) && !errors.Is(ioErr, unix.EPROTONOSUPPORT) && !errors.Is(ioErr, unix.EOPNOTSUPP) {
		return nil, fmt.Errorf("uverbs: %s: %w", c.dev.Name, ioErr)
	}
	var all []GIDEntry
	for p := 1; p <= int(da.PhysPortCnt); p++ {
		pa, err := c.QueryPort(uint8(p))
		if err != nil {
			return nil, err
		}
		ents, err := sysfsGIDs(c.dev.sysfsRoot(), c.dev.Name, p, int(pa.GIDTableLen), pa.LinkLayer)
		if err != nil {
			return nil, fmt.Errorf("uverbs: %s GID table: ioctl: %v; sysfs: %w", c.dev.Name, ioErr, err)
		}
		all = append(all, ents...)
	}
	return all, nil
}

// buildGIDTableIoctl lays out UVERBS_METHOD_QUERY_GID_TABLE for n entries in a buffer whose
// first byte is at address base: the command, then the entries at sizeofQueryGIDTable.
func buildGIDTableIoctl(base uint64, n int, driverID uint32) queryGIDTable {
	return queryGIDTable{
		Hdr: ioctlHdr{
			Length:   sizeofIoctlHdr + gidTableAttrs*sizeofIoctlAttr,
			ObjectID: uverbsObjectDevice,
			MethodID: uverbsMethodQueryGIDTable,
			NumAttrs: gidTableAttrs,
			DriverID: driverID,
		},
		Attrs: [gidTableAttrs]ioctlAttr{
			{AttrID: attrGIDTableEntrySize, Len: 8, Flags: uverbsAttrFMandatory, Data: sizeofGidEntry},
			{AttrID: attrGIDTableFlags, Len: 4, Data: 0},
			{AttrID: attrGIDTableRespEntries, Len: uint16(sizeofGidEntry * n), Flags: uverbsAttrFMandatory, Data: base + sizeofQueryGIDTable},
			{AttrID: attrGIDTableRespNumEntries, Len: 8, Flags: uverbsAttrFMandatory, Data: base + offsetofGIDTableNumEntries},
		},
	}
}

// queryGIDTableIoctl runs UVERBS_METHOD_QUERY_GID_TABLE. Command, attributes, count and
// entries live in one temporary mapping (umem): the kernel gets their addresses as integers.
func (c *Context) queryGIDTableIoctl(n int) ([]GIDEntry, error) {
	mem, err := umem.Anon(sizeofQueryGIDTable + sizeofGidEntry*n)
	if err != nil {
		return nil, fmt.Errorf("uverbs: GID query buffer: %w", err)
	}
	defer mem.Free()
	// The ioctl header must carry the device's driver id or the kernel says EINVAL.
	driverID := c.dev.DriverID
	if driverID == 0 {
		driverID = c.info.DriverID
	}
	q := buildGIDTableIoctl(mem.Addr(), n, driverID)
	b := mem.Bytes()
	copy(b, wire.Bytes(&q))

	if err := c.cmd.ioctlCmd("QUERY_GID_TABLE", uintptr(mem.Addr())); err != nil {
		if c.cmd.tr != nil {
			c.traceGIDIoctl(n, 0, err)
		}
		return nil, err
	}
	wire.Decode(&q, b)
	if c.cmd.tr != nil {
		c.traceGIDIoctl(n, q.NumEntries, nil)
	}
	return parseGIDEntries(q.NumEntries, b[sizeofQueryGIDTable:])
}

// parseGIDEntries decodes the QUERY_GID_TABLE answer: count entries of struct
// ib_uverbs_gid_entry.
func parseGIDEntries(count uint64, entries []byte) ([]GIDEntry, error) {
	if count > uint64(len(entries)/sizeofGidEntry) {
		return nil, fmt.Errorf("uverbs: QUERY_GID_TABLE: %d entries do not fit %d bytes", count, len(entries))
	}
	out := make([]GIDEntry, 0, count)
	for i := range int(count) {
		var e gidEntry
		wire.Decode(&e, entries[sizeofGidEntry*i:sizeofGidEntry*(i+1)])
		out = append(out, GIDEntry{GID: e.GID, Index: e.GIDIndex, Port: e.PortNum, Type: GIDType(e.GIDType), IfIndex: e.NetdevIfindex})
	}
	return out, nil
}

// sysfsGIDs reads the valid GIDs of one port from sysfs, those with an index below n.
func sysfsGIDs(root, dev string, port, n int, ll LinkLayer) ([]GIDEntry, error) {
	gids, err := sysattr.PortGIDs(filepath.Join(root, "class", "infiniband", dev, "ports", strconv.Itoa(port)), true)
	if err != nil {
		return nil, err
	}
	var out []GIDEntry
	for _, g := range gids {
		if g.Index >= n {
			break
		}
		e := GIDEntry{GID: g.Raw, Index: uint32(g.Index), Port: uint32(port), Type: GIDTypeIB}
		switch {
		case strings.Contains(g.Type, "v2"):
			e.Type = GIDTypeRoCEv2
		case ll == LinkLayerEthernet:
			e.Type = GIDTypeRoCEv1
		}
		if g.Netdev != "" {
			if ifi, err := netInterfaceIndex(root, g.Netdev); err == nil {
				e.IfIndex = uint32(ifi)
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// netInterfaceIndex reads a netdev's ifindex from sysfs (avoids importing net).
func netInterfaceIndex(root, name string) (int, error) {
	s, err := sysattr.Read(filepath.Join(root, "class", "net", name, "ifindex"))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(s)
}
