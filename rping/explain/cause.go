package explain

import (
	"fmt"
	"strconv"
	"time"

	"github.com/gorping/gorping/uverbs"
	"github.com/gorping/gorping/uverbs/diag"
)

// CMProbe tells apart the reasons a connection request got no answer, from
// what the local port and its netdev counted while it waited: did this host's
// connection manager send requests, did anything come back, and did replies
// reach the netdev but not the RDMA device.
//
// The last case is a driver's problem after a link flap: a port whose link went down,
// whose connection manager sends nothing (or nothing that completes) or hears nothing
// while its netdev receives, and that heard nothing from the peer. The driver's provider
// says what to do about it (uverbs/driver.LinkDownAdvisor; rxe's QP1 does not recover from a
// link flap, uverbs/rxe).
type CMProbe struct {
	host   uverbs.Host
	dev    uverbs.Device
	port   int
	netdev string
	before diag.CounterSnapshot
	rx     uint64 // netdev rx_packets before
	ok     bool
}

func NewCMProbe(h uverbs.Host, dev uverbs.Device, port uint8) *CMProbe {
	p := &CMProbe{host: h, dev: dev, port: int(port)}
	if ports, err := diag.ReadPorts(h, dev.Name, false); err == nil {
		for _, pi := range ports {
			if pi.Port == p.port {
				p.netdev = pi.Netdev
			}
		}
	}
	s, err := diag.ReadCounters(h, dev.Name, p.port)
	p.before, p.ok = s, err == nil
	p.rx, _ = p.netdevRx()
	return p
}

// netdevRx is the netdev's received-packet count.
func (p *CMProbe) netdevRx() (uint64, bool) {
	if p.netdev == "" {
		return 0, false
	}
	n, err := diag.NetdevStat(p.host, p.netdev, "statistics/rx_packets")
	return n, err == nil
}

// Cause explains, after waiting for waited, why peer did not answer.
func (p *CMProbe) Cause(peer string, waited time.Duration) string {
	if p == nil || !p.ok {
		return cmCause(cmFacts{peer: peer})
	}
	after, err := diag.ReadCounters(p.host, p.dev.Name, p.port)
	if err != nil {
		return cmCause(cmFacts{peer: peer})
	}
	pdir := "ports/" + strconv.Itoa(p.port) + "/"
	rcvd := pdir + "hw_counters/rcvd_pkts"
	f := cmFacts{
		peer: peer, known: true, dev: p.dev.Name, port: p.port, netdev: p.netdev, waited: waited,
		sent:       after.Sum(pdir+"cm_tx_msgs") - p.before.Sum(pdir+"cm_tx_msgs"),
		heard:      after.Sum(pdir+"cm_rx_msgs") - p.before.Sum(pdir+"cm_rx_msgs"),
		linkDowned: after.Values[pdir+"hw_counters/link_downed"] + after.Values[pdir+"counters/link_downed"],
		rdmaRx:     after.Values[rcvd] - p.before.Values[rcvd],
	}
	if rx, ok := p.netdevRx(); ok {
		f.netdevRx, f.netdevRxKnown = rx-p.rx, true
	}
	if f.linkDowned > 0 {
		f.advice = p.dev.LinkDownAdvice(p.netdev)
	}
	return cmCause(f)
}

// cmFacts are what a connection request's wait left in the port's counters.
type cmFacts struct {
	peer          string
	known         bool // the counters could be read
	dev           string
	port          int
	netdev        string
	waited        time.Duration
	sent, heard   uint64 // CM messages sent and received meanwhile
	linkDowned    uint64 // the port's link-down count so far
	rdmaRx        uint64 // packets the RDMA device took in meanwhile
	netdevRx      uint64 // packets the netdev took in meanwhile
	netdevRxKnown bool
	advice        string // the driver's advice after a link went down (uverbs/driver.LinkDownAdvisor)
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
	if f.advice != "" && f.linkDowned > 0 && f.heard == 0 && (f.sent == 0 || deaf || mute) {
		what := fmt.Sprintf("sent %d connection manager message(s) in %s", f.sent, secs(f.waited))
		if deaf {
			what = fmt.Sprintf("received nothing while %s got %d packets", f.netdev, f.netdevRx)
		}
		return fmt.Sprintf("%s %s since its link went down (link_downed %d): %s", f.dev, what, f.linkDowned, f.advice)
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

// Stall is the likely cause of a stalled ping, from what the peer's host still
// acknowledged.
func Stall(peer string, keepaliveAcked, keepaliveSent bool) string {
	switch {
	case keepaliveAcked:
		return fmt.Sprintf("%s's host is up (it acknowledged a keepalive) but its rping does not answer: the process is stopped or stuck", peer)
	case keepaliveSent:
		return fmt.Sprintf("%s's host acknowledged nothing (a keepalive went unanswered): it is down, its link is down, or the network between is partitioned", peer)
	}
	return fmt.Sprintf("%s is down, its link is down, or the network between is partitioned", peer)
}

// secs is a duration as rping's stall lines give it ("19.0 s").
func secs(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }
