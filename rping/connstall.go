package rping

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/gorping/gorping/uverbs"
)

// cmProbe tells apart the reasons a connection request got no answer, from
// what the local port and its netdev counted while it waited: did this host's
// connection manager send requests, did anything come back, and did replies
// reach the netdev but not the RDMA device.
//
// The last case is a Soft-RoCE bug found with the multi-host test bed: on
// kernel 6.1, a link that goes down while rxe sends a management datagram
// leaves rxe's QP1 (the GSI QP, which carries the connection manager's
// messages) unable to receive. rxe puts QP1 in its error state; the MAD layer
// moves it back to RTS, but rxe's transition to RTS resets only the send side,
// so every CM message that arrives afterwards is dropped. Connections from
// and to that host time out until the rxe device is created anew.
type cmProbe struct {
	dev    uverbs.Device
	port   int
	netdev string
	before uverbs.CounterSnapshot
	rx     uint64 // netdev rx_packets before
	ok     bool
}

func newCMProbe(dev uverbs.Device, port uint8) *cmProbe {
	p := &cmProbe{dev: dev, port: int(port)}
	if ports, err := uverbs.ReadPorts(dev.Name, false); err == nil {
		for _, pi := range ports {
			if pi.Port == p.port {
				p.netdev = pi.Netdev
			}
		}
	}
	s, err := uverbs.ReadCounters(dev.Name, p.port)
	p.before, p.ok = s, err == nil
	p.rx, _ = netdevRxPackets(p.netdev)
	return p
}

// netdevRxPackets is the netdev's received-packet count.
func netdevRxPackets(netdev string) (uint64, bool) {
	if netdev == "" {
		return 0, false
	}
	b, err := os.ReadFile("/sys/class/net/" + netdev + "/statistics/rx_packets")
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	return n, err == nil
}

// cause explains, after the wait, why peer did not answer.
func (p *cmProbe) cause(peer string) string {
	generic := fmt.Sprintf("%s's host is down, its link is down, the network between is partitioned, or its connection manager cannot receive", peer)
	if p == nil || !p.ok {
		return generic
	}
	after, err := uverbs.ReadCounters(p.dev.Name, p.port)
	if err != nil {
		return generic
	}
	pdir := "ports/" + strconv.Itoa(p.port) + "/"
	sent := after.Sum(pdir+"cm_tx_msgs") - p.before.Sum(pdir+"cm_tx_msgs")
	heard := after.Sum(pdir+"cm_rx_msgs") - p.before.Sum(pdir+"cm_rx_msgs")
	rcvd := pdir + "hw_counters/rcvd_pkts"
	linkDowned := after.Values[pdir+"hw_counters/link_downed"] + after.Values[pdir+"counters/link_downed"]
	rx, rxOK := netdevRxPackets(p.netdev)
	deaf := rxOK && rx > p.rx && after.Values[rcvd] == p.before.Values[rcvd]
	if p.dev.Driver == "rxe" && linkDowned > 0 && heard == 0 && (sent == 0 || deaf) {
		what := "sent no connection manager message"
		if sent > 0 {
			what = fmt.Sprintf("received nothing while %s got %d packets", p.netdev, rx-p.rx)
		}
		return fmt.Sprintf("%s %s since its link went down (link_downed %d): rxe's QP1, which carries the connection "+
			"manager's messages, does not recover from a link flap (kernel bug); create the device anew: "+
			"rdma link delete %s; rdma link add %s type rxe netdev %s",
			p.dev.Name, what, linkDowned, p.dev.Name, p.dev.Name, p.netdev)
	}
	switch {
	case sent == 0:
		return fmt.Sprintf("this host's connection manager sent nothing (%s ports/%d/cm_tx_msgs did not move)", p.dev.Name, p.port)
	case heard > 0:
		return fmt.Sprintf("%s's connection manager answered (%d messages) but the connection did not complete", peer, heard)
	}
	return fmt.Sprintf("%d connection manager messages sent, none answered: %s", sent, generic)
}
