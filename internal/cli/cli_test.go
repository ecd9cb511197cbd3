package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// wantUsage is stock rping's usage text, typed out independently of usageText.
var wantUsage = strings.Join([]string{
	"rping -s [-vVd] [-S size] [-C count] [-a addr] [-p port]",
	"rping -c [-vVd] [-S size] [-C count] [-I addr] -a addr [-p port]",
	"\t-c\t\tclient side",
	"\t-I\t\tSource address to bind to for client.",
	"\t-s\t\tserver side.  To bind to any address with IPv6 use -a ::0",
	"\t-v\t\tdisplay ping data to stdout",
	"\t-V\t\tvalidate ping data",
	"\t-d\t\tdebug printfs",
	"\t-S size \tping data size",
	"\t-C count\tping count times",
	"\t-a addr\t\taddress",
	"\t-p port\t\tport",
	"\t-P\t\tpersistent server mode allowing multiple connections",
	"\t-q\t\tuse self-created, self-modified QP",
	"",
}, "\n")

func runCLI(posix bool, args ...string) (status int, stdout, stderr string) {
	var o, e bytes.Buffer
	status, _ = Run(context.Background(), args, Env{Version: "v0.0.0-test", Posix: posix, Stdout: &o, Stderr: &e})
	return status, o.String(), e.String()
}

func TestRunUsageAndExitCodes(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		posix  bool
		status int
		stdout string
		stderr string
	}{
		{nil, false, 22, wantUsage, ""},
		{[]string{"foo"}, false, 22, wantUsage, ""},
		{[]string{"foo", "-s"}, true, 22, wantUsage, ""},
		{[]string{"--", "-s"}, false, 22, wantUsage, ""},
		{[]string{"-t", "x", "-s"}, false, 22, wantUsage, ""},
		{[]string{"-s", "-p"}, false, 22, wantUsage, ""},
		{[]string{"-d", "-s", "-Z"}, false, 22, "server\n" + wantUsage, ""},
		{[]string{"-S", "1", "-S", "64", "-s"}, false, 22, "", "Invalid size 1 (valid range is 23 to 65536)\n"},
		{[]string{"-C", "-3", "-c"}, false, 22, "", "Invalid count -3\n"},
		{[]string{"--help"}, false, 0, wantUsage, ""},
		{[]string{"-s", "--help"}, false, 0, wantUsage, ""},
		{[]string{"help"}, false, 22, wantUsage, ""}, // a word, not cli's help command
		// `devices` is a subcommand only as the first word followed by devices options
		// alone (devices.go); everything else stays rping's.
		{[]string{"devices", "-x"}, false, 22, wantUsage, ""},
		{[]string{"devices", "-vx"}, false, 22, wantUsage, ""},
		{[]string{"devices", "-d", "-s", "-p"}, false, 22, "server\n" + wantUsage, ""},
		{[]string{"-v", "devices"}, false, 22, wantUsage, ""},
		{[]string{"--", "devices"}, false, 22, wantUsage, ""},
		{[]string{"devices", "--", "-v"}, false, 22, wantUsage, ""},
		{[]string{"devices", "--help", "-s"}, false, 0, wantUsage, ""},
		{[]string{"devices", "--help"}, false, 0, devicesUsage, ""},
		{[]string{"devices", "-h"}, true, 0, devicesUsage, ""},
	} {
		st, out, errOut := runCLI(tc.posix, tc.args...)
		if st != tc.status || out != tc.stdout || errOut != tc.stderr {
			t.Errorf("%q: exit %d\nstdout %q\nstderr %q\nwant exit %d\nstdout %q\nstderr %q", tc.args, st, out, errOut, tc.status, tc.stdout, tc.stderr)
		}
	}
}

func TestRunVersion(t *testing.T) {
	for _, tc := range []struct {
		env  Env
		want string
	}{
		{Env{}, "gorping (devel) (rping-compatible, rdma-core 44 protocol)\n"},
		{Env{Version: "v1.2.3"}, "gorping v1.2.3 (rping-compatible, rdma-core 44 protocol)\n"},
		{Env{Version: "v1.2.3", Commit: "6b967d5abcdef"}, "gorping v1.2.3 (rping-compatible, rdma-core 44 protocol)\ncommit 6b967d5abcdef\n"},
	} {
		var o, e bytes.Buffer
		tc.env.Stdout, tc.env.Stderr = &o, &e
		st, _ := Run(context.Background(), []string{"--version"}, tc.env)
		if st != 0 || o.String() != tc.want || e.String() != "" {
			t.Errorf("--version with %+v: exit %d stdout %q stderr %q, want %q", tc.env, st, o.String(), e.String(), tc.want)
		}
	}
}
