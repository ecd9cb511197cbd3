//go:build fabric

package fabric

import (
	"encoding/json"
	"github.com/gorping/gorping/test/vm/agent"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorping/gorping/test/vm"
)

// jsonRun is what a gorping --json client reported.
type jsonRun struct {
	rtts []time.Duration // per ping, in order
	sum  struct {
		Transmitted, Received, Errors int
		RTT                           struct{ Min, P50, Max float64 } `json:"rtt_ns"`
	}
	exit int
}

// pingJSON runs a gorping --json client on h against addr:port and parses
// its records.
func pingJSON(t *testing.T, h *vm.Host, addr string, port, count int, extra ...string) jsonRun {
	t.Helper()
	args := append([]string{gorping, "-c", "-a", addr, "-p", strconv.Itoa(port), "-C", strconv.Itoa(count), "-V", "--json", "--stats"}, extra...)
	st := run(t, h, 5*time.Minute, args...)
	var r jsonRun
	r.exit = -1
	for _, line := range strings.Split(strings.TrimSpace(st.Stdout), "\n") {
		var rec struct {
			Type   string          `json:"type"`
			RTTNs  json.RawMessage `json:"rtt_ns"` // a number in "ping", an object in "summary"
			Status int             `json:"status"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("client printed a line that is not JSON: %q (%v)", line, err)
		}
		switch rec.Type {
		case "ping":
			var ns float64
			if err := json.Unmarshal(rec.RTTNs, &ns); err != nil {
				t.Fatalf("ping record %q: %v", line, err)
			}
			r.rtts = append(r.rtts, time.Duration(ns))
		case "summary":
			if err := json.Unmarshal([]byte(line), &r.sum); err != nil {
				t.Fatalf("summary %q: %v", line, err)
			}
		case "exit":
			r.exit = rec.Status
		}
	}
	if r.exit != 0 || len(r.rtts) != count || r.sum.Received != count {
		t.Fatalf("%s: %d of %d pings, exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), len(r.rtts), count, r.exit, st.Stdout, st.Stderr)
	}
	return r
}

func (r jsonRun) min() time.Duration { return time.Duration(r.sum.RTT.Min) }

func (r jsonRun) median() time.Duration {
	s := append([]time.Duration(nil), r.rtts...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// crossingsPerPing is how often one ping crosses the link in each direction
// on its critical path: the client's advert, the server's READ request, the
// READ response, the first go-ahead, the second advert, the echo WRITE, its
// ACK, the last go-ahead: four times each way.
const crossingsPerPing = 4

// TestCrossStatsDelay: a one-way delay injected with netem shows in --stats's
// RTTs as often as a ping crosses it: 4 times for a delay on one host's
// egress, 8 times for the same delay on both; against gorping's and stock
// rping's server alike (the protocol fixes the crossings, not the server).
func TestCrossStatsDelay(t *testing.T) {
	h1, h2 := host(t, 1), host(t, 2)
	const delay = 50 * time.Millisecond
	for _, server := range []impl{gorpingImpl, stockImpl} {
		t.Run(server.name+"Server", func(t *testing.T) {
			port := freshPort()
			srv := start(t, h2, server.bin, "-s", "-P", "-a", h2.IPv4, "-p", strconv.Itoa(port))
			waitListening(t, srv, addrPort(h2.IPv4, port), time.Minute)
			base := pingJSON(t, h1, h2.IPv4, port, 20)
			t.Logf("no delay: min %v, median %v", base.min(), base.median())
			// The delayed minimum is crossings x delay plus an undelayed ping;
			// allow the undelayed part up to three medians of the baseline.
			slack := 3*base.median() + 10*time.Millisecond
			check := func(what string, r jsonRun, crossings int) {
				t.Helper()
				lo := time.Duration(crossings) * delay
				t.Logf("%s: min %v, median %v (expected at least %d x %v = %v)", what, r.min(), r.median(), crossings, delay, lo)
				if r.min() < lo || r.min() > lo+slack {
					t.Errorf("%s: minimum RTT %v, want %v..%v (%d crossings of %v, plus an undelayed ping)", what, r.min(), lo, lo+slack, crossings, delay)
				}
			}
			netem(t, h2, "delay", delay.String())
			check("delay on h2's egress", pingJSON(t, h1, h2.IPv4, port, 8), crossingsPerPing)
			netem(t, h1, "delay", delay.String())
			check("delay on both egresses", pingJSON(t, h1, h2.IPv4, port, 8), 2*crossingsPerPing)
		})
	}
}

// TestCrossLoss: with 3% of the packets lost each way, RC retransmission
// delivers every ping, validated, to gorping's and stock rping's server.
func TestCrossLoss(t *testing.T) {
	h1, h2 := host(t, 1), host(t, 2)
	netem(t, h1, "loss", "3%")
	netem(t, h2, "loss", "3%")
	for _, server := range []impl{gorpingImpl, stockImpl} {
		t.Run(server.name+"Server", func(t *testing.T) {
			drops := netemDrops(t, h1) + netemDrops(t, h2)
			port := freshPort()
			srv := start(t, h2, server.bin, "-s", "-a", h2.IPv4, "-p", strconv.Itoa(port))
			waitListening(t, srv, addrPort(h2.IPv4, port), time.Minute)
			r := pingJSON(t, h1, h2.IPv4, port, 25)
			lost := netemDrops(t, h1) + netemDrops(t, h2) - drops
			t.Logf("25 pings, %d packets dropped by netem, max RTT %v (a retransmission waits one ACK timeout)", lost, time.Duration(r.sum.RTT.Max))
			if lost == 0 {
				t.Errorf("netem dropped nothing: the test tested no loss")
			}
			serverEndsAfterLossyRun(t, srv, server)
		})
	}
}

// serverEndsAfterLossyRun checks how a server ends once its client has, on a
// link that loses or corrupts packets. The client's disconnect request crosses
// that link too, and the client's connection manager stops retransmitting it
// when the client destroys its ID at exit: when it is lost, stock rping's server
// waits for ever for the next ping (recorded, then killed), and gorping's ends
// after its bound, saying the client's host acknowledged nothing.
// It returns the server's status once it has ended (Done false if not).
func serverEndsAfterLossyRun(t *testing.T, srv *rproc, server impl) agent.Status {
	t.Helper()
	st, err := srv.waitErr(time.Minute)
	if err != nil {
		t.Fatalf("wait for %s: %v", srv.name, err)
	}
	switch {
	case !st.Done && server.stock():
		t.Logf("%s still waits a minute after its client ended: the client's disconnect request was lost, and stock rping waits for ever", srv.name)
	case !st.Done:
		t.Errorf("%s did not end within a minute of its client\nstderr:\n%s", srv.name, st.Stderr)
	case !server.stock() && st.Code == 110 && strings.Contains(st.Stderr, "acknowledged nothing"):
		t.Logf("%s: the client's disconnect request was lost; it ended after its bound:\n%s", srv.name, lastLines(st.Stderr, 2))
	default:
		checkExit(t, server.name+" server", server, st)
	}
	return st
}

// TestCrossNetemMix: jitter, reordering, duplication and corruption on both
// hosts' egress at once; RC delivers every ping in order and intact, and a
// corrupted packet is dropped by the receiver's ICRC check and retransmitted.
func TestCrossNetemMix(t *testing.T) {
	h1, h2 := host(t, 1), host(t, 2)
	// netem corrupts ARP frames too and delivers them, where a real link's FCS
	// drops them; ARP has no checksum, so a flipped bit in a sender's MAC becomes
	// the peer's neighbour entry, and rdma_cm ends the connection
	// (TestCrossPeerMACChanges). Pinned entries ignore ARP.
	pinNeighbour(t, h1, h2)
	pinNeighbour(t, h2, h1)
	for _, h := range []*vm.Host{h1, h2} {
		netem(t, h, "delay", "5ms", "2ms", "reorder", "10%", "50%", "duplicate", "2%", "corrupt", "1%")
	}
	for _, server := range []impl{gorpingImpl, stockImpl} {
		t.Run(server.name+"Server", func(t *testing.T) {
			port := freshPort()
			srv := start(t, h2, server.bin, "-s", "-a", h2.IPv4, "-p", strconv.Itoa(port), "-v")
			waitListening(t, srv, addrPort(h2.IPv4, port), time.Minute)
			r := pingJSON(t, h1, h2.IPv4, port, 30, "-v")
			t.Logf("30 pings: min %v, median %v, max %v", r.min(), r.median(), time.Duration(r.sum.RTT.Max))
			// 1% of packets are corrupted, and dropped: the client's disconnect
			// request may be one of them.
			if st := serverEndsAfterLossyRun(t, srv, server); st.Done {
				sameText(t, server.name+" server stdout", st.Stdout, pingLines("server ping data: ", 30, 64))
			}
		})
	}
}
