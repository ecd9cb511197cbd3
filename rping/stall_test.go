package rping

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestStallBound(t *testing.T) {
	if got := ackTimeout(19); got != 2147483648*time.Nanosecond {
		t.Errorf("ackTimeout(19) = %v, want 2.147483648s", got)
	}
	p := stallBound(0, 19, 7)
	if want := 9 * ackTimeout(19); p.bound != want {
		t.Errorf("bound for timeout 19, retry 7 = %v, want %v (8 tries and one more timeout)", p.bound, want)
	}
	if s := p.String(); s != "19.3 s: RC retry budget 17.2 s (local ACK timeout 19 = 2.1 s, retry_cnt 7) plus one timeout" {
		t.Errorf("String() = %q", s)
	}
	if c := connPolicy(0); c.bound != p.bound {
		t.Errorf("connection phase bound %v, want rdma_cm's default %v", c.bound, p.bound)
	}
	if q := stallBound(0, 14, 3); q.bound != 5*ackTimeout(14) {
		t.Errorf("bound for timeout 14, retry 3 = %v", q.bound)
	}
	if e := stallBound(3*time.Second, 19, 7); e.bound != 3*time.Second || e.String() != "3.0 s (--timeout)" {
		t.Errorf("--timeout 3: %v %q", e.bound, e.String())
	}
	if n := stallBound(NoTimeout, 19, 7); n.bound != 0 || n.String() != "none (--timeout 0)" {
		t.Errorf("--timeout 0: %v %q", n.bound, n.String())
	}
}

// shortBound is a stall bound that keeps the tests fast, and still lets a loaded
// machine's late timers keep the order of half-way tick and bound.
var shortBound = stallBound(400*time.Millisecond, 0, 0)

// A partition right after the server's third echo: the client waits for the
// last go-ahead and its keepalive goes unanswered; the server, between pings,
// drops the client whose host acknowledges nothing. Both end with 110.
func TestStallPartition(t *testing.T) {
	cl, sv := newSide(false, 64, 0), newSide(true, 64, 0)
	writes := 0
	_, c, s := runPair(t, cl, sv, 64, 64, func(c, s *fakeConn) {
		c.policy, s.policy = shortBound, shortBound
		s.onWrite = func([]byte) {
			if writes++; writes == 3 {
				c.partitioned, s.partitioned = true, true // under the fake net's lock
			}
		}
	})
	if st := cl.wait(t); st != exitTimeout {
		t.Errorf("client exit %d, want %d; stderr %q", st, exitTimeout, cl.stderr)
	}
	if st := sv.wait(t); st != exitTimeout {
		t.Errorf("server exit %d, want %d; stderr %q", st, exitTimeout, sv.stderr)
	}
	want := "rping client: no progress for 0.4 s waiting for the server's echo and last go-ahead: " +
		"the server's host acknowledged nothing (a keepalive went unanswered): it is down, its link is down, or the network between is partitioned\n"
	if got := cl.stderr.String(); !sameStallLine(got, want) {
		t.Errorf("client stderr:\n%q\nwant\n%q", got, want)
	}
	if got, _, _ := strings.Cut(sv.stderr.String(), "(a keepalive went unanswered): "); !sameStallLine(got, "rping server: the client acknowledged nothing for 0.2 s ") ||
		!strings.HasSuffix(sv.stderr.String(), "; connection dropped\n") || strings.Count(sv.stderr.String(), "\n") != 1 {
		t.Errorf("server stderr %q", sv.stderr)
	}
	if c.keepalives != 1 || s.keepalives != 1 {
		t.Errorf("keepalives: client %d, server %d; want 1 each", c.keepalives, s.keepalives)
	}
}

// A server whose host is up but whose rping never answers: the client's
// keepalive is acknowledged, and its message says so.
func TestStallPeerHostUp(t *testing.T) {
	n := newFakeNet()
	c, s := n.pair(64, 64)
	c.policy = shortBound
	_ = s // nobody serves: the advert lands in s's RECV and stays there
	cl := newSide(false, 64, 1)
	cl.startClient(context.Background(), c)
	if st := cl.wait(t); st != exitTimeout {
		t.Fatalf("client exit %d, want %d; stderr %q", st, exitTimeout, cl.stderr)
	}
	want := "rping client: no progress for 0.4 s waiting for the server's first go-ahead (it reads the ping): " +
		"the server's host is up (it acknowledged a keepalive) but its rping does not answer: the process is stopped or stuck\n"
	if got := cl.stderr.String(); !sameStallLine(got, want) {
		t.Errorf("client stderr:\n%q\nwant\n%q", got, want)
	}
}

