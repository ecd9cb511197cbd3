//go:build !guest

package mesh

// The agent facing a hostile or careless network (issue 26): HTTP clients that hold
// connections, DNS that does not answer, target files that are not what they seem.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
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
