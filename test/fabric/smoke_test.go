//go:build fabric

package fabric

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestCrossHostSmoke: a stock rping server on h2 and a gorping client on h1
// over the virtual Ethernet, and the switch saw RoCEv2 frames both ways.
func TestCrossHostSmoke(t *testing.T) {
	h1, h2 := host(t, 1), host(t, 2)
	port := freshPort()
	before12, before21 := cl.Switch.RoCEFrames(0, 1), cl.Switch.RoCEFrames(1, 0)
	srv := start(t, h2, stock, "-s", "-a", h2.IPv4, "-p", strconv.Itoa(port), "-v")
	waitListening(t, srv, addrPort(h2.IPv4, port), time.Minute)
	st := run(t, h1, 2*time.Minute, gorping, "-c", "-a", h2.IPv4, "-p", strconv.Itoa(port), "-C", "5", "-v", "-V", "--stats")
	if st.Code != 0 {
		t.Fatalf("client exit %d\n%s%s", st.Code, st.Stdout, st.Stderr)
	}
	t.Logf("client:\n%s", st.Stdout)
	if n := strings.Count(st.Stdout, "ping data: rdma-ping-"); n != 5 {
		t.Errorf("%d ping lines, want 5", n)
	}
	sst := srv.wait(t, time.Minute)
	t.Logf("server exit %d:\n%s%s", sst.Code, sst.Stdout, sst.Stderr)
	d12, d21 := cl.Switch.RoCEFrames(0, 1)-before12, cl.Switch.RoCEFrames(1, 0)-before21
	t.Logf("RoCEv2 frames h1->h2 %d, h2->h1 %d", d12, d21)
	if d12 < 5*2 || d21 < 5*2 {
		t.Errorf("RoCEv2 frames h1->h2 %d, h2->h1 %d: the pings did not cross the switch", d12, d21)
	}
}
