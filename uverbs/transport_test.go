package uverbs

import (
	"os"
	"path/filepath"
	"testing"
)

func TestDeviceTransport(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	for name, nt := range map[string]string{"rxe0": "1: CA\n", "siw0": "4: RNIC\n", "odd0": "7: unspecified\n", "bad0": "x"} {
		dir := filepath.Join(root, "class", "infiniband", name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "node_type"), []byte(nt), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range map[string]Transport{
		"rxe0": TransportIB, "siw0": TransportIWARP, "odd0": TransportUnknown, "bad0": TransportUnknown, "gone0": TransportUnknown,
	} {
		if got := (Device{Name: name, sysfs: root}).Transport(); got != want {
			t.Errorf("%s: Transport() = %v, want %v", name, got, want)
		}
	}
}
