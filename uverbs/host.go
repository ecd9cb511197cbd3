package uverbs

import "github.com/gorping/gorping/internal/hostenv"

// Host is the machine uverbs looks at: where its sysfs and its uverbs nodes are and how
// RDMA netlink is reached (internal/hostenv). The zero Host is this machine; tests build
// others with NewHost and pass them in, so nothing process-wide changes. Devices found on a
// Host remember its sysfs (Device.Netdevs, LinkLayers, Transport and the GID table's sysfs
// fallback read there).
type Host struct {
	env *hostenv.Env
	reg *registry // whose SysfsMatch recognizes drivers; nil: the registered providers
}

// NewHost is the host e describes.
func NewHost(e hostenv.Env) Host { return Host{env: &e} }

func (h Host) registry() *registry {
	if h.reg == nil {
		return &providers
	}
	return h.reg
}

// Env is where h looks.
func (h Host) Env() hostenv.Env {
	if h.env == nil {
		return hostenv.Default()
	}
	return *h.env
}

// Devices lists the RDMA devices of this machine (Host.Devices).
func Devices() ([]Device, error) { return Host{}.Devices() }

// ReadDeviceInfo reads the device-wide sysfs attributes of ibdev on this machine.
func ReadDeviceInfo(ibdev string) DeviceInfo { return Host{}.ReadDeviceInfo(ibdev) }

// ReadPorts reads every port of ibdev from this machine's sysfs (Host.ReadPorts).
func ReadPorts(ibdev string, gids bool) ([]PortInfo, error) { return Host{}.ReadPorts(ibdev, gids) }

// NetdevMTU reads a netdev's MTU from this machine's sysfs (Host.NetdevMTU).
func NetdevMTU(netdev string) (int, error) { return Host{}.NetdevMTU(netdev) }

// ReadCounters reads the counters of ibdev's port from this machine's sysfs
// (Host.ReadCounters).
func ReadCounters(ibdev string, port int) (CounterSnapshot, error) {
	return Host{}.ReadCounters(ibdev, port)
}

// ReadDeviceInfo reads the device-wide sysfs attributes of ibdev. Missing attributes are
// left empty.
func (h Host) ReadDeviceInfo(ibdev string) DeviceInfo { return readDeviceInfo(h.Env().Sysfs, ibdev) }

// ReadPorts reads every port of ibdev from sysfs, in port order; with gids it also reads
// the valid GID table entries.
func (h Host) ReadPorts(ibdev string, gids bool) ([]PortInfo, error) {
	return readPorts(h.Env().Sysfs, ibdev, gids)
}

// NetdevMTU reads /sys/class/net/<netdev>/mtu.
func (h Host) NetdevMTU(netdev string) (int, error) { return netdevMTU(h.Env().Sysfs, netdev) }

// ReadCounters reads every numeric file of ibdev's port's counters/ and hw_counters/.
func (h Host) ReadCounters(ibdev string, port int) (CounterSnapshot, error) {
	return readCounters(h.Env().Sysfs, ibdev, port)
}

// sysfsRoot is where d's sysfs is: the host it was found on, else this machine's.
func (d Device) sysfsRoot() string {
	if d.sysfs != "" {
		return d.sysfs
	}
	return hostenv.Default().Sysfs
}
