package uverbs

import "github.com/gorping/gorping/internal/hostenv"

// Internals the external (uverbs_test) guest tests compare against.
var (
	SysfsDevicesForTest   = func() ([]Device, error) { return sysfsDevices(hostenv.Get().Sysfs) }
	NetlinkDevicesForTest = netlinkDevices
	SysfsGIDsForTest      = func(dev string, port, n int, ll LinkLayer) ([]GIDEntry, error) {
		return sysfsGIDs(hostenv.Get().Sysfs, dev, port, n, ll)
	}
)
