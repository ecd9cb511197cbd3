package driver

import "fmt"

// What a failed work completion most likely means, for error reports, the path
// diagnostics and --trace.

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
