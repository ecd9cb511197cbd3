package rping

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

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

// cause explains, after waiting for waited, why peer did not answer.
func (p *cmProbe) cause(peer string, waited time.Duration) string {
	if p == nil || !p.ok {
		return cmCause(cmFacts{peer: peer})
	}
	after, err := uverbs.ReadCounters(p.dev.Name, p.port)
	if err != nil {
		return cmCause(cmFacts{peer: peer})
	}
	pdir := "ports/" + strconv.Itoa(p.port) + "/"
	rcvd := pdir + "hw_counters/rcvd_pkts"
	f := cmFacts{
		peer: peer, known: true, dev: p.dev.Name, driver: p.dev.Driver, port: p.port, netdev: p.netdev, waited: waited,
		sent:       after.Sum(pdir+"cm_tx_msgs") - p.before.Sum(pdir+"cm_tx_msgs"),
		heard:      after.Sum(pdir+"cm_rx_msgs") - p.before.Sum(pdir+"cm_rx_msgs"),
		linkDowned: after.Values[pdir+"hw_counters/link_downed"] + after.Values[pdir+"counters/link_downed"],
		rdmaRx:     after.Values[rcvd] - p.before.Values[rcvd],
	}
	if rx, ok := netdevRxPackets(p.netdev); ok {
		f.netdevRx, f.netdevRxKnown = rx-p.rx, true
	}
	return cmCause(f)
}

// cmFacts are what a connection request's wait left in the port's counters.
type cmFacts struct {
	peer          string
	known         bool // the counters could be read
	dev, driver   string
	port          int
	netdev        string
	waited        time.Duration
	sent, heard   uint64 // CM messages sent and received meanwhile
	linkDowned    uint64 // the port's link-down count so far
	rdmaRx        uint64 // packets the RDMA device took in meanwhile
	netdevRx      uint64 // packets the netdev took in meanwhile
	netdevRxKnown bool
}

// cmCause is the likely cause of an unanswered connection request.
func cmCause(f cmFacts) string {
	generic := fmt.Sprintf("%s's host is down, its link is down, the network between is partitioned, or its connection manager cannot receive", f.peer)
	if !f.known {
		return generic
	}
	deaf := f.netdevRxKnown && f.netdevRx > 0 && f.rdmaRx == 0
	// The CM retransmits an unanswered request after its response timeout
	// (4.3 s plus twice the packet lifetime: 6.4 s on kernel 6.1, 4.8 s on
	// 6.12): fewer transmissions than that allows means its sends do not
	// complete.
	mute := f.waited >= 10*time.Second && f.sent < 1+uint64(f.waited/(6500*time.Millisecond))
	if f.driver == "rxe" && f.linkDowned > 0 && f.heard == 0 && (f.sent == 0 || deaf || mute) {
		what := fmt.Sprintf("sent %d connection manager message(s) in %s", f.sent, secs(f.waited))
		if deaf {
			what = fmt.Sprintf("received nothing while %s got %d packets", f.netdev, f.netdevRx)
		}
		return fmt.Sprintf("%s %s since its link went down (link_downed %d): rxe's QP1, which carries the connection "+
			"manager's messages, does not recover from a link flap (kernel bug); create the device anew: "+
			"rdma link delete %s; rdma link add %s type rxe netdev %s",
			f.dev, what, f.linkDowned, f.dev, f.dev, f.netdev)
	}
	switch {
	case f.sent == 0:
		return fmt.Sprintf("this host's connection manager sent nothing (%s ports/%d/cm_tx_msgs did not move)", f.dev, f.port)
	case f.heard > 0:
		return fmt.Sprintf("%s's connection manager answered (%d messages) but the connection did not complete", f.peer, f.heard)
	case mute:
		return fmt.Sprintf("this host's connection manager sent only %d message(s) in %s (it retransmits every 4.3 to 6.4 s): its sends do not complete on %s", f.sent, secs(f.waited), f.dev)
	}
	return fmt.Sprintf("%d connection manager messages sent, none answered: %s", f.sent, generic)
}
