//go:build guest

package guest

// Helpers for the interop, error-path and leak tests: which binary plays which
// role, listener detection that works for multi-threaded processes, the
// kernel's view of RDMA resources (rdma resource show) and a process's open
// file descriptors.

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorping/gorping/rping"
	"github.com/gorping/gorping/test/guesttest"
)

// impl is one rping implementation: gorping or rdma-core's rping.
type impl struct {
	name string // "gorping" or "stock"
	bin  string
}

func (i impl) isStock() bool { return i.name == "stock" }

func gorpingImpl(t testing.TB) impl { return impl{"gorping", GorpingBin(t)} }
func stockImpl(t testing.TB) impl   { return impl{"stock", StockRping(t)} }

// portSeq hands every server its own port, so a test can never talk to (or
// see the listener of) a server of an earlier test.
var portSeq atomic.Int32

func freshPort() int { return 7300 + int(portSeq.Add(1)) }

// pidOf is the process id of p.
func pidOf(p *Proc) int { return p.cmd.Process.Pid }

// tasksOf returns the thread ids of process pid. rdma's restrack records the
// thread that created an object ("pid" in rdma resource show is that thread's
// id), and a Go program creates its objects on whatever thread runs the
// goroutine, so "belongs to process pid" means "pid is one of its tasks".
func tasksOf(pid int) map[int]bool {
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	m := make(map[int]bool, len(ents))
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			m[n] = true
		}
	}
	return m
}

// waitFor polls cond every 20 ms until it holds, failing the test after timeout.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cleanSummary is `rdma resource show` (per-device totals) of an idle guest,
// learned the first time the detailed listing shows no user object. Checking
// the one-line summary first keeps the common case to a single rdma call.
var (
	cleanMu      sync.Mutex
	cleanSummary string
)

// rdmaIdle reports whether no user process owns any RDMA object, and if not,
// what is left.
func rdmaIdle(t testing.TB) (bool, map[string][]guesttest.Resource) {
	t.Helper()
	cleanMu.Lock()
	defer cleanMu.Unlock()
	sum := guesttest.Summary(t)
	if cleanSummary != "" && sum == cleanSummary {
		return true, nil
	}
	left := guesttest.UserResources(t)
	if len(left) > 0 {
		return false, left
	}
	// Nothing of a user: re-read the summary, the idle totals may have moved
	// (e.g. objects that were being torn down between the two reads).
	cleanSummary = guesttest.Summary(t)
	return true, nil
}

// waitRDMAIdle waits until no user process owns an RDMA object. After a
// process exits the kernel releases its objects when its files close, but
// some of that work is deferred, hence the wait.
func waitRDMAIdle(t testing.TB, timeout time.Duration, when string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		idle, left := rdmaIdle(t)
		if idle {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("RDMA objects still owned by processes %s (waited %s):\n%s", when, timeout, guesttest.Describe(left))
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// leakGuard checks that a test starts and ends with no RDMA object owned by
// any process. Call it before starting processes: cleanups run last-in
// first-out, so the final check runs after Start's cleanups killed whatever
// was still running.
func leakGuard(t *testing.T) {
	t.Helper()
	waitRDMAIdle(t, 30*time.Second, "before the test (left over by an earlier test)")
	if t.Failed() {
		t.FailNow()
	}
	t.Cleanup(func() { waitRDMAIdle(t, 30*time.Second, "after every process of the test exited") })
}

// procResources counts the RDMA objects of process p by kind.
func procResources(t testing.TB, p *Proc) map[string]int {
	t.Helper()
	tasks := tasksOf(pidOf(p))
	m := map[string]int{}
	for _, k := range guesttest.Kinds {
		for _, e := range guesttest.Resources(t, k) {
			if !e.Kernel() && tasks[e.PID()] {
				m[k]++
			}
		}
	}
	return m
}

// fdTargets lists process pid's open descriptors as "fd -> target", sorted.
func fdTargets(pid int) ([]string, error) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list fds of %d: %w", pid, err)
	}
	var l []string
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue // closed while we looked
		}
		l = append(l, e.Name()+" -> "+target)
	}
	sort.Strings(l)
	return l, nil
}

// expectedServerLines is what `rping -s -v` prints for a client's count
// pings of size bytes.
func expectedServerLines(count, size int) string {
	var b strings.Builder
	for i := range count {
		fmt.Fprintf(&b, "server ping data: %s\n", rping.PayloadString(i, size))
	}
	return b.String()
}

// checkPingPrefix checks that out is whole ping lines with prefix ("ping
// data: " or "server ping data: ") for pings 0, 1, 2, ... and returns how many.
// Used for runs that end by a kill, where only the count is unknown.
func checkPingPrefix(t testing.TB, who, prefix, out string, size int) int {
	t.Helper()
	if out == "" {
		return 0
	}
	if !strings.HasSuffix(out, "\n") {
		t.Errorf("%s stdout ends in a partial line: %q", who, out[max(0, len(out)-80):])
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	for i, l := range lines {
		if want := prefix + rping.PayloadString(i, size); l != want {
			t.Errorf("%s stdout line %d:\n got %q\nwant %q", who, i+1, l, want)
			break
		}
	}
	return len(lines)
}

// onlyLines fails the test if text has a line outside allowed (an empty
// text passes). It is how the tests accept rping's racy, harmless lines
// ("client DISCONNECT EVENT...") while catching anything else.
func onlyLines(t testing.TB, who, text string, allowed ...string) {
	t.Helper()
	ok := map[string]bool{}
	for _, a := range allowed {
		ok[a] = true
	}
	for _, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if l != "" && !ok[l] {
			t.Errorf("%s printed an unexpected line %q; whole output:\n%s", who, l, text)
			return
		}
	}
}

// noCrash fails the test if a Go runtime crash shows in stderr.
func noCrash(t testing.TB, who, stderr string) {
	t.Helper()
	for _, s := range []string{"panic:", "fatal error:", "goroutine ", "SIGSEGV"} {
		if strings.Contains(stderr, s) {
			t.Errorf("%s crashed (%q in stderr):\n%s", who, s, stderr)
			return
		}
	}
}
