//go:build guest

package guest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorping/gorping/rping"
	"github.com/gorping/gorping/test/guesttest"
	"golang.org/x/sys/unix"
)

// The errors a user meets first: rping's own lines and exit status, plus one
// "gorping: " line that says what to do, and nothing left behind. Each case
// runs the gorping binary (exit status as the shell sees it), stock rping
// (same first line and status, where rping has them) and Run in a helper
// process (this test binary, see TestMain), which reports Run's status and
// stays alive while the test checks that Run left no RDMA object.
//
// The guest runs tests as root, whom neither file modes nor RLIMIT_MEMLOCK
// stop (CAP_DAC_OVERRIDE, CAP_IPC_LOCK), so the cases run as nobody. Not by
// switching this process's effective uid: that gives each thread its own
// credentials, and rdma_cm refuses writes from a thread whose credentials
// differ from the opener's ("changed security contexts").

const nobody = 65534

// errCase is one failing invocation.
type errCase struct {
	cfg     rping.Config
	nobody  bool   // run as uid/gid 65534
	memlock int64  // RLIMIT_MEMLOCK in bytes for the run; -1 leaves it
	stderr  string // gorping's exact stderr
	code    int
	// stockFirst is stock rping's first line (libibverbs' warnings aside), ""
	// to skip stock; stockCode its exit status.
	stockFirst string
	stockCode  int
}

func clientCfg(dst, src netip.Addr) rping.Config {
	c := rping.DefaultConfig()
	c.Addr, c.SrcAddr, c.Port, c.Count = dst, src, port(), 1
	return c
}

func serverCfg(addr netip.Addr) rping.Config {
	c := rping.DefaultConfig()
	c.Server, c.Addr, c.Port = true, addr, port()
	return c
}

// args is cfg's command line.
func args(cfg rping.Config) []string {
	a := []string{"-c"}
	if cfg.Server {
		a = []string{"-s"}
	}
	a = append(a, "-a", cfg.Addr.String(), "-p", strconv.Itoa(int(cfg.Port)))
	if cfg.HasSrcAddr() {
		a = append(a, "-I", cfg.SrcAddr.String())
	}
	if !cfg.Server {
		a = append(a, "-C", strconv.Itoa(cfg.Count))
	}
	if cfg.Persistent {
		a = append(a, "-P")
	}
	return a
}

type result struct {
	stdout, stderr string
	code           int
}

// proc is a running binary.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr lockedBuffer
	done           chan struct{}
}

// start runs bin with cfg's arguments, as nobody and with RLIMIT_MEMLOCK set
// through a shell's ulimit if the case says so.
func start(t *testing.T, bin string, c *errCase) *proc {
	t.Helper()
	argv := append([]string{bin}, args(c.cfg)...)
	if c.memlock >= 0 {
		argv = append([]string{"sh", "-c", fmt.Sprintf(`ulimit -l %d && exec "$@"`, c.memlock/1024), "sh"}, argv...)
	}
	p := &proc{cmd: exec.Command(argv[0], argv[1:]...), done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if c.nobody {
		p.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %v: %v", argv, err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

func (p *proc) wait(t *testing.T) result {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("%v did not exit; stderr %q", p.cmd.Args, p.stderr.String())
	}
	return result{p.stdout.String(), p.stderr.String(), p.cmd.ProcessState.ExitCode()}
}

func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// chmod sets path's mode for the test.
func chmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(path, st.Mode().Perm()) })
}

// sh runs a shell command for the test's network setup.
func sh(t *testing.T, cmd string) {
	t.Helper()
	if out, err := exec.Command("sh", "-c", cmd).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, out)
	}
}

// userObjects lists the RDMA objects user processes own (rdma names kernel
// owners in brackets).
func userObjects(t *testing.T) []string {
	t.Helper()
	var objs []string
	user := guesttest.UserResources(t)
	for _, kind := range guesttest.Kinds {
		for _, r := range user[kind] {
			if r.KV["comm"] != "" { // a line without an owner is not an object
				objs = append(objs, kind+": "+r.Line)
			}
		}
	}
	return objs
}

