//go:build guest

package guest

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorping/gorping/test/guesttest"
)

// withoutLine drops every occurrence of line from text.
func withoutLine(text, line string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(text, "\n") {
		if strings.TrimSuffix(l, "\n") != line {
			b.WriteString(l)
		}
	}
	return b.String()
}

// sameAsStock runs args with gorping and with stock rping in the same guest and
// requires the same stdout, stderr and exit status. Stock's stderr is taken
// without the v44 spurious "rdma_get_cm_event: Bad file descriptor" (which
// gorping must never print); the exit status is compared as is, as that bug
// only turns 0 into 255.
func sameAsStock(t *testing.T, args ...string) (gorping, stock Result) {
	t.Helper()
	gorping = Run(t, 60*time.Second, GorpingBin(t), args...)
	stock = Run(t, 60*time.Second, StockRping(t), args...)
	stockErr := withoutLine(stock.Stderr, v44SpuriousExit)
	cmd := "rping " + strings.Join(args, " ")
	if gorping.Stdout != stock.Stdout {
		t.Errorf("%s: stdout\n gorping %q\n   stock %q", cmd, gorping.Stdout, stock.Stdout)
	}
	if gorping.Stderr != stockErr {
		t.Errorf("%s: stderr\n gorping %q\n   stock %q", cmd, gorping.Stderr, stockErr)
	}
	if gorping.Code != stock.Code {
		t.Errorf("%s: exit status gorping %d, stock %d", cmd, gorping.Code, stock.Code)
	}
	noCrash(t, "gorping", gorping.Stderr)
	return gorping, stock
}

// rpingLinesOf returns stderr without gorping's own explanations (lines
// starting with "gorping: ", which it may add to rping's terse errors) and
// logs those.
func rpingLinesOf(t testing.TB, stderr string) string {
	t.Helper()
	var b strings.Builder
	for _, l := range strings.SplitAfter(stderr, "\n") {
		if strings.HasPrefix(l, "gorping: ") {
			t.Logf("gorping's own explanation: %s", strings.TrimSpace(l))
			continue
		}
		b.WriteString(l)
	}
	return b.String()
}

// expect checks one result against literal expectations (the issue's, which
// the stock comparison alone would not pin down).
func expect(t *testing.T, who string, r Result, stdout, stderr string, code int) {
	t.Helper()
	if r.Stdout != stdout {
		t.Errorf("%s stdout %q, want %q", who, r.Stdout, stdout)
	}
	if r.Stderr != stderr {
		t.Errorf("%s stderr %q, want %q", who, r.Stderr, stderr)
	}
	if r.Code != code {
		t.Errorf("%s exit status %d, want %d", who, r.Code, code)
	}
}