var stallSecs = regexp.MustCompile(`\d+\.\d s\b`)

// sameStallLine compares a stall message with want. Its durations ("0.4 s") are what
// the waits measured: on a loaded machine a timer fires late, so they may be longer than
// want's, never shorter.
func sameStallLine(got, want string) bool {
	g, w := stallSecs.FindAllString(got, -1), stallSecs.FindAllString(want, -1)
	if len(g) != len(w) || stallSecs.ReplaceAllString(got, "T") != stallSecs.ReplaceAllString(want, "T") {
		return false
	}
	for i := range g {
		gv, _ := strconv.ParseFloat(strings.TrimSuffix(g[i], " s"), 64)
		wv, _ := strconv.ParseFloat(strings.TrimSuffix(w[i], " s"), 64)
		if gv < wv {
			return false
		}
	}
	return true
}

// A client pinging every 1.2 s, three times the bound: the server keeps it,
// because its host acknowledges the keepalives in between.
func TestStallIdleClientKeptAlive(t *testing.T) {
	cl, sv := newSide(false, 64, 3), newSide(true, 64, 0)
	cl.cfg.Interval = 1200 * time.Millisecond
	_, c, s := runPair(t, cl, sv, 64, 64, func(c, s *fakeConn) { c.policy, s.policy = shortBound, shortBound })
	if st := cl.wait(t); st != 0 {
		t.Errorf("client exit %d; stderr %q", st, cl.stderr)
	}
	if st := sv.wait(t); st != 0 {
		t.Errorf("server exit %d; stderr %q", st, sv.stderr)
	}
	if s.keepalives < 4 {
		t.Errorf("server sent %d keepalives in two 1.2 s gaps with a 0.2 s tick, want at least 4", s.keepalives)
	}
	if c.keepalives != 0 {
		t.Errorf("client sent %d keepalives, want 0 (its waits are short)", c.keepalives)
	}
}

