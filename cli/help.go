package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gorping/gorping/uverbs"
)

// noDevices reports whether this host has no RDMA device (rping's exit 19 has other
// causes too, an ENODEV of any call).
func noDevices() bool {
	devs, err := uverbs.Host{}.Devices() // this machine (a test binary's from GORPING_HOSTENV_*)
	return err == nil && len(devs) == 0
}

// noDevicesHint follows rping's "No RDMA devices were detected": what to do about it.
const noDevicesHint = "gorping: load the NIC's RDMA driver (ConnectX: modprobe mlx5_ib), or make a Soft-RoCE device " +
	"on an Ethernet interface: modprobe rdma_rxe && rdma link add rxe0 type rxe netdev IFACE; then gorping devices"

// gorpingHelp is what --help prints after rping's usage: gorping's own options of rping's
// command line, its commands, and where the rest is.
func gorpingHelp() string {
	var own []option
	for _, o := range rpingLine {
		if o.usage == "" && !o.hidden {
			own = append(own, o)
		}
	}
	var b strings.Builder
	b.WriteString("\ngorping's own options (not in rping):\n")
	b.WriteString(usageList(own))
	b.WriteString("\ngorping's commands:\n")
	w := 0
	for _, sc := range subcommands {
		w = max(w, len(sc.name))
	}
	cmds := slices.Clone(subcommands)
	slices.SortStableFunc(cmds, func(a, b *subcommand) int { return strings.Compare(a.name, b.name) })
	for _, sc := range cmds {
		fmt.Fprintf(&b, "  gorping %-*s  %s\n", w, sc.name, sc.help)
	}
	b.WriteString("\nEach command's --help lists its options; man gorping has everything.\n")
	return b.String()
}