// TestErrors checks gorping's failures against stock rping's in the same guest:
// same messages, same streams, same exit status; and that a vanished peer ends
// a run promptly.
func TestErrors(t *testing.T) {
	t.Run("NoServer", func(t *testing.T) {
		for _, f := range families(t) {
			t.Run(f.name, func(t *testing.T) {
				leakGuard(t)
				args := []string{"-c", "-a", f.addr, "-p", strconv.Itoa(freshPort()), "-C", "1"}
				g := Run(t, 60*time.Second, GorpingBin(t), args...)
				s := Run(t, 60*time.Second, StockRping(t), args...)
				const rejected = "cma event RDMA_CM_EVENT_REJECTED, error 8"
				// Stock's later lines race with the CM thread's exit(-1);
				// gorping prints rping's complete sequence every time.
				expect(t, "gorping (its rping lines)", Result{Stdout: g.Stdout, Stderr: rpingLinesOf(t, g.Stderr), Code: g.Code},
					"", rejected+"\nwait for CONNECTED state 4\nconnect error -1\n", 255)
				noCrash(t, "gorping", g.Stderr)
				if s.Code != 255 || !strings.HasPrefix(s.Stderr, rejected+"\n") || s.Stdout != "" {
					t.Errorf("stock rping in this guest: exit %d stdout %q stderr %q; the expectation above assumes exit 255 and %q first", s.Code, s.Stdout, s.Stderr, rejected)
				}
				onlyLines(t, "stock", s.Stderr, rejected, "wait for CONNECTED state 4", "connect error -1", v44SpuriousExit)
			})
		}
	})

	t.Run("UnresolvableName", func(t *testing.T) {
		const (
			name      = "no.such.host.invalid"
			nonameOut = "getaddrinfo failed (Name or service not known) - invalid hostname or IP address\n"
		)
		// The name server says the name does not exist (NXDOMAIN).
		t.Run("NXDOMAIN", func(t *testing.T) {
			startFakeDNS(t, nil)
			for _, args := range [][]string{
				{"-c", "-a", name, "-C", "1"},
				{"-s", "-a", name},
				{"-c", "-a", IPv4(t), "-I", name, "-C", "1"},
			} {
				t.Run(strings.Join(args, "_"), func(t *testing.T) {
					g, s := sameAsStock(t, args...)
					expect(t, "gorping", g, nonameOut, "", 254)
					expect(t, "stock", s, nonameOut, "", 254)
				})
			}
		})
		// No name server at all (the guest's normal state): whatever glibc
		// makes of that, gorping must say the same.
		t.Run("NoResolver", func(t *testing.T) {
			g, _ := sameAsStock(t, "-c", "-a", name, "-C", "1")
			if g.Code == 0 || !strings.HasPrefix(g.Stdout, "getaddrinfo failed (") {
				t.Errorf("gorping: exit %d stdout %q, want a getaddrinfo failure", g.Code, g.Stdout)
			}
		})
	})

	t.Run("BadOptions", func(t *testing.T) {
		a := IPv4(t)
		usage := "rping -s [-vVd] [-S size] [-C count] [-a addr] [-p port]\n"
		for _, tc := range []struct {
			name   string
			args   []string
			stdout string // prefix of the expected stdout
			stderr string
		}{
			{"SizeTooSmall", []string{"-c", "-a", a, "-S", "22", "-C", "1"}, "", "Invalid size 22 (valid range is 23 to 65536)\n"},
			{"SizeTooLarge", []string{"-c", "-a", a, "-S", "65536", "-C", "1"}, "", "Invalid size 65536 (valid range is 23 to 65536)\n"},
			{"ServerSizeTooSmall", []string{"-s", "-a", a, "-S", "22"}, "", "Invalid size 22 (valid range is 23 to 65536)\n"},
			{"NegativeCount", []string{"-c", "-a", a, "-C", "-1"}, "", "Invalid count -1\n"},
			{"UnknownOption", []string{"-c", "-a", a, "-x"}, usage, ""},
			{"UnknownOptionAlone", []string{"-x"}, usage, ""},
			{"TosVestige", []string{"-s", "-t", "5"}, usage, ""},
			{"MissingArgument", []string{"-c", "-a"}, usage, ""},
			{"NoMode", []string{"-a", a}, usage, ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				leakGuard(t)
				g, _ := sameAsStock(t, tc.args...)
				if g.Code != 22 {
					t.Errorf("gorping exit status %d, want 22 (EINVAL)", g.Code)
				}
				if !strings.HasPrefix(g.Stdout, tc.stdout) || (tc.stdout == "" && g.Stdout != "") {
					t.Errorf("gorping stdout %q, want it to start with %q", g.Stdout, tc.stdout)
				}
				if g.Stderr != tc.stderr {
					t.Errorf("gorping stderr %q, want %q", g.Stderr, tc.stderr)
				}
			})
		}
	})

	// Addresses rdma_cm cannot reach through an RDMA device. gorping must
	// print rping's lines (stock's may stop early: its CM thread's exit(-1)
	// races the main thread, §1.4) and exit 255 like rping; it may add its
	// own explanation on lines starting with "gorping: ".
	t.Run("NoRDMADevice", func(t *testing.T) {
		const noRoute = "rdma_resolve_route: No such device\nwaiting for addr/route resolution state 11\n"
		for _, tc := range []struct{ name, src, addr, stderr string }{
			// Loopback: the address resolves, the route has no RDMA device.
			{"Loopback", "", "127.0.0.1", noRoute},
			// No route at all.
			{"Unroutable", "", "10.9.9.9", "rdma_resolve_addr: Network is unreachable\n"},
			// No -a: 0.0.0.0, which rdma_cm treats as loopback.
			{"NoAddress", "", "", noRoute},
			// -I on an address of no RDMA device: rdma_cm reports
			// ADDR_ERROR -19 (ENODEV); rping's main thread, woken with the
			// state unchanged (still IDLE, 1), prints the resolution
			// failure if it gets there before the CM thread's exit (§3.5).
			{"SourceWithoutRDMA", "127.0.0.1", IPv4(t),
				"cma event RDMA_CM_EVENT_ADDR_ERROR, error -19\nwaiting for addr/route resolution state 1\n"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				leakGuard(t)
				args := []string{"-c", "-p", strconv.Itoa(freshPort()), "-C", "1"}
				if tc.addr != "" {
					args = append(args, "-a", tc.addr)
				}
				if tc.src != "" {
					args = append(args, "-I", tc.src)
				}
				g := Run(t, 60*time.Second, GorpingBin(t), args...)
				s := Run(t, 60*time.Second, StockRping(t), args...)
				rpingLines := rpingLinesOf(t, g.Stderr)
				expect(t, "gorping (its rping lines)", Result{Stdout: g.Stdout, Stderr: rpingLines, Code: g.Code}, "", tc.stderr, 255)
				noCrash(t, "gorping", g.Stderr)
				stockErr := withoutLine(s.Stderr, v44SpuriousExit)
				if s.Code != 255 || s.Stdout != "" || stockErr == "" || !strings.HasPrefix(tc.stderr, stockErr) {
					t.Errorf("stock rping in this guest: exit %d stdout %q stderr %q; the expectation assumes exit 255 and a line prefix of %q", s.Code, s.Stdout, s.Stderr, tc.stderr)
				}
			})
		}
	})

	// -I addresses the client cannot bind: rdma_resolve_addr fails at once.
	t.Run("BadSourceAddress", func(t *testing.T) {
		for _, tc := range []struct{ name, src, first string }{
			{"NotLocal", "192.0.2.99", "rdma_resolve_addr: Cannot assign requested address"},
			{"OtherFamily", IPv6(t), "rdma_resolve_addr: Invalid argument"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				leakGuard(t)
				args := []string{"-c", "-a", IPv4(t), "-I", tc.src, "-p", strconv.Itoa(freshPort()), "-C", "1"}
				g := Run(t, 60*time.Second, GorpingBin(t), args...)
				s := Run(t, 60*time.Second, StockRping(t), args...)
				expect(t, "gorping (its rping lines)", Result{Stdout: g.Stdout, Stderr: rpingLinesOf(t, g.Stderr), Code: g.Code}, "", tc.first+"\n", 255)
				expect(t, "stock", Result{Stdout: s.Stdout, Stderr: withoutLine(s.Stderr, v44SpuriousExit), Code: s.Code}, "", tc.first+"\n", 255)
				noCrash(t, "gorping", g.Stderr)
			})
		}
	})

	t.Run("PeerKilled", func(t *testing.T) {
		g, s := gorpingImpl(t), stockImpl(t)
		for _, srv := range []impl{s, g} {
			t.Run("ServerKilled/"+srv.name+"Server", func(t *testing.T) { testServerKilled(t, srv) })
		}
		for _, cli := range []impl{g, s} {
			t.Run("ClientKilled/"+cli.name+"Client", func(t *testing.T) { testClientKilled(t, g, cli, false) })
			t.Run("ClientKilled/"+cli.name+"Client_PersistentServer", func(t *testing.T) { testClientKilled(t, g, cli, true) })
		}
		// The judge of those endings, applied to stock rping's server in the same
		// situation: both of its orders must be ones it accepts.
		t.Run("ClientKilled/gorpingClient_stockServer", func(t *testing.T) { testClientKilled(t, s, g, false) })
	})
}