// noUserObjects waits until no user process owns an RDMA object (the kernel
// releases an exited process's objects with its files, partly deferred).
func noUserObjects(t *testing.T, when string) {
	t.Helper()
	var objs []string
	deadline := time.Now().Add(30 * time.Second)
	for objs = userObjects(t); len(objs) > 0; objs = userObjects(t) {
		if time.Now().After(deadline) {
			t.Fatalf("RDMA objects of user processes %s:\n%s", when, strings.Join(objs, "\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// check runs one case: the binary, stock rping, then Run in this process.
func check(t *testing.T, c errCase) {
	t.Helper()
	noUserObjects(t, "before the case")
	if st, err := os.Stat(os.Getenv("GORPING_BIN")); err != nil || st.Mode()&0o005 != 0o005 {
		t.Fatalf("GORPING_BIN %s is not executable by nobody: %v", os.Getenv("GORPING_BIN"), err)
	}
	g := start(t, os.Getenv("GORPING_BIN"), &c).wait(t)
	if g.stderr != c.stderr || g.code != c.code || g.stdout != "" {
		t.Errorf("gorping %s: exit %d\nstderr %q\nstdout %q\nwant exit %d\nstderr %q", strings.Join(args(c.cfg), " "), g.code, g.stderr, g.stdout, c.code, c.stderr)
	}
	if c.stockFirst != "" {
		s := start(t, "rping", &c).wait(t)
		if first := firstRpingLine(s.stderr); first != c.stockFirst || s.code != c.stockCode {
			t.Errorf("stock rping %s: exit %d stderr %q; want exit %d and first line %q", strings.Join(args(c.cfg), " "), s.code, s.stderr, c.stockCode, c.stockFirst)
		}
	}

	noUserObjects(t, "after the binaries exited")
	h := startHelper(t, &c)
	st := h.status(t)
	if objs := settledObjects(t); len(objs) > 0 {
		t.Errorf("Run returned %d and left RDMA objects:\n%s", st, strings.Join(objs, "\n"))
	}
	r := h.finish(t)
	if r.stderr != c.stderr || st != c.code || r.stdout != "" {
		t.Errorf("Run: status %d stderr %q stdout %q, want %d %q", st, r.stderr, r.stdout, c.code, c.stderr)
	}
}

// helperEnv carries a helper process's case (see TestMain).
const helperEnv = "GORPING_RUN_HELPER"

// helperSpec is the part of an errCase the helper needs.
type helperSpec struct {
	Server, Persistent bool
	Addr, SrcAddr      netip.Addr
	Port               uint16
	Count              int
	Memlock            int64
}

// TestMain makes this test binary a helper that runs Run once when helperEnv
// is set: it lowers RLIMIT_MEMLOCK if asked, runs Run with its stdout and
// stderr, writes the status to fd 3, and exits once stdin closes.
func TestMain(m *testing.M) {
	spec := os.Getenv(helperEnv)
	if spec == "" {
		os.Exit(m.Run())
	}
	var h helperSpec
	if err := json.Unmarshal([]byte(spec), &h); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(2)
	}
	if h.Memlock >= 0 {
		var lim unix.Rlimit
		unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim)
		lim.Cur = uint64(h.Memlock)
		if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &lim); err != nil {
			fmt.Fprintln(os.Stderr, "helper: setrlimit:", err)
			os.Exit(2)
		}
	}
	cfg := rping.DefaultConfig()
	cfg.Server, cfg.Persistent, cfg.Addr, cfg.SrcAddr, cfg.Port, cfg.Count = h.Server, h.Persistent, h.Addr, h.SrcAddr, h.Port, h.Count
	st := rping.Run(context.Background(), cfg)
	fmt.Fprintf(os.NewFile(3, "status"), "%d\n", st)
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// helper is a running helper process.
type helper struct {
	*proc
	stdin    io.WriteCloser
	statusCh chan string
}

func startHelper(t *testing.T, c *errCase) *helper {
	t.Helper()
	spec, err := json.Marshal(helperSpec{Server: c.cfg.Server, Persistent: c.cfg.Persistent, Addr: c.cfg.Addr,
		SrcAddr: c.cfg.SrcAddr, Port: c.cfg.Port, Count: c.cfg.Count, Memlock: c.memlock})
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	h := &helper{proc: &proc{cmd: exec.Command(exe), done: make(chan struct{})}, statusCh: make(chan string, 1)}
	cmd := h.cmd
	cmd.Env = append(os.Environ(), helperEnv+"="+string(spec))
	cmd.Stdout, cmd.Stderr = &h.stdout, &h.stderr
	cmd.ExtraFiles = []*os.File{pw}
	if h.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if c.nobody {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start helper: %v", err)
	}
	pw.Close()
	go func() {
		// One line; the helper keeps fd 3 open until it exits.
		line, _ := bufio.NewReader(pr).ReadString('\n')
		pr.Close()
		h.statusCh <- line
	}()
	go func() { cmd.Wait(); close(h.done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-h.done
	})
	return h
}

// status waits for Run's status in the helper.
func (h *helper) status(t *testing.T) int {
	t.Helper()
	select {
	case s := <-h.statusCh:
		st, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			<-h.done
			t.Fatalf("helper reported no status (%q); stderr %q", s, h.stderr.String())
		}
		return st
	case <-time.After(60 * time.Second):
		t.Fatalf("Run in the helper did not return; stderr %q", h.stderr.String())
		return -1
	}
}

// finish lets the helper exit and returns what it printed.
func (h *helper) finish(t *testing.T) result {
	t.Helper()
	h.stdin.Close()
	r := h.wait(t)
	if r.code != 0 {
		t.Errorf("helper exit %d", r.code)
	}
	return r
}

// settledObjects is what user processes own once pending releases are done:
// it waits up to 10 s for the list to become empty.
func settledObjects(t *testing.T) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		objs := userObjects(t)
		if len(objs) == 0 || time.Now().After(deadline) {
			return objs
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// firstRpingLine is stock rping's first stderr line, skipping libibverbs'
// RLIMIT_MEMLOCK warning.
func firstRpingLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "libibverbs: Warning: RLIMIT_MEMLOCK") || strings.HasPrefix(l, "    This will severely limit") {
			continue
		}
		return l
	}
	return ""
}

