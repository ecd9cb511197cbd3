//go:build !guest

package mesh

// Signals to the agent binary (issue 26 finding 9): handling installed before anything
// else, and a second signal that kills at once.

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gorping/gorping/internal/hostenv"
	"github.com/gorping/gorping/internal/hostenv/hostenvtest"
	"github.com/gorping/gorping/test/meshtest"
)

// fullPipe is a pipe whose buffer is already full: a process writing to it blocks until
// the test reads.
func fullPipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	syscall.SetNonblock(p[1], true)
	chunk := make([]byte, 4096)
	for {
		if _, err := syscall.Write(p[1], chunk); err != nil {
			break // EAGAIN: full
		}
	}
	syscall.SetNonblock(p[1], false)
	return os.NewFile(uintptr(p[0]), "pipe-r"), os.NewFile(uintptr(p[1]), "pipe-w")
}

// writingStderr reports whether one of pid's threads is blocked in write(2) on fd 2.
func writingStderr(pid int) bool {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/syscall", pid))
	for _, p := range tasks {
		b, err := os.ReadFile(p)
		f := strings.Fields(string(b))
		if err == nil && len(f) > 1 && f[0] == fmt.Sprint(unix.SYS_WRITE) && f[1] == "0x2" {
			return true
		}
	}
	return false
}

// TestSIGHUPAtStart: a SIGHUP that comes while the agent is starting (here: while its
// first log line is held by a full stderr pipe) does not kill it.
func TestSIGHUPAtStart(t *testing.T) {
	bin := buildGorping(t)
	env := append(os.Environ(), hostenvtest.BinaryEnv(hostenv.NoRDMA(filepath.Join(t.TempDir(), "host")))...)
	r, w := fullPipe(t)
	defer r.Close()
	cmd := exec.Command(bin, "mesh", "--no-responder", "--listen", "127.0.0.1:0", "--log.format", "json")
	cmd.Env, cmd.Stdout, cmd.Stderr = env, w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		cmd.Process.Kill()
		<-done
	}()
	if _, err := os.ReadFile(fmt.Sprintf("/proc/%d/syscall", cmd.Process.Pid)); err != nil {
		t.Skipf("cannot see the agent's system calls (/proc/PID/syscall): %v", err)
	}
	meshtest.WaitFor(t, 30*time.Second, "the agent blocked writing its first log line", func() (bool, string) {
		return writingStderr(cmd.Process.Pid), ""
	})
	cmd.Process.Signal(syscall.SIGHUP)
	var mu sync.Mutex
	var out bytes.Buffer
	go func() {
		b := make([]byte, 64<<10)
		for {
			n, err := r.Read(b)
			mu.Lock()
			out.Write(b[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	meshtest.WaitFor(t, 30*time.Second, "the agent started after a SIGHUP during its start", func() (bool, string) {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("the agent ended (%v) on a SIGHUP at start", err)
		default:
		}
		mu.Lock()
		defer mu.Unlock()
		return strings.Contains(out.String(), "gorping mesh started"), ""
	})
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		done <- err
		if err != nil {
			t.Errorf("after SIGTERM: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no exit 30 s after SIGTERM")
	}
}

// TestSecondSignalKills: SIGTERM starts the orderly shutdown; a SIGINT during it (here
// it waits for a request that is still being sent) kills the agent at once.
func TestSecondSignalKills(t *testing.T) {
	bin := buildGorping(t)
	env := append(os.Environ(), hostenvtest.BinaryEnv(hostenv.NoRDMA(filepath.Join(t.TempDir(), "host")))...)
	a := meshtest.Start(t, bin, env, "--no-responder", "--listen", "127.0.0.1:0")
	c, err := net.Dial("tcp", a.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /metrics HTTP/1.1\r\nHost: agent\r\n") // the header's end never comes
	a.Signal(syscall.SIGTERM)
	meshtest.WaitFor(t, 30*time.Second, "the agent closing its listener", func() (bool, string) {
		return strings.Contains(a.Logs(), "closing the metrics listener"), ""
	})
	a.Signal(syscall.SIGINT)
	if code := a.Wait(t, 30*time.Second); code != -1 {
		t.Errorf("exit status %d after SIGTERM then SIGINT, want killed by SIGINT\n%s", code, a.Logs())
	}
}
