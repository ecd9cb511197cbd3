package uverbs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// maxGIDEntries bounds one QUERY_GID_TABLE: the attribute length is a u16.
const maxGIDEntries = 0xffff / 32

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
		ents, err := sysfsGIDs(sysfsRoot, c.dev.Name, p, int(pa.GIDTableLen), pa.LinkLayer)
		if err != nil {
			return nil, fmt.Errorf("uverbs: %s GID table: ioctl: %v; sysfs: %w", c.dev.Name, ioErr, err)
		}
		all = append(all, ents...)
	}
	return all, nil
}

// Layout of the QUERY_GID_TABLE ioctl buffer: header, 4 attributes, count, entries.
const (
	gidIoctlAttrsOff   = 24
	gidIoctlCountOff   = gidIoctlAttrsOff + 4*16
	gidIoctlEntriesOff = gidIoctlCountOff + 8
)

// buildGIDTableIoctl lays out UVERBS_METHOD_QUERY_GID_TABLE for n entries in mem, whose
// first byte is at address base.
func buildGIDTableIoctl(mem []byte, base uint64, n int, driverID uint32) {
	hdr := ioctlHdr{
		Length:   uint16(gidIoctlAttrsOff + 4*16),
		ObjectId: uverbsObjectDevice,
		MethodId: uverbsMethodQueryGIDTable,
		NumAttrs: 4,
		DriverId: driverID,
	}
	attrs := [4]ioctlAttr{
		{AttrId: attrGIDTableEntrySize, Len: 8, Flags: uverbsAttrFMandatory, Data: 32},
		{AttrId: attrGIDTableFlags, Len: 4, Data: 0},
		{AttrId: attrGIDTableRespEntries, Len: uint16(32 * n), Flags: uverbsAttrFMandatory, Data: base + gidIoctlEntriesOff},
		{AttrId: attrGIDTableRespNumEntries, Len: 8, Flags: uverbsAttrFMandatory, Data: base + gidIoctlCountOff},
	}
	copy(mem, asBytes(&hdr))
	copy(mem[gidIoctlAttrsOff:], asBytes(&attrs))
}

// queryGIDTableIoctl runs UVERBS_METHOD_QUERY_GID_TABLE. Header, attributes, count and
// entries live in one temporary mapping: the kernel gets their addresses as integers.
func (c *Context) queryGIDTableIoctl(n int) ([]GIDEntry, error) {
	size := gidIoctlEntriesOff + 32*n
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("uverbs: mmap GID query buffer: %w", err)
	}
	defer unix.Munmap(mem)
	// The ioctl header must carry the device's driver id or the kernel says EINVAL.
	driverID := c.dev.DriverID
	if driverID == 0 {
		driverID = c.provider.DriverID()
	}
	buildGIDTableIoctl(mem, uint64(uintptr(unsafe.Pointer(&mem[0]))), n, driverID)

	c.cmd.mu.Lock()
	if c.cmd.closed {
		c.cmd.mu.Unlock()
		return nil, ErrClosed
	}
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(c.cmd.fd), rdmaVerbsIoctl, uintptr(unsafe.Pointer(&mem[0])))
	c.cmd.mu.Unlock()
	if errno != 0 {
		return nil, &CmdError{Cmd: "QUERY_GID_TABLE", Errno: errno}
	}
	return parseGIDEntries(mem[gidIoctlCountOff:gidIoctlCountOff+8], mem[gidIoctlEntriesOff:])
}

// parseGIDEntries decodes the QUERY_GID_TABLE answer: a u64 count and the entries.
func parseGIDEntries(count, entries []byte) ([]GIDEntry, error) {
	if len(count) < 8 {
		return nil, errors.New("uverbs: QUERY_GID_TABLE: short count")
	}
	n := *(*uint64)(unsafe.Pointer(&count[0]))
	if n > uint64(len(entries)/32) {
		return nil, fmt.Errorf("uverbs: QUERY_GID_TABLE: %d entries do not fit %d bytes", n, len(entries))
	}
	out := make([]GIDEntry, 0, n)
	for i := uint64(0); i < n; i++ {
		var e gidEntry
		fromBytes(&e, entries[32*i:32*i+32])
		out = append(out, GIDEntry{GID: e.Gid, Index: e.GidIndex, Port: e.PortNum, Type: GIDType(e.GidType), IfIndex: e.NetdevIfindex})
	}
	return out, nil
}

// sysfsGIDs reads the valid GIDs of one port from sysfs (verbs.md §1.8).
func sysfsGIDs(root, dev string, port, n int, ll LinkLayer) ([]GIDEntry, error) {
	pdir := filepath.Join(root, "class", "infiniband", dev, "ports", strconv.Itoa(port))
	_, attrsErr := os.Stat(filepath.Join(pdir, "gid_attrs"))
	var out []GIDEntry
	for i := 0; i < n; i++ {
		s, err := readSysfs(filepath.Join(pdir, "gids", strconv.Itoa(i)))
		if err != nil {
			if errors.Is(err, os.ErrNotExist) && i > 0 {
				break
			}
			continue // unreadable slot: treat as empty
		}
		gid, err := parseGID(s)
		if err != nil || gid == ([16]byte{}) {
			continue
		}
		e := GIDEntry{GID: gid, Index: uint32(i), Port: uint32(port), Type: GIDTypeIB}
		if ll == LinkLayerEthernet {
			e.Type = GIDTypeRoCEv1
		}
		if attrsErr == nil {
			t, err := readSysfs(filepath.Join(pdir, "gid_attrs", "types", strconv.Itoa(i)))
			if err != nil {
				continue // empty slot
			}
			if strings.Contains(t, "v2") {
				e.Type = GIDTypeRoCEv2
			}
			if nd, err := readSysfs(filepath.Join(pdir, "gid_attrs", "ndevs", strconv.Itoa(i))); err == nil && nd != "" {
				if ifi, err := netInterfaceIndex(nd); err == nil {
					e.IfIndex = uint32(ifi)
				}
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// parseGID parses sysfs's "fe80:0000:0000:0000:5054:00ff:fe12:3456".
func parseGID(s string) ([16]byte, error) {
	var g [16]byte
	parts := strings.Split(strings.TrimSpace(s), ":")
	if len(parts) != 8 {
		return g, fmt.Errorf("uverbs: bad GID %q", s)
	}
	for k, p := range parts {
		if len(p) == 0 || len(p) > 4 {
			return g, fmt.Errorf("uverbs: bad GID %q", s)
		}
		v, err := strconv.ParseUint(p, 16, 16)
		if err != nil {
			return g, fmt.Errorf("uverbs: bad GID %q", s)
		}
		g[2*k], g[2*k+1] = byte(v>>8), byte(v)
	}
	return g, nil
}

// netInterfaceIndex reads a netdev's ifindex from sysfs (avoids importing net).
func netInterfaceIndex(name string) (int, error) {
	s, err := readSysfs(filepath.Join(sysfsRoot, "class", "net", name, "ifindex"))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(s)
}