const (
	hintRDMACM = `gorping: /dev/infiniband/rdma_cm is not accessible: run as root or grant access (udev rule MODE="0666" for rdma_cm and uverbs*)`
	linkHint   = "rdma link show lists the RDMA devices and their netdevs"
)

func hintUverbs(t *testing.T) string {
	return fmt.Sprintf(`gorping: %s (%s) is not accessible: run as root or grant access (udev rule MODE="0666" for rdma_cm and uverbs*)`,
		uverbsPath(t), "rxe0")
}

// uverbsPath is rxe0's uverbs node.
func uverbsPath(t *testing.T) string {
	t.Helper()
	ents, err := os.ReadDir("/sys/class/infiniband/rxe0/device/infiniband_verbs")
	if err == nil && len(ents) == 1 {
		return "/dev/infiniband/" + ents[0].Name()
	}
	// rxe has no parent device: find the node whose ibdev is rxe0.
	nodes, _ := os.ReadDir("/sys/class/infiniband_verbs")
	for _, n := range nodes {
		if b, err := os.ReadFile("/sys/class/infiniband_verbs/" + n.Name() + "/ibdev"); err == nil && strings.TrimSpace(string(b)) == "rxe0" {
			return "/dev/infiniband/" + n.Name()
		}
	}
	t.Fatal("no uverbs node of rxe0")
	return ""
}

// rpingAdvertLen is the size of rping's advert buffers (recv_buf, send_buf), the first
// ones it registers.
const rpingAdvertLen = 16

func memlockHintLine(size int, limit int64) string {
	return fmt.Sprintf("gorping: registering %d bytes failed: RLIMIT_MEMLOCK is %d bytes; raise it with ulimit -l or systemd LimitMEMLOCK=", size, limit)
}

