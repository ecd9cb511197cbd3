//go:build fabric

package fabric

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorping/gorping/test/guesttest"
	"github.com/gorping/gorping/test/vm"
)

// Faults, injected inside the guests with the tools a user would use, and
// undone by the test's cleanup so the next test finds the cluster as it was.

// netem puts a netem qdisc with args ("delay 20ms", "loss 3%") on h's eth0,
// i.e. on everything h sends on the data network. Cleanup removes it.
func netem(t testing.TB, h *vm.Host, args ...string) {
	t.Helper()
	netemOn(t, h, "eth0", args...)
}

// pinNeighbour makes from's eth0 neighbour entry for to permanent until the test
// ends, so that a one-way fault toward from stays one-way. rxe sends through the
// kernel's IP output, which needs a resolved neighbour: with to's ARP replies lost
// too, an entry that goes stale and is probed fails after a few seconds, and from
// then on rxe silences from toward to. That failed TestCrossOneWayServerFirst once in
// three clean-clone runs (the server's disconnect never reached its client, which
// ended after its own 30 s bound); flushing the entry after the cut reproduces it
// every time, and the pinned entry cures it. A RoCE NIC sends with the MAC its
// address handle holds and asks no one.
func pinNeighbour(t testing.TB, from, to *vm.Host) {
	t.Helper()
	must(t, from, ipTool, "neigh", "replace", to.IPv4, "lladdr", to.MAC, "dev", "eth0", "nud", "permanent")
	t.Cleanup(func() {
		if from.Running() {
			run(t, from, time.Minute, ipTool, "neigh", "del", to.IPv4, "dev", "eth0")
		}
	})
}

// netemOn is netem on one of h's NICs (a rail's eth<r>).
func netemOn(t testing.TB, h *vm.Host, dev string, args ...string) {
	t.Helper()
	must(t, h, append([]string{tc, "qdisc", "replace", "dev", dev, "root", "netem"}, args...)...)
	t.Cleanup(func() {
		if h.Running() {
			run(t, h, time.Minute, tc, "qdisc", "del", "dev", dev, "root")
		}
	})
}

var netemDropped = regexp.MustCompile(`dropped (\d+)`)

// netemDrops is how many packets h's netem qdisc has dropped.
func netemDrops(t testing.TB, h *vm.Host) int {
	t.Helper()
	out := must(t, h, tc, "-s", "qdisc", "show", "dev", "eth0")
	m := netemDropped.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("%s: no drop count in tc -s qdisc show:\n%s", h.Name, out)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// setMTU sets eth0's MTU on h; cleanup restores 1500.
func setMTU(t testing.TB, h *vm.Host, mtu int) {
	t.Helper()
	must(t, h, ipTool, "link", "set", "dev", "eth0", "mtu", strconv.Itoa(mtu))
	t.Cleanup(func() {
		if h.Running() {
			must(t, h, ipTool, "link", "set", "dev", "eth0", "mtu", "1500")
		}
	})
}

// linkSet takes h's eth0 down or up.
func linkSet(t testing.TB, h *vm.Host, state string) {
	t.Helper()
	must(t, h, ipTool, "link", "set", "dev", "eth0", state)
}

// restoreNetwork brings h's data network back to the test bed's state: eth0
// up with both addresses (a link that went down loses its IPv6 address), and
// rxe0 created anew (a link flap can leave rxe's QP1 unable to receive; see
// rping/explain/cause.go), waiting until its port is ACTIVE with both GIDs.
func restoreNetwork(t testing.TB, h *vm.Host) {
	t.Helper()
	linkSet(t, h, "up")
	run(t, h, time.Minute, ipTool, "addr", "add", h.IPv6+"/64", "dev", "eth0", "nodad") // may exist
	must(t, h, rdma, "link", "delete", "rxe0")
	must(t, h, rdma, "link", "add", "rxe0", "type", "rxe", "netdev", "eth0")
	waitPort(t, h, "ACTIVE", true)
}

// waitPort waits until rxe0's port on h is in state (e.g. "ACTIVE", "DOWN"),
// and, with gids, has the GIDs of both of h's addresses.
func waitPort(t testing.TB, h *vm.Host, state string, gids bool) {
	t.Helper()
	want := []string{gidOf(h.IPv4), gidOf(h.IPv6)}
	deadline := time.Now().Add(time.Minute)
	for {
		out := run(t, h, time.Minute, "sh", "-c", "cat /sys/class/infiniband/rxe0/ports/1/state; cat /sys/class/infiniband/rxe0/ports/1/gids/*").Stdout
		ok := strings.Contains(out, state)
		for _, g := range want {
			ok = ok && (!gids || strings.Contains(out, g))
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: rxe0 port not %s with GIDs %v within a minute:\n%s", h.Name, state, want, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// gidOf is the GID sysfs shows for an address (RoCE v2: IPv4-mapped).
func gidOf(addr string) string {
	b := netipMust(addr).As16()
	var s []string
	for i := 0; i < 16; i += 2 {
		s = append(s, fmt.Sprintf("%02x%02x", b[i], b[i+1]))
	}
	return strings.Join(s, ":")
}

// cmIDs lists the rdma_cm ids on h (rdma resource show cm_id).
func cmIDs(t testing.TB, h *vm.Host) []guesttest.Resource {
	t.Helper()
	return guesttest.ParseResources("cm_id", must(t, h, rdma, "resource", "show", "cm_id"))
}
