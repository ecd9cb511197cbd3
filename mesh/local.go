package mesh

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/gorping/gorping/internal/hostenv"
	"github.com/gorping/gorping/internal/sysattr"
	"github.com/gorping/gorping/mesh/agentdesc"
	"github.com/gorping/gorping/uverbs"
	"github.com/gorping/gorping/uverbs/diag"
)

// hostRails is where the agent reads its own rails: the RDMA devices and ports (the
// discovery `gorping devices` uses: RDMA netlink, else sysfs), each port's netdev, its
// addresses and its GID table. Host tests replace every part.
type hostRails struct {
	env hostenv.Env
	// addrs are a netdev's addresses with their prefix lengths (the default asks the
	// kernel over rtnetlink, through package net).
	addrs func(netdev string) ([]netip.Prefix, error)
	// mtu is a port's active MTU in bytes, 0 if unknown.
	mtu func(d uverbs.Device, port int) int
	// fixed, if set, gives the rails instead of all of the above (NewIn).
	fixed func() []agentdesc.Rail
}

func defaultHostRails() hostRails {
	return hostRails{env: hostenv.Default(), addrs: netdevAddrs, mtu: queryMTU}
}

// netdevAddrs are netdev's addresses with their prefix lengths, link-local ones left out
// (a peer cannot reach them without a zone).
func netdevAddrs(netdev string) ([]netip.Prefix, error) {
	ifi, err := net.InterfaceByName(netdev)
	if err != nil {
		return nil, err
	}
	as, err := ifi.Addrs()
	if err != nil {
		return nil, fmt.Errorf("%s: addresses: %w", netdev, err)
	}
	var out []netip.Prefix
	for _, a := range as {
		ipn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(ipn.IP)
		if !ok {
			continue
		}
		ones, _ := ipn.Mask.Size()
		ip = ip.Unmap()
		if ip.Is4() && ones > 32 {
			ones -= 96
		}
		if ip.IsLinkLocalUnicast() || ip.IsLoopback() {
			continue
		}
		out = append(out, netip.PrefixFrom(ip, ones))
	}
	return out, nil
}

// describe is this agent's description of itself: name, group, version, responder port
// and one rail per RDMA port. A port whose link layer this gorping does not know is
// left out (note says so); a rail is cut to the document's bounds.
func (h hostRails) describe(name, group, version string, port uint16) (agentdesc.Description, []string, error) {
	d := agentdesc.Description{Version: agentdesc.Version, Name: name, Group: group, GorpingVersion: version, ResponderPort: port}
	if h.fixed != nil {
		d.Rails = h.fixed()
		return d, nil, nil
	}
	host := uverbs.NewHost(h.env)
	devs, err := host.Devices()
	if err != nil {
		return d, nil, fmt.Errorf("RDMA devices: %w", err)
	}
	var notes []string
	for _, dev := range devs {
		ports, err := diag.ReadPorts(host, dev.Name, true)
		if err != nil {
			notes = append(notes, err.Error())
			continue
		}
		for _, p := range ports {
			r, note := h.rail(dev, p)
			if note != "" {
				notes = append(notes, note)
			}
			if r.Device == "" {
				continue
			}
			if len(d.Rails) == agentdesc.MaxRails {
				notes = append(notes, fmt.Sprintf("more than %d RDMA ports: %s port %d and later ones are left out", agentdesc.MaxRails, dev.Name, p.Port))
				break
			}
			d.Rails = append(d.Rails, r)
		}
	}
	return d, notes, nil
}

// rail is one port's rail, or a zero Rail and why it is left out.
func (h hostRails) rail(dev uverbs.Device, p diag.PortInfo) (agentdesc.Rail, string) {
	r := agentdesc.Rail{Device: dev.Name, Port: p.Port, Netdev: p.Netdev}
	switch p.LinkLayer {
	case uverbs.LinkLayerEthernet:
		r.LinkLayer = agentdesc.LinkEthernet
	case uverbs.LinkLayerInfiniBand:
		r.LinkLayer = agentdesc.LinkInfiniBand
	default:
		return agentdesc.Rail{}, fmt.Sprintf("%s port %d: link layer %s: left out of the description", dev.Name, p.Port, p.LinkLayer)
	}
	if p.Port < 1 || p.Port > 255 {
		return agentdesc.Rail{}, fmt.Sprintf("%s port %d: not a port number a description carries", dev.Name, p.Port)
	}
	var note string
	for _, g := range p.GIDs {
		if len(r.GIDs) == agentdesc.MaxGIDs {
			note = fmt.Sprintf("%s port %d: more than %d GIDs, the rest left out", dev.Name, p.Port, agentdesc.MaxGIDs)
			break
		}
		r.GIDs = append(r.GIDs, agentdesc.GID{Index: g.Index, GID: g.GID, Type: g.Type.String()})
	}
	if p.Netdev != "" && h.addrs != nil {
		as, err := h.addrs(p.Netdev)
		if err != nil {
			note = fmt.Sprintf("%s port %d: netdev %s: %v", dev.Name, p.Port, p.Netdev, err)
		}
		slices.SortFunc(as, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
		if len(as) > agentdesc.MaxAddresses {
			note = fmt.Sprintf("%s port %d: more than %d addresses on %s, the rest left out", dev.Name, p.Port, agentdesc.MaxAddresses, p.Netdev)
			as = as[:agentdesc.MaxAddresses]
		}
		r.Addresses = as
	}
	r.ActiveMTU = h.activeMTU(dev, p.Port)
	return r, note
}

// activeMTU reads ports/N/active_mtu where a kernel or a test tree has one, else asks the
// device (QUERY_PORT; the ib core's sysfs has no such attribute).
func (h hostRails) activeMTU(dev uverbs.Device, port int) int {
	pdir := filepath.Join(h.env.Sysfs, "class", "infiniband", dev.Name, "ports", strconv.Itoa(port))
	if s, err := sysattr.Read(filepath.Join(pdir, "active_mtu")); err == nil {
		n, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(s, " ", 2)[0])) // "1024" or "4096 (5)"
		if err != nil {
			n, _ = sysattr.SplitNumName(s)
		}
		if n >= 256 && n <= 4096 {
			return n
		}
		if b := uverbs.MTU(n).Bytes(); b > 0 { // the enum (1..5) rather than bytes
			return b
		}
	}
	if h.mtu != nil {
		return h.mtu(dev, port)
	}
	return 0
}

// queryMTU asks the device for a port's active MTU (only with a provider for its driver;
// a test tree has no device node).
func queryMTU(dev uverbs.Device, port int) int {
	if !dev.HasProvider() || port > 255 {
		return 0
	}
	if _, err := os.Stat(dev.Path); err != nil {
		return 0
	}
	ctx, err := uverbs.Open(dev)
	if err != nil {
		return 0
	}
	defer ctx.Close()
	pa, err := ctx.QueryPort(uint8(port))
	if err != nil {
		return 0
	}
	return pa.ActiveMTU.Bytes()
}

// localAddrs is the set of this host's interface addresses, for skipping itself.
func localAddrs() map[netip.Addr]bool {
	m := map[netip.Addr]bool{}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return m
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			m[p.Addr().Unmap()] = true
		}
	}
	return m
}
