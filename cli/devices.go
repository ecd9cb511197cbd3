package cli

// `gorping devices`: the RDMA devices of this machine, like ibv_devinfo and `rdma link`.
// (subcommand.go has the rule that keeps `rping devices -s` a server.)

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/gorping/gorping/uverbs"
	"github.com/gorping/gorping/uverbs/diag"
)

// exitNoDevice is rping's status when it finds no RDMA device (ENODEV).
const exitNoDevice = 19

// runDevices runs `gorping devices`.
func runDevices(verbose, asJSON bool, env Env) int {
	stdout, stderr := env.Stdout, env.Stderr
	doc, err := collectDevices(verbose)
	if err != nil {
		fmt.Fprintf(stderr, "gorping devices: %v\n", err)
		return 1
	}
	if asJSON {
		b, err := json.MarshalIndent(doc, "", "  ")
		if err != nil {
			fmt.Fprintf(stderr, "gorping devices: %v\n", err)
			return 1
		}
		stdout.Write(append(b, '\n'))
	} else {
		writeDevices(stdout, doc, verbose)
	}
	if len(doc.Devices) == 0 {
		fmt.Fprintln(stderr, "No RDMA devices were detected")
		fmt.Fprintln(stderr, noDevicesHint)
		return exitNoDevice
	}
	return 0
}

// devicesDoc is the --json document; gorping(1) (docs/gorping.1.md) documents the schema.
type devicesDoc struct {
	Devices []deviceDoc `json:"devices"`
}

type deviceDoc struct {
	Name         string    `json:"name"`
	Index        int       `json:"index"` // kernel ib_device index, -1 if unknown
	Driver       string    `json:"driver"`
	DriverID     uint32    `json:"driver_id"`
	Provider     bool      `json:"provider"` // gorping has a provider for the driver
	Uverbs       string    `json:"uverbs"`
	Path         string    `json:"path"`
	ABI          int       `json:"abi"`
	NodeGUID     string    `json:"node_guid"`
	NodeType     string    `json:"node_type,omitempty"`      // -v
	FWVersion    string    `json:"fw_ver,omitempty"`         // -v
	SysImageGUID string    `json:"sys_image_guid,omitempty"` // -v
	Ports        []portDoc `json:"ports"`
	Error        string    `json:"error,omitempty"` // ports could not be read
}

type portDoc struct {
	Port       int     `json:"port"`
	State      string  `json:"state"`
	PhysState  string  `json:"physical_state"`
	LinkLayer  string  `json:"link_layer"`
	ActiveMTU  int     `json:"active_mtu,omitempty"` // bytes; absent when unknown
	MaxMTU     int     `json:"max_mtu,omitempty"`
	MTUError   string  `json:"mtu_error,omitempty"` // why the MTUs are unknown
	Rate       string  `json:"rate,omitempty"`
	LID        *uint16 `json:"lid,omitempty"`    // InfiniBand, -v
	SMLID      *uint16 `json:"sm_lid,omitempty"` // InfiniBand, -v
	Netdev     string  `json:"netdev,omitempty"`
	NetdevMTU  int     `json:"netdev_mtu,omitempty"`
	MTUWarning string  `json:"mtu_warning,omitempty"`
	// The port's link-down count (hw_counters or counters link_downed) and its
	// connection manager's message totals, with the driver's advice after a link
	// flap (uverbs/driver.LinkDownAdvisor: rxe's QP1); absent when the port has none.
	LinkDowned  *uint64  `json:"link_downed,omitempty"`
	CMSent      *uint64  `json:"cm_sent,omitempty"`
	CMReceived  *uint64  `json:"cm_received,omitempty"`
	LinkWarning string   `json:"link_warning,omitempty"`
	GIDs        []gidDoc `json:"gids,omitempty"` // -v
}

type gidDoc struct {
	Index  int    `json:"index"`
	GID    string `json:"gid"`
	Type   string `json:"type"` // "IB", "RoCE v1", "RoCE v2"
	Netdev string `json:"netdev,omitempty"`
}

