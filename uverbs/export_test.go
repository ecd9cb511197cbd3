package uverbs

// Internals the external (uverbs_test) guest tests compare against.
var (
	SysfsDevicesForTest   = func() ([]Device, error) { return sysfsDevices(sysfsRoot) }
	NetlinkDevicesForTest = netlinkDevices
	SysfsGIDsForTest      = func(dev string, port, n int, ll LinkLayer) ([]GIDEntry, error) {
		return sysfsGIDs(sysfsRoot, dev, port, n, ll)
	}
)
