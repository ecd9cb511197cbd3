//go:build guest

package guest

// Device removal: `rdma link delete` under running servers and clients. The
// kernel's removal delivers RDMA_CM_EVENT_DEVICE_REMOVAL to every rdma_cm id
// on the device and then waits until every uverbs file of the device is
// closed (rxe cannot disassociate a context), so a process that keeps its
// verbs context open blocks `rdma link delete` for good. Every test deletes
// the guest's rxe link, checks how the processes end, waits for the delete to
// finish and adds the link back, so the tests after it find the guest as it
// was.

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorping/gorping/test/guesttest"
)

// removalLine is what rping prints on RDMA_CM_EVENT_DEVICE_REMOVAL before it
// exits 255.
const removalLine = "cma detected device removal!!!!"

// exitDeadline bounds how long a process may take to end after the link is
// deleted (stock rping needs well under a second; arm64 runs under TCG).
const exitDeadline = 30 * time.Second

// rxeLink is the guest's rxe link and the netdev it sits on.
type rxeLink struct{ dev, netdev string }

var netdevRE = regexp.MustCompile(`\bnetdev (\S+)`)

// currentLink reads rxe0's netdev from `rdma link show`, so the test adds the
// link back on whatever interface the guest set up.
func currentLink(t testing.TB) rxeLink {
	t.Helper()
	const dev = "rxe0"
	out, err := exec.Command(RDMATool(t), "link", "show", dev+"/1").CombinedOutput()
	if err != nil {
		t.Fatalf("rdma link show %s/1: %v\n%s", dev, err, out)
	}
	m := netdevRE.FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("no netdev in `rdma link show %s/1`: %s", dev, out)
	}
	return rxeLink{dev: dev, netdev: m[1]}
}

// gidOf is addr as sysfs prints a GID (IPv4 as its v4-mapped IPv6 address).
func gidOf(addr string) string {
	b := netip.MustParseAddr(addr).As16()
	var g []string
	for i := 0; i < 16; i += 2 {
		g = append(g, fmt.Sprintf("%02x%02x", b[i], b[i+1]))
	}
	return strings.Join(g, ":")
}

// removal is one `rdma link delete` in flight and what must end because of it.
type removal struct {
	link  rxeLink
	procs []*Proc // killed before the link is restored, if still running
	del   *Proc
	done  bool
}

// removeLink deletes the rxe link in the background (the command returns only
// once every user has let go of the device) and registers the cleanup that
// kills what still runs, waits for the delete and adds the link back.
func removeLink(t *testing.T, procs ...*Proc) *removal {
	t.Helper()
	r := &removal{link: currentLink(t), procs: procs}
	r.del = Start(t, RDMATool(t), "link", "delete", r.link.dev)
	// Registered after Start's own cleanup, so it runs first: killing a
	// blocked delete would wait forever.
	t.Cleanup(func() { r.restore(t) })
	return r
}

