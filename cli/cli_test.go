package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// wantUsage is stock rping's usage text, typed out independently of rpingLine.
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

// wantDevicesUsage is `gorping devices --help`, typed out.
const wantDevicesUsage = `usage: gorping devices [-v] [--json]
List the RDMA devices with a uverbs node: driver, node GUID, ports with state, physical
state, link layer, active MTU, rate and netdev, and whether gorping has a provider for the
driver.
  -v, --verbose  also node type, firmware, system image GUID, LIDs and the GID tables
      --json     one JSON document instead of text
  -h, --help     print this usage
`

// wantHelp is --help: rping's usage, then gorping's own block.
var wantHelp = wantUsage + `
gorping's own options (not in rping):
  -i, --interval SEC  client: start a ping every SEC (0.2, 200ms; 0: back to back)
  -w, --deadline SEC  client: end the run after SEC (10, 1m)
      --timeout SEC   give up after SEC without progress (0: wait for ever)
      --poll          busy-poll the completion queue
      --stats         round-trip time per ping and a summary
      --json          JSON lines on stdout
      --trace         trace kernel commands and data-path steps on stderr
      --help          print this usage, then gorping's own options and commands
      --version       print the version

gorping's commands:
  gorping completion  print a shell completion script
  gorping devices     list the RDMA devices
  gorping mesh        ping mesh agent exporting to Prometheus
  gorping mesh plan   print the pinglist of a members file

Each command's --help lists its options; man gorping has everything.
`

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
		{[]string{"--help"}, false, 0, wantHelp, ""},
		{[]string{"-s", "--help"}, false, 0, wantHelp, ""},
		{[]string{"help"}, false, 22, wantUsage, ""}, // a word, not cli's help command
		// `devices` is a subcommand only as the first word with no rping option after it
		// (subcommand.go); a word it does not take is its usage error, exit 2.
		{[]string{"devices", "-x"}, false, 2, "", "gorping devices: unknown option -x (gorping devices --help)\n"},
		{[]string{"devices", "-vx"}, false, 2, "", "gorping devices: unknown option -vx (gorping devices --help)\n"},
		{[]string{"devices", "foo"}, false, 2, "", "gorping devices: unexpected argument \"foo\" (gorping devices --help)\n"},
		{[]string{"devices", "--json=1"}, false, 2, "", "gorping devices: option --json takes no value (gorping devices --help)\n"},
		{[]string{"devices", "-x", "-h"}, false, 0, wantDevicesUsage, ""},
		{[]string{"devices", "-d", "-s", "-p"}, false, 22, "server\n" + wantUsage, ""},
		{[]string{"devices", "-x", "-s", "-p"}, false, 22, wantUsage, ""},
		{[]string{"-v", "devices"}, false, 22, wantUsage, ""},
		{[]string{"--", "devices"}, false, 22, wantUsage, ""},
		{[]string{"devices", "--", "-v"}, false, 22, wantUsage, ""},
		{[]string{"devices", "--help", "-s"}, false, 0, wantHelp, ""},
		{[]string{"devices", "--help"}, false, 0, wantDevicesUsage, ""},
		{[]string{"devices", "-h"}, true, 0, wantDevicesUsage, ""},
		{[]string{"completion", "tcsh"}, false, 2, "", "gorping completion: \"tcsh\" is not one of bash, zsh, fish, addresses (gorping completion --help)\n"},
		{[]string{"completion"}, false, 2, "", "gorping completion: name one of bash, zsh, fish, addresses (gorping completion --help)\n"},
		{[]string{"mesh", "--bogus"}, false, 2, "", "gorping mesh: unknown option --bogus (gorping mesh --help)\n"},
		{[]string{"mesh", "--port", "1", "--nosuch.option=:10175"}, false, 2, "", "gorping mesh: unknown option --nosuch.option (gorping mesh --help)\n"},
		{[]string{"mesh", "--interval"}, false, 2, "", "gorping mesh: option --interval needs a value (DUR) (gorping mesh --help)\n"},
		{[]string{"mesh", "plan", "--self", "a"}, false, 2, "", "gorping mesh plan: --members FILE is required (gorping mesh plan --help)\n"},
		{[]string{"mesh", "plan", "--members"}, false, 2, "", "gorping mesh plan: option --members needs a value (FILE) (gorping mesh plan --help)\n"},
		{[]string{"mesh", "plan", "--bogus"}, false, 2, "", "gorping mesh plan: unknown option --bogus (gorping mesh plan --help)\n"},
		{[]string{"mesh", "--port", "1", "plan"}, false, 2, "", "gorping mesh: unexpected argument \"plan\" (gorping mesh --help)\n"},
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
