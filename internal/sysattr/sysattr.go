// Package sysattr reads the text attributes sysfs shows for RDMA devices and their
// netdevs: one value per file, GUIDs and GIDs in colon-separated hex, "4: ACTIVE" enums,
// and a port's GID table. uverbs' discovery and uverbs/diag both read through it, each
// under the sysfs root of the host it looks at.
package sysattr

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Read is the attribute in file path, without surrounding white space.
func Read(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// ParseGUID parses sysfs's "xxxx:xxxx:xxxx:xxxx" (big-endian 16-bit groups).
func ParseGUID(s string) (uint64, error) {
	var g uint64
	err := hexGroups(s, 4, func(_ int, v uint64) { g = g<<16 | v })
	if err != nil {
		return 0, fmt.Errorf("bad GUID %q", s)
	}
	return g, nil
}

// ParseGID parses sysfs's "fe80:0000:0000:0000:5054:00ff:fe12:3456".
func ParseGID(s string) ([16]byte, error) {
	var g [16]byte
	err := hexGroups(s, 8, func(k int, v uint64) { g[2*k], g[2*k+1] = byte(v>>8), byte(v) })
	if err != nil {
		return [16]byte{}, fmt.Errorf("bad GID %q", s)
	}
	return g, nil
}

// hexGroups calls f with each of the n colon-separated 16-bit hex groups of s.
func hexGroups(s string, n int, f func(k int, v uint64)) error {
	parts := strings.Split(strings.TrimSpace(s), ":")
	if len(parts) != n {
		return errors.New("wrong number of groups")
	}
	for k, p := range parts {
		if len(p) == 0 || len(p) > 4 {
			return errors.New("bad group")
		}
		v, err := strconv.ParseUint(p, 16, 16)
		if err != nil {
			return err
		}
		f(k, v)
	}
	return nil
}

// SplitNumName splits sysfs's "4: ACTIVE" into 4 and "ACTIVE" (a bare name: 0 and it).
func SplitNumName(s string) (int, string) {
	num, name, ok := strings.Cut(s, ":")
	if !ok {
		return 0, strings.TrimSpace(s)
	}
	n, _ := strconv.Atoi(strings.TrimSpace(num))
	return n, strings.TrimSpace(name)
}

// GID is one valid entry of a port's GID table.
type GID struct {
	Index  int
	Raw    [16]byte
	Attrs  bool   // the kernel has gid_attrs (type and netdev per entry)
	Type   string // gid_attrs/types: "IB/RoCE v1", "RoCE v2"; "" without Attrs
	Netdev string // gid_attrs/ndevs; "" if none
}

// PortGIDs reads the valid entries of the GID table of the port whose sysfs directory
// is pdir, in index order. Without all it stops at the first entry that names a netdev
// (a GID table has up to 1024 slots). Slots that are empty or empty out while read are
// left out; a port without a GID table has none.
func PortGIDs(pdir string, all bool) ([]GID, error) {
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
	var out []GID
	for _, i := range idx {
		si := strconv.Itoa(i)
		s, err := Read(filepath.Join(pdir, "gids", si))
		if err != nil {
			continue // unreadable slot: empty
		}
		raw, err := ParseGID(s)
		if err != nil || raw == ([16]byte{}) {
			continue
		}
		g := GID{Index: i, Raw: raw, Attrs: attrsErr == nil}
		if g.Attrs {
			if g.Type, err = Read(filepath.Join(pdir, "gid_attrs", "types", si)); err != nil {
				continue // the slot emptied between the two reads
			}
			g.Netdev, _ = Read(filepath.Join(pdir, "gid_attrs", "ndevs", si))
		}
		out = append(out, g)
		if !all && g.Netdev != "" {
			break
		}
	}
	return out, nil
}
