// Package hostenv says where gorping meets the kernel's RDMA interfaces on this host: the
// sysfs mount, the directory of the RDMA character devices and the netlink sockets. The
// product reads Get; host tests install the environment they describe (no RDMA, a fake
// device) with Set, so they see it whatever the machine has.
package hostenv

import (
	"fmt"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/gorping/gorping/internal/netlink"
)

// Env is one host environment.
type Env struct {
	Sysfs   string         // where sysfs is mounted: "/sys"
	Dev     string         // where the RDMA character devices are: "/dev/infiniband"
	Netlink netlink.Dialer // opens netlink sockets
}

// Default is the machine's own environment.
func Default() Env {
	return Env{Sysfs: "/sys", Dev: "/dev/infiniband", Netlink: netlink.Dial}
}

var (
	mu  sync.RWMutex
	cur = Default()
)

// Get returns the current environment.
func Get() Env {
	mu.RLock()
	defer mu.RUnlock()
	return cur
}

// Set installs e (tests) and returns a function that restores the previous environment.
func Set(e Env) (restore func()) {
	mu.Lock()
	defer mu.Unlock()
	prev := cur
	cur = e
	return func() {
		mu.Lock()
		cur = prev
		mu.Unlock()
	}
}

// Sys is the path of sysfs file or directory rel ("class/infiniband") in the current
// environment.
func Sys(rel ...string) string {
	return filepath.Join(append([]string{Get().Sysfs}, rel...)...)
}

// DevPath is the path of RDMA character device name ("rdma_cm", "uverbs0").
func DevPath(name string) string { return filepath.Join(Get().Dev, name) }

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
