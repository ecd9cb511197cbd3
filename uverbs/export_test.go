package uverbs

import "github.com/gorping/gorping/internal/hostenv"

// Internals the external (uverbs_test) guest tests compare against, on this machine.
var (
	SysfsDevicesForTest   = func() ([]Device, error) { return sysfsDevices(&providers, hostenv.Default()) }
	NetlinkDevicesForTest = func() ([]Device, error) { return netlinkDevices(hostenv.Default()) }
	SysfsGIDsForTest      = func(dev string, port, n int, ll LinkLayer) ([]GIDEntry, error) {
		return sysfsGIDs(hostenv.Default().Sysfs, dev, port, n, ll)
	}
)
