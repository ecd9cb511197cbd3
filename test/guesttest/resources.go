//go:build guest

package guesttest

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Env returns the guest harness's environment variable name (GORPING_BIN, GORPING_IPV4,
// GORPING_IPV6, GORPING_RDMA_TOOL), failing the test when it is unset: the test is not
// running inside the guest.
func Env(t testing.TB, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		t.Fatalf("%s is not set: run inside the guest harness (make guest PKGS=...)", name)
	}
	return v
}

// Kinds are the object kinds whose leaks matter: everything rping creates.
var Kinds = []string{"cm_id", "qp", "cq", "mr", "pd", "ctx"}

// Resources lists the objects of kind as the kernel's restrack sees them.
func Resources(t testing.TB, kind string) []Resource {
	t.Helper()
	tool := RDMATool(t)
	out, err := exec.Command(tool, "resource", "show", kind).CombinedOutput()
	if err != nil {
		t.Fatalf("%s resource show %s: %v\n%s", tool, kind, err, out)
	}
	return ParseResources(kind, string(out))
}

// UserResources returns every RDMA object a user process owns, by kind.
func UserResources(t testing.TB) map[string][]Resource {
	t.Helper()
	m := map[string][]Resource{}
	for _, k := range Kinds {
		for _, r := range Resources(t, k) {
			if !r.Kernel() {
				m[k] = append(m[k], r)
			}
		}
	}
	return m
}

// Describe lists m one object a line ("  kind: line"), "  (none)" when empty.
func Describe(m map[string][]Resource) string {
	var b strings.Builder
	for _, k := range Kinds {
		for _, r := range m[k] {
			fmt.Fprintf(&b, "  %s: %s\n", k, r.Line)
		}
	}
	if b.Len() == 0 {
		return "  (none)\n"
	}
	return b.String()
}

// transportListening reports whether the listener behind r can take connections:
// always on RoCE, and on iWARP once the driver's TCP socket listens (TCPListening).
func transportListening(r Resource, addrPort string) bool {
	dev, _, _ := strings.Cut(r.KV["link"], "/")
	nodeType, err := os.ReadFile("/sys/class/infiniband/" + dev + "/node_type")
	if err != nil || !strings.Contains(string(nodeType), "RNIC") {
		return true
	}
	port, err := strconv.Atoi(addrPort[strings.LastIndex(addrPort, ":")+1:])
	if err != nil {
		return true
	}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		if b, err := os.ReadFile(f); err == nil && TCPListening(string(b), port) {
			return true
		}
	}
	return false
}

// WaitListening waits until some rdma_cm id listens on addrPort (see Resource.Listening)
// and satisfies owner (nil: any owner), or fails the test after timeout or as soon as
// alive (nil: not checked) returns an error. Polling the kernel's view of the listener
// (on iWARP also its TCP socket) means a client started afterwards cannot race the
// server's rdma_listen.
func WaitListening(t testing.TB, addrPort string, timeout time.Duration, owner func(Resource) bool, alive func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ids := Resources(t, "cm_id")
		for _, r := range ids {
			if r.Listening(addrPort) && (owner == nil || owner(r)) && transportListening(r, addrPort) {
				return
			}
		}
		if alive != nil {
			if err := alive(); err != nil {
				t.Fatalf("no listener on %s: %v", addrPort, err)
			}
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			for _, r := range ids {
				b.WriteString(r.Line + "\n")
			}
			t.Fatalf("no listener on %s after %s; rdma resource show cm_id:\n%s", addrPort, timeout, b.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
