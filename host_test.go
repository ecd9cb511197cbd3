//go:build !guest

package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// hostHasNoRDMA fails the test if this machine has uverbs devices: these tests
// assert rping's behaviour on a host without RDMA.
func hostHasNoRDMA(t *testing.T) {
	t.Helper()
	ents, err := os.ReadDir("/sys/class/infiniband_verbs")
	if err == nil && len(ents) > 0 {
		t.Fatalf("this host has uverbs devices (%d); the !guest tests assume none", len(ents))
	}
}

func TestNoDevicesRun(t *testing.T) {
	hostHasNoRDMA(t)
	for _, args := range [][]string{{"-s"}, {"-c", "-a", "127.0.0.1", "-C", "1"}, {"-s", "-P", "-a", "::0"}} {
		st, out, errOut := runCLI(false, args...)
		if st != 19 || out != "" || errOut != "No RDMA devices were detected\n" {
			t.Errorf("%q: exit %d stdout %q stderr %q, want 19 and the no-device line", args, st, out, errOut)
		}
	}
	// Debug lines of option parsing come first, as in rping.
	st, out, errOut := runCLI(false, "-d", "-s", "-S", "100")
	if st != 19 || out != "server\nsize 100\n" || errOut != "No RDMA devices were detected\n" {
		t.Errorf("-d -s -S 100: exit %d stdout %q stderr %q", st, out, errOut)
	}
}

// The built binary exits with the statuses rping's do (os.Exit path, env).
func TestBinaryExitStatus(t *testing.T) {
	hostHasNoRDMA(t)
	bin := filepath.Join(t.TempDir(), "rping")
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	build := exec.Command(gobin, "build", "-ldflags", "-X main.buildVersion=v9.9.9", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		args   []string
		env    []string
		status int
		stdout string
		stderr string
	}{
		{[]string{"-c", "-a", "127.0.0.1", "-C", "1"}, nil, 19, "", "No RDMA devices were detected\n"},
		{nil, nil, 22, wantUsage, ""},
		{[]string{"foo", "-s"}, []string{"POSIXLY_CORRECT="}, 22, wantUsage, ""},
		{[]string{"foo", "-s"}, nil, 19, "", "No RDMA devices were detected\n"},
		{[]string{"-S", "1", "-s"}, nil, 22, "", "Invalid size 1 (valid range is 23 to 65536)\n"},
		{[]string{"-a", "1.2.3.4.5.6.7", "-s", "-a", "256.1.1.1"}, nil, -1, "", ""}, // exit code depends on DNS; checked below
		{[]string{"--version"}, nil, 0, "gorping v9.9.9 (rping-compatible, rdma-core 44 protocol)\n", ""},
		{[]string{"--help"}, nil, 0, wantUsage, ""},
	} {
		cmd := exec.Command(bin, tc.args...)
		cmd.Env = append(os.Environ(), tc.env...)
		if tc.env == nil {
			cmd.Env = withoutPosixlyCorrect(os.Environ())
		}
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		st := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			st = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if tc.status == -1 {
			// Invalid dotted names go to the resolver: EAI_NONAME (254), or
			// EAI_AGAIN (253) without working DNS; either way the message.
			if (st != 254 && st != 253) || !strings.HasPrefix(o.String(), "getaddrinfo failed (") {
				t.Errorf("%q: exit %d stdout %q", tc.args, st, o.String())
			}
			continue
		}
		if st != tc.status || o.String() != tc.stdout || e.String() != tc.stderr {
			t.Errorf("%q env %q: exit %d stdout %q stderr %q, want %d %q %q", tc.args, tc.env, st, o.String(), e.String(), tc.status, tc.stdout, tc.stderr)
		}
	}
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
