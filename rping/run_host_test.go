//go:build !guest

package rping

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/gorping/gorping/internal/hostenv"
	"github.com/gorping/gorping/internal/hostenv/hostenvtest"
	"github.com/gorping/gorping/uverbs"
)

func runHostServer(t *testing.T, env hostenv.Env) (int, string) {
	t.Helper()
	var stderr bytes.Buffer
	cfg := DefaultConfig()
	cfg.Server = true
	cfg.Stdout, cfg.Stderr, cfg.host = &bytes.Buffer{}, &stderr, uverbs.NewHost(env)
	return Run(context.Background(), cfg), stderr.String()
}

// A host without RDMA (passed in, whatever the machine has): rping's no-device line and
// status.
func TestRunNoDevices(t *testing.T) {
	t.Parallel()
	if st, stderr := runHostServer(t, hostenvtest.NoRDMA(t)); st != exitNoDevice || stderr != "No RDMA devices were detected\n" {
		t.Errorf("exit %d stderr %q, want %d and the no-device line", st, stderr, exitNoDevice)
	}
}

// A device in sysfs but no rdma_cm node: Run fails like rping's
// rdma_create_event_channel (perror text, the errno as status), then says which module
// is missing.
func TestRunNoRdmaCM(t *testing.T) {
	t.Parallel()
	env := hostenvtest.NoRDMA(t)
	hostenvtest.AddRxe(t, env, "rxe0", "uverbs0")
	st, stderr := runHostServer(t, env)
	want := "failed to create RDMA CM event channel: No such file or directory\n" +
		"gorping: " + filepath.Join(env.Dev, "rdma_cm") + " does not exist: load the rdma_ucm kernel module (modprobe rdma_ucm)\n"
	if st != 2 || stderr != want {
		t.Errorf("exit %d stderr %q, want 2 and %q", st, stderr, want)
	}
}
