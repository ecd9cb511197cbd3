//go:build !guest

package rdmacm

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gorping/gorping/internal/hostenv"
	"github.com/gorping/gorping/uverbs"
)

// On a host without RDMA (passed in, so the machine's own devices do not matter) Open
// fails with the errno rping reports ("failed to create RDMA CM event channel: No such
// file or directory"), as a PathError naming the host's node.
func TestOpenWithoutRDMA(t *testing.T) {
	t.Parallel()
	env := hostenv.NoRDMA(t.TempDir())
	ch, err := Open(WithHost(uverbs.NewHost(env)))
	var pe *fs.PathError
	if ch != nil || !errors.Is(err, unix.ENOENT) || !errors.As(err, &pe) || pe.Path != filepath.Join(env.Dev, "rdma_cm") {
		t.Fatalf("Open() = %v, %v; want ENOENT on %s", ch, err, filepath.Join(env.Dev, "rdma_cm"))
	}
}

// A node that is not a character device is refused (ENODEV), not written to.
func TestOpenNotACharDevice(t *testing.T) {
	t.Parallel()
	env := hostenv.NoRDMA(t.TempDir())
	if err := os.MkdirAll(env.Dev, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(env.Dev, "rdma_cm"), nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if ch, err := Open(WithHost(uverbs.NewHost(env))); ch != nil || !errors.Is(err, unix.ENODEV) {
		t.Fatalf("Open() = %v, %v; want ENODEV", ch, err)
	}
}

func TestCheckABI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := hostenv.NoRDMA(dir)
	write := func(name, v string) string {
		if err := os.MkdirAll(env.Sysfs, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(env.Sysfs, name), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
		return name
	}
	for _, tc := range []struct {
		files []string
		ok    bool
	}{
		{[]string{write("v4", "4\n")}, true},
		{[]string{write("v3", "3\n")}, false},
		{[]string{write("junk", "x\n")}, false},
		{[]string{"missing", write("old4", "4\n")}, true}, // older kernels' path
		{[]string{"missing"}, true},                       // nothing says: proceed
	} {
		err := checkABI(env, tc.files)
		if tc.ok && err != nil || !tc.ok && !errors.Is(err, unix.EPERM) {
			t.Errorf("%v: got %v, want ok=%v (EPERM otherwise)", tc.files, err, tc.ok)
		}
	}
}

// The real paths are where librdmacm looks.
func TestDefaultPaths(t *testing.T) {
	t.Parallel()
	env := hostenv.Default()
	if p := env.DevPath(devName); p != "/dev/infiniband/rdma_cm" {
		t.Errorf("rdma_cm node %q", p)
	}
	if p := env.Sys(abiFiles()[0]); p != "/sys/class/misc/rdma_cm/abi_version" {
		t.Errorf("ABI file %q", p)
	}
}
