package rping

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// exitNoDevice is rping's exit status when no RDMA device exists: ENODEV, the
// errno of rdma_create_event_channel, which rping returns from main.
const exitNoDevice = 19

// exitNotWired is what the stub Run returns once devices exist (EOPNOTSUPP).
const exitNotWired = 95

// countDevices reports how many uverbs devices the host has. It is a variable so
// tests can pretend either way.
//
// TODO(lead): switch to len(uverbs.Devices()) once uverbs builds; this reads
// the same sysfs class libibverbs scans.
var countDevices = sysfsVerbsDevices

// sysfsVerbsDevices counts /sys/class/infiniband_verbs/uverbs*. A missing class
// directory (no ib_uverbs module) means no devices, as for libibverbs.
func sysfsVerbsDevices() (int, error) {
	ents, err := os.ReadDir("/sys/class/infiniband_verbs")
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("list uverbs devices: %w", err)
	}
	n := 0
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "uverbs") {
			n++
		}
	}
	return n, nil
}

// Run executes one rping invocation described by cfg and returns the process
// exit status (0..255). Like rping, the first thing after option parsing is
// opening the rdma_cm event channel, which fails with "No RDMA devices were
// detected" (exit 19) on a host without RDMA devices.
//
// STUB: the rdma_cm/uverbs glue that implements conn and drives
// runPingClient/runPingServer is not wired yet; with devices present Run says
// so and returns 95 (EOPNOTSUPP).
func Run(ctx context.Context, cfg Config) int {
	n, err := countDevices()
	if err != nil {
		perror(cfg.Stderr, "failed to create RDMA CM event channel", err)
		if e := errnoOf(err); e > 0 {
			return e & 0xff
		}
		return exitFailure
	}
	if n == 0 {
		fmt.Fprintln(cfg.Stderr, "No RDMA devices were detected")
		return exitNoDevice
	}
	if ctx.Err() != nil {
		return exitInterrupted
	}
	fmt.Fprintln(cfg.Stderr, "gorping: the RDMA data path is not wired up yet")
	return exitNotWired
}
