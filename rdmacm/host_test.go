//go:build !guest

package rdmacm

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// The host has no RDMA: Open fails with the errno rping reports
// ("failed to create RDMA CM event channel: No such file or directory").
func TestOpenWithoutRDMA(t *testing.T) {
	if _, err := os.Stat(devPath); err == nil {
		t.Fatalf("%s exists: this test needs a host without RDMA (guest tests carry the guest tag)", devPath)
	}
	ch, err := Open()
	if ch != nil || !errors.Is(err, unix.ENOENT) {
		t.Fatalf("Open() = %v, %v; want ENOENT", ch, err)
	}
}

func TestCheckABI(t *testing.T) {
	dir := t.TempDir()
	saved := abiFiles
	defer func() { abiFiles = saved }()
	write := func(name, v string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		files []string
		ok    bool
	}{
		{[]string{write("v4", "4\n")}, true},
		{[]string{write("v3", "3\n")}, false},
		{[]string{write("junk", "x\n")}, false},
		{[]string{filepath.Join(dir, "missing"), write("old4", "4\n")}, true}, // older kernels' path
		{[]string{filepath.Join(dir, "missing")}, true},                       // nothing says: proceed
	} {
		abiFiles = tc.files
		err := checkABI()
		if tc.ok && err != nil || !tc.ok && !errors.Is(err, unix.EPERM) {
			t.Errorf("%v: got %v, want ok=%v (EPERM otherwise)", tc.files, err, tc.ok)
		}
	}
}
