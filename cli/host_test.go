//go:build !guest

package cli

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/gorping/gorping/internal/hostenv"
	"github.com/gorping/gorping/internal/hostenv/hostenvtest"
)

// noRDMAEnv is the environment that gives a gorping binary built by buildBinary
// a host without RDMA (below dir), or, with fakeDevice, one rxe device in sysfs
// and no device nodes; the machine's own devices do not matter.
func noRDMAEnv(t *testing.T, dir string, fakeDevice bool) []string {
	t.Helper()
	e := hostenv.NoRDMA(dir)
	if fakeDevice {
		hostenvtest.AddRxe(t, e, "rxe0", "uverbs0")
	}
	return hostenvtest.BinaryEnv(e)
}

// runNoRDMA runs bin (buildBinary) as runCLI runs the command in-process, on a host
// without RDMA of its own (passed in through its environment: the machine's devices do
// not matter, and nothing process-wide changes).
func runNoRDMA(t *testing.T, bin string, args ...string) (status int, stdout, stderr string) {
	t.Helper()
	env := append(withoutPosixlyCorrect(os.Environ()), noRDMAEnv(t, t.TempDir(), false)...)
	return execute(t, bin, env, args...)
}

func TestNoDevicesRun(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	for _, args := range [][]string{{"-s"}, {"-c", "-a", "127.0.0.1", "-C", "1"}, {"-s", "-P", "-a", "::0"}} {
		st, out, errOut := runNoRDMA(t, bin, args...)
		if st != 19 || out != "" || errOut != noDevices19 {
			t.Errorf("%q: exit %d stdout %q stderr %q, want 19, the no-device line and the hint", args, st, out, errOut)
		}
	}
	// Debug lines of option parsing come first, as in rping.
	st, out, errOut := runNoRDMA(t, bin, "-d", "-s", "-S", "100")
	if st != 19 || out != "server\nsize 100\n" || errOut != noDevices19 {
		t.Errorf("-d -s -S 100: exit %d stdout %q stderr %q", st, out, errOut)
	}
}

// noDevices19 is what gorping prints on a host without RDMA devices: rping's line, then
// gorping's hint.
const noDevices19 = "No RDMA devices were detected\n" + noDevicesHint + "\n"

// testCommit is the commit buildBinary stamps into gorping.
const testCommit = "0123456789abcdef0123456789abcdef01234567"

// buildBinary builds gorping into a temporary directory, with the
// gorping_hostenv tag: the binary then takes its sysfs and /dev directories
// from GORPING_HOSTENV_SYSFS/_DEV (noRDMAEnv) instead of the machine's.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "rping")
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	build := exec.Command(gobin, "build", "-tags", "gorping_hostenv", "-ldflags", "-X main.buildVersion=v9.9.9 -X main.buildCommit="+testCommit, "-o", bin, "github.com/gorping/gorping")
	// The binary runs as a child of this test, so it is built for the machine: under
	// make unit-arm64 this test is an arm64 binary in qemu-aarch64 with GOARCH=arm64 set,
	// and an arm64 child would not execute on the amd64 host.
	hostArch, err := exec.Command(gobin, "env", "GOHOSTARCH").Output()
	if err != nil {
		t.Fatalf("go env GOHOSTARCH: %v", err)
	}
	build.Env = append(os.Environ(), "GOARCH="+strings.TrimSpace(string(hostArch)))
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// execute runs bin and returns its exit status and output.
func execute(t *testing.T, bin string, env []string, args ...string) (int, string, string) {
	t.Helper()
	return runChild(t, exec.Command(bin, args...), env)
}

// executeStock is execute for stock rping, with this machine's RDMA hidden.
func executeStock(t *testing.T, bin string, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd, err := hidingRDMA(bin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return runChild(t, cmd, env)
}

func runChild(t *testing.T, cmd *exec.Cmd, env []string) (int, string, string) {
	t.Helper()
	bin, args := cmd.Path, cmd.Args[1:]
	cmd.Env = env
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), o.String(), e.String()
	}
	if err != nil {
		t.Fatalf("%s %q: %v", bin, args, err)
	}
	return 0, o.String(), e.String()
}

