//go:build guest

package guest

// The interop, -q, many-client and leak tests over Soft-iWARP: siw0 on its own
// interface (iw0) beside rxe0, built by the test bed from the guest kernel's source.
// iWARP differs from RoCE where rping can see it: the kernel's iw_cm moves the QP
// to RTS (no CONNECT_RESPONSE), so a -q client's rdma_establish fails.

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorping/gorping/rping"
	"github.com/gorping/gorping/uverbs"
	"golang.org/x/sys/unix"
)

// siwFamilies brings up siw0 for the calling test and returns siw's IPv4 and IPv6
// addresses. The test bed checks at boot that siw0 comes up, then deletes it: it
// exists only while a siw test runs (see test/vm's init script), and the link is
// deleted again when the test ends. A guest without siw (the test bed could not
// build it for this kernel or architecture) skips with the reason, which the test
// bed also prints in its verdict line.
func siwFamilies(t *testing.T) []struct{ name, addr string } {
	t.Helper()
	if why := os.Getenv("GORPING_SIW_UNAVAILABLE"); why != "" {
		t.Skipf("siw NOT AVAILABLE in this guest: %s", why)
	}
	dev, netdev := Env(t, "GORPING_SIW_DEV"), Env(t, "GORPING_SIW_NETDEV")
	rdma := RDMATool(t)
	if out, err := exec.Command(rdma, "link", "add", dev, "type", "siw", "netdev", netdev).CombinedOutput(); err != nil {
		t.Fatalf("rdma link add %s type siw netdev %s: %v: %s", dev, netdev, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command(rdma, "link", "delete", dev).CombinedOutput(); err != nil {
			t.Errorf("rdma link delete %s: %v: %s", dev, err, out)
		}
	})
	waitFor(t, 30*time.Second, dev+"'s port to become ACTIVE", func() bool {
		b, err := os.ReadFile("/sys/class/infiniband/" + dev + "/ports/1/state")
		return err == nil && strings.Contains(string(b), "ACTIVE")
	})
	return []struct{ name, addr string }{
		{"IPv4", Env(t, "GORPING_SIW_IPV4")}, {"IPv6", Env(t, "GORPING_SIW_IPV6")},
	}
}

// TestSiwDevice checks the test bed and the provider choice: siw0 is an iWARP device
// of driver siw, and a gorping run to siw's address uses the siw provider (its -d
// output describes siw's queues), not rxe.
func TestSiwDevice(t *testing.T) {
	fams := siwFamilies(t)
	leakGuard(t)
	name := Env(t, "GORPING_SIW_DEV")
	devs, err := uverbs.Host{}.Devices()
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, d := range devs {
		if d.Name != name {
			continue
		}
		found = true
		if d.Driver != "siw" || d.Transport() != uverbs.TransportIWARP {
			t.Errorf("%s: driver %q, transport %v; want siw, iWARP", name, d.Driver, d.Transport())
		}
	}
	if !found {
		t.Fatalf("no device %s among %+v", name, devs)
	}
	g := gorpingImpl(t)
	for _, f := range fams {
		port := freshPort()
		srv := Start(t, g.bin, "-s", "-a", f.addr, "-p", strconv.Itoa(port), "-d")
		WaitListening(t, srv, f.addr, port, 30*time.Second)
		cli := Run(t, 60*time.Second, g.bin, "-c", "-a", f.addr, "-p", strconv.Itoa(port), "-C", "2", "-d")
		code := srv.Wait(t, 30*time.Second)
		for who, r := range map[string]Result{"client": cli, "server": {Stdout: srv.Stdout(), Stderr: srv.Stderr(), Code: code}} {
			if r.Code != 0 {
				t.Errorf("%s %s exit status %d\nstderr:\n%s", f.name, who, r.Code, r.Stderr)
			}
			if out := r.Stdout + r.Stderr; !strings.Contains(out, "siw qp:") || !strings.Contains(out, "siw cq:") {
				t.Errorf("%s %s did not use the siw provider; -d output:\n%s", f.name, who, out)
			}
		}
	}
}

