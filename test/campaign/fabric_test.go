package campaign

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gorping/gorping/rping"
)

func reasonOf(err error) string {
	var pe *rping.ProbeError
	if errors.As(err, &pe) {
		return pe.Reason
	}
	return ""
}

// TestFabricModel checks the model the campaign judges the rules on: an ECMP member
// black-holed fails exactly the flows its hash puts on it (both hash kinds), a dead NIC
// fails the dial after the connect timeout, a stopped agent refuses at once, and a
// healthy ping's RTT is the network's part plus the hosts'.
func TestFabricModel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := Shape{Hosts: 8, GroupSize: 4, Rails: 2, Spines: 4}
		f := NewFabric(s, 7, HashUDPSport, HashDestQP)
		for h := range s.Hosts {
			f.SetRunning(h, true)
		}
		ctx := context.Background()
		dial := func(a, b, r int) *conn {
			t.Helper()
			c, err := f.Dialer(a)(ctx, RailAddr(a, r), netip.AddrPortFrom(RailAddr(b, r), 7174), 0, nil)
			if err != nil {
				t.Fatalf("dial %d->%d rail %d: %v", a, b, r, err)
			}
			return c.(*conn)
		}
		for r := range s.Rails {
			f.SetUplink(0, r, 1, linkState{blackhole: true})
			failed, onMember := 0, 0
			for i := range 200 {
				c := dial(i%4, 4+i%4, r) // group 0 -> group 1: crosses the uplinks
				fl := c.Flow()
				fwd := f.member(0, r, fl.UDPSourcePort, fl.RemoteQPN)
				rev := f.member(1, r, fl.UDPSourcePort, fl.LocalQPN)
				hit := fwd == 1 || rev == 1
				if hit {
					onMember++
				}
				_, err := c.Ping(time.Second)
				if (err != nil) != hit {
					t.Fatalf("rail %d (%s): flow %+v on member %d/%d: ping error %v", r, f.HashKind[r], fl, fwd, rev, err)
				}
				if err != nil {
					failed++
				}
				c.Close()
			}
			// 1-(3/4)^2 of the flows meet member 1 one way or the other.
			if onMember < 60 || onMember > 120 {
				t.Errorf("rail %d: %d of 200 flows on the black-holed member, want about 88", r, onMember)
			}
			// Inside a group nothing crosses the uplinks.
			c := dial(0, 1, r)
			if _, err := c.Ping(time.Second); err != nil {
				t.Errorf("rail %d: a ping inside the group failed: %v", r, err)
			}
			f.SetUplink(0, r, 1, linkState{})
		}

		f.SetNIC(5, 1, linkState{down: true})
		start := time.Now()
		_, err := f.Dialer(0)(ctx, RailAddr(0, 1), netip.AddrPortFrom(RailAddr(5, 1), 7174), 0, nil)
		if reasonOf(err) != rping.ReasonUnreachable || time.Since(start) != 5*time.Second {
			t.Errorf("dial to a dead NIC: %v after %s, want unreachable after 5s", err, time.Since(start))
		}
		if c := dial(0, 5, 0); c == nil {
			t.Error("the other rail of a host with a dead NIC is unreachable")
		}
		f.SetRunning(6, false)
		if _, err := f.Dialer(0)(ctx, RailAddr(0, 0), netip.AddrPortFrom(RailAddr(6, 0), 7174), 0, nil); reasonOf(err) != rping.ReasonConnectRefused {
			t.Errorf("dial to a stopped agent: %v, want connect_refused", err)
		}

		c := dial(0, 4, 0)
		rtt, err := c.Ping(time.Second)
		nic, host, ok := c.LastSplit()
		if err != nil || !ok || rtt != nic+host || nic < 8*hopLatency || host != hostLatency {
			t.Errorf("ping: rtt %s (nic %s host %s, split %v), err %v", rtt, nic, host, ok, err)
		}
	})
}