// --timeout 0 waits for ever, as rping does: no keepalive, no message; only
// the context ends the wait.
func TestStallNoTimeout(t *testing.T) {
	n := newFakeNet()
	c, _ := n.pair(64, 64)
	c.policy = stallBound(NoTimeout, 0, 0)
	c.partitioned = true
	cl := newSide(false, 64, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	cl.startClient(ctx, c)
	if st := cl.wait(t); st != exitInterrupted {
		t.Errorf("client exit %d, want %d (cancelled); stderr %q", st, exitInterrupted, cl.stderr)
	}
	if cl.stderr.String() != "" || c.keepalives != 0 {
		t.Errorf("stderr %q, %d keepalives; want neither", cl.stderr, c.keepalives)
	}
}

// A one-way fault after the third echo: nothing the client sends arrives, what the
// server sends does. The server's bound runs out first (its keepalive unanswered) and
// its disconnect reaches the client, whose advert has gone unacknowledged since: the
// client's last line says what that means.
func TestStallOneWayServerBoundFirst(t *testing.T) {
	cl, sv := newSide(false, 64, 0), newSide(true, 64, 0)
	writes := 0
	_, _, s := runPair(t, cl, sv, 64, 64, func(c, s *fakeConn) {
		// The client's bound is far away; its QP's local ACK timeout is 4 ms (10).
		c.policy, s.policy = stallBound(time.Minute, 10, 7), shortBound
		s.onWrite = func([]byte) {
			if writes++; writes == 3 {
				c.partitioned = true // under the fake net's lock
			}
		}
	})
	if st := sv.wait(t); st != exitTimeout {
		t.Errorf("server exit %d, want %d; stderr %q", st, exitTimeout, sv.stderr)
	}
	s.disconnect() // as the server's glue does when its loop ends
	if st := cl.wait(t); st != 255 {
		t.Errorf("client exit %d, want 255 (rping's -1 after a disconnect mid-ping); stderr %q", st, cl.stderr)
	}
	want := regexp.MustCompile(`^wait for RDMA_WRITE_ADV state 10\n` +
		`rping client: peer disconnected after 3 pings while our advert had gone unacknowledged for 0\.[3-9] s: ` +
		`what this host sends does not reach the server \(lost on the way or dropped by its host\) while what it sends arrives, ` +
		`a one-way fault toward it\n$`)
	if got := cl.stderr.String(); !want.MatchString(got) {
		t.Errorf("client stderr:\n%s\nwant it to match\n%s", got, want)
	}
}

// A peer that disconnects while our request has been in flight for less than one local
// ACK timeout has not necessarily missed it: the same one-way fault with the client's
// QP at rdma_cm's timeout (19: 2.1 s) and the server gone after 0.4 s ends with rping's
// lines and gorping's plain last line only.
func TestStallDisconnectInFlightQuiet(t *testing.T) {
	cl, sv := newSide(false, 64, 0), newSide(true, 64, 0)
	writes := 0
	_, _, s := runPair(t, cl, sv, 64, 64, func(c, s *fakeConn) {
		c.policy, s.policy = stallBound(time.Minute, 19, 7), shortBound
		s.onWrite = func([]byte) {
			if writes++; writes == 3 {
				c.partitioned = true
			}
		}
	})
	sv.wait(t)
	s.disconnect()
	cl.wait(t)
	if got, want := cl.stderr.String(), "wait for RDMA_WRITE_ADV state 10\nrping client: peer disconnected after 3 pings\n"; got != want {
		t.Errorf("client stderr:\n%s\nwant\n%s", got, want)
	}
}

// The mirror: nothing the server sends arrives after the third echo. The client's
// bound runs out first and its disconnect reaches the server, whose go-ahead has gone
// unacknowledged since: the server says so at once (and serves on, as after any client).
func TestStallOneWayClientBoundFirst(t *testing.T) {
	cl, sv := newSide(false, 64, 0), newSide(true, 64, 0)
	writes := 0
	_, c, _ := runPair(t, cl, sv, 64, 64, func(c, s *fakeConn) {
		c.policy, s.policy = shortBound, stallBound(time.Minute, 10, 7)
		s.onWrite = func([]byte) {
			if writes++; writes == 3 {
				s.partitioned = true
			}
		}
	})
	if st := cl.wait(t); st != exitTimeout {
		t.Errorf("client exit %d, want %d; stderr %q", st, exitTimeout, cl.stderr)
	}
	c.disconnect()
	if st := sv.wait(t); st != 0 {
		t.Errorf("server exit %d, want 0 (its client left between pings); stderr %q", st, sv.stderr)
	}
	want := regexp.MustCompile(`^rping server: the client disconnected while our go-ahead had gone unacknowledged for 0\.[3-9] s: ` +
		`what this host sends does not reach the client \(lost on the way or dropped by its host\) while what it sends arrives, ` +
		`a one-way fault toward it\n$`)
	if got := sv.stderr.String(); !want.MatchString(got) {
		t.Errorf("server stderr:\n%s\nwant it to match\n%s", got, want)
	}
}

// A one-way fault the client cannot see in its own requests: its advert was
// acknowledged, but what the server's RDMA requests need back from this host (here
// the server's last go-ahead of the third ping is lost too, from the fake's side) does
// not arrive. The server gives up first; the client's last line says what a ping that
// waited that long for the disconnecting server likely means.
func TestStallOneWayAcknowledgedAdvert(t *testing.T) {
	cl, sv := newSide(false, 64, 0), newSide(true, 64, 0)
	writes := 0
	n, _, s := runPair(t, cl, sv, 64, 64, func(c, s *fakeConn) {
		c.policy, s.policy = stallBound(time.Minute, 10, 7), shortBound
		s.onWrite = func([]byte) {
			if writes++; writes == 3 {
				s.partitioned = true
			}
		}
	})
	if st := sv.wait(t); st != exitTimeout {
		t.Errorf("server exit %d, want %d; stderr %q", st, exitTimeout, sv.stderr)
	}
	n.mu.Lock()
	s.partitioned = false // the disconnect request gets through, as the bed's does
	n.mu.Unlock()
	s.disconnect()
	if st := cl.wait(t); st != 255 {
		t.Errorf("client exit %d, want 255; stderr %q", st, cl.stderr)
	}
	want := regexp.MustCompile(`^wait for RDMA_WRITE_COMPLETE state 10\n` +
		`rping client: peer disconnected after 2 pings while a ping had waited 0\.[3-9] s for it: ` +
		`what this host sends likely does not reach the server \(the responses to its RDMA requests lost on the way or dropped by its host\) ` +
		`while what it sends arrives, a one-way fault toward it\n$`)
	if got := cl.stderr.String(); !want.MatchString(got) {
		t.Errorf("client stderr:\n%s\nwant it to match\n%s", got, want)
	}
}