// TestSiwInterop runs gorping against stock rping and itself over siw, in both roles,
// over IPv4 and IPv6, and compares everything printed with stock rping's output.
func TestSiwInterop(t *testing.T) {
	fams := siwFamilies(t)
	sizesAndCounts(t, fams)
	t.Run("Quiet", func(t *testing.T) {
		for _, p := range pairs(t) {
			runCase(t, p.name, pingCase{
				server: p.server, client: p.client, addr: fams[0].addr, port: freshPort(),
				cliOpts: []string{"-C", "20", "-V"},
				count:   20, size: rping.DefaultSize,
			})
		}
	})
	// A -q server moves its own QP before accepting: iWARP allows that.
	t.Run("SelfQPServer", func(t *testing.T) {
		g, s := gorpingImpl(t), stockImpl(t)
		for _, f := range fams {
			for _, qc := range []struct {
				name           string
				server, client impl
			}{
				{"GorpingServerQ_StockClient", g, s},
				{"StockServerQ_GorpingClient", s, g},
				{"GorpingServerQ_GorpingClient", g, g},
			} {
				runCase(t, f.name+"/"+qc.name, pingCase{
					server: qc.server, client: qc.client, addr: f.addr, port: freshPort(),
					srvOpts: []string{"-v", "-q"}, cliOpts: pingOpts(10, rping.DefaultSize),
					count: 10, size: rping.DefaultSize, cliVerbose: true, srvVerbose: true,
				})
			}
		}
	})
	// iWARP connects over TCP through iw_cm, whose listen backlog (3, as rping's) is
	// a hard limit: with 12 concurrent clients even stock rping's -P server loses some
	// (UNREACHABLE -110, REJECTED -104, its own "rdma_create_qp: Invalid argument").
	// So the crowds here stay within the backlog, two waves per family.
	t.Run("PersistentManyClients", func(t *testing.T) {
		for _, f := range fams {
			for wave := range 2 {
				t.Run(fmt.Sprintf("%s/%d", f.name, wave+1), func(t *testing.T) { testPersistentManyClients(t, f.addr, 2, 1) })
			}
		}
	})
}

// TestSiwSelfQPClient: a -q client cannot work over iWARP (the kernel already moved
// the QP to RTS; rdma_establish is EINVAL). gorping fails as stock rping does, with
// the same lines and exit status, plus a hint, and leaves nothing behind.
func TestSiwSelfQPClient(t *testing.T) {
	fams := siwFamilies(t)
	g, s := gorpingImpl(t), stockImpl(t)
	want := "rdma_establish: Invalid argument\nconnect error -1\n"
	for _, f := range fams {
		for _, cli := range []impl{s, g} {
			t.Run(f.name+"/"+cli.name, func(t *testing.T) {
				leakGuard(t)
				port := freshPort()
				// The server is gorping: stock rping's server does not notice the
				// failed client and waits forever.
				srv := Start(t, g.bin, "-s", "-a", f.addr, "-p", strconv.Itoa(port))
				WaitListening(t, srv, f.addr, port, 30*time.Second)
				args := []string{"-c", "-q", "-a", f.addr, "-p", strconv.Itoa(port), "-C", "3", "-v"}
				var r Result
				if cli.isStock() {
					// Stock rping may hang after the error (racy): wait for its
					// lines, then stop it.
					p := Start(t, cli.bin, args...)
					waitFor(t, 60*time.Second, "stock -q client's rdma_establish error", func() bool {
						return strings.Contains(p.Stderr(), want) || !p.Running()
					})
					code := 255 // still running: stock's hang, its exit status unknown
					if !p.Running() {
						code = exitCode(t, p)
					} else {
						p.Kill()
					}
					r = Result{Stdout: p.Stdout(), Stderr: p.Stderr(), Code: code}
				} else {
					r = Run(t, 60*time.Second, cli.bin, args...)
				}
				if r.Code != 255 {
					t.Errorf("%s -q client exit status %d, want 255\nstderr:\n%s", cli.name, r.Code, r.Stderr)
				}
				stderr := r.Stderr
				if !cli.isStock() {
					hint := "gorping: " + Env(t, "GORPING_SIW_DEV") + " is an iWARP device: the kernel moves the QP to RTS" +
						" while connecting, so a client cannot use -q there (a -q server can)"
					if !strings.Contains(stderr, "\n"+hint+"\n") {
						t.Errorf("gorping -q client gave no hint %q:\n%s", hint, stderr)
					}
					stderr = strings.Replace(stderr, hint+"\n", "", 1)
					onlyLines(t, "gorping -q client", stderr, "rdma_establish: Invalid argument", "connect error -1", clientDisconnect)
					noCrash(t, "gorping -q client", stderr)
				}
				if !strings.HasPrefix(stderr, want) {
					t.Errorf("%s -q client stderr:\n%s\nwant it to start with (hint aside):\n%s", cli.name, r.Stderr, want)
				}
				if r.Stdout != "" {
					t.Errorf("%s -q client printed on stdout:\n%s", cli.name, r.Stdout)
				}
				if code := srv.Wait(t, peerEndDeadline); code != 0 {
					t.Errorf("gorping server exit status %d after the failed -q client, want 0\nstderr:\n%s", code, srv.Stderr())
				}
			})
		}
	}
}

