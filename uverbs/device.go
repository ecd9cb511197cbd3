package uverbs

import (
	"errors"
	"fmt"
	"github.com/gorping/gorping/uverbs/driver"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/gorping/gorping/internal/hostenv"
	"github.com/gorping/gorping/internal/sysattr"
)

// Device is an RDMA device that exposes a uverbs character device.
type Device struct {
	Name     string // ibdev name, e.g. "rxe0"
	Index    int    // kernel ib_device index (RDMA netlink), -1 if unknown
	Uverbs   string // "uverbs0"
	Path     string // "/dev/infiniband/uverbs0"
	NodeGUID uint64 // sysfs node_guid as a number ("5054:00ff:fe96:b707" = 0x505400fffe96b707)
	Driver   string // "rxe", "siw", "mlx5", ... ("" if unknown)
	DriverID uint32 // enum rdma_driver_id (rxe 14, siw 18, mlx5 1), 0 if unknown
	ABI      int    // driver uverbs ABI version (sysfs abi_version)

	sysfs string // sysfs of the Host the device was found on; "": this machine's
}

// Devices lists the RDMA devices of h with a uverbs character device, ordered by uverbs
// name. It asks RDMA netlink first (which also yields the driver id) and falls back to
// sysfs. A machine without RDMA support yields an empty list and no error.
func (h Host) Devices() ([]Device, error) {
	env := h.Env()
	devs, nlErr := netlinkDevices(env)
	if nlErr == nil {
		// Netlink knows no driver name for ids we have no table entry for; sysfs may.
		for i := range devs {
			if devs[i].Driver == "" {
				drv, id := sysfsDriver(h.registry(), env.Sysfs, devs[i].Name)
				devs[i].Driver = drv
				if devs[i].DriverID == 0 {
					devs[i].DriverID = id
				}
			}
		}
		sortDevices(devs)
		return devs, nil
	}
	devs, err := sysfsDevices(h.registry(), env)
	if err != nil {
		return nil, fmt.Errorf("uverbs: device discovery: netlink: %v; sysfs: %w", nlErr, err)
	}
	return devs, nil
}

func sortDevices(devs []Device) {
	sort.Slice(devs, func(i, j int) bool {
		a, b := uverbsNum(devs[i].Uverbs), uverbsNum(devs[j].Uverbs)
		if a != b {
			return a < b
		}
		return devs[i].Uverbs < devs[j].Uverbs
	})
}

func uverbsNum(s string) int {
	n, err := strconv.Atoi(strings.TrimPrefix(s, "uverbs"))
	if err != nil {
		return 1 << 30
	}
	return n
}

// sysfsDevices scans <sysfs>/class/infiniband_verbs/uverbs*.
func sysfsDevices(reg *registry, env hostenv.Env) ([]Device, error) {
	root := env.Sysfs
	dir := filepath.Join(root, "class", "infiniband_verbs")
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return []Device{}, nil
		}
		return nil, err
	}
	devs := []Device{}
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, "uverbs") {
			continue // e.g. the global abi_version file
		}
		ibdev, err := sysattr.Read(filepath.Join(dir, name, "ibdev"))
		if err != nil || ibdev == "" {
			continue // device going away; skip it rather than fail the whole scan
		}
		d := Device{Name: ibdev, Index: -1, Uverbs: name, Path: env.DevPath(name), sysfs: root}
		if s, err := sysattr.Read(filepath.Join(dir, name, "abi_version")); err == nil {
			d.ABI, _ = strconv.Atoi(s)
		}
		if s, err := sysattr.Read(filepath.Join(root, "class", "infiniband", ibdev, "node_guid")); err == nil {
			d.NodeGUID, _ = sysattr.ParseGUID(s)
		}
		d.Driver, d.DriverID = sysfsDriver(reg, root, ibdev)
		devs = append(devs, d)
	}
	sortDevices(devs)
	return devs, nil
}

// sysfsDriver infers the driver of an ib device from sysfs, by reg's providers'
// driver.SysfsMatch: the bus device's driver (mlx5_core), else a software device's `parent`
// attribute (rxe), else a software device's node type (siw). A bus driver no provider
// claims is reported by its own name, with no id.
func sysfsDriver(reg *registry, root, ibdev string) (string, uint32) {
	base := filepath.Join(root, "class", "infiniband", ibdev)
	if link, err := os.Readlink(filepath.Join(base, "device", "driver")); err == nil {
		bus := filepath.Base(link)
		if info, ok := reg.sysfs(bus, false, TransportUnknown); ok {
			return info.Driver, info.DriverID
		}
		return bus, 0
	}
	if _, err := os.Stat(filepath.Join(base, "parent")); err == nil {
		if info, ok := reg.sysfs("", true, TransportUnknown); ok {
			return info.Driver, info.DriverID
		}
		return "", 0
	}
	if _, err := os.Lstat(filepath.Join(base, "device")); err == nil {
		return "", 0 // a bus device without a driver bound
	}
	if info, ok := reg.sysfs("", false, nodeTransport(base)); ok {
		return info.Driver, info.DriverID
	}
	return "", 0
}

// Netdevs returns the network interfaces d sits on, as sysfs shows them without opening d
// (so also for drivers gorping has no provider for): a soft device's parent (rxe), a NIC's
// own netdevs, and the netdevs in its ports' GID tables (siw).
func (d Device) Netdevs() []string {
	base := filepath.Join(d.sysfsRoot(), "class", "infiniband", d.Name)
	var nds []string
	add := func(nd string) {
		if nd != "" && !slices.Contains(nds, nd) {
			nds = append(nds, nd)
		}
	}
	if s, err := sysattr.Read(filepath.Join(base, "parent")); err == nil {
		add(s)
	}
	if ents, err := os.ReadDir(filepath.Join(base, "device", "net")); err == nil {
		for _, e := range ents {
			add(e.Name())
		}
	}
	ndevs, _ := filepath.Glob(filepath.Join(base, "ports", "*", "gid_attrs", "ndevs", "*"))
	for _, f := range ndevs {
		if s, err := sysattr.Read(f); err == nil { // unused GID entries fail to read (EINVAL)
			add(s)
		}
	}
	return nds
}

// LinkLayers returns the link layer of each of d's ports, from sysfs.
func (d Device) LinkLayers() []LinkLayer {
	files, _ := filepath.Glob(filepath.Join(d.sysfsRoot(), "class", "infiniband", d.Name, "ports", "*", "link_layer"))
	var lls []LinkLayer
	for _, f := range files {
		s, err := sysattr.Read(f)
		if err != nil {
			continue
		}
		switch s {
		case "InfiniBand":
			lls = append(lls, LinkLayerInfiniBand)
		case "Ethernet":
			lls = append(lls, LinkLayerEthernet)
		default:
			lls = append(lls, LinkLayerUnspecified)
		}
	}
	return lls
}

// driverDevice is what d's provider learns of d (driver.Provider.NewContext).
func (d Device) driverDevice() driver.Device {
	return driver.Device{Name: d.Name, Driver: d.Driver, DriverID: d.DriverID, ABI: d.ABI, Transport: d.Transport()}
}
