//go:build fabric

package fabric

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorping/gorping/test/vm"
	"github.com/gorping/gorping/test/vm/agent"
)

// The longest default stall bound (rping/stall.go): on kernel 6.1, (retry_cnt
// 7 + 2) local ACK timeouts of 2.147 s (6.12's RoCE timeout is shorter: 4.8 s).
const defaultBound = 19327352832 * time.Nanosecond

// boundSlack covers the guest's own slowness under TCG: a process that
// decided in time may take seconds to print and exit on a loaded host.
const boundSlack = 20 * time.Second

// waitOutput waits until p printed want on stdout or stderr.
func waitOutput(t testing.TB, p *rproc, want string, timeout time.Duration) {
	t.Helper()
	if err := printsWithin(t, p, want, timeout); err != nil {
		t.Fatal(err)
	}
}

// printsWithin is waitOutput that returns what went wrong instead of failing.
func printsWithin(t testing.TB, p *rproc, want string, timeout time.Duration) error {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		st := p.status(t)
		if strings.Contains(st.Stdout, want) || strings.Contains(st.Stderr, want) {
			return nil
		}
		if st.Done {
			return fmt.Errorf("%s exited (status %d) before printing %q\nstdout:\n%s\nstderr:\n%s", p.name, st.Code, want, lastLines(st.Stdout, 10), st.Stderr)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not print %q within %s\nstdout:\n%s\nstderr:\n%s", p.name, want, timeout, lastLines(st.Stdout, 10), st.Stderr)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// endsWithin waits for p to end within limit of since and checks its status
// and that its stderr has want; it returns the status.
func endsWithin(t testing.TB, p *rproc, since time.Time, limit time.Duration, code int, want string) agent.Status {
	t.Helper()
	st := p.wait(t, limit-time.Since(since)+5*time.Second)
	took := time.Since(since)
	t.Logf("%s ended after %.1fs with status %d:\n%s", p.name, took.Seconds(), st.Code, lastLines(st.Stderr, 4))
	if took > limit {
		t.Errorf("%s took %s to end, more than %s", p.name, took, limit)
	}
	if st.Code != code {
		t.Errorf("%s exit %d, want %d\nstderr:\n%s", p.name, st.Code, code, st.Stderr)
	}
	if !strings.Contains(st.Stderr, want) {
		t.Errorf("%s stderr lacks %q:\n%s", p.name, want, st.Stderr)
	}
	return st
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}

// stillRunning checks that a stock rping is still stuck after the bound in
// which gorping ended: the behaviour gorping improves on (documented in
// README); then it is killed.
func stillRunning(t testing.TB, p *rproc, what string) {
	t.Helper()
	st := p.status(t)
	if st.Done {
		t.Errorf("stock rping ended by itself (status %d) %s: the README's comparison is out of date\nstderr:\n%s", st.Code, what, st.Stderr)
		return
	}
	t.Logf("stock rping still running %s, killed", what)
	p.signal(t, syscall.SIGKILL)
}

// endless starts an endless client with one ping per 0.1 s and waits until it
// has completed a few pings.
func endless(t *testing.T, h *vm.Host, i impl, addr string, port int) *rproc {
	t.Helper()
	args := []string{i.bin, "-c", "-a", addr, "-p", strconv.Itoa(port), "-v"}
	if !i.stock() {
		args = append(args, "-i", "0.1", "--stats")
	}
	p := start(t, h, args...)
	waitOutput(t, p, "rdma-ping-3: ", 2*time.Minute)
	return p
}

// TestCrossPartition: h1 loses every packet it sends in the middle of endless
// runs (the client's bound first; TestCrossOneWayServerFirst forces the other order). gorping's client ends within the default bound with 110 and says the
// server's host acknowledged nothing; gorping's -P server drops that client
// and still serves a client from h3; stock rping's client is still waiting.
func TestCrossPartition(t *testing.T) {
	h1, h2, h3 := host(t, 1), host(t, 2), host(t, 3)
	gp, sp := freshPort(), freshPort()
	// The server gets a longer bound than the client's default: h2's packets
	// still reach h1, so a server that gave up first would disconnect the
	// client (exit 255, "peer disconnected") before its own bound ends.
	gsrv := start(t, h2, gorping, "-s", "-P", "-a", h2.IPv4, "-p", strconv.Itoa(gp), "--timeout", "30")
	ssrv := start(t, h2, stock, "-s", "-P", "-a", h2.IPv4, "-p", strconv.Itoa(sp))
	waitListening(t, gsrv, addrPort(h2.IPv4, gp), time.Minute)
	waitListening(t, ssrv, addrPort(h2.IPv4, sp), time.Minute)
	gcli := endless(t, h1, gorpingImpl, h2.IPv4, gp)
	scli := endless(t, h1, stockImpl, h2.IPv4, sp)

	cut := time.Now()
	netem(t, h1, "loss", "100%")
	endsWithin(t, gcli, cut, defaultBound+boundSlack, 110, "the server's host acknowledged nothing (a keepalive went unanswered)")
	// The server noticed too, between pings or in the middle of one.
	waitOutput(t, gsrv, "rping server: ", 30*time.Second+boundSlack)
	if st := gsrv.status(t); !strings.Contains(st.Stderr, "acknowledged nothing") {
		t.Errorf("gorping server's explanation:\n%s", st.Stderr)
	}
	stillRunning(t, scli, "after gorping's client ended")

	// The -P server keeps serving others.
	r := run(t, h3, 2*time.Minute, gorping, "-c", "-a", h2.IPv4, "-p", strconv.Itoa(gp), "-C", "5", "-V")
	if r.Code != 0 {
		t.Errorf("a client from h3 after the partition: exit %d\n%s", r.Code, r.Stderr)
	}
	if st := gsrv.status(t); st.Done {
		t.Errorf("gorping's -P server exited (status %d)", st.Code)
	}
}

// TestCrossOneWayServerFirst: the other order of TestCrossPartition's race (issue
// 26, finding 11). h1 loses every packet it sends while h2's reach it; gorping's -P
// server on h2 has the shorter bound (6 s, the client's is 30 s), so it drops the
// client first and its disconnect reaches h1. The client ends at once with rping's
// lines and a last line that says what a disconnect while its requests went
// unacknowledged means; the server says why it dropped the client and serves on.
func TestCrossOneWayServerFirst(t *testing.T) {
	h1, h2, h3 := host(t, 1), host(t, 2), host(t, 3)
	port := freshPort()
	srv := start(t, h2, gorping, "-s", "-P", "-a", h2.IPv4, "-p", strconv.Itoa(port), "--timeout", "6")
	waitListening(t, srv, addrPort(h2.IPv4, port), time.Minute)
	cli := start(t, h1, gorping, "-c", "-a", h2.IPv4, "-p", strconv.Itoa(port), "-v", "-i", "0.1", "--timeout", "30")
	waitOutput(t, cli, "rdma-ping-3: ", 2*time.Minute)

	pinNeighbour(t, h2, h1)
	cut := time.Now()
	netem(t, h1, "loss", "100%")
	st := endsWithin(t, cli, cut, 6*time.Second+boundSlack, 255, "a one-way fault toward it")
	if !strings.Contains(st.Stderr, "client DISCONNECT EVENT...") || !strings.Contains(st.Stderr, "rping client: peer disconnected after ") {
		t.Errorf("client: rping's disconnect lines and gorping's last line missing:\n%s", st.Stderr)
	}
	if took := time.Since(cut); took < 5*time.Second {
		t.Errorf("client ended %.1fs after the cut, before the server's 6 s bound could have", took.Seconds())
	}
	waitOutput(t, srv, "rping server: ", boundSlack)
	r := run(t, h3, 2*time.Minute, gorping, "-c", "-a", h2.IPv4, "-p", strconv.Itoa(port), "-C", "3", "-V")
	if r.Code != 0 {
		t.Errorf("a client from h3 after the fault: exit %d\n%s", r.Code, r.Stderr)
	}
}

// TestCrossPeerPowerOff: h3 loses power in the middle of endless runs. h1's
// gorping client ends within the bound with 110; h1's gorping -P server drops
// h3's client and keeps pinging with h2's; stock rping's client waits; a new
// connection to the dead host ends within the bound with an explanation; h3
// boots again and serves.
func TestCrossPeerPowerOff(t *testing.T) {
	h1, h2, h3 := host(t, 1), host(t, 2), host(t, 3)
	t.Cleanup(func() {
		if !h3.Running() {
			if err := h3.Boot(t.Context()); err != nil {
				t.Errorf("booting h3 again: %v", err)
			}
		}
	})
	gp, sp, lp := freshPort(), freshPort(), freshPort()
	// h3 serves h1's clients; h1 serves h2's and h3's.
	g3 := start(t, h3, gorping, "-s", "-P", "-a", h3.IPv4, "-p", strconv.Itoa(gp))
	s3 := start(t, h3, stock, "-s", "-P", "-a", h3.IPv4, "-p", strconv.Itoa(sp))
	l1 := start(t, h1, gorping, "-s", "-P", "-a", h1.IPv4, "-p", strconv.Itoa(lp))
	waitListening(t, g3, addrPort(h3.IPv4, gp), time.Minute)
	waitListening(t, s3, addrPort(h3.IPv4, sp), time.Minute)
	waitListening(t, l1, addrPort(h1.IPv4, lp), time.Minute)
	gcli := endless(t, h1, gorpingImpl, h3.IPv4, gp)
	scli := endless(t, h1, stockImpl, h3.IPv4, sp)
	from2 := endless(t, h2, gorpingImpl, h1.IPv4, lp)
	endless(t, h3, gorpingImpl, h1.IPv4, lp)

	off := time.Now()
	h3.PowerOff()
	endsWithin(t, gcli, off, defaultBound+boundSlack, 110, "the server's host acknowledged nothing (a keepalive went unanswered)")
	waitOutput(t, l1, "rping server: ", boundSlack)
	if st := l1.status(t); !strings.Contains(st.Stderr, h3.IPv4) || !strings.Contains(st.Stderr, "acknowledged nothing") {
		t.Errorf("h1's -P server's explanation does not name h3's client:\n%s", st.Stderr)
	}
	stillRunning(t, scli, "after gorping's client ended")

	// h2's client went on all along; Ctrl-C ends it with its summary.
	from2.signal(t, syscall.SIGINT)
	st := from2.wait(t, time.Minute)
	if st.Code != 0 || !strings.Contains(st.Stdout, " 0 errors") {
		t.Errorf("h2's client of h1's -P server, while h3 died: exit %d\n%s\n%s", st.Code, lastLines(st.Stdout, 3), st.Stderr)
	}

	// A new connection to the dead host: ARP may still know it (the
	// connection request then goes unanswered) or not (no neighbour answer).
	began := time.Now()
	c := start(t, h1, gorping, "-c", "-a", h3.IPv4, "-p", strconv.Itoa(gp), "-C", "1")
	r := c.wait(t, defaultBound+boundSlack)
	t.Logf("a new connection to the powered-off host ended after %.1fs, status %d:\n%s", time.Since(began).Seconds(), r.Code, r.Stderr)
	if r.Code == 0 || !strings.Contains(r.Stderr, "gorping: ") && !strings.Contains(r.Stderr, "rping client: no answer") {
		t.Errorf("connection to a dead host: exit %d without gorping's explanation:\n%s", r.Code, r.Stderr)
	}

	if err := h3.Boot(t.Context()); err != nil {
		t.Fatalf("booting h3 again: %v", err)
	}
	crossCase{server: gorpingImpl, client: stockImpl, srvHost: h3, cliHost: h1, size: 64, count: 5}.runCase(t)
}

// TestCrossFarLinkDown: h2's link goes down in the middle of an endless run
// from h1: h1's client ends within the bound with 110; h2's server reports
// its port down. h2's network is restored afterwards.
func TestCrossFarLinkDown(t *testing.T) {
	h1, h2 := host(t, 1), host(t, 2)
	t.Cleanup(func() { restoreNetwork(t, h2) })
	port, sport := freshPort(), freshPort()
	srv := start(t, h2, gorping, "-s", "-a", h2.IPv4, "-p", strconv.Itoa(port))
	ssrv := start(t, h2, stock, "-s", "-a", h2.IPv4, "-p", strconv.Itoa(sport), "-v")
	waitListening(t, srv, addrPort(h2.IPv4, port), time.Minute)
	waitListening(t, ssrv, addrPort(h2.IPv4, sport), time.Minute)
	cli := endless(t, h1, gorpingImpl, h2.IPv4, port)
	scli := endless(t, h1, stockImpl, h2.IPv4, sport)
	down := time.Now()
	linkSet(t, h2, "down")
	endsWithin(t, srv, down, boundSlack, 255, "gorping: ")
	endsWithin(t, cli, down, defaultBound+boundSlack, 110, "the server's host acknowledged nothing")
	// Stock rping: its client notices nothing; its server fails only if the
	// link went down while one of its requests was outstanding (mid-ping),
	// and otherwise waits as well.
	stillRunning(t, scli, "(the client) after gorping's client ended")
	if st := ssrv.status(t); st.Done {
		t.Logf("stock rping's server failed (status %d; the link went down mid-ping):\n%s", st.Code, lastLines(st.Stderr, 4))
	} else {
		t.Logf("stock rping's server is still waiting (the link went down between pings)")
	}
}

// TestCrossPeerMACChanges: the server's link-layer address in h1's neighbour
// table changes under running connections, as in a MAC failover, or when a
// corrupted ARP from h2 carries its address with a flipped bit (netem's corrupt
// delivers such a frame, which a real link's FCS would drop; ARP has no checksum
// of its own). Since Linux 6.0 rdma_cm then ends every connection to that
// address at once with RDMA_CM_EVENT_UNREACHABLE, status -110, whatever the state
// of the QP: gorping's client and stock rping's print rping's line and exit 255,
// and gorping's says why.
func TestCrossPeerMACChanges(t *testing.T) {
	h1, h2 := host(t, 1), host(t, 2)
	port, sport := freshPort(), freshPort()
	srv := start(t, h2, gorping, "-s", "-a", h2.IPv4, "-p", strconv.Itoa(port))
	ssrv := start(t, h2, stock, "-s", "-a", h2.IPv4, "-p", strconv.Itoa(sport))
	waitListening(t, srv, addrPort(h2.IPv4, port), time.Minute)
	waitListening(t, ssrv, addrPort(h2.IPv4, sport), time.Minute)
	cli := endless(t, h1, gorpingImpl, h2.IPv4, port)
	scli := endless(t, h1, stockImpl, h2.IPv4, sport)
	t.Cleanup(func() {
		if h1.Running() { // resolved anew by the next test's connection
			run(t, h1, time.Minute, ipTool, "neigh", "del", h2.IPv4, "dev", "eth0")
		}
	})
	changed := time.Now()
	must(t, h1, ipTool, "neigh", "replace", h2.IPv4, "lladdr", "02:00:00:00:00:99", "dev", "eth0", "nud", "reachable")
	const want = "cma event RDMA_CM_EVENT_UNREACHABLE, error -110"
	st := endsWithin(t, cli, changed, boundSlack, 255, want)
	if !strings.Contains(st.Stderr, "gorping: the kernel ended the connection because this host's neighbour entry for the server changed its MAC address") {
		t.Errorf("gorping's client does not say why:\n%s", st.Stderr)
	}
	endsWithin(t, scli, changed, boundSlack, 255, want)
}

// TestCrossLinkFlap: h1's link goes down and up. The running client ends at
// once (port down). Afterwards a new connection from h1 either works, or ends
// within the bound naming rxe's QP1 problem and the fix; a stock client in the
// same spot is still waiting. IPv6 is gone with the link's address, and
// gorping says so. Once rxe0 is created anew, both work again.
func TestCrossLinkFlap(t *testing.T) {
	h1, h2 := host(t, 1), host(t, 2)
	t.Cleanup(func() { restoreNetwork(t, h1) })
	port, port6, sport := freshPort(), freshPort(), freshPort()
	srv := start(t, h2, gorping, "-s", "-P", "-a", h2.IPv4, "-p", strconv.Itoa(port))
	srv6 := start(t, h2, gorping, "-s", "-P", "-a", h2.IPv6, "-p", strconv.Itoa(port6))
	ssrv := start(t, h2, stock, "-s", "-P", "-a", h2.IPv4, "-p", strconv.Itoa(sport))
	waitListening(t, srv, addrPort(h2.IPv4, port), time.Minute)
	waitListening(t, srv6, addrPort(h2.IPv6, port6), time.Minute)
	waitListening(t, ssrv, addrPort(h2.IPv4, sport), time.Minute)
	cli := endless(t, h1, gorpingImpl, h2.IPv4, port)
	scli := endless(t, h1, stockImpl, h2.IPv4, sport)

	flap := time.Now()
	linkSet(t, h1, "down")
	// gorping ends its connection at once on the port error (and its
	// disconnect, sent while the link is down, is what breaks rxe's QP1)...
	endsWithin(t, cli, flap, boundSlack, 255, "rxe0 port 1")
	linkSet(t, h1, "up")
	waitPort(t, h1, "ACTIVE", false)
	// ...while stock rping reads no asynchronous events: on 6.1 RC retransmission
	// delivers its stalled ping once the link is back; on 6.12 its connection
	// often stalls for good (rxe's send path, not rping). Either is recorded, for
	// docs/multi-host.md; what is asserted here is gorping's behaviour.
	pings := strings.Count(scli.status(t).Stdout, "ping data: ")
	if err := printsWithin(t, scli, "rdma-ping-"+strconv.Itoa(pings+3)+": ", 20*time.Second); err != nil {
		t.Logf("stock rping's running client did not go on after the flap (kernel %s): %v", cl.Kernel, err)
	} else {
		t.Logf("stock rping's running client went on after the flap (kernel %s; ping %d and on)", cl.Kernel, pings)
	}
	dev := must(t, h1, gorping, "devices")
	if !strings.Contains(dev, "link_downed") || !strings.Contains(dev, "rdma link delete rxe0") {
		t.Errorf("gorping devices after a flap does not show it:\n%s", dev)
	}

	again := time.Now()
	g := start(t, h1, gorping, "-c", "-a", h2.IPv4, "-p", strconv.Itoa(port), "-C", "3")
	s := start(t, h1, stock, "-c", "-a", h2.IPv4, "-p", strconv.Itoa(port), "-C", "3")
	r := g.wait(t, defaultBound+boundSlack)
	t.Logf("a new connection after the flap: status %d after %.1fs\n%s", r.Code, time.Since(again).Seconds(), r.Stderr)
	switch {
	case r.Code == 0:
		t.Logf("rxe0's QP1 survived this flap")
	case r.Code == 110 && strings.Contains(r.Stderr, "rdma link delete rxe0; rdma link add rxe0 type rxe netdev eth0"):
		stillRunning(t, s, "after gorping explained the flap")
	default:
		t.Errorf("after a flap: exit %d without the explanation:\n%s", r.Code, r.Stderr)
	}
	r6 := run(t, h1, time.Minute, gorping, "-c", "-a", h2.IPv6, "-p", strconv.Itoa(port6), "-C", "1")
	if r6.Code == 0 || !strings.Contains(r6.Stderr, "has no IPv6 address (a link that goes down loses its IPv6 addresses") {
		t.Errorf("IPv6 after the flap: exit %d\n%s", r6.Code, r6.Stderr)
	}

	restoreNetwork(t, h1)
	for _, a := range []struct {
		addr string
		port int
	}{{h2.IPv4, port}, {h2.IPv6, port6}} {
		connectsAnew(t, h1, a.addr, a.port)
	}
}

// connectsAnew checks that a client on h connects to addr:port, on an rxe0
// created anew. The new device numbers its QPs from the start again, so a
// request can reuse the QP number of a connection the peer still holds (one
// whose disconnect was lost in the flap): the peer's connection manager then
// rejects it as stale (REJECTED, error 10) and disconnects the old one. Such
// rejections are retried until a minute has passed.
func connectsAnew(t *testing.T, h *vm.Host, addr string, port int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for tries := 1; ; tries++ {
		r := run(t, h, time.Minute, gorping, "-c", "-a", addr, "-p", strconv.Itoa(port), "-C", "3", "-V")
		switch {
		case r.Code == 0:
			if tries > 1 {
				t.Logf("%s: connected at try %d (the earlier ones were rejected as stale)", addr, tries)
			}
			return
		case strings.Contains(r.Stderr, "RDMA_CM_EVENT_REJECTED, error 10") && time.Now().Before(deadline):
			time.Sleep(time.Second) // the peer's disconnect of the stale connection
		default:
			t.Errorf("after rxe0 was created anew, %s: exit %d at try %d\n%s", addr, r.Code, tries, r.Stderr)
			return
		}
	}
}

var boundLine = regexp.MustCompile(`gorping: path: stall bound ([0-9.]+) s: RC retry budget ([0-9.]+) s \(local ACK timeout (\d+) = [0-9.]+ s, retry_cnt (\d+)\) plus one timeout`)

// stallBoundOf runs one ping with -d from h against a -P server and returns
// the stall bound gorping printed and the QP attributes it came from.
func stallBoundOf(t *testing.T, h *vm.Host, addr string, port int) (bound float64, timeout, retry int) {
	t.Helper()
	r := run(t, h, time.Minute, gorping, "-c", "-a", addr, "-p", strconv.Itoa(port), "-C", "1", "-d")
	m := boundLine.FindStringSubmatch(r.Stderr)
	if r.Code != 0 || m == nil {
		t.Fatalf("exit %d, no stall bound line in:\n%s", r.Code, r.Stderr)
	}
	bound, _ = strconv.ParseFloat(m[1], 64)
	timeout, _ = strconv.Atoi(m[3])
	retry, _ = strconv.Atoi(m[4])
	return bound, timeout, retry
}

// TestCrossStallBound: the default bound comes from the QP's own attributes,
// which differ between kernels (6.1 gives RoCE connections a local ACK timeout
// of 19, 6.12 of 17): (retry_cnt + 2) x 4.096 µs x 2^timeout.
func TestCrossStallBound(t *testing.T) {
	h1, h2 := host(t, 1), host(t, 2)
	port := freshPort()
	srv := start(t, h2, gorping, "-s", "-P", "-a", h2.IPv4, "-p", strconv.Itoa(port))
	waitListening(t, srv, addrPort(h2.IPv4, port), time.Minute)
	bound, timeout, retry := stallBoundOf(t, h1, h2.IPv4, port)
	want := float64(retry+2) * 4.096e-6 * math.Pow(2, float64(timeout))
	t.Logf("kernel %s: local ACK timeout %d, retry_cnt %d: bound %.1f s", cl.Kernel, timeout, retry, bound)
	if retry != 7 || math.Abs(bound-want) > 0.06 {
		t.Errorf("bound %.1f s for timeout %d, retry_cnt %d; want retry_cnt 7 (rping's) and %.1f s", bound, timeout, retry, want)
	}
}

// rxeCounter reads one of rxe0's port counters on h.
func rxeCounter(t testing.TB, h *vm.Host, name string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimSpace(must(t, h, "cat", "/sys/class/infiniband/rxe0/ports/1/hw_counters/"+name)))
	if err != nil {
		t.Fatalf("%s: counter %s: %v", h.Name, name, err)
	}
	return n
}

// TestCrossRxeRetriesForEver documents why a partition stalls rping on
// Soft-RoCE for ever: a SEND whose packets are all lost is retransmitted far
// beyond the QP's retry_cnt of 7 (rxe takes 7 as "unlimited"), and never
// fails with RETRY_EXC_ERR, as a NIC's would after 8 tries. With --timeout 0
// gorping waits as rping does; the test reads rxe's own counters.
func TestCrossRxeRetriesForEver(t *testing.T) {
	h1, h2 := host(t, 1), host(t, 2)
	port := freshPort()
	srv := start(t, h2, gorping, "-s", "-P", "-a", h2.IPv4, "-p", strconv.Itoa(port), "--timeout", "0")
	waitListening(t, srv, addrPort(h2.IPv4, port), time.Minute)
	_, timeout, _ := stallBoundOf(t, h1, h2.IPv4, port)
	budget := 8 * time.Duration(4096*math.Pow(2, float64(timeout)))
	// One ping every 3 s: the partition comes between two, so the next
	// ping's SEND is the request that is lost.
	cli := start(t, h1, gorping, "-c", "-a", h2.IPv4, "-p", strconv.Itoa(port), "-i", "3", "--stats", "--timeout", "0", "-d")
	waitOutput(t, cli, "seq=0 ", 2*time.Minute)
	retries, exceeded := rxeCounter(t, h1, "completer_retry_err"), rxeCounter(t, h1, "retry_exceeded_err")
	netem(t, h1, "loss", "100%")
	deadline := time.Now().Add(budget*2 + boundSlack)
	for {
		r := rxeCounter(t, h1, "completer_retry_err") - retries
		if r > 10 {
			t.Logf("kernel %s: %d retransmission timeouts of the lost SEND (retry_cnt 7; a NIC gives up after the 8th try, %.1f s)", cl.Kernel, r, budget.Seconds())
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d retransmission timeouts within %s: does rxe honour retry_cnt 7 now? (README and docs/multi-host.md say it does not)", r, budget*2+boundSlack)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if e := rxeCounter(t, h1, "retry_exceeded_err") - exceeded; e != 0 {
		t.Errorf("retry_exceeded_err moved by %d", e)
	}
	if st := cli.status(t); st.Done || strings.Contains(st.Stderr, "cq completion failed") {
		t.Errorf("the client's SEND failed after all (status %d):\n%s", st.Code, lastLines(st.Stderr, 5))
	}
}