// TestSiwLeaks: a persistent server over siw returns to its post-listen state after
// sequential, concurrent, -q-server-side and failed -q clients, and after a client
// killed mid-run.
func TestSiwLeaks(t *testing.T) {
	fams := siwFamilies(t)
	leakGuard(t)
	g, s := gorpingImpl(t), stockImpl(t)
	ls := startLeakServer(t, fams[0].addr)
	for i := range 3 {
		ls.finish(fmt.Sprintf("sequential client %d", i+1), 0, ls.client(g))
	}
	var crowd []*Proc
	for range 3 {
		crowd = append(crowd, ls.client(g), ls.client(s))
	}
	ls.finish("6 concurrent clients", 0, crowd...)
	ls.finish("a failed -q client", 255, ls.client(g, "-q"))
	ls.finish("clients bigger than the server's -S", 0, ls.client(g, "-S", "65535"), ls.client(s, "-S", "4000"))
	ls.killMidRun()
}

// TestSiwConnectSignals: on iWARP, rdma_cm's CONNECT blocks in the driver's TCP
// connect, and the kernel runs a write(2) again after a signal whose handler has
// SA_RESTART interrupts it, as Go's handlers do. The Go runtime signals its own
// threads (SIGURG, to preempt goroutines), so gorping blocks signals on the thread
// for the write; before that, each signal made a new TCP connect, and one whose
// first attempt had got through failed with "Cannot assign requested address".
// The client here connects to an address on siw's dummy interface that nothing
// answers (dummy drops what it sends), so the connect waits in its SYN retries
// while every thread of the client gets SIGURG 40 times: the kernel must count no
// further active TCP opens.
func TestSiwConnectSignals(t *testing.T) {
	siwFamilies(t)
	leakGuard(t)
	const nobody = "198.19.0.2" // in iw0's /24, not assigned
	before := tcpActiveOpens(t)
	cli := Start(t, GorpingBin(t), "-c", "-a", nobody, "-p", strconv.Itoa(freshPort()), "-C", "1")
	waitFor(t, 60*time.Second, "the client's TCP connect to "+nobody, func() bool {
		return tcpActiveOpens(t) > before
	})
	opens := tcpActiveOpens(t)
	pid := pidOf(cli)
	for i := 0; i < 40; i++ {
		for tid := range tasksOf(pid) {
			unix.Tgkill(pid, tid, unix.SIGURG)
		}
		time.Sleep(20 * time.Millisecond) // spacing the signals, not waiting for a result
	}
	if after := tcpActiveOpens(t); after != opens {
		t.Errorf("the kernel counted %d more active TCP opens while the client's threads were signalled: its CONNECT was restarted", after-opens)
	}
	if !cli.Running() {
		t.Fatalf("the client exited while connecting to %s\nstdout:\n%s\nstderr:\n%s", nobody, cli.Stdout(), cli.Stderr())
	}
	cli.cmd.Process.Kill()
	cli.Wait(t, 30*time.Second)
}

// tcpActiveOpens is the kernel's count of TCP connects that sent a SYN
// (ActiveOpens in /proc/net/snmp).
func tcpActiveOpens(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/net/snmp")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "Tcp:" {
			continue
		}
		if names == nil {
			names = f
			continue
		}
		for i, name := range names {
			if name == "ActiveOpens" && i < len(f) {
				n, err := strconv.Atoi(f[i])
				if err != nil {
					t.Fatalf("/proc/net/snmp: ActiveOpens %q: %v", f[i], err)
				}
				return n
			}
		}
	}
	t.Fatalf("/proc/net/snmp has no Tcp ActiveOpens:\n%s", b)
	return 0
}