// killAfter is how many pings a run does before the test kills a peer.
const killAfter = 50

// peerEndDeadline is how long the surviving side may take to notice.
const peerEndDeadline = 30 * time.Second

// testServerKilled SIGKILLs the server under an endless (-C 0) gorping client:
// the client must end promptly, with a non-zero status and a message that says
// why (rping itself exits 0 here, §6.5; gorping reports the cut-short run).
func testServerKilled(t *testing.T, server impl) {
	leakGuard(t)
	addr, port := IPv4(t), freshPort()
	srv := Start(t, server.bin, "-s", "-a", addr, "-p", strconv.Itoa(port))
	WaitListening(t, srv, addr, port, 30*time.Second)
	cli := Start(t, GorpingBin(t), "-c", "-a", addr, "-p", strconv.Itoa(port), "-C", "0", "-v", "-V")
	waitFor(t, 120*time.Second, "the client's first pings", func() bool {
		return strings.Count(cli.Stdout(), "\n") >= killAfter || !cli.Running()
	})
	if !cli.Running() {
		t.Fatalf("client ended before the server was killed\nstderr:\n%s", cli.Stderr())
	}
	srv.Kill()
	killed := time.Now()
	code := cli.Wait(t, peerEndDeadline)
	t.Logf("client ended %s after the kill with exit %d; stderr:\n%s", time.Since(killed).Round(time.Millisecond), code, cli.Stderr())
	if code == 0 {
		t.Errorf("gorping client exit status 0 after its server vanished, want non-zero")
	}
	stderr := cli.Stderr()
	if strings.TrimSpace(stderr) == "" {
		t.Errorf("gorping client said nothing on stderr about its server vanishing")
	}
	noCrash(t, "gorping client", stderr)
	if n := checkPingPrefix(t, "gorping client", "ping data: ", cli.Stdout(), 64); n < killAfter {
		t.Errorf("client printed %d ping lines, want at least %d", n, killAfter)
	}
}

