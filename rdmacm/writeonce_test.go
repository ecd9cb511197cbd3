package rdmacm

import (
	"os"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// sigBlk is the calling thread's blocked-signal mask as the kernel reports it.
func sigBlk(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/thread-self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "SigBlk:") {
			return strings.TrimSpace(strings.TrimPrefix(l, "SigBlk:"))
		}
	}
	t.Fatal("no SigBlk in /proc/thread-self/status")
	return ""
}

// writeOnce writes through and leaves the thread's signal mask as it found it.
func TestWriteOnceRestoresSignalMask(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	before := sigBlk(t)
	if n, err := writeOnce(p[1], []byte("cmd")); n != 3 || err != nil {
		t.Fatalf("writeOnce = %d, %v", n, err)
	}
	if after := sigBlk(t); after != before {
		t.Fatalf("signal mask %s after writeOnce, %s before", after, before)
	}
	buf := make([]byte, 8)
	if n, _ := unix.Read(p[0], buf); string(buf[:n]) != "cmd" {
		t.Fatalf("read %q", buf[:n])
	}
}
