//go:build guest

package guest

// Helpers for tests that run inside the QEMU guest (see test/vm). The guest has
// rxe0 on dummy interface d0 with GORPING_IPV4 and GORPING_IPV6, stock rping on
// PATH, and GORPING_BIN / GORPING_RDMA_TOOL pointing at gorping and iproute2's rdma.

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorping/gorping/test/guesttest"
)

// Env returns the environment variable name, failing the test if it is unset:
// a guest test outside the guest must fail loudly, never pass vacuously.
func Env(t testing.TB, name string) string { t.Helper(); return guesttest.Env(t, name) }

// IPv4 and IPv6 are the addresses of the guest's rxe0 netdev.
func IPv4(t testing.TB) string { return Env(t, "GORPING_IPV4") }
func IPv6(t testing.TB) string { return Env(t, "GORPING_IPV6") }

// GorpingBin is the gorping binary under test.
func GorpingBin(t testing.TB) string { return Env(t, "GORPING_BIN") }

// RDMATool is iproute2's rdma (busybox has none).
func RDMATool(t testing.TB) string { t.Helper(); return guesttest.RDMATool(t) }

// StockRping is rdma-core's rping from the guest's PATH.
func StockRping(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("rping")
	if err != nil {
		t.Fatalf("stock rping not found: %v", err)
	}
	return p
}

// lockedBuffer collects a process's output while the test may read it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Len()
}

// lineCounter discards what is written and counts its lines, without
// allocating (the allocation tests' output sink and progress signal).
type lineCounter struct{ n atomic.Int64 }

func (c *lineCounter) Write(p []byte) (int, error) {
	c.n.Add(int64(bytes.Count(p, []byte{'\n'})))
	return len(p), nil
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Proc is a process started by a test; the test's cleanup kills it if it is
// still running, so no test leaves a server behind for the next.
type Proc struct {
	Name   string
	cmd    *exec.Cmd
	stdout lockedBuffer
	stderr lockedBuffer
	done   chan struct{}
	err    error
}

// Start runs name with args in the background.
func Start(t testing.TB, name string, args ...string) *Proc {
	t.Helper()
	p := &Proc{Name: name + " " + strings.Join(args, " "), done: make(chan struct{})}
	p.cmd = exec.Command(name, args...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", p.Name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		if p.Running() {
			t.Logf("killing %s (still running at test end)", p.Name)
			if t.Failed() {
				p.dumpIfGorping()
				if s := p.Stderr(); strings.Contains(s, "SIGQUIT") {
					t.Logf("%s stderr:\n%s", p.Name, s)
				}
			}
			p.Kill()
		}
	})
	return p
}

// Running reports whether the process has not exited yet.
func (p *Proc) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Kill kills the process (and its process group) and waits for it.
func (p *Proc) Kill() {
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// dumpIfGorping makes a hung gorping print its goroutines (SIGQUIT: the Go
// runtime writes every stack to stderr and exits), so a hang's report says
// where it waited. Other programs are left to Kill.
func (p *Proc) dumpIfGorping() {
	if !strings.Contains(p.cmd.Path, "gorping") {
		return
	}
	p.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
	}
}

// Stdout and Stderr are what the process printed so far.
func (p *Proc) Stdout() string { return p.stdout.String() }
func (p *Proc) Stderr() string { return p.stderr.String() }

// Wait waits up to timeout for the process to exit and returns its exit code
// (-1 if a signal killed it). On timeout the process is killed and the test
// fails with what it printed.
func (p *Proc) Wait(t testing.TB, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.dumpIfGorping()
		p.Kill()
		t.Fatalf("%s did not exit within %s\nstdout:\n%s\nstderr:\n%s", p.Name, timeout, p.Stdout(), p.Stderr())
	}
	return exitCode(t, p)
}

// exitCode is the exit status of p, which has exited or is about to (-1:
// killed by a signal).
func exitCode(t testing.TB, p *Proc) int {
	t.Helper()
	<-p.done
	var ee *exec.ExitError
	switch {
	case p.err == nil:
		return 0
	case errors.As(p.err, &ee):
		return ee.ExitCode()
	}
	t.Fatalf("wait for %s: %v", p.Name, p.err)
	return -1
}

// Result is a finished process.
type Result struct {
	Stdout, Stderr string
	Code           int
}

// Run runs name with args to completion within timeout.
func Run(t testing.TB, timeout time.Duration, name string, args ...string) Result {
	t.Helper()
	p := Start(t, name, args...)
	code := p.Wait(t, timeout)
	return Result{Stdout: p.Stdout(), Stderr: p.Stderr(), Code: code}
}

// WaitListening waits until server has an rdma_cm id in state LISTEN on
// addr:port (as rdma prints it, e.g. "192.0.2.1:7174", "2001:db8::1:7174"), or
// fails the test after timeout or when the server exits. rdma lists an id under
// the thread that created it, which for gorping (Go) is seldom the main thread,
// so any thread of the process counts.
func WaitListening(t testing.TB, server *Proc, addr string, port int, timeout time.Duration) {
	t.Helper()
	owner := func(r guesttest.Resource) bool { return tasksOf(pidOf(server))[r.PID()] }
	alive := func() error {
		if server.Running() {
			return nil
		}
		return fmt.Errorf("%s (pid %d) exited\nstdout:\n%s\nstderr:\n%s", server.Name, pidOf(server), server.Stdout(), server.Stderr())
	}
	guesttest.WaitListening(t, fmt.Sprintf("%s:%d", addr, port), timeout, owner, alive)
}