// The built binary exits with the statuses rping's do (os.Exit path, env).
func TestBinaryExitStatus(t *testing.T) {
	bin := buildBinary(t)
	hostEnv := noRDMAEnv(t, t.TempDir(), false)
	for _, tc := range []struct {
		args   []string
		env    []string
		status int
		stdout string
		stderr string
	}{
		{[]string{"-c", "-a", "127.0.0.1", "-C", "1"}, nil, 19, "", noDevices19},
		{nil, nil, 22, wantUsage, ""},
		{[]string{"foo", "-s"}, []string{"POSIXLY_CORRECT="}, 22, wantUsage, ""},
		{[]string{"foo", "-s"}, nil, 19, "", noDevices19},
		{[]string{"-S", "1", "-s"}, nil, 22, "", "Invalid size 1 (valid range is 23 to 65536)\n"},
		{[]string{"-a", "1.2.3.4.5.6.7", "-s", "-a", "256.1.1.1"}, nil, -1, "", ""}, // exit code depends on DNS; checked below
		{[]string{"--version"}, nil, 0, "gorping v9.9.9 (rping-compatible, rdma-core 44 protocol)\ncommit " + testCommit + "\n", ""},
		{[]string{"--help"}, nil, 0, wantHelp, ""},
		{[]string{"devices", "-x"}, nil, 2, "", "gorping devices: unknown option -x (gorping devices --help)\n"},
		{[]string{"devices"}, nil, 19, "", noDevices19},
		{[]string{"devices", "-v", "--json"}, []string{"POSIXLY_CORRECT="}, 19, "{\n  \"devices\": []\n}\n", noDevices19},
		{[]string{"devices", "-s"}, nil, 19, "", noDevices19},
	} {
		env := append(os.Environ(), tc.env...)
		if tc.env == nil {
			env = withoutPosixlyCorrect(os.Environ())
		}
		env = append(env, hostEnv...)
		st, stdout, stderr := execute(t, bin, env, tc.args...)
		if tc.status == -1 {
			// Invalid dotted names go to the resolver: EAI_NONAME (254), or
			// EAI_AGAIN (253) without working DNS; either way the message.
			if (st != 254 && st != 253) || !strings.HasPrefix(stdout, "getaddrinfo failed (") {
				t.Errorf("%q: exit %d stdout %q", tc.args, st, stdout)
			}
			continue
		}
		if st != tc.status || stdout != tc.stdout || stderr != tc.stderr {
			t.Errorf("%q env %q: exit %d stdout %q stderr %q, want %d %q %q", tc.args, tc.env, st, stdout, stderr, tc.status, tc.stdout, tc.stderr)
		}
	}
}

// The binary sees the environment it is given, not the machine's: with a fake
// rxe device in sysfs it gets past device discovery and fails at the rdma_cm
// node of its (empty) device directory.
func TestBinaryUsesInjectedEnvironment(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	env := append(withoutPosixlyCorrect(os.Environ()), noRDMAEnv(t, dir, true)...)
	st, stdout, stderr := execute(t, bin, env, "-s")
	want := "failed to create RDMA CM event channel: No such file or directory\n" +
		"gorping: " + filepath.Join(dir, "dev", "rdma_cm") + " does not exist: load the rdma_ucm kernel module (modprobe rdma_ucm)\n"
	if st != 2 || stdout != "" || stderr != want {
		t.Errorf("exit %d stdout %q stderr %q, want 2 and %q", st, stdout, stderr, want)
	}
}

// rdmaPaths are what librdmacm and libibverbs look at to find devices.
var rdmaPaths = []string{"/dev/infiniband", "/sys/class/infiniband", "/sys/class/infiniband_verbs", "/sys/class/misc/rdma_cm"}

// hidingRDMA returns the command that runs name without seeing this machine's
// RDMA devices: as is on a host without any, else in a new user and mount
// namespace with an empty tmpfs over each of rdmaPaths (stock rping cannot be
// pointed elsewhere). An error says the namespace is not available here.
func hidingRDMA(name string, args ...string) (*exec.Cmd, error) {
	var present []string
	for _, p := range rdmaPaths {
		if _, err := os.Stat(p); err == nil {
			present = append(present, p)
		}
	}
	if len(present) == 0 {
		return exec.Command(name, args...), nil
	}
	if err := exec.Command("unshare", "-rm", "true").Run(); err != nil {
		return nil, fmt.Errorf("unshare -rm (to hide %v): %w", present, err)
	}
	script := `for d in ` + strings.Join(present, " ") + `; do mount -t tmpfs gorping-test "$d" || exit 99; done; exec "$0" "$@"`
	return exec.Command("unshare", append([]string{"-rm", "sh", "-c", script, name}, args...)...), nil
}

func withoutPosixlyCorrect(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "POSIXLY_CORRECT=") {
			out = append(out, kv)
		}
	}
	return out
}