// collectDevices gathers everything from RDMA netlink (the device list, via
// uverbs.Devices) and sysfs. The active MTU is only in QUERY_PORT, so for a device gorping
// has a provider for it opens a uverbs context for the query; otherwise the MTU is left
// unknown with the reason.
func collectDevices(verbose bool) (devicesDoc, error) {
	h := uverbs.Host{} // this machine (a test binary's from GORPING_HOSTENV_*)
	devs, err := h.Devices()
	if err != nil {
		return devicesDoc{}, err
	}
	doc := devicesDoc{Devices: []deviceDoc{}}
	for _, d := range devs {
		dd := deviceDoc{
			Name: d.Name, Index: d.Index, Driver: d.Driver, DriverID: d.DriverID,
			Provider: d.HasProvider(), Uverbs: d.Uverbs, Path: d.Path, ABI: d.ABI,
			NodeGUID: formatGUID(d.NodeGUID), Ports: []portDoc{},
		}
		if verbose {
			di := diag.ReadDeviceInfo(h, d.Name)
			dd.NodeType, dd.FWVersion = di.NodeType, di.FWVersion
			if di.SysImageGUID != 0 {
				dd.SysImageGUID = formatGUID(di.SysImageGUID)
			}
		}
		ports, err := diag.ReadPorts(h, d.Name, verbose)
		if err != nil {
			dd.Error = err.Error()
			doc.Devices = append(doc.Devices, dd)
			continue
		}
		mtus := queryMTUs(d, ports)
		for _, p := range ports {
			pd := portDoc{
				Port: p.Port, State: p.State.String(), PhysState: p.PhysState.String(),
				LinkLayer: p.LinkLayer.String(), Rate: p.Rate, Netdev: p.Netdev,
			}
			var active uverbs.MTU
			if m, ok := mtus.ports[p.Port]; ok {
				active = m.ActiveMTU
				pd.ActiveMTU, pd.MaxMTU = m.ActiveMTU.Bytes(), m.MaxMTU.Bytes()
			} else {
				pd.MTUError = mtus.err
			}
			if p.Netdev != "" {
				if n, err := diag.NetdevMTU(h, p.Netdev); err == nil {
					pd.NetdevMTU = n
				}
			}
			pd.MTUWarning = diag.CheckMTU(diag.MTUFacts{
				ActiveMTU: active, LinkLayer: p.LinkLayer, Netdev: p.Netdev, NetdevMTU: pd.NetdevMTU,
			})
			linkCounters(h, d, p.Port, &pd)
			if verbose && p.LinkLayer == uverbs.LinkLayerInfiniBand {
				lid, smlid := p.LID, p.SMLID
				pd.LID, pd.SMLID = &lid, &smlid
			}
			if verbose {
				for _, g := range p.GIDs {
					pd.GIDs = append(pd.GIDs, gidDoc{Index: g.Index, GID: g.GID.String(), Type: g.Type.String(), Netdev: g.Netdev})
				}
			}
			dd.Ports = append(dd.Ports, pd)
		}
		doc.Devices = append(doc.Devices, dd)
	}
	return doc, nil
}

// linkCounters fills in the port's link-down count and CM message totals.
func linkCounters(h uverbs.Host, d uverbs.Device, port int, pd *portDoc) {
	s, err := diag.ReadCounters(h, d.Name, port)
	if err != nil {
		return
	}
	pdir := fmt.Sprintf("ports/%d/", port)
	for _, k := range []string{"hw_counters/link_downed", "counters/link_downed"} {
		if v, ok := s.Values[pdir+k]; ok {
			pd.LinkDowned = &v
		}
	}
	if _, ok := s.Values[pdir+"cm_tx_msgs/req"]; ok {
		tx, rx := s.Sum(pdir+"cm_tx_msgs"), s.Sum(pdir+"cm_rx_msgs")
		pd.CMSent, pd.CMReceived = &tx, &rx
	}
	if pd.LinkDowned != nil && *pd.LinkDowned > 0 {
		if advice := d.LinkDownAdvice(pd.Netdev); advice != "" {
			pd.LinkWarning = fmt.Sprintf("the link went down %d time(s) since %s was created: %s", *pd.LinkDowned, d.Name, advice)
		}
	}
}

type portMTUs struct {
	ports map[int]uverbs.PortAttr
	err   string // set when ports is incomplete
}