// (a) no permission on /dev/infiniband/rdma_cm and uverbsN.
func TestGuestErrorPermission(t *testing.T) {
	a4 := guestAddr(t, "GORPING_IPV4")
	t.Run("rdma_cm", func(t *testing.T) {
		chmod(t, "/dev/infiniband/rdma_cm", 0o600)
		want := "failed to create RDMA CM event channel: Permission denied\n" + hintRDMACM + "\n"
		// Stock rping says ENOENT and exits 22 here: librdmacm falls back to
		// other ways of reaching the node and reports the last failure. gorping
		// keeps the real errno.
		for _, cfg := range []rping.Config{clientCfg(a4, netip.Addr{}), serverCfg(a4)} {
			check(t, errCase{cfg: cfg, nobody: true, memlock: -1, stderr: want, code: 13,
				stockFirst: "failed to create RDMA CM event channel: No such file or directory", stockCode: 22})
		}
	})
	t.Run("uverbs", func(t *testing.T) {
		chmod(t, uverbsPath(t), 0o600)
		t.Run("client", func(t *testing.T) {
			check(t, errCase{cfg: clientCfg(a4, netip.Addr{}), nobody: true, memlock: -1,
				stderr: "cma event RDMA_CM_EVENT_ADDR_ERROR, error -1\n" + hintUverbs(t) + "\nwaiting for addr/route resolution state 1\n", code: 255,
				stockFirst: "cma event RDMA_CM_EVENT_ADDR_ERROR, error -1", stockCode: 255})
		})
		t.Run("server", func(t *testing.T) {
			check(t, errCase{cfg: serverCfg(a4), nobody: true, memlock: -1,
				stderr: "rdma_bind_addr: No such device\n" + hintUverbs(t) + "\n", code: 255,
				stockFirst: "rdma_bind_addr: No such device", stockCode: 255})
		})
		// A wildcard listener meets the device with its first client (stock
		// rping rejects that client inside librdmacm and listens on).
		t.Run("wildcard server", func(t *testing.T) {
			noUserObjects(t, "before the case")
			c := errCase{cfg: serverCfg(netip.IPv4Unspecified()), nobody: true, memlock: -1}
			srv := start(t, os.Getenv("GORPING_BIN"), &c)
			listening(t, c.cfg.Port)
			cl := clientCfg(a4, netip.Addr{})
			cl.Port = c.cfg.Port
			cl.Stdout, cl.Stderr = &lockedBuffer{}, &lockedBuffer{}
			if st := rping.Run(context.Background(), cl); st == 0 {
				t.Errorf("client of a server without its device: exit 0")
			}
			r := srv.wait(t)
			want := hintUverbs(t) + "\nsetup_qp failed: 13\n"
			if r.stderr != want || r.code != 13 {
				t.Errorf("server: exit %d stderr %q, want 13 %q", r.code, r.stderr, want)
			}
		})
	})
	noUserObjects(t, "after the cases")
}