// TestSameAsRping runs Debian's rping (rdmacm-utils 44.0) and gorping side by
// side on a host without RDMA: same stdout, stderr and exit status for every
// command line, except the deliberate differences (README's compatibility table,
// gorping(1)'s SUBCOMMANDS): gorping's stderr may have its hint after rping's
// no-device line (the only line it adds on these command lines), and command lines
// of gorping's own subcommands (exit 2 where rping prints its usage) are not
// compared here.
//
// On a host with RDMA, stock rping runs in a namespace that hides the devices
// (hidingRDMA) and gorping gets an injected environment without them.
func TestSameAsRping(t *testing.T) {
	const rping = "/usr/bin/rping"
	if _, err := os.Stat(rping); err != nil {
		// make test installs it (make host-deps); only a bare `go test` gets here.
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s not installed (apt-get install rdmacm-utils): %v", rping, err)
		}
		t.Skipf("%s not installed (apt-get install rdmacm-utils): %v", rping, err)
	}
	if _, err := hidingRDMA(rping); err != nil {
		t.Fatalf("this host has RDMA devices and they cannot be hidden from stock rping: %v", err)
	}
	bin := buildBinary(t)
	env := append(withoutPosixlyCorrect(os.Environ()), noRDMAEnv(t, t.TempDir(), false)...)
	cases := [][]string{
		{}, {"-s"}, {"-c"}, {"-s", "-c"}, {"-dvsP"}, {"-dS100", "-s"},
		{"-d", "-S100", "-s", "-C5", "-vV", "-p", "99999"},
		{"-S", "1", "-a", "127.0.0.1", "-s"}, {"-S", "1", "-S", "64", "-s"}, {"-S", "abc", "-s"},
		{"-S", "65536", "-s"}, {"-S", "65535", "-s"}, {"-S", "22", "-s"}, {"-S", "23", "-s"},
		{"-C", "-1", "-s"}, {"-C", "-1", "-a", "127.0.0.1", "-c"}, {"-a", "foo", "-s"},
		{"-a", "foo", "-a", "127.0.0.1", "-s"}, {"-I", "foo", "-c"}, {"-a", "::0", "-s"},
		{"-a", "127.1", "-c"}, {"-a", "0x7f.1", "-c"}, {"-s", "foo"}, {"foo", "-s"}, {"--", "-s"},
		{"-s", "--", "-c"}, {"-t", "x", "-s"}, {"-s", "-t"}, {"-s", "-p"}, {"-p", "-s"}, {"-a", "-s"},
		{"-x"}, {"-d", "-sx"}, {"-s", "-:"}, {"-d", "-s", "-S"}, {"-S", "1", "-x", "-s"},
		{"-d", "-p", "abc", "-s"}, {"-d", "-C", "abc", "-c"}, {"-d", "-p", "0x10", "-s"},
		{"-S", " 100", "-d", "-s"}, {"-S", "4294967360", "-d", "-s"}, {"-d", "-C", "2147483648", "-c"},
		{"-dd", "-s"}, {"-v", "-d", "-V", "-s", "-c", "-C", "3", "-S", "64", "-p", "1"},
		{"-S", "1", "-C", "-1", "-a", "foo", "-s"}, {"-a", "", "-s"}, {"-a", "1.2.3.4.5", "-s"},
		{"-a", "fe80::1%nosuchif", "-s"}, {"-a", "fe80::1%lo", "-s"},
		{"-I", "127.0.0.1", "-c", "-a", "127.0.0.1", "-d"}, {"-", "-s"}, {"-sa127.0.0.1"},
		{"-vvVV", "-s", "-q", "-P"}, {"-h"}, {"-s", "-d", "-S", "1", "-C", "-2"},
		// Lines starting with "devices" that are not the devices subcommand (devices.go).
		{"devices", "-s"}, {"devices", "-d", "-s"}, {"devices", "-v", "-d", "-c"}, {"devices", "-x", "-s"},
		{"devices", "-vs"}, {"devices", "-v", "-S", "1"}, {"devices", "--", "-v"}, {"-d", "devices", "-s"},
		{"mesh", "-s"}, {"mesh", "-S", "1", "-c"}, {"mesh", "plan", "-s"}, {"mesh", "plan", "--all", "-d", "-c"}, {"completion", "bash", "-d", "-s"}, {"mesh", "--st"},
	}
	hinted := 0
	same := func(rs int, ro, re string, gs int, gout, gerr string) bool {
		if h, ok := strings.CutSuffix(gerr, noDevicesHint+"\n"); ok && strings.HasSuffix(h, "No RDMA devices were detected\n") {
			gerr = h
			hinted++
		}
		return rs == gs && ro == gout && re == gerr
	}
	for _, args := range cases {
		rs, ro, re := executeStock(t, rping, env, args...)
		gs, gout, gerr := execute(t, bin, env, args...)
		if !same(rs, ro, re, gs, gout, gerr) {
			t.Errorf("%q: rping exit %d stdout %q stderr %q; gorping exit %d stdout %q stderr %q", args, rs, ro, re, gs, gout, gerr)
		}
	}
	posix := append(env, "POSIXLY_CORRECT=1")
	for _, args := range [][]string{{"foo", "-s"}, {"-s", "foo", "-c"}} {
		rs, ro, re := executeStock(t, rping, posix, args...)
		gs, gout, gerr := execute(t, bin, posix, args...)
		if !same(rs, ro, re, gs, gout, gerr) {
			t.Errorf("POSIXLY_CORRECT %q: rping %d %q %q; gorping %d %q %q", args, rs, ro, re, gs, gout, gerr)
		}
	}
	if hinted < 10 {
		t.Errorf("gorping's no-device hint was seen %d times: the comparison's allowance is not what runs", hinted)
	}
}
