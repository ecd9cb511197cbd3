package rping

import (
	"fmt"
	"math"
	"time"

	"github.com/gorping/gorping/uverbs"
)

// Bounded stalls. An RC connection whose peer vanished (host powered off,
// link down at the far end, a partition) makes no progress, and nothing in
// rping's protocol notices: a side with a request outstanding retransmits it,
// and on a NIC it fails with RETRY_EXC_ERR once the QP's retry budget is
// spent, but a side that waits for the peer's next message (a client that
// sent its advert and had it acknowledged, a server between pings) waits for
// ever. On rxe even the retransmitting side never gives up: rxe treats
// retry_cnt 7, which rping asks for, as "retry for ever".
//
// gorping bounds every wait by the connection's RC retry budget: the time
// after which a NIC would have given up on a request, (retry_cnt + 1) local
// ACK timeouts of 4.096 µs × 2^timeout each, plus one more timeout so a
// device's own RETRY_EXC_ERR, where it has one, comes first. With rdma_cm's
// defaults for RoCE (timeout 19: 2.1 s, retry_cnt 7) that is 19.3 s.
// --timeout SEC sets another bound, --timeout 0 none (rping's behaviour).
//
// Half way through a stalled wait the waiting side posts a keepalive, a
// zero-length RDMA WRITE (no memory is touched, the peer's application sees
// nothing; stock rping never notices), whose acknowledgement tells a host
// that is still up from one that is gone. A server between pings waits as
// long as its client likes, as long as the client's host acknowledges a
// keepalive every half bound.

// exitTimeout is gorping's status when a stall ends the run: ETIMEDOUT, as
// rping returns errnos elsewhere.
const exitTimeout = 110

// rdma_cm's defaults where the connection's own attributes are not known yet
// (connection setup) or not given (iWARP: TCP does the retransmitting):
// ib_cm's local ACK timeout for RoCE and most IB fabrics (packet lifetime 18
// plus one) and the retry count rping asks for.
const (
	defaultAckTimeout = 19
	defaultRetryCnt   = sendRetry
)

// ackTimeout is the IB local ACK timeout for the QP attribute value t:
// 4.096 µs × 2^t (t 0 means infinite; callers treat it as unknown).
func ackTimeout(t uint8) time.Duration {
	return time.Duration(4096 * math.Pow(2, float64(min(t, 31))))
}

// rcBudget is how long a NIC retransmits a request before it fails it.
func rcBudget(timeout, retryCnt uint8) time.Duration {
	return time.Duration(int64(retryCnt)+1) * ackTimeout(timeout)
}

// stallPolicy is one connection's bound and what it is made of.
type stallPolicy struct {
	bound    time.Duration // 0: never (--timeout 0)
	explicit bool          // --timeout SEC
	timeout  uint8         // the QP's local ACK timeout attribute (0 unknown)
	retryCnt uint8
}

// stallBound returns the bound for a connection with the given QP attributes
// (timeout 0: unknown, use rdma_cm's defaults) under --timeout.
func stallBound(cfgTimeout time.Duration, timeout, retryCnt uint8) stallPolicy {
	p := stallPolicy{timeout: timeout, retryCnt: retryCnt}
	switch {
	case cfgTimeout == NoTimeout:
		return p
	case cfgTimeout > 0:
		p.bound, p.explicit = cfgTimeout, true
		return p
	}
	if p.timeout == 0 {
		p.timeout, p.retryCnt = defaultAckTimeout, defaultRetryCnt
	}
	p.bound = rcBudget(p.timeout, p.retryCnt) + ackTimeout(p.timeout)
	return p
}

// connPolicy is the bound for the connection phases, before the QP has its
// RTS attributes: rdma_cm's defaults.
func connPolicy(cfgTimeout time.Duration) stallPolicy {
	return stallBound(cfgTimeout, 0, 0)
}

// String says where the bound comes from (-d, --trace).
func (p stallPolicy) String() string {
	switch {
	case p.bound == 0:
		return "none (--timeout 0)"
	case p.explicit:
		return fmt.Sprintf("%s (--timeout)", secs(p.bound))
	}
	return fmt.Sprintf("%s: RC retry budget %s (local ACK timeout %d = %s, retry_cnt %d) plus one timeout",
		secs(p.bound), secs(rcBudget(p.timeout, p.retryCnt)), p.timeout, secs(ackTimeout(p.timeout)), p.retryCnt)
}

// secs formats a duration as seconds with one decimal ("19.3 s").
func secs(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }

// qpPolicy reads the bound of an established connection from its QP.
func qpPolicy(qp *uverbs.QP, cfgTimeout time.Duration) stallPolicy {
	if qp != nil && cfgTimeout == 0 {
		if a, err := qp.Query(uverbs.QPAttrTimeout | uverbs.QPAttrRetryCnt); err == nil {
			return stallBound(cfgTimeout, a.Timeout, a.RetryCnt)
		}
	}
	return stallBound(cfgTimeout, 0, 0)
}

// waitingFor says, for a stall message, what a side in state s was waiting for.
func waitingFor(s testState, server bool) string {
	if server {
		switch s {
		case stateRDMAReadAdv:
			return "the RDMA READ of the client's ping"
		case stateRDMAReadComplete:
			return "the client's second advert"
		case stateRDMAWriteAdv:
			return "the RDMA WRITE of the echo"
		}
		return "the client's next advert"
	}
	switch s {
	case stateRDMAReadAdv:
		return "the server's first go-ahead (it reads the ping)"
	case stateRDMAWriteAdv:
		return "the server's echo and last go-ahead"
	}
	return "the server"
}