// restore ends whatever still holds the device, waits for the delete and
// adds the link back, waiting until its port is ACTIVE with both GIDs.
func (r *removal) restore(t *testing.T) {
	t.Helper()
	if r.done {
		return
	}
	r.done = true
	for _, p := range r.procs {
		if p.Running() {
			t.Logf("killing %s before restoring the link", p.Name)
			p.Kill()
		}
	}
	select {
	case <-r.del.done:
		if code := exitCode(t, r.del); code != 0 {
			t.Errorf("rdma link delete %s: exit %d\n%s%s", r.link.dev, code, r.del.Stdout(), r.del.Stderr())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("rdma link delete %s still blocked 60s after every test process ended: the guest is unusable now", r.link.dev)
	}
	out, err := exec.Command(RDMATool(t), "link", "add", r.link.dev, "type", "rxe", "netdev", r.link.netdev).CombinedOutput()
	if err != nil {
		t.Fatalf("rdma link add %s type rxe netdev %s: %v\n%s", r.link.dev, r.link.netdev, err, out)
	}
	waitPortReady(t, r.link.dev)
}

// waitPortReady waits until dev's port is ACTIVE and has the GIDs of both
// guest addresses, as the guest's setup does.
func waitPortReady(t *testing.T, dev string) {
	t.Helper()
	port := "/sys/class/infiniband/" + dev + "/ports/1"
	want := []string{gidOf(IPv4(t)), gidOf(IPv6(t))}
	waitFor(t, 30*time.Second, dev+" ACTIVE with its GIDs again", func() bool {
		st, _ := os.ReadFile(port + "/state")
		if !strings.Contains(string(st), "ACTIVE") {
			return false
		}
		out, _ := exec.Command("sh", "-c", "cat "+port+"/gids/* 2>/dev/null").Output()
		for _, g := range want {
			if !strings.Contains(string(out), g) {
				return false
			}
		}
		return true
	})
}

// waitDeleted waits for the delete to finish: it only can once every process
// has released the device.
func (r *removal) waitDeleted(t *testing.T) {
	t.Helper()
	select {
	case <-r.del.done:
	case <-time.After(exitDeadline):
		t.Errorf("rdma link delete %s still blocked %s after the test's processes ended; device users:\n%s",
			r.link.dev, exitDeadline, guesttest.Describe(guesttest.UserResources(t)))
	}
}

// endsAfterRemoval waits for p to exit after the link was deleted. On timeout
// it sends SIGQUIT (a Go program prints every goroutine's stack) and fails
// the test with what p printed.
func endsAfterRemoval(t *testing.T, p *Proc) (code int, ok bool) {
	t.Helper()
	select {
	case <-p.done:
		return exitCode(t, p), true
	case <-time.After(exitDeadline):
	}
	syscall.Kill(pidOf(p), syscall.SIGQUIT)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.Kill()
	}
	t.Errorf("%s still running %s after the device was removed\nstdout:\n%s\nstderr (with the goroutine dump from SIGQUIT):\n%s",
		p.Name, exitDeadline, p.Stdout(), p.Stderr())
	return -1, false
}

// stockRemovalRE matches the lines rping's main thread may print after its
// CM thread printed the removal line and before that thread's exit(-1) ends
// the process (usually in state ERROR, 11; the main thread may look before
// the CM thread has set it).
var stockRemovalRE = regexp.MustCompile(`^(wait for [A-Z_]+ state \d+|rping (server|client) failed: -1)$`)

// cqFailedRE and waitState11RE are a failed completion's lines: rping's status of a
// request the peer's end could no longer serve, and the main loop's wait in state ERROR.
var (
	cqFailedRE    = regexp.MustCompile(`^cq completion failed status (9|10|11|12)$`)
	waitState11RE = regexp.MustCompile(`^wait for [A-Z_]+ state 11$`)
)

// disconnectFirstRE matches what a client may print when its server's end of
// the connection went first: the server got its removal, exited (or tore
// down) and the client's DISCONNECTED overtook its own DEVICE_REMOVAL. Then
// gorping prints its lines for a cut-short run, and the removal line only if
// the removal still reached the connection before its teardown.
var disconnectFirstRE = regexp.MustCompile(`^(wait for [A-Z_]+ state 10|rping client: peer disconnected after \d+( of \d+)? pings)$`)

// checkRemovalExit checks how an rping ended because its device went away:
// rping's line once and rping's status 255. A gorping server prints nothing
// else; stock rping may add stockRemovalRE's racy lines, and a client
// whose DISCONNECTED came first what disconnectFirstRE allows.
func checkRemovalExit(t *testing.T, p *Proc, stock, client bool) {
	t.Helper()
	code, ok := endsAfterRemoval(t, p)
	if !ok {
		return
	}
	stderr := p.Stderr()
	t.Logf("%s: exit %d, stderr %q", p.Name, code, stderr)
	noCrash(t, p.Name, stderr)
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	discFirst := client && lines[0] == "client DISCONNECT EVENT..."
	// Stock rping's client, when the DISCONNECTED wins the race, ends its
	// ping loop as after a normal disconnect and exits 0 even though it then
	// prints the removal line (seen on arm64). gorping exits 255 whenever the
	// device went away under it.
	if code != 255 && !(stock && discFirst && code == 0) {
		t.Errorf("%s exit status %d after device removal, want 255\nstderr:\n%s", p.Name, code, stderr)
	}
	if n := strings.Count(stderr, removalLine+"\n"); n != 1 && !(discFirst && n == 0) {
		t.Errorf("%s: want %q once on stderr, got:\n%s", p.Name, removalLine, stderr)
	}
	// A serving server's peer is on the same device here, so the removal also destroys the
	// peer's QP: the server's request in flight can fail (status 9-12) after the removal
	// line and before its loop sees the removal, and then gorping, like rping's CQ thread,
	// ends as after a failed completion (seen once on bookworm/arm64 under load).
	if !stock && !client && len(lines) == 4 && lines[0] == removalLine && cqFailedRE.MatchString(lines[1]) &&
		waitState11RE.MatchString(lines[2]) && lines[3] == "rping server failed: -1" {
		t.Logf("%s: a request in flight failed after the removal: %q", p.Name, lines[1:])
		return
	}
	for i, l := range lines {
		switch {
		case l == removalLine:
		case stock && stockRemovalRE.MatchString(l):
		case discFirst && i == 0:
		case discFirst && !stock && disconnectFirstRE.MatchString(l):
		default:
			t.Errorf("%s printed an unexpected line %q; whole output:\n%s", p.Name, l, stderr)
			return
		}
	}
}

