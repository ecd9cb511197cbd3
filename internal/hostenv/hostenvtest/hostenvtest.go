// Package hostenvtest builds host environments for tests (imported by tests only): a host
// without RDMA, and the sysfs of a fake rxe device in it. Nothing here is installed
// anywhere: a test passes the Env to what it tests (uverbs.NewHost, rdmacm.WithHost, or a
// gorping binary through BinaryEnv).
package hostenvtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gorping/gorping/internal/hostenv"
)

// NoRDMA is a host without RDMA in a directory of the test's own.
func NoRDMA(t testing.TB) hostenv.Env {
	t.Helper()
	return hostenv.NoRDMA(t.TempDir())
}

// AddRxe writes the sysfs of an rxe device ibdev with uverbs node uverbs (no /dev node) on
// netdev d0 into e: what discovery's sysfs fallback reads.
func AddRxe(t testing.TB, e hostenv.Env, ibdev, uverbs string) {
	t.Helper()
	for rel, content := range map[string]string{
		"class/infiniband_verbs/" + uverbs + "/ibdev":       ibdev + "\n",
		"class/infiniband_verbs/" + uverbs + "/abi_version": "2\n",
		"class/infiniband/" + ibdev + "/node_guid":          "5054:00ff:fe96:b707\n",
		"class/infiniband/" + ibdev + "/parent":             "d0\n",
	} {
		p := filepath.Join(e.Sysfs, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// BinaryEnv is the environment (KEY=value) that gives a gorping binary built with the
// gorping_hostenv tag the host e.
func BinaryEnv(e hostenv.Env) []string {
	return []string{"GORPING_HOSTENV_SYSFS=" + e.Sysfs, "GORPING_HOSTENV_DEV=" + e.Dev}
}

// WriteTree writes files below root: path (relative, slash-separated) → content; a
// content "->target" makes a symlink to target (sysfs class entries are links).
func WriteTree(t testing.TB, root string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, ok := strings.CutPrefix(c, "->"); ok {
			if err := os.Symlink(target, full); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
