package rping

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/gorping/gorping/internal/hostenv/hostenvtest"
	"github.com/gorping/gorping/uverbs"
)

// rping's first step is the device count: none is rping's line and ENODEV's status, a
// discovery that fails is the event channel's perror with the errno as status.
func TestRunDeviceCheck(t *testing.T) {
	t.Parallel()
	none := hostenvtest.NoRDMA(t)
	broken := hostenvtest.NoRDMA(t)
	// class/infiniband_verbs is a file: the sysfs scan fails with ENOTDIR.
	if err := os.MkdirAll(filepath.Join(broken.Sysfs, "class"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(broken.Sysfs, "class", "infiniband_verbs"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host   uverbs.Host
		status int
		stderr string
	}{
		{uverbs.NewHost(none), 19, "No RDMA devices were detected\n"},
		{uverbs.NewHost(broken), 20, "failed to create RDMA CM event channel: Not a directory\n"},
	} {
		var stderr bytes.Buffer
		cfg := DefaultConfig()
		cfg.Stdout, cfg.Stderr, cfg.host = &bytes.Buffer{}, &stderr, tc.host
		if st := Run(context.Background(), cfg); st != tc.status || stderr.String() != tc.stderr {
			t.Errorf("%s: exit %d stderr %q, want %d %q", tc.host.Env().Sysfs, st, stderr.String(), tc.status, tc.stderr)
		}
	}
}
