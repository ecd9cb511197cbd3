//go:build !guest

package rping

import (
	"bytes"
	"context"
	"os"
	"testing"
)

// With a device reported but no /dev/infiniband/rdma_cm (this host), Run fails
// like rping's rdma_create_event_channel: perror text and the errno as status,
// then says which module is missing.
func TestRunNoRdmaCM(t *testing.T) {
	if _, err := os.Stat("/dev/infiniband/rdma_cm"); err == nil {
		t.Fatal("this host has /dev/infiniband/rdma_cm; the !guest tests assume none")
	}
	defer func(f func() (int, error)) { countDevices = f }(countDevices)
	countDevices = func() (int, error) { return 1, nil }
	var stderr bytes.Buffer
	cfg := DefaultConfig()
	cfg.Server = true
	cfg.Stdout, cfg.Stderr = &bytes.Buffer{}, &stderr
	st := Run(context.Background(), cfg)
	want := "failed to create RDMA CM event channel: No such file or directory\n" +
		"gorping: /dev/infiniband/rdma_cm does not exist: load the rdma_ucm kernel module (modprobe rdma_ucm)\n"
	if st != 2 || stderr.String() != want {
		t.Errorf("exit %d stderr %q, want 2 and %q", st, stderr.String(), want)
	}
}
