package uverbs

import (
	"fmt"
	"strings"
)

// Diagnostic texts for the path diagnostics: what a failed completion most likely means,
// and whether the MTUs along a RoCE path fit each other.

var wcCauses = [...]string{
	WCSuccess:        "the work request completed successfully",
	WCLocLenErr:      "a message did not fit: the posted receive buffer is smaller than the incoming SEND, or a local buffer is larger than the port's maximum message size; check both sides' buffer sizes",
	WCLocQPOpErr:     "the local QP rejected the work request: it was malformed for this QP (too many SGEs, inline data too large) or the QP was not in a state that allows it",
	WCLocEECOpErr:    "local EE context error (reliable datagram, which gorping never uses)",
	WCLocProtErr:     "a local buffer is not covered by the lkey given: the address or length lies outside the registered memory region, or the region belongs to another PD",
	WCWRFlushErr:     "the work request was flushed because the QP went to the error state; look for the first completion with another status, it names the real cause",
	WCMWBindErr:      "a memory window bind failed: wrong access rights or bounds for the window",
	WCBadRespErr:     "the peer answered with an unexpected transport response; a protocol mismatch or a buggy peer",
	WCLocAccessErr:   "the local memory region lacks the access right the operation needs (e.g. LOCAL_WRITE for a receive or READ target)",
	WCRemInvReqErr:   "the peer found the request invalid: a message longer than its receive buffer, an opcode it does not support, or a length beyond its limits",
	WCRemAccessErr:   "the peer refused remote access: the rkey is wrong or stale, the address and length fall outside the peer's registered region, or it lacks REMOTE_READ/REMOTE_WRITE",
	WCRemOpErr:       "the peer could not complete the operation (for example its receive queue entry was malformed or its QP failed)",
	WCRetryExcErr:    "no acknowledgement arrived within the retry count: the peer is unreachable on this path; check the route and the GID chosen (RoCE v1 vs v2, IPv4 vs IPv6), that the path MTU fits the network MTU along the way, and for lossy Ethernet PFC/ECN",
	WCRNRRetryExcErr: "the peer had no receive posted (receiver not ready) for longer than the RNR retries allow; the peer must post receives before the sender sends",
	WCLocRDDViolErr:  "reliable datagram domain violation (not used by gorping)",
	WCRemInvRDReqErr: "invalid reliable datagram request (not used by gorping)",
	WCRemAbortErr:    "the peer aborted the operation",
	WCInvEECNErr:     "invalid EE context number (reliable datagram, not used by gorping)",
	WCInvEECStateErr: "invalid EE context state (reliable datagram, not used by gorping)",
	WCFatalErr:       "fatal device error: the adapter or driver failed; check the kernel log",
	WCRespTimeoutErr: "the response to a request timed out at the peer",
	WCGeneralErr:     "general error reported by the driver; check the kernel log",
}

// Cause returns one sentence naming the status and its likely cause, e.g.
// "RETRY_EXC_ERR (12): no acknowledgement arrived ...".
func (s WCStatus) Cause() string {
	c := "unknown completion status"
	if int(s) < len(wcCauses) && wcCauses[s] != "" {
		c = wcCauses[s]
	}
	return fmt.Sprintf("%s (%d): %s", s, uint32(s), c)
}

// RoCEHeaderBytes is what a RoCE packet carries inside the netdev MTU besides its IB
// payload: an IPv6 header (40; IPv4's is 20, RoCE v1's GRH is 40: take the larger since one
// port carries both), UDP (8), BTH (12), RETH (16, the largest extended header an RC data
// packet carries: the first packet of an RDMA WRITE, or a READ request) and the ICRC (4).
// The Ethernet header, VLAN tag and FCS are outside the netdev MTU and not counted. Soft-RoCE
// budgets the same 80 bytes when it derives the active MTU from the netdev MTU.
const RoCEHeaderBytes = 40 + 8 + 12 + 16 + 4

// MTUFacts are the MTUs along one path.
type MTUFacts struct {
	PathMTU   MTU // the QP's path MTU (0 if not known)
	ActiveMTU MTU // the port's active MTU (0 if not known)
	LinkLayer LinkLayer
	Netdev    string // the port's netdev ("" on InfiniBand)
	NetdevMTU int    // its MTU in bytes (0 if not known)
}

// CheckMTU returns a warning when the MTUs do not fit each other so that large transfers
// break (packets of a full IB MTU dropped; small messages still pass), or "" when they fit
// or too little is known to tell.
func CheckMTU(f MTUFacts) string {
	var w []string
	if f.PathMTU.Bytes() > 0 && f.ActiveMTU.Bytes() > 0 && f.PathMTU > f.ActiveMTU {
		w = append(w, fmt.Sprintf("path MTU %d exceeds the port's active MTU %d", f.PathMTU.Bytes(), f.ActiveMTU.Bytes()))
	}
	if f.LinkLayer == LinkLayerEthernet && f.NetdevMTU > 0 {
		nd := f.Netdev
		if nd == "" {
			nd = "the netdev"
		}
		// The path MTU is what packets are cut to; without one the active MTU is what the
		// next connection gets.
		m, what := f.PathMTU, "path"
		if m.Bytes() == 0 {
			m, what = f.ActiveMTU, "active"
		}
		if m.Bytes() > 0 && m.Bytes()+RoCEHeaderBytes > f.NetdevMTU {
			fix := " (no IB MTU fits it now)"
			if fit := fittingMTU(f.NetdevMTU); fit > 0 {
				fix = fmt.Sprintf(" or use an IB MTU of at most %d", fit)
			}
			w = append(w, fmt.Sprintf("%s MTU %d plus %d bytes of RoCE headers exceeds %s's MTU %d: messages larger than %d bytes will not get through (the sender retries until its retry budget runs out; rxe retries for ever); raise %s's MTU to at least %d%s",
				what, m.Bytes(), RoCEHeaderBytes, nd, f.NetdevMTU, max(f.NetdevMTU-RoCEHeaderBytes, 0), nd, m.Bytes()+RoCEHeaderBytes, fix))
		}
	}
	return strings.Join(w, "; ")
}

// fittingMTU is the largest IB MTU whose packets fit a netdev MTU (0 if none does).
func fittingMTU(netdevMTU int) int {
	best := 0
	for m := MTU256; m <= MTU4096; m++ {
		if m.Bytes()+RoCEHeaderBytes <= netdevMTU {
			best = m.Bytes()
		}
	}
	return best
}