// testClientKilled SIGKILLs an endless client of a server (gorping's, or stock
// rping's to show that the judge of the ending, killedClientEnding, accepts what
// stock rping does). A non-persistent server must end promptly as rping does; a
// persistent one must keep serving.
func testClientKilled(t *testing.T, server, client impl, persistent bool) {
	leakGuard(t)
	addr, port := IPv4(t), freshPort()
	args := []string{"-s", "-a", addr, "-p", strconv.Itoa(port), "-v"}
	if persistent {
		args = append(args, "-P")
	}
	srv := Start(t, server.bin, args...)
	WaitListening(t, srv, addr, port, 30*time.Second)
	cli := Start(t, client.bin, "-c", "-a", addr, "-p", strconv.Itoa(port), "-C", "0", "-V")
	waitFor(t, 120*time.Second, "the server's first pings", func() bool {
		return strings.Count(srv.Stdout(), "\n") >= killAfter || !cli.Running() || !srv.Running()
	})
	if !cli.Running() || !srv.Running() {
		t.Fatalf("a side ended before the client was killed\nclient stderr:\n%s\nserver stderr:\n%s", cli.Stderr(), srv.Stderr())
	}
	cli.Kill()
	who := server.name + " server"
	if persistent {
		// The server must notice and go on serving: a new client succeeds.
		r := Run(t, 60*time.Second, GorpingBin(t), "-c", "-a", addr, "-p", strconv.Itoa(port), "-C", "3", "-V")
		if r.Code != 0 {
			t.Errorf("client after the killed one: exit status %d\nstderr:\n%s", r.Code, r.Stderr)
		}
		if !srv.Running() {
			t.Fatalf("persistent server exited after a client was killed\nstderr:\n%s", srv.Stderr())
		}
		noCrash(t, who, srv.Stderr())
		return
	}
	killed := time.Now()
	code := srv.Wait(t, peerEndDeadline)
	t.Logf("%s ended %s after the kill with exit %d; stderr:\n%s", who, time.Since(killed).Round(time.Millisecond), code, srv.Stderr())
	killedClientEnding(t, server, code, srv.Stderr())
	noCrash(t, who, srv.Stderr())
	if n := checkPingPrefix(t, who, "server ping data: ", srv.Stdout(), 64); n < killAfter {
		t.Errorf("server printed %d ping lines, want at least %d", n, killAfter)
	}
}

// killedClientEnding judges how a non-persistent server ended after its client was
// killed mid-run (guesttest.KilledClientEnding: every ending rping's three racing
// threads allow) and logs which one it saw. The PeerKilled test applies it to stock
// rping's server in the same situation, so every ending accepted is rping's own.
func killedClientEnding(t *testing.T, server impl, code int, stderr string) {
	t.Helper()
	who := server.name + " server"
	ending, problems := guesttest.KilledClientEnding(server.isStock(), code, stderr)
	t.Logf("%s: %s", who, ending)
	for _, p := range problems {
		t.Errorf("%s after its client vanished: %s", who, p)
	}
	if len(problems) > 0 {
		t.Errorf("%s's stderr:\n%s", who, stderr)
	}
}