// waitLines waits until p has printed at least n lines on stdout; on failure
// it shows what others printed and the kernel's last lines.
func waitLines(t *testing.T, p *Proc, n int, others ...*Proc) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for strings.Count(p.Stdout(), "\n") < n {
		if !p.Running() || time.Now().After(deadline) {
			var b strings.Builder
			for _, o := range append([]*Proc{p}, others...) {
				fmt.Fprintf(&b, "%s (running %v):\nstdout:\n%s\nstderr:\n%s\n", o.Name, o.Running(), o.Stdout(), o.Stderr())
			}
			dmesg, _ := exec.Command("dmesg").CombinedOutput()
			lines := strings.Split(strings.TrimSpace(string(dmesg)), "\n")
			t.Fatalf("no %d stdout lines from %s within 60s\n%s\nkernel log:\n%s", n, p.Name, b.String(),
				strings.Join(lines[max(0, len(lines)-20):], "\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRemoval deletes the rxe link under idle and serving servers (plain and
// -P) and under a client, for gorping and for stock rping as the reference:
// each must end promptly with rping's line and status 255, holding nothing
// (the delete completes). A wildcard server outlives the removal and serves a
// new client on the re-added link.
func TestRemoval(t *testing.T) {
	t.Setenv("GOTRACEBACK", "all") // a SIGQUIT'd gorping dumps every goroutine
	addr := IPv4(t)
	impls := []impl{gorpingImpl(t), stockImpl(t)}

	// rping -P ends on a removal as rping does; the stock reference runs
	// without -P only, to keep the guest run short.
	for _, srvImpl := range impls {
		for _, persistent := range []bool{false, true} {
			if persistent && srvImpl.isStock() {
				continue
			}
			name := "IdleServer/" + srvImpl.name
			args := []string{"-s", "-a", addr}
			if persistent {
				name = "IdlePersistentServer/" + srvImpl.name
				args = append(args, "-P")
			}
			t.Run(name, func(t *testing.T) {
				leakGuard(t)
				port := freshPort()
				srv := Start(t, srvImpl.bin, append(args, "-p", strconv.Itoa(port))...)
				WaitListening(t, srv, addr, port, 30*time.Second)
				r := removeLink(t, srv)
				checkRemovalExit(t, srv, srvImpl.isStock(), false)
				r.waitDeleted(t)
			})
		}
	}

	// A server serving stock clients that ping forever. The clients lose the
	// device too (and end as rping does; not checked here).
	for _, srvImpl := range impls {
		for _, persistent := range []bool{false, true} {
			if persistent && srvImpl.isStock() {
				continue
			}
			name := "ServingServer/" + srvImpl.name
			args := []string{"-s", "-a", addr, "-v"}
			nClients := 1
			if persistent {
				name = "ServingPersistentServer/" + srvImpl.name
				args = append(args, "-P")
				nClients = 2
			}
			t.Run(name, func(t *testing.T) {
				leakGuard(t)
				port := freshPort()
				ps := strconv.Itoa(port)
				srv := Start(t, srvImpl.bin, append(args, "-p", ps)...)
				WaitListening(t, srv, addr, port, 30*time.Second)
				procs := []*Proc{srv}
				for range nClients {
					cli := Start(t, StockRping(t), "-c", "-a", addr, "-p", ps, "-v")
					procs = append(procs, cli)
					waitLines(t, cli, 3, srv)
				}
				r := removeLink(t, procs...)
				checkRemovalExit(t, srv, srvImpl.isStock(), false)
				for _, cli := range procs[1:] {
					if code, ok := endsAfterRemoval(t, cli); ok {
						t.Logf("stock client: exit %d, stderr %q", code, cli.Stderr())
					}
				}
				r.waitDeleted(t)
			})
		}
	}

	// A client pinging a stock server forever.
	for _, cliImpl := range impls {
		t.Run("Client/"+cliImpl.name, func(t *testing.T) {
			leakGuard(t)
			port := freshPort()
			ps := strconv.Itoa(port)
			srv := Start(t, StockRping(t), "-s", "-a", addr, "-p", ps)
			WaitListening(t, srv, addr, port, 30*time.Second)
			cli := Start(t, cliImpl.bin, "-c", "-a", addr, "-p", ps, "-v")
			waitLines(t, cli, 3, srv)
			r := removeLink(t, srv, cli)
			checkRemovalExit(t, cli, cliImpl.isStock(), true)
			if code, ok := endsAfterRemoval(t, srv); ok {
				t.Logf("stock server: exit %d, stderr %q", code, srv.Stderr())
			}
			r.waitDeleted(t)
		})
	}

	// A server listening on the wildcard address holds nothing on the device
	// (the kernel's per-device listener goes without an event): the delete
	// completes under it, it keeps listening, and once the link is back it
	// serves a client on it, as rping does.
	for _, srvImpl := range impls {
		t.Run("WildcardServer/"+srvImpl.name, func(t *testing.T) {
			leakGuard(t)
			port := freshPort()
			ps := strconv.Itoa(port)
			srv := Start(t, srvImpl.bin, "-s", "-p", ps)
			WaitListening(t, srv, "0.0.0.0", port, 30*time.Second)
			r := removeLink(t)
			r.waitDeleted(t)
			if !srv.Running() {
				t.Fatalf("wildcard server exited on the removal: exit %d\nstderr:\n%s", exitCode(t, srv), srv.Stderr())
			}
			r.restore(t)
			cli := Run(t, 60*time.Second, gorpingImpl(t).bin, "-c", "-a", addr, "-p", ps, "-C", "3", "-v", "-V")
			if cli.Code != 0 || cli.Stdout != ExpectedPingLines(3, 64) {
				t.Errorf("client of the wildcard server after the link came back: exit %d\nstdout:\n%s\nstderr:\n%s", cli.Code, cli.Stdout, cli.Stderr)
			}
			code := srv.Wait(t, 30*time.Second)
			if srvImpl.isStock() {
				CheckStockExit(t, "stock wildcard server", Result{Stdout: srv.Stdout(), Stderr: srv.Stderr(), Code: code})
			} else if code != 0 || srv.Stderr() != "server DISCONNECT EVENT...\n" {
				t.Errorf("wildcard server: exit %d, want 0 and only the normal end's line\nstderr:\n%s", code, srv.Stderr())
			}
		})
	}
}

// portDown takes the rxe link's netdev down (rxe reports IBV_EVENT_PORT_ERR
// on every verbs context of the device). The returned restore, also run at
// cleanup, brings the netdev back up with its addresses (the kernel drops the
// IPv6 one on down), ends procs that still run, and creates the rxe link
// anew: in our guests no connection could be set up on rxe0 after a flap
// that failed a connection (clients hang in connection setup) until then.
func portDown(t *testing.T, procs ...*Proc) (restore func()) {
	t.Helper()
	l := currentLink(t)
	ip := filepath.Join(filepath.Dir(RDMATool(t)), "ip")
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(ip, args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("link", "set", l.netdev, "down")
	done := false
	restore = func() {
		t.Helper()
		if done {
			return
		}
		done = true
		run("link", "set", l.netdev, "up")
		run("addr", "replace", IPv4(t)+"/24", "dev", l.netdev)
		run("-6", "addr", "replace", IPv6(t)+"/64", "dev", l.netdev, "nodad")
		r := &removal{link: l, procs: procs}
		r.del = Start(t, RDMATool(t), "link", "delete", l.dev)
		r.restore(t)
	}
	t.Cleanup(restore)
	return restore
}

// portErrLine is gorping's line when IBV_EVENT_PORT_ERR ends a connection.
const portErrLine = "gorping: async event IBV_EVENT_PORT_ERR on rxe0 port 1: connection ended"

// portDownLine is gorping's line when a connection failed by itself (rxe
// fails the work requests of a port that went down before the kernel's work
// queue delivers PORT_ERR) and its port is not ACTIVE.
const portDownLine = "gorping: rxe0 port 1 is DOWN: connection ended"

// portErrAllowedRE matches what else a connection may print when its port
// goes down: rping's lines for a failed work request, or for a disconnect if
// the peer's end went first.
var portErrAllowedRE = regexp.MustCompile(`^(cq completion failed status \d+|wait for [A-Z_]+ state 1[01]|rping client failed: -1|` +
	`(client|server) DISCONNECT EVENT\.\.\.|rping client: peer disconnected after \d+ pings)$`)

// checkPortErrExit checks a gorping client whose port went down: status 255
// and exactly one line that names the port as the cause.
func checkPortErrExit(t *testing.T, p *Proc, code int) {
	t.Helper()
	stderr := p.Stderr()
	t.Logf("%s: exit %d, stderr %q", p.Name, code, stderr)
	noCrash(t, p.Name, stderr)
	if code != 255 {
		t.Errorf("%s: exit %d after its port went down, want 255", p.Name, code)
	}
	if n := portCauses(t, p.Name, stderr); n != 1 {
		t.Errorf("%s: want one of %q / %q once, got:\n%s", p.Name, portErrLine, portDownLine, stderr)
	}
}

// portCauses counts the lines of stderr that name the port as the cause and
// fails the test on any line outside portErrAllowedRE.
func portCauses(t *testing.T, who, stderr string) int {
	t.Helper()
	causes := 0
	for _, l := range strings.Split(strings.TrimSuffix(stderr, "\n"), "\n") {
		switch {
		case l == portErrLine || l == portDownLine:
			causes++
		case l != "" && !portErrAllowedRE.MatchString(l):
			t.Errorf("%s printed an unexpected line %q; whole output:\n%s", who, l, stderr)
		}
	}
	return causes
}

// TestRemovalPortError takes the port down under running connections: the
// asynchronous IBV_EVENT_PORT_ERR ends a gorping client (status 255) and a
// persistent gorping server's connection (the server lives on and serves a
// new client once the port is back).
func TestRemovalPortError(t *testing.T) {
	addr := IPv4(t)
	g := gorpingImpl(t)

	t.Run("Client", func(t *testing.T) {
		leakGuard(t)
		port := freshPort()
		ps := strconv.Itoa(port)
		srv := Start(t, StockRping(t), "-s", "-a", addr, "-p", ps)
		WaitListening(t, srv, addr, port, 30*time.Second)
		cli := Start(t, g.bin, "-c", "-a", addr, "-p", ps, "-v")
		waitLines(t, cli, 3, srv)
		portDown(t, srv)
		code, ok := endsAfterRemoval(t, cli)
		if !ok {
			return
		}
		checkPortErrExit(t, cli, code)
		checkPingPrefix(t, "gorping client", "ping data: ", cli.Stdout(), 64)
	})

	// A persistent server on the wildcard address (which outlives the
	// re-creation of the link) loses its connection to the port error and
	// serves a new client once the port is back.
	t.Run("PersistentServer", func(t *testing.T) {
		leakGuard(t)
		port := freshPort()
		ps := strconv.Itoa(port)
		srv := Start(t, g.bin, "-s", "-P", "-p", ps)
		WaitListening(t, srv, "0.0.0.0", port, 30*time.Second)
		cli := Start(t, StockRping(t), "-c", "-a", addr, "-p", ps, "-v")
		waitLines(t, cli, 3, srv)
		restore := portDown(t, cli)
		waitFor(t, exitDeadline, "the server's line naming the port", func() bool {
			out := srv.Stderr()
			return strings.Contains(out, portErrLine+"\n") || strings.Contains(out, portDownLine+"\n")
		})
		restore() // now, so a new client can connect
		if !srv.Running() {
			t.Fatalf("persistent server exited after PORT_ERR\nstderr:\n%s", srv.Stderr())
		}
		if n := portCauses(t, "gorping server", srv.Stderr()); n != 1 {
			t.Errorf("gorping server: want one line naming the port, got:\n%s", srv.Stderr())
		}
		again := Run(t, 60*time.Second, g.bin, "-c", "-a", addr, "-p", ps, "-C", "3", "-v", "-V")
		if again.Code != 0 || again.Stdout != ExpectedPingLines(3, 64) {
			t.Errorf("new client after the port came back: exit %d\nstdout:\n%s\nstderr:\n%s", again.Code, again.Stdout, again.Stderr)
		}
		if !srv.Running() {
			t.Errorf("persistent server exited\nstderr:\n%s", srv.Stderr())
		}
	})
}
