package sysattr

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	t.Parallel()
	if g, err := ParseGUID("5054:00ff:fe12:3456"); g != 0x505400fffe123456 || err != nil {
		t.Errorf("ParseGUID = %#x, %v", g, err)
	}
	for _, bad := range []string{"", "5054:00ff:fe12", "5054:00ff:fe12:34567", "5054:00ff:fe12:xyzw", "5054::fe12:3456"} {
		if _, err := ParseGUID(bad); err == nil {
			t.Errorf("ParseGUID(%q): no error", bad)
		}
	}
	g, err := ParseGID("fe80:0000:0000:0000:5054:00ff:fe12:3456\n")
	if err != nil || g != [16]byte{0xfe, 0x80, 8: 0x50, 0x54, 0x00, 0xff, 0xfe, 0x12, 0x34, 0x56} {
		t.Errorf("ParseGID = %x, %v", g, err)
	}
	if _, err := ParseGID("fe80::1"); err == nil {
		t.Error("ParseGID of the short form: no error")
	}
	if n, s := SplitNumName("4: ACTIVE"); n != 4 || s != "ACTIVE" {
		t.Errorf("SplitNumName = %d %q", n, s)
	}
	if n, s := SplitNumName("CA"); n != 0 || s != "CA" {
		t.Errorf("SplitNumName(no colon) = %d %q", n, s)
	}
}

// A port's GID table: empty and zero slots left out, types and netdevs where gid_attrs
// has them, the early stop at the first netdev when not all are wanted.
func TestPortGIDs(t *testing.T) {
	t.Parallel()
	pdir := t.TempDir()
	for rel, c := range map[string]string{
		"gids/0":            "fe80:0000:0000:0000:5054:00ff:fe12:3456\n",
		"gids/1":            "0000:0000:0000:0000:0000:0000:0000:0000\n",
		"gids/2":            "0000:0000:0000:0000:0000:ffff:c000:0201\n",
		"gids/10":           "2001:0db8:0000:0000:0000:0000:0000:0001\n",
		"gid_attrs/types/0": "RoCE v2\n",
		"gid_attrs/ndevs/0": "d0\n",
		"gid_attrs/types/2": "RoCE v2\n",
		"gid_attrs/ndevs/2": "d0\n",
		// gids/10 has no type: it emptied between the reads.
	} {
		p := filepath.Join(pdir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	all, err := PortGIDs(pdir, true)
	if err != nil || len(all) != 2 || all[0].Index != 0 || all[1].Index != 2 || all[1].Type != "RoCE v2" ||
		all[1].Netdev != "d0" || !all[1].Attrs || all[1].Raw[15] != 1 {
		t.Errorf("PortGIDs(all) = %+v, %v", all, err)
	}
	if first, err := PortGIDs(pdir, false); err != nil || len(first) != 1 {
		t.Errorf("PortGIDs(first) = %+v, %v", first, err)
	}
	if none, err := PortGIDs(t.TempDir(), true); err != nil || none != nil {
		t.Errorf("no table: %+v, %v", none, err)
	}
}

func TestParseGUID(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]uint64{
		"5054:00ff:fe96:b707":   0x505400fffe96b707,
		"0000:0000:0000:0001\n": 1,
		"ffff:ffff:ffff:ffff":   ^uint64(0),
	} {
		if g, err := ParseGUID(s); err != nil || g != want {
			t.Errorf("ParseGUID(%q) = %#x, %v", s, g, err)
		}
	}
	for _, s := range []string{"", "1:2:3", "12345:0:0:0", "x:0:0:0", "1:2:3:4:5", "::::"} {
		if _, err := ParseGUID(s); err == nil {
			t.Errorf("ParseGUID(%q) succeeded", s)
		}
	}
}

func FuzzSysfsText(f *testing.F) {
	f.Add("5054:00ff:fe96:b707")
	f.Add("fe80:0000:0000:0000:5054:00ff:fe12:3456")
	f.Fuzz(func(t *testing.T, s string) {
		if g, err := ParseGUID(s); err == nil {
			back := fmt.Sprintf("%04x:%04x:%04x:%04x", g>>48, g>>32&0xffff, g>>16&0xffff, g&0xffff)
			if g2, err := ParseGUID(back); err != nil || g2 != g {
				t.Fatalf("GUID %q → %#x → %q does not round-trip", s, g, back)
			}
		}
		if g, err := ParseGID(s); err == nil {
			var parts []string
			for k := 0; k < 16; k += 2 {
				parts = append(parts, fmt.Sprintf("%02x%02x", g[k], g[k+1]))
			}
			if g2, err := ParseGID(strings.Join(parts, ":")); err != nil || g2 != g {
				t.Fatalf("GID %q does not round-trip", s)
			}
		}
	})
}