// queryMTUs opens a uverbs context on d (only if gorping has its provider) and queries
// every port.
func queryMTUs(d uverbs.Device, ports []diag.PortInfo) portMTUs {
	res := portMTUs{ports: map[int]uverbs.PortAttr{}}
	if !d.HasProvider() {
		res.err = "needs a uverbs context; gorping has no provider for driver " + orUnknown(d.Driver)
		return res
	}
	ctx, err := uverbs.Open(d)
	if err != nil {
		res.err = err.Error()
		return res
	}
	defer ctx.Close()
	for _, p := range ports {
		if p.Port > 255 {
			continue
		}
		pa, err := ctx.QueryPort(uint8(p.Port))
		if err != nil {
			res.err = err.Error()
			continue
		}
		res.ports[p.Port] = pa
	}
	return res
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// formatGUID prints a GUID as sysfs and ibv_devinfo do: "5054:00ff:fe96:b707".
func formatGUID(g uint64) string {
	return fmt.Sprintf("%04x:%04x:%04x:%04x", g>>48, g>>32&0xffff, g>>16&0xffff, g&0xffff)
}

// writeDevices prints doc as aligned text.
func writeDevices(w io.Writer, doc devicesDoc, verbose bool) {
	for i, d := range doc.Devices {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintln(w, d.Name)
		kv := func(indent int, key, val string) {
			fmt.Fprintf(w, "%s%-16s%s\n", strings.Repeat("  ", indent), key, val)
		}
		prov := "no (supported: " + strings.Join(uverbs.SupportedDrivers(), ", ") + ")"
		if d.Provider {
			prov = "yes"
		}
		drv := orUnknown(d.Driver)
		if d.DriverID != 0 {
			drv += fmt.Sprintf(" (driver id %d)", d.DriverID)
		}
		kv(1, "driver", drv)
		kv(1, "provider", prov)
		kv(1, "uverbs", fmt.Sprintf("%s (ABI %d)", d.Path, d.ABI))
		kv(1, "node_guid", d.NodeGUID)
		if verbose {
			// Empty attributes (rxe has no firmware version) are left out, as in the JSON.
			for _, f := range [][2]string{{"node_type", d.NodeType}, {"fw_ver", d.FWVersion}, {"sys_image_guid", d.SysImageGUID}} {
				if f[1] != "" {
					kv(1, f[0], f[1])
				}
			}
		}
		if d.Error != "" {
			kv(1, "error", d.Error)
		}
		for _, p := range d.Ports {
			fmt.Fprintf(w, "  port %d\n", p.Port)
			kv(2, "state", p.State)
			kv(2, "physical_state", p.PhysState)
			kv(2, "link_layer", p.LinkLayer)
			if p.ActiveMTU > 0 {
				kv(2, "active_mtu", fmt.Sprintf("%d (max %d)", p.ActiveMTU, p.MaxMTU))
			} else {
				kv(2, "active_mtu", "unknown: "+p.MTUError)
			}
			if p.Rate != "" {
				kv(2, "rate", p.Rate)
			}
			if verbose && p.LID != nil {
				kv(2, "lid", fmt.Sprintf("0x%x", *p.LID))
				kv(2, "sm_lid", fmt.Sprintf("0x%x", *p.SMLID))
			}
			if p.Netdev != "" {
				nd := p.Netdev
				if p.NetdevMTU > 0 {
					nd += fmt.Sprintf(" (mtu %d)", p.NetdevMTU)
				}
				kv(2, "netdev", nd)
			}
			if p.MTUWarning != "" {
				kv(2, "warning", p.MTUWarning)
			}
			if p.LinkDowned != nil {
				kv(2, "link_downed", fmt.Sprint(*p.LinkDowned))
			}
			if verbose && p.CMSent != nil {
				kv(2, "cm_messages", fmt.Sprintf("%d sent, %d received", *p.CMSent, *p.CMReceived))
			}
			if p.LinkWarning != "" {
				kv(2, "warning", p.LinkWarning)
			}
			if verbose {
				kv(2, "gids", fmt.Sprintf("%d valid", len(p.GIDs)))
				if len(p.GIDs) > 0 {
					tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
					fmt.Fprintln(tw, "      index\tgid\ttype\tnetdev")
					for _, g := range p.GIDs {
						fmt.Fprintf(tw, "      %d\t%s\t%s\t%s\n", g.Index, g.GID, g.Type, g.Netdev)
					}
					tw.Flush()
				}
			}
		}
	}
}
