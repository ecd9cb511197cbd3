package vm

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// QEMUBinary is the emulator for a Debian architecture, and the Debian package
// that ships it.
func QEMUBinary(arch string) (binary, pkg string) {
	if arch == "arm64" {
		return "qemu-system-aarch64", "qemu-system-arm"
	}
	return "qemu-system-x86_64", "qemu-system-x86"
}

// KVMUsable reports whether qemu can use KVM for a guest of arch, and why not.
// /dev/kvm can exist on a host whose CPU has no virtualisation extensions (or
// whose kernel lacks kvm_intel/kvm_amd), so its presence proves nothing: require
// the same architecture, the CPU flag, and a working KVM_GET_API_VERSION.
func KVMUsable(arch string) (bool, string) {
	if runtime.GOARCH != arch {
		return false, "guest architecture differs from the host's"
	}
	if arch == "amd64" {
		b, err := os.ReadFile("/proc/cpuinfo")
		if err != nil {
			return false, "cannot read /proc/cpuinfo"
		}
		if !HasVirtFlag(string(b)) {
			return false, "CPU has no vmx/svm flag"
		}
	}
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		return false, "cannot open /dev/kvm: " + err.Error()
	}
	defer f.Close()
	const kvmGetAPIVersion = 0xAE00 // _IO(KVMIO, 0x00)
	v, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), kvmGetAPIVersion, 0)
	if errno != 0 || v != 12 {
		return false, fmt.Sprintf("KVM_GET_API_VERSION = %d, %v", v, errno)
	}
	return true, ""
}

// HasVirtFlag reports whether /proc/cpuinfo text lists vmx or svm in a flags line.
func HasVirtFlag(cpuinfo string) bool {
	for _, line := range strings.Split(cpuinfo, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(k) != "flags" {
			continue
		}
		for _, f := range strings.Fields(v) {
			if f == "vmx" || f == "svm" {
				return true
			}
		}
	}
	return false
}

// QEMU is one guest boot.
type QEMU struct {
	Arch        string
	Kernel      string // vmlinuz
	Initrd      string
	MemoryMB    int
	CPUs        int
	KVM         bool
	Interactive bool // connect our stdin to the guest console
	// Net replaces "-nic none": the multi-host test bed's NICs (cluster.go).
	Net []string
	// Cmdline is added to the kernel command line.
	Cmdline string
}

// Args is qemu's command line. No network device: the guest's RDMA traffic
// never leaves it. -no-reboot turns the guest's poweroff, and a panic's reboot
// (panic=-1), into qemu exiting.
func (q QEMU) Args() []string {
	console := "ttyS0"
	var a []string
	if q.Arch == "arm64" {
		console = "ttyAMA0"
		// pauth-impdef: QEMU's cheap pointer-authentication algorithm; the
		// architected one dominates TCG time of a Debian arm64 kernel.
		a = append(a, "-M", "virt", "-cpu", "max,pauth-impdef=on")
	}
	if q.KVM {
		a = append(a, "-accel", "kvm", "-cpu", "host")
	} else {
		a = append(a, "-accel", "tcg")
	}
	a = append(a, "-nographic", "-no-reboot")
	if len(q.Net) > 0 {
		a = append(a, q.Net...)
	} else {
		a = append(a, "-nic", "none")
	}
	cmdline := "console=" + console + " quiet panic=-1"
	if q.Cmdline != "" {
		cmdline += " " + q.Cmdline
	}
	return append(a,
		"-m", strconv.Itoa(q.MemoryMB), "-smp", strconv.Itoa(q.CPUs),
		"-kernel", q.Kernel, "-initrd", q.Initrd,
		"-append", cmdline,
	)
}

// Guest is a running qemu.
type Guest struct {
	cmd    *exec.Cmd
	Lines  <-chan string // console lines; closed when qemu's output ends
	stderr *tailBuffer
	done   chan struct{}
	err    error
}

// Start launches qemu. Its console (serial on stdout) arrives on Lines with
// carriage returns removed. The caller must Kill the guest on every path.
func (q QEMU) Start(ctx context.Context, stderrEcho io.Writer) (*Guest, error) {
	bin, _ := QEMUBinary(q.Arch)
	cmd := exec.Command(bin, q.Args()...)
	// Own process group, and SIGKILL if we die: a qemu must never outlive its run.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if q.Interactive {
		cmd.Stdin = os.Stdin
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("qemu stdout: %w", err)
	}
	g := &Guest{cmd: cmd, stderr: &tailBuffer{max: 4096}, done: make(chan struct{})}
	cmd.Stderr = io.MultiWriter(g.stderr, stderrEcho)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	lines := make(chan string, 64)
	g.Lines = lines
	var src io.Reader = out
	if q.Interactive {
		// A shell prompt has no newline: pass the console through unprefixed as
		// it comes, and split lines only for the markers.
		src = io.TeeReader(out, os.Stdout)
	}
	go func() {
		defer close(lines)
		r := bufio.NewReaderSize(src, 64<<10)
		for {
			s, err := r.ReadString('\n')
			if s != "" {
				s = CleanConsoleLine(s)
				select {
				case lines <- s:
				case <-ctx.Done():
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		g.err = cmd.Wait()
		close(g.done)
	}()
	return g, nil
}

// Kill ends qemu (if still running) and waits for it.
func (g *Guest) Kill() {
	select {
	case <-g.done:
		return
	default:
	}
	syscall.Kill(-g.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-g.done:
	case <-time.After(10 * time.Second):
	}
}

// Stderr is the tail of qemu's own error output, for failure messages.
func (g *Guest) Stderr() string { return strings.TrimSpace(g.stderr.String()) }

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf.Write(p)
	if over := t.buf.Len() - t.max; over > 0 {
		t.buf.Next(over)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.buf.String()
}

// ansiEscape matches the terminal control sequences firmware writes to the
// console (SeaBIOS clears the screen); they garble a log.
var ansiEscape = regexp.MustCompile(`\x1b(\[[0-9;?]*[A-Za-z]|[A-Za-z])`)

// CleanConsoleLine removes line endings, carriage returns and terminal control
// sequences from a console line.
func CleanConsoleLine(s string) string {
	s = strings.TrimRight(s, "\r\n")
	s = strings.ReplaceAll(s, "\r", "")
	return ansiEscape.ReplaceAllString(s, "")
}
