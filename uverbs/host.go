package uverbs

import "github.com/gorping/gorping/internal/hostenv"

// Host is the machine uverbs looks at: where its sysfs and its uverbs nodes are and how
// RDMA netlink is reached (internal/hostenv). The zero Host is this machine, the default
// at the edge (package main); tests build others with NewHost and pass them in, so
// nothing process-wide changes. Devices found on a Host remember its sysfs
// (Device.Netdevs, LinkLayers, Transport and the GID table's sysfs fallback read there);
// uverbs/diag reads a Host's ports, counters and netdevs.
type Host struct {
	env *hostenv.Env
	reg *registry // whose driver.SysfsMatch recognizes drivers; nil: the registered providers
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

// sysfsRoot is where d's sysfs is: the host it was found on, else this machine's.
func (d Device) sysfsRoot() string {
	if d.sysfs != "" {
		return d.sysfs
	}
	return hostenv.Default().Sysfs
}
