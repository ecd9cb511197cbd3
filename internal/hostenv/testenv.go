//go:build gorping_hostenv

package hostenv

import "os"

// Built with the gorping_hostenv tag (host tests that run the gorping binary), the binary
// takes its environment from GORPING_HOSTENV_SYSFS and GORPING_HOSTENV_DEV, with RDMA
// netlink refused when either is set. Product builds never contain this file.
func fromBuild(e Env) Env {
	sys, dev := os.Getenv("GORPING_HOSTENV_SYSFS"), os.Getenv("GORPING_HOSTENV_DEV")
	if sys == "" && dev == "" {
		return e
	}
	if sys != "" {
		e.Sysfs = sys
	}
	if dev != "" {
		e.Dev = dev
	}
	e.Netlink = WithoutRDMANetlink(e.Netlink)
	return e
}
