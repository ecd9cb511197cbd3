//go:build !guest

package mesh

// The agent facing a hostile or careless network (issue 26): HTTP clients that hold
// connections, DNS that does not answer, target files that are not what they seem.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

// rawConn opens a TCP connection to the agent's listener.
func rawConn(t *testing.T, ta *testAgent) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", ta.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waitClosed waits until the server closes c (a read returns EOF or a reset).
func waitClosed(t *testing.T, c net.Conn, within time.Duration, what string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(within))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Errorf("%s: the agent still holds the connection after %s", what, within)
	}
}

// get sends one keep-alive GET on c and reads the response.
func get(t *testing.T, c net.Conn, r *bufio.Reader, path string) *http.Response {
	t.Helper()
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: agent\r\n\r\n", path)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// TestHTTPLimits (issue 26 finding 1): idle keep-alive connections and slow request
// bodies are closed, a huge header is refused, and the listener holds a bounded number
// of connections. The limits are shortened here; their values are defaultHTTPLimits.
func TestHTTPLimits(t *testing.T) {
	short := httpLimits{readHeader: 300 * time.Millisecond, read: 500 * time.Millisecond, write: 15 * time.Second,
		idle: 500 * time.Millisecond, maxHeaderBytes: 8 << 10, maxConns: 64}
	ta := startAgent(t, deps{dial: newFakeNet().dial, resolver: &fakeResolver{m: map[string][]netip.Addr{}}, limits: &short},
		"--no-responder")

	idle := rawConn(t, ta)
	if resp := get(t, idle, bufio.NewReader(idle), "/-/healthy"); resp.StatusCode != 200 {
		t.Fatalf("/-/healthy: %d", resp.StatusCode)
	}
	waitClosed(t, idle, 10*time.Second, "an idle keep-alive connection")

	slow := rawConn(t, ta)
	fmt.Fprintf(slow, "POST /probe?target=192.0.2.1 HTTP/1.1\r\nHost: agent\r\nContent-Length: 100000\r\n\r\nx")
	waitClosed(t, slow, 10*time.Second, "a request body sent slowly")

	big := rawConn(t, ta)
	fmt.Fprintf(big, "GET /metrics HTTP/1.1\r\nHost: agent\r\nX-Big: %s\r\n\r\n", strings.Repeat("a", 100<<10))
	big.SetReadDeadline(time.Now().Add(10 * time.Second))
	if resp, err := http.ReadResponse(bufio.NewReader(big), nil); err != nil || resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("a 100 KiB header: %v %v, want 431", resp, err)
	}

	// At most maxConns connections at once: a fifth waits until one of four goes.
	capped := httpLimits{readHeader: 5 * time.Second, read: 10 * time.Second, write: 15 * time.Second, idle: time.Minute,
		maxHeaderBytes: 8 << 10, maxConns: 4}
	tb := startAgent(t, deps{dial: newFakeNet().dial, resolver: &fakeResolver{m: map[string][]netip.Addr{}}, limits: &capped},
		"--no-responder")
	var held []net.Conn
	for range 4 {
		c := rawConn(t, tb)
		get(t, c, bufio.NewReader(c), "/-/healthy")
		held = append(held, c)
	}
	fifth := rawConn(t, tb)
	fr := bufio.NewReader(fifth)
	fmt.Fprintf(fifth, "GET /-/healthy HTTP/1.1\r\nHost: agent\r\n\r\n")
	fifth.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := fr.Peek(1); err == nil {
		t.Error("a fifth connection was served while four were held (maxConns 4)")
	}
	held[0].Close()
	fifth.SetReadDeadline(time.Now().Add(10 * time.Second))
	if resp, err := http.ReadResponse(fr, nil); err != nil || resp.StatusCode != 200 {
		t.Errorf("the fifth connection after one of four closed: %v %v", resp, err)
	}
}

// heldResolver answers every lookup with addr, but only once released (a DNS server that
// does not answer; it ignores the context as a stuck resolver would), and counts.
type heldResolver struct {
	addr    netip.Addr
	release chan struct{}
	mu      sync.Mutex
	calls   int
	now     int // lookups in flight
	most    int
}

func newHeldResolver(addr string) *heldResolver {
	return &heldResolver{addr: netip.MustParseAddr(addr), release: make(chan struct{})}
}

func (r *heldResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	r.calls++
	r.now++
	r.most = max(r.most, r.now)
	r.mu.Unlock()
	<-r.release
	r.mu.Lock()
	r.now--
	r.mu.Unlock()
	return []netip.Addr{r.addr}, nil
}

func (r *heldResolver) counts() (calls, most int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls, r.most
}

// probeStatuses sends n /probe requests for names at once and returns their statuses
// as they arrive.
func probeStatuses(ta *testAgent, n int) chan int {
	out := make(chan int, n)
	for i := range n {
		go func() {
			code, _, err := ta.Get(fmt.Sprintf("/probe?target=n%d.slow.test", i))
			if err != nil {
				code = -1
			}
			out <- code
		}()
	}
	return out
}

// TestProbeDNSBounded (finding 2): /probe takes its slot before any resolution and
// resolves only names the allow-list could admit, so parallel requests for names make
// at most maxProbesInFlight lookups, and none when only the agent's targets are allowed.
func TestProbeDNSBounded(t *testing.T) {
	res := newHeldResolver("203.0.113.9") // outside the allow-list below
	defer close(res.release)
	ta := startAgent(t, deps{dial: newFakeNet().dial, resolver: res}, "--no-responder", "--peers", "192.0.2.1")
	got := probeStatuses(ta, 40)
	for range 40 {
		if code := <-got; code != http.StatusForbidden {
			t.Errorf("/probe of a name that is no target, without --probe-allow: %d, want 403", code)
		}
	}
	if calls, _ := res.counts(); calls != 0 {
		t.Errorf("%d DNS lookups for names that no allow-list could admit", calls)
	}

	res2 := newHeldResolver("203.0.113.9")
	tb := startAgent(t, deps{dial: newFakeNet().dial, resolver: res2}, "--no-responder", "--probe-allow", "198.51.100.0/24")
	got = probeStatuses(tb, 40)
	// maxProbesInFlight requests wait on DNS; every other one is answered 503 at once.
	for i := range 40 - maxProbesInFlight {
		select {
		case code := <-got:
			if code != http.StatusServiceUnavailable {
				t.Errorf("answer %d while %d probes wait on DNS: %d, want 503", i, maxProbesInFlight, code)
			}
		case <-time.After(10 * time.Second):
			calls, _ := res2.counts()
			t.Fatalf("only %d of 40 requests answered while DNS does not answer (%d lookups in flight)", i, calls)
		}
	}
	close(res2.release)
	for range maxProbesInFlight {
		if code := <-got; code != http.StatusForbidden {
			t.Errorf("a name that resolves outside --probe-allow: %d, want 403", code)
		}
	}
	if calls, most := res2.counts(); calls > maxProbesInFlight || most > maxProbesInFlight {
		t.Errorf("%d lookups, %d at once, for 40 requests: want at most %d", calls, most, maxProbesInFlight)
	}
}
