// Package hostenv says where gorping meets the kernel's RDMA interfaces on a host: the
// sysfs mount, the directory of the RDMA character devices and the netlink sockets. An Env
// is a plain value that is handed to whoever looks (uverbs.Host, rdmacm.WithHost): the
// product uses Default, host tests build the host they describe (NoRDMA, a fake device)
// and pass it in, so they see it whatever the machine has and can run in parallel.
package hostenv

import (
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/gorping/gorping/internal/netlink"
)

// Env is one host environment.
type Env struct {
	Sysfs   string         // where sysfs is mounted: "/sys"
	Dev     string         // where the RDMA character devices are: "/dev/infiniband"
	Netlink netlink.Dialer // opens netlink sockets
}

// Default is the machine's own environment (in a binary built with the gorping_hostenv
// tag, the one its GORPING_HOSTENV_* variables describe).
func Default() Env {
	return fromBuild(Env{Sysfs: "/sys", Dev: "/dev/infiniband", Netlink: netlink.Dial})
}

// Sys is the path of sysfs file or directory rel ("class/infiniband") in e.
func (e Env) Sys(rel ...string) string {
	return filepath.Join(append([]string{e.Sysfs}, rel...)...)
}

// DevPath is the path of RDMA character device name ("rdma_cm", "uverbs0") in e.
func (e Env) DevPath(name string) string { return filepath.Join(e.Dev, name) }

// NoRDMA is a host without RDMA below dir: empty sysfs and device directories, and RDMA
// netlink refused as by a kernel without it (EPROTONOSUPPORT). Other netlink protocols
// (rtnetlink) reach the real kernel.
func NoRDMA(dir string) Env {
	return Env{Sysfs: filepath.Join(dir, "sys"), Dev: filepath.Join(dir, "dev"), Netlink: WithoutRDMANetlink(netlink.Dial)}
}

// WithoutRDMANetlink wraps d so that NETLINK_RDMA sockets fail with EPROTONOSUPPORT.
func WithoutRDMANetlink(d netlink.Dialer) netlink.Dialer {
	return func(protocol int) (netlink.Conn, error) {
		if protocol == unix.NETLINK_RDMA {
			return nil, fmt.Errorf("netlink socket: %w", unix.EPROTONOSUPPORT)
		}
		return d(protocol)
	}
}
