//go:build fabric

package fabric

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorping/gorping/test/vm"
)

// pathMTU is the path MTU a gorping --json client reported for its connection.
func pathMTU(t *testing.T, stdout string) int {
	t.Helper()
	for _, line := range strings.Split(stdout, "\n") {
		var rec struct {
			Type    string `json:"type"`
			PathMTU int    `json:"path_mtu"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Type == "connection" {
			return rec.PathMTU
		}
	}
	t.Fatalf("no connection record in:\n%s", stdout)
	return 0
}

// waitActiveMTU waits until rxe0 on h reports an active MTU of mtu bytes
// (rxe follows its netdev's MTU). It reads rxe0's own port: the other rails'
// devices keep their MTU.
func waitActiveMTU(t *testing.T, h *vm.Host, mtu int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		out := must(t, h, gorping, "devices", "--json")
		got, err := activeMTU(out, "rxe0", 1)
		if err != nil {
			t.Fatalf("%s: %v", h.Name, err)
		}
		if got == mtu {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: rxe0's active MTU is %d, not %d, after a minute:\n%s", h.Name, got, mtu, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// activeMTU is one port's active MTU in gorping devices --json (0: not given).
func activeMTU(doc, device string, port int) (int, error) {
	var d struct {
		Devices []struct {
			Name  string
			Ports []struct {
				Port      int
				ActiveMTU int `json:"active_mtu"`
			}
		}
	}
	if err := json.Unmarshal([]byte(doc), &d); err != nil {
		return 0, fmt.Errorf("gorping devices --json: %w\n%s", err, doc)
	}
	for _, dev := range d.Devices {
		for _, p := range dev.Ports {
			if dev.Name == device && p.Port == port {
				return p.ActiveMTU, nil
			}
		}
	}
	return 0, fmt.Errorf("gorping devices --json has no %s port %d:\n%s", device, port, doc)
}

// TestCrossMTU: jumbo frames on both hosts carry a 4096-byte path MTU; a
// client with the smaller MTU works too, because the connecting side chooses
// the path MTU from its own netdev and the server takes it. A server with the
// smaller MTU gets a path MTU it cannot send: pings that fit its MTU pass,
// larger ones stall; its gorping warns at once, and both ends' stall lines
// name the MTU.
func TestCrossMTU(t *testing.T) {
	h1, h2 := host(t, 1), host(t, 2)
	port := freshPort()
	srv := start(t, h2, gorping, "-s", "-P", "-a", h2.IPv4, "-p", strconv.Itoa(port))
	waitListening(t, srv, addrPort(h2.IPv4, port), time.Minute)
	ping := func(size int, extra ...string) (code int, stdout, stderr string) {
		args := append([]string{gorping, "-c", "-a", h2.IPv4, "-p", strconv.Itoa(port), "-C", "3", "-V", "--json", "-S", strconv.Itoa(size)}, extra...)
		st := run(t, h1, 2*time.Minute, args...)
		return st.Code, st.Stdout, st.Stderr
	}

	t.Run("Jumbo", func(t *testing.T) {
		setMTU(t, h1, 9000)
		setMTU(t, h2, 9000)
		waitActiveMTU(t, h1, 4096)
		waitActiveMTU(t, h2, 4096)
		code, out, errs := ping(65535)
		if code != 0 || pathMTU(t, out) != 4096 {
			t.Errorf("jumbo: exit %d, path MTU %d, want 0 and 4096\n%s", code, pathMTU(t, out), errs)
		}
	})
	t.Run("SmallerClient", func(t *testing.T) {
		setMTU(t, h2, 9000)
		waitActiveMTU(t, h2, 4096)
		code, out, errs := ping(65535)
		if code != 0 || pathMTU(t, out) != 1024 {
			t.Errorf("client 1500, server 9000: exit %d, path MTU %d, want 0 and 1024\n%s", code, pathMTU(t, out), errs)
		}
	})
	t.Run("SmallerServer", func(t *testing.T) {
		setMTU(t, h1, 9000)
		waitActiveMTU(t, h1, 4096)
		if code, out, errs := ping(1000); code != 0 || pathMTU(t, out) != 4096 {
			t.Errorf("client 9000, server 1500, 1000-byte pings: exit %d, path MTU %d, want 0 and 4096\n%s", code, pathMTU(t, out), errs)
		}
		p2 := freshPort()
		s2 := start(t, h2, gorping, "-s", "-a", h2.IPv4, "-p", strconv.Itoa(p2), "--timeout", "6")
		waitListening(t, s2, addrPort(h2.IPv4, p2), time.Minute)
		began := time.Now()
		c := start(t, h1, gorping, "-c", "-a", h2.IPv4, "-p", strconv.Itoa(p2), "-C", "1", "-S", "65535", "--timeout", "6")
		endsWithin(t, c, began, 6*time.Second+boundSlack, 110, "; or it cannot send packets of this connection's path MTU")
		st := s2.wait(t, boundSlack)
		t.Logf("server: status %d\n%s", st.Code, st.Stderr)
		if !strings.Contains(st.Stderr, "gorping: warning: the client chose the path MTU (the connecting side's netdev decides): path MTU 4096") {
			t.Errorf("the server did not warn about the path MTU:\n%s", st.Stderr)
		}
	})
}