// (b) RLIMIT_MEMLOCK too low to register the buffers.
func TestGuestErrorMemlock(t *testing.T) {
	a4 := guestAddr(t, "GORPING_IPV4")
	page := int64(os.Getpagesize())
	t.Run("client", func(t *testing.T) {
		// 0: the kernel refuses any pinning (EPERM).
		check(t, errCase{cfg: clientCfg(a4, netip.Addr{}), nobody: true, memlock: 0,
			stderr: "recv_buf reg_mr failed\n" + memlockHintLine(rpingAdvertLen, 0) + "\nrping_setup_buffers failed: 1\n", code: 1,
			stockFirst: "recv_buf reg_mr failed", stockCode: 1})
		// One page: recv_buf's page fits, send_buf's does not (ENOMEM). Stock
		// rping's malloc'd buffers share pages, so it fails elsewhere.
		check(t, errCase{cfg: clientCfg(a4, netip.Addr{}), nobody: true, memlock: page,
			stderr: "send_buf reg_mr failed\n" + memlockHintLine(rpingAdvertLen, page) + "\nrping_setup_buffers failed: 12\n", code: 12})
	})
	want := "recv_buf reg_mr failed\n" + memlockHintLine(rpingAdvertLen, 0) + "\nrping_setup_buffers failed: 1\n"
	// The server meets the limit with its first client.
	t.Run("server", func(t *testing.T) {
		noUserObjects(t, "before the case")
		c := errCase{cfg: serverCfg(a4), nobody: true, memlock: 0}
		srv := start(t, os.Getenv("GORPING_BIN"), &c)
		listening(t, c.cfg.Port)
		cl := clientCfg(a4, netip.Addr{})
		cl.Port = c.cfg.Port
		cl.Stdout, cl.Stderr = &lockedBuffer{}, &lockedBuffer{}
		if st := rping.Run(context.Background(), cl); st == 0 {
			t.Errorf("client of a server that cannot register memory: exit 0")
		}
		if r := srv.wait(t); r.stderr != want || r.code != 1 {
			t.Errorf("server: exit %d stderr %q, want 1 %q", r.code, r.stderr, want)
		}
	})
	// A persistent server reports each failed session, frees what it set up
	// for it, and serves on.
	t.Run("persistent server", func(t *testing.T) {
		noUserObjects(t, "before the case")
		c := errCase{cfg: serverCfg(a4), nobody: true, memlock: 0}
		c.cfg.Persistent = true
		srv := start(t, os.Getenv("GORPING_BIN"), &c)
		listening(t, c.cfg.Port)
		for i := 1; i <= 2; i++ {
			cl := clientCfg(a4, netip.Addr{})
			cl.Port = c.cfg.Port
			cl.Stdout, cl.Stderr = &lockedBuffer{}, &lockedBuffer{}
			if st := rping.Run(context.Background(), cl); st == 0 {
				t.Errorf("client %d: exit 0", i)
			}
			waitFor(t, 60*time.Second, fmt.Sprintf("session %d's failure", i), func() bool { return srv.stderr.String() == strings.Repeat(want, i) })
			// Only the listener is left.
			var objs []string
			deadline := time.Now().Add(30 * time.Second)
			for objs = userObjects(t); len(objs) != 1 || !strings.HasPrefix(objs[0], "cm_id: ") || !strings.Contains(objs[0], "LISTEN"); objs = userObjects(t) {
				if time.Now().After(deadline) {
					out, _ := exec.Command(os.Getenv("GORPING_RDMA_TOOL"), "resource", "show", "cm_id").CombinedOutput()
					t.Fatalf("after session %d the server should hold its listener only; user objects:\n%s\nrdma resource show cm_id:\n%s\nserver running %v, stderr %q", i, strings.Join(objs, "\n"), out, srv.running(), srv.stderr.String())
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		if !srv.running() {
			t.Fatalf("persistent server exited: %q", srv.stderr.String())
		}
	})
	noUserObjects(t, "after the cases")
}

// (c) addresses that map to no RDMA device.
func TestGuestErrorNoRDMAAddress(t *testing.T) {
	a4 := guestAddr(t, "GORPING_IPV4")
	lo4, lo6 := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")
	onLo := func(a netip.Addr) string {
		return fmt.Sprintf("gorping: %s is on lo, which has no RDMA device: %s; use an address of one of them\n", a, linkHint)
	}
	for _, lo := range []netip.Addr{lo4, lo6} {
		t.Run(lo.String(), func(t *testing.T) {
			// The loopback route has no RDMA netdev.
			check(t, errCase{cfg: clientCfg(lo, netip.Addr{}), memlock: -1,
				stderr: "rdma_resolve_route: No such device\n" + onLo(lo) + "waiting for addr/route resolution state 11\n", code: 255,
				stockFirst: "rdma_resolve_route: No such device", stockCode: 255})
			// The kernel binds a loopback address without a device; stock rping
			// then listens where no RoCE client can reach it.
			check(t, errCase{cfg: serverCfg(lo), memlock: -1,
				stderr: "rdma_bind_addr: No such device\n" + onLo(lo), code: 255})
		})
	}
	t.Run("-I 127.0.0.1", func(t *testing.T) {
		check(t, errCase{cfg: clientCfg(a4, lo4), memlock: -1,
			stderr: "cma event RDMA_CM_EVENT_ADDR_ERROR, error -19\n" + onLo(lo4) + "waiting for addr/route resolution state 1\n", code: 255,
			stockFirst: "cma event RDMA_CM_EVENT_ADDR_ERROR, error -19", stockCode: 255})
	})
	// A netdev with an address but no RDMA device.
	t.Run("plain netdev", func(t *testing.T) {
		sh(t, "ip link add d9 type dummy && ip link set d9 up && ip addr add 203.0.113.1/24 dev d9")
		t.Cleanup(func() { exec.Command("ip", "link", "del", "d9").Run() })
		plain := netip.MustParseAddr("203.0.113.1")
		onD9 := fmt.Sprintf("gorping: 203.0.113.1 is on d9, which has no RDMA device: %s; use an address of one of them\n", linkHint)
		check(t, errCase{cfg: clientCfg(a4, plain), memlock: -1,
			stderr: "rdma_resolve_addr: No such device\n" + onD9, code: 255,
			stockFirst: "rdma_resolve_addr: No such device", stockCode: 255})
		check(t, errCase{cfg: serverCfg(plain), memlock: -1,
			stderr: "rdma_bind_addr: No such device\n" + onD9, code: 255,
			stockFirst: "rdma_bind_addr: No such device", stockCode: 255})
		check(t, errCase{cfg: clientCfg(plain, netip.Addr{}), memlock: -1,
			stderr: "cma event RDMA_CM_EVENT_ADDR_ERROR, error -19\n" + onD9 + "waiting for addr/route resolution state 1\n", code: 255,
			stockFirst: "cma event RDMA_CM_EVENT_ADDR_ERROR, error -19", stockCode: 255})
	})
}

// (d) a port without the GID the connection needs: rxe1 on d1, which has no
// address of its own; the route to 198.51.100.0/24 leaves through d1 with
// d0's address as source, for which rxe1 has no GID.
func TestGuestErrorNoGID(t *testing.T) {
	a4 := guestAddr(t, "GORPING_IPV4")
	sh(t, "ip link add d1 type dummy && ip link set d1 up && "+
		os.Getenv("GORPING_RDMA_TOOL")+" link add rxe1 type rxe netdev d1")
	t.Cleanup(func() {
		exec.Command(os.Getenv("GORPING_RDMA_TOOL"), "link", "delete", "rxe1").Run()
		exec.Command("ip", "link", "del", "d1").Run()
	})
	sh(t, "ip route add 198.51.100.0/24 dev d1 src "+a4.String())
	waitFor(t, 60*time.Second, "rxe1's port to come up", func() bool {
		b, err := os.ReadFile("/sys/class/infiniband/rxe1/ports/1/state")
		return err == nil && strings.Contains(string(b), "ACTIVE")
	})
	dst := netip.MustParseAddr("198.51.100.2")
	hint := fmt.Sprintf("gorping: rxe1 (netdev d1) has no GID for %s, the source address of the route to %s: add an address to d1 (ip addr add ADDR dev d1) or pass one of its addresses with -I\n", a4, dst)
	check(t, errCase{cfg: clientCfg(dst, netip.Addr{}), memlock: -1,
		stderr: "cma event RDMA_CM_EVENT_ADDR_ERROR, error -19\n" + hint + "waiting for addr/route resolution state 1\n", code: 255,
		stockFirst: "cma event RDMA_CM_EVENT_ADDR_ERROR, error -19", stockCode: 255})

	// The remedy works: once d1 has an address (and rxe1 the GID), the same
	// destination resolves through rxe1 (then nobody answers there: the
	// connect times out, which is not this test's business).
	sh(t, "ip addr add 198.51.100.1/24 dev d1")
	waitFor(t, 60*time.Second, "rxe1's GID for 198.51.100.1", func() bool {
		b, _ := exec.Command("sh", "-c", "cat /sys/class/infiniband/rxe1/ports/1/gids/* 2>/dev/null").Output()
		return bytes.Contains(b, []byte("0000:0000:0000:0000:0000:ffff:c633:6401"))
	})
	var stdout, stderr lockedBuffer
	cfg := clientCfg(netip.MustParseAddr("198.51.100.1"), netip.Addr{})
	cfg.Stdout, cfg.Stderr = &stdout, &stderr
	if st := rping.Run(context.Background(), cfg); st != 255 || !strings.HasPrefix(stderr.String(), "cma event RDMA_CM_EVENT_REJECTED") {
		t.Errorf("client to d1's own address: exit %d stderr %q, want the rejection of a host without listener", st, stderr.String())
	}
}
