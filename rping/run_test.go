package rping

import (
	"bytes"
	"context"
	"fmt"
	"syscall"
	"testing"
)

func TestRunDeviceCheck(t *testing.T) {
	defer func(f func() (int, error)) { countDevices = f }(countDevices)
	for _, tc := range []struct {
		n      int
		err    error
		status int
		stderr string
	}{
		{0, nil, 19, "No RDMA devices were detected\n"},
		{0, fmt.Errorf("list uverbs devices: %w", syscall.EACCES), 13, "failed to create RDMA CM event channel: Permission denied\n"},
	} {
		countDevices = func() (int, error) { return tc.n, tc.err }
		var stderr bytes.Buffer
		cfg := DefaultConfig()
		cfg.Stdout, cfg.Stderr = &bytes.Buffer{}, &stderr
		if st := Run(context.Background(), cfg); st != tc.status || stderr.String() != tc.stderr {
			t.Errorf("devices %d err %v: exit %d stderr %q, want %d %q", tc.n, tc.err, st, stderr.String(), tc.status, tc.stderr)
		}
	}
}
