package uverbs

import (
	"errors"
	"fmt"
	"github.com/gorping/gorping/uverbs/driver"
	"slices"
	"sort"
	"strings"
	"sync"
)

// LinkDownAdvice is what d's provider advises after a link went down on d's port on
// netdev (driver.LinkDownAdvisor), "" if it has no advice or d has no provider.
func (d Device) LinkDownAdvice(netdev string) string {
	if a, ok := providers.find(d).(driver.LinkDownAdvisor); ok {
		return a.LinkDownAdvice(d.driverDevice(), netdev)
	}
	return ""
}

// HasProvider reports whether a registered provider (one gorping ships) handles d.
func (d Device) HasProvider() bool { return providers.find(d) != nil }

// SupportedDrivers lists the drivers of the registered providers, sorted.
func SupportedDrivers() []string { return providers.drivers() }

// Register makes a provider available to Open. It panics on a duplicate driver id or
// name, or on an Info that does not hold together (checkInfo): both are programming errors
// found at the first start. Providers call it from init; nothing else does.
func Register(p driver.Provider) {
	if err := providers.add(p); err != nil {
		panic(err)
	}
}

// providers are the registered providers.
var providers registry

// registry is a set of providers. The process has one (Register); tests build their own
// and hand it to a Host.
type registry struct {
	mu   sync.RWMutex
	list []registered
}

// registered is a provider with the Info it registered with.
type registered struct {
	p    driver.Provider
	info driver.Info
}

func (r *registry) add(p driver.Provider) error {
	info := p.Info()
	if err := checkInfo(info); err != nil {
		return fmt.Errorf("uverbs: provider %q: %w", info.Driver, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, q := range r.list {
		if q.info.DriverID == info.DriverID || q.info.Driver == info.Driver {
			return fmt.Errorf("uverbs: provider %q registered twice", info.Driver)
		}
	}
	r.list = append(r.list, registered{p, info})
	return nil
}

func checkInfo(info driver.Info) error {
	switch {
	case info.Driver == "" || info.DriverID == 0:
		return errors.New("no driver name or id")
	case info.ABIMin > info.ABIMax:
		return fmt.Errorf("ABI range %d..%d is empty", info.ABIMin, info.ABIMax)
	case info.Transport != TransportIB && info.Transport != TransportIWARP:
		return fmt.Errorf("transport %v", info.Transport)
	}
	for _, c := range info.RawCommands {
		if c >= 64 || rawAllowed&(1<<c) == 0 {
			return fmt.Errorf("%s cannot be a raw command", cmdName(c))
		}
	}
	return nil
}

// find matches by driver id first, then by driver name (sysfs discovery without
// netlink yields only a name).
func (r *registry) find(dev Device) driver.Provider {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if dev.DriverID != 0 {
		for _, q := range r.list {
			if q.info.DriverID == dev.DriverID {
				return q.p
			}
		}
	}
	if dev.Driver != "" {
		for _, q := range r.list {
			if q.info.Driver == dev.Driver {
				return q.p
			}
		}
	}
	return nil
}

// lookup is the provider for dev: p if not nil (WithProvider), else the registered one.
// It fails with *UnsupportedDriverError without one, and when dev's driver ABI version
// is not the provider's.
func (r *registry) lookup(dev Device, p driver.Provider) (driver.Provider, error) {
	if p == nil {
		p = r.find(dev)
	}
	if p == nil {
		return nil, &UnsupportedDriverError{Device: dev.Name, Driver: dev.Driver, DriverID: dev.DriverID, Supported: r.drivers()}
	}
	if info := p.Info(); dev.ABI < info.ABIMin || dev.ABI > info.ABIMax {
		return nil, fmt.Errorf("uverbs: device %s: driver ABI version %d is not supported by the %s provider (supported %d..%d)", dev.Name, dev.ABI, info.Driver, info.ABIMin, info.ABIMax)
	}
	return p, nil
}

// sysfs is the provider whose driver.SysfsMatch fits a device sysfs shows with bus driver bus
// ("" for a software device), a `parent` attribute or not, and transport t.
func (r *registry) sysfs(bus string, parent bool, t Transport) (driver.Info, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, q := range r.list {
		m := q.info.Sysfs
		switch {
		case bus != "" && slices.Contains(m.BusDrivers, bus),
			bus == "" && parent && m.SoftParent,
			bus == "" && !parent && m.SoftNode && t == q.info.Transport:
			return q.info, true
		}
	}
	return driver.Info{}, false
}

// drivers are the registered drivers' names, sorted.
func (r *registry) drivers() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var names []string
	for _, q := range r.list {
		names = append(names, q.info.Driver)
	}
	sort.Strings(names)
	return names
}

// UnsupportedDriverError is returned by Open for a device no registered provider handles.
type UnsupportedDriverError struct {
	Device    string
	Driver    string // "" if unknown
	DriverID  uint32
	Supported []string
}

func (e *UnsupportedDriverError) Error() string {
	drv := e.Driver
	if drv == "" {
		drv = "unknown"
	}
	if e.DriverID != 0 {
		drv = fmt.Sprintf("%s (driver id %d)", drv, e.DriverID)
	}
	sup := "none"
	if len(e.Supported) > 0 {
		sup = strings.Join(e.Supported, ", ")
	}
	return fmt.Sprintf("uverbs: device %s uses driver %s, which has no gorping provider (supported: %s)", e.Device, drv, sup)
}
