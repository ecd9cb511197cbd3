package cli

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorping/gorping/rping"
)

// fakeLookup stands in for DNS: a few names, each failing the way Go's
// resolver reports it.
func fakeLookup(_ context.Context, _, host string) ([]netip.Addr, error) {
	switch host {
	case "server.example":
		return []netip.Addr{netip.MustParseAddr("::ffff:192.0.2.7"), netip.MustParseAddr("2001:db8::7")}, nil
	case "v6only.example":
		return []netip.Addr{netip.MustParseAddr("2001:db8::8")}, nil
	case "slow.example":
		return nil, &net.DNSError{Err: "i/o timeout", Name: host, IsTimeout: true}
	case "servfail.example":
		return nil, &net.DNSError{Err: "server misbehaving", Name: host, IsTemporary: true}
	case "broken.example":
		return nil, &net.DNSError{Err: "cannot unmarshal DNS message", Name: host}
	case "empty.example":
		return nil, nil
	case "odd.example":
		return nil, errors.New("something else")
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func fakeResolve(ctx context.Context, host string) (netip.Addr, int) {
	return resolveWith(ctx, host, fakeLookup)
}

type parsed struct {
	cfg            rping.Config
	act            action
	status         int
	stdout, stderr string
}

func parse(posix bool, argv ...string) parsed {
	var stdout, stderr bytes.Buffer
	cfg, act, st := parseArgs(context.Background(), argv, posix, &stdout, &stderr, fakeResolve)
	return parsed{cfg, act, st, stdout.String(), stderr.String()}
}

const (
	sizeErr1  = "Invalid size 1 (valid range is 23 to 65536)\n"
	gaiNoName = "getaddrinfo failed (Name or service not known) - invalid hostname or IP address\n"
	gaiAgain  = "getaddrinfo failed (Temporary failure in name resolution) - invalid hostname or IP address\n"
	gaiFail   = "getaddrinfo failed (Non-recoverable failure in name resolution) - invalid hostname or IP address\n"
	gaiNoData = "getaddrinfo failed (No address associated with hostname) - invalid hostname or IP address\n"
	v4any     = "0.0.0.0"
)

func TestParseArgs(t *testing.T) {
	for _, tc := range []struct {
		argv   string // split on spaces; "␠" stands for a space inside an argument
		posix  bool
		act    action
		status int
		stdout string
		stderr string
		check  func(c rping.Config) bool
	}{
		// Mode.
		{argv: "", act: actUsage, status: 22},
		{argv: "-s", act: actRun, check: func(c rping.Config) bool {
			return c.Server && c.Addr.String() == v4any && c.Port == 7174 && c.Size == 64 && c.Count == 0 &&
				!c.HasSrcAddr() && !c.Verbose && !c.Validate && !c.Debug && !c.Persistent && !c.SelfCreateQP
		}},
		{argv: "-c", act: actRun, check: func(c rping.Config) bool { return !c.Server && c.Addr.String() == v4any }},
		{argv: "-s -c", act: actRun, check: func(c rping.Config) bool { return !c.Server }},
		{argv: "-c -s", act: actRun, check: func(c rping.Config) bool { return c.Server }},
		{argv: "-sc", act: actRun, check: func(c rping.Config) bool { return !c.Server }},
		{argv: "-v -V -d -P -q", act: actUsage, status: 22},
		// Clusters and attached/separate arguments.
		{argv: "-vV -s", act: actRun, check: func(c rping.Config) bool { return c.Verbose && c.Validate && !c.Debug }},
		{argv: "-dvsP", act: actRun, stdout: "verbose\nserver\n", check: func(c rping.Config) bool { return c.Debug && c.Verbose && c.Server && c.Persistent }},
		{argv: "-dS100 -s", act: actRun, stdout: "size 100\nserver\n", check: func(c rping.Config) bool { return c.Size == 100 }},
		{argv: "-dS 100 -s", act: actRun, stdout: "size 100\nserver\n", check: func(c rping.Config) bool { return c.Size == 100 }},
		{argv: "-C5 -p7175 -s", act: actRun, check: func(c rping.Config) bool { return c.Count == 5 && c.Port == 7175 }},
		{argv: "-C 5 -p 7175 -s", act: actRun, check: func(c rping.Config) bool { return c.Count == 5 && c.Port == 7175 }},
		{argv: "-dp 7175 -sq", act: actRun, stdout: "port 7175\nserver\n", check: func(c rping.Config) bool { return c.Port == 7175 && c.SelfCreateQP }},
		{argv: "-vvVV -s", act: actRun, check: func(c rping.Config) bool { return c.Verbose && c.Validate }},
		{argv: "-sa127.0.0.1", act: actRun, check: func(c rping.Config) bool { return c.Addr.String() == "127.0.0.1" }},
		// Debug lines only after -d.
		{argv: "-v -d -V -s -c -C 3 -S 64 -p 1", act: actRun, stdout: "validate data\nserver\nclient\ncount 3\nsize 64\nport 1\n"},
		{argv: "-s -S 100 -d", act: actRun, stdout: ""},
		{argv: "-dd -s", act: actRun, stdout: "server\n"},
		// -p: atoi truncated to 16 bits, no validation; debug shows the atoi value.
		{argv: "-d -p 99999 -s", act: actRun, stdout: "port 99999\nserver\n", check: func(c rping.Config) bool { return c.Port == 34463 }},
		{argv: "-p abc -s", act: actRun, check: func(c rping.Config) bool { return c.Port == 0 }},
		{argv: "-p -1 -s", act: actRun, check: func(c rping.Config) bool { return c.Port == 65535 }},
		{argv: "-d -p 0x10 -s", act: actRun, stdout: "port 0\nserver\n", check: func(c rping.Config) bool { return c.Port == 0 }},
		// -S.
		{argv: "-S 23 -s", act: actRun, check: func(c rping.Config) bool { return c.Size == 23 }},
		{argv: "-S 65535 -s", act: actRun, check: func(c rping.Config) bool { return c.Size == 65535 }},
		{argv: "-S 22 -s", act: actExit, status: 22, stderr: "Invalid size 22 (valid range is 23 to 65536)\n"},
		{argv: "-S 65536 -s", act: actExit, status: 22, stderr: "Invalid size 65536 (valid range is 23 to 65536)\n"},
		{argv: "-S abc -s", act: actExit, status: 22, stderr: "Invalid size 0 (valid range is 23 to 65536)\n"},
		{argv: "-Sx -s", act: actExit, status: 22, stderr: "Invalid size 0 (valid range is 23 to 65536)\n"},
		{argv: "-S -5 -s", act: actExit, status: 22, stderr: "Invalid size -5 (valid range is 23 to 65536)\n"},
		{argv: "-S 4294967360 -s", act: actRun, check: func(c rping.Config) bool { return c.Size == 64 }},
		{argv: "-S 100abc -s", act: actRun, check: func(c rping.Config) bool { return c.Size == 100 }},
		{argv: "-S ␠+100 -s", act: actRun, check: func(c rping.Config) bool { return c.Size == 100 }},
		{argv: "-S 1 -s", act: actExit, status: 22, stderr: sizeErr1},
		{argv: "-d -S 1 -s", act: actExit, status: 22, stdout: "server\n", stderr: sizeErr1},
		// ret overwrite rules.
		{argv: "-S 1 -a 127.0.0.1 -s", act: actRun, stderr: sizeErr1, check: func(c rping.Config) bool { return c.Size == 64 }},
		{argv: "-S 100 -S 1 -a 127.0.0.1 -s", act: actRun, stderr: sizeErr1, check: func(c rping.Config) bool { return c.Size == 100 }},
		{argv: "-S 1 -I 127.0.0.1 -s", act: actRun, stderr: sizeErr1},
		{argv: "-S 1 -S 64 -s", act: actExit, status: 22, stderr: sizeErr1},
		{argv: "-S 1 -C 3 -s", act: actExit, status: 22, stderr: sizeErr1},
		{argv: "-a 127.0.0.1 -S 1 -s", act: actExit, status: 22, stderr: sizeErr1},
		{argv: "-S 1 -a nosuch -s", act: actExit, status: 254, stdout: gaiNoName, stderr: sizeErr1},
		{argv: "-a nosuch -S 1 -s", act: actExit, status: 22, stdout: gaiNoName, stderr: sizeErr1},
		{argv: "-a nosuch -a 127.0.0.1 -s", act: actRun, stdout: gaiNoName},
		{argv: "-S 1 -C -1 -a nosuch -s", act: actExit, status: 254, stdout: gaiNoName, stderr: sizeErr1 + "Invalid count -1\n"},
		// -C.
		{argv: "-C -1 -s", act: actExit, status: 22, stderr: "Invalid count -1\n"},
		{argv: "-C abc -c", act: actRun, check: func(c rping.Config) bool { return c.Count == 0 }},
		{argv: "-d -C 0 -c", act: actRun, stdout: "count 0\nclient\n"},
		{argv: "-C -1 -a 127.0.0.1 -c", act: actRun, stderr: "Invalid count -1\n", check: func(c rping.Config) bool { return c.Count == -1 }},
		{argv: "-C 2147483648 -c", act: actExit, status: 22, stderr: "Invalid count -2147483648\n"},
		// -a / -I.
		{argv: "-a nosuch -s", act: actExit, status: 254, stdout: gaiNoName},
		{argv: "-a slow.example -c", act: actExit, status: 253, stdout: gaiAgain},
		{argv: "-a servfail.example -c", act: actExit, status: 253, stdout: gaiAgain},
		{argv: "-a broken.example -c", act: actExit, status: 252, stdout: gaiFail},
		{argv: "-a odd.example -c", act: actExit, status: 252, stdout: gaiFail},
		{argv: "-a empty.example -c", act: actExit, status: 251, stdout: gaiNoData},
		{argv: "-I nosuch -c", act: actExit, status: 254, stdout: gaiNoName},
		{argv: "-a -s", act: actExit, status: 254, stdout: gaiNoName}, // "-s" is -a's argument
		{argv: "-a ::0 -s", act: actRun, check: func(c rping.Config) bool { return c.Addr == netip.IPv6Unspecified() }},
		{argv: "-a :: -s", act: actRun, check: func(c rping.Config) bool { return c.Addr.Is6() && c.Addr.IsUnspecified() }},
		{argv: "-a 127.1 -c", act: actRun, check: func(c rping.Config) bool { return c.Addr.String() == "127.0.0.1" }},
		{argv: "-a fe80::1%7 -c", act: actRun, check: func(c rping.Config) bool { return c.Addr.String() == "fe80::1%7" }},
		{argv: "-a server.example -c", act: actRun, check: func(c rping.Config) bool { return c.Addr.String() == "192.0.2.7" }},
		{argv: "-a v6only.example -c", act: actRun, check: func(c rping.Config) bool { return c.Addr.String() == "2001:db8::8" }},
		{argv: "-I 10.0.0.1 -a 10.0.0.2 -c", act: actRun, check: func(c rping.Config) bool {
			return c.HasSrcAddr() && c.SrcAddr.String() == "10.0.0.1" && c.Addr.String() == "10.0.0.2"
		}},
		{argv: "-a 10.0.0.2 -a 10.0.0.3 -c", act: actRun, check: func(c rping.Config) bool { return c.Addr.String() == "10.0.0.3" }},
		// Permutation, POSIXLY_CORRECT, --.
		{argv: "-s foo", act: actRun},
		{argv: "foo -s bar", act: actRun, check: func(c rping.Config) bool { return c.Server }},
		{argv: "- -s", act: actRun},
		{argv: "foo -s", posix: true, act: actUsage, status: 22},
		{argv: "-s foo -c", posix: true, act: actRun, check: func(c rping.Config) bool { return c.Server }},
		{argv: "-- -s", act: actUsage, status: 22},
		{argv: "-s -- -c", act: actRun, check: func(c rping.Config) bool { return c.Server }},
		{argv: "-p -- -s", act: actRun, check: func(c rping.Config) bool { return c.Port == 0 }}, // "--" is -p's argument
		// Unknown options, missing arguments, -t.
		{argv: "-x", act: actUsage, status: 22},
		{argv: "-s -x", act: actUsage, status: 22},
		{argv: "-d -sx", act: actUsage, status: 22, stdout: "server\n"},
		{argv: "-s -:", act: actUsage, status: 22},
		{argv: "-s -p", act: actUsage, status: 22},
		{argv: "-d -s -S", act: actUsage, status: 22, stdout: "server\n"},
		{argv: "-p -s", act: actUsage, status: 22}, // "-s" is the port; no mode
		{argv: "-t x -s", act: actUsage, status: 22},
		{argv: "-s -t x", act: actUsage, status: 22},
		{argv: "-s -tx", act: actUsage, status: 22},
		{argv: "-s -t", act: actUsage, status: 22},
		{argv: "-S 1 -x -s", act: actUsage, status: 22, stderr: sizeErr1},
		// Long options (gorping additions).
		{argv: "--help", act: actHelp},
		{argv: "-s --help", act: actHelp},
		{argv: "--he", act: actHelp},
		{argv: "--version", act: actVersion},
		{argv: "--v", act: actVersion},
		{argv: "-x --help", act: actUsage, status: 22},
		{argv: "--help=1", act: actUsage, status: 22},
		{argv: "--foo -s", act: actUsage, status: 22},
		{argv: "-s -- --help", act: actRun},
		// gorping extensions: --poll, --stats, --json, -i/--interval, -w/--deadline.
		{argv: "-c --poll --stats --json", act: actRun, check: func(c rping.Config) bool { return c.Poll && c.Stats && c.JSON }},
		{argv: "-c --trace", act: actRun, check: func(c rping.Config) bool { return c.Trace && !c.JSON }},
		{argv: "-s --trace=1", act: actUsage, status: 22},
		{argv: "-c --po --st --j", act: actRun, check: func(c rping.Config) bool { return c.Poll && c.Stats && c.JSON }},
		{argv: "-c", act: actRun, check: func(c rping.Config) bool {
			return !c.Poll && !c.Stats && !c.JSON && c.Interval == 0 && c.Deadline == 0
		}},
		{argv: "-c -i 0.25 -w 3", act: actRun, check: func(c rping.Config) bool {
			return c.Interval == 250*time.Millisecond && c.Deadline == 3*time.Second
		}},
		{argv: "-ci0.5 -w1e-3", act: actRun, check: func(c rping.Config) bool {
			return c.Interval == 500*time.Millisecond && c.Deadline == time.Millisecond
		}},
		{argv: "-c --interval=2 --deadline 1.5", act: actRun, check: func(c rping.Config) bool {
			return c.Interval == 2*time.Second && c.Deadline == 1500*time.Millisecond
		}},
		{argv: "-c --int 0 --dead=7", act: actRun, check: func(c rping.Config) bool { return c.Interval == 0 && c.Deadline == 7*time.Second }},
		// The same time forms as mesh's options: seconds, or a duration with its unit.
		{argv: "-c -i 1s -w 1m30s --timeout 500ms", act: actRun, check: func(c rping.Config) bool {
			return c.Interval == time.Second && c.Deadline == 90*time.Second && c.Timeout == 500*time.Millisecond
		}},
		{argv: "-c -i 200ms", act: actRun, check: func(c rping.Config) bool { return c.Interval == 200*time.Millisecond }},
		{argv: "-c -i 0s --timeout 0s", act: actRun, check: func(c rping.Config) bool { return c.Interval == 0 && c.Timeout == rping.NoTimeout }},
		{argv: "-c -w 0s", act: actExit, status: 22, stderr: "gorping: invalid deadline \"0s\" (seconds or a duration, more than 0: 10, 1m)\n"},
		{argv: "-c -i -1s", act: actExit, status: 22, stderr: "gorping: invalid interval \"-1s\" (seconds or a duration, 0 or more: 0.2, 200ms)\n"},
		{argv: "-c -i 1x", act: actExit, status: 22, stderr: "gorping: invalid interval \"1x\" (seconds or a duration, 0 or more: 0.2, 200ms)\n"},
		{argv: "-c -i", act: actUsage, status: 22},
		{argv: "-c --interval", act: actUsage, status: 22},
		{argv: "-c --poll=1", act: actUsage, status: 22},
		{argv: "-c --pol=", act: actUsage, status: 22},
		{argv: "-c --=1", act: actUsage, status: 22},
		{argv: "-c -i -1", act: actExit, status: 22, stderr: "gorping: invalid interval \"-1\" (seconds or a duration, 0 or more: 0.2, 200ms)\n"},
		{argv: "-c -i abc", act: actExit, status: 22, stderr: "gorping: invalid interval \"abc\" (seconds or a duration, 0 or more: 0.2, 200ms)\n"},
		{argv: "-c -i NaN", act: actExit, status: 22, stderr: "gorping: invalid interval \"NaN\" (seconds or a duration, 0 or more: 0.2, 200ms)\n"},
		{argv: "-c -w 0", act: actExit, status: 22, stderr: "gorping: invalid deadline \"0\" (seconds or a duration, more than 0: 10, 1m)\n"},
		// --timeout: unset is the connection's RC budget (0), 0 is never.
		{argv: "-c", act: actRun, check: func(c rping.Config) bool { return c.Timeout == 0 }},
		{argv: "-c --timeout 2.5", act: actRun, check: func(c rping.Config) bool { return c.Timeout == 2500*time.Millisecond }},
		{argv: "-s --time=0", act: actRun, check: func(c rping.Config) bool { return c.Timeout == rping.NoTimeout }},
		{argv: "-c --timeout -1", act: actExit, status: 22, stderr: "gorping: invalid timeout \"-1\" (seconds or a duration, 0 or more: 5, 500ms; 0 waits for ever)\n"},
		{argv: "-c --timeout", act: actUsage, status: 22},
		{argv: "-c -w 1e300", act: actExit, status: 22, stderr: "gorping: invalid deadline \"1e300\" (seconds or a duration, more than 0: 10, 1m)\n"},
		// A later -a clears rping's own errors, never an invalid gorping option.
		{argv: "-w x -a 127.0.0.1 -c", act: actExit, status: 22, stderr: "gorping: invalid deadline \"x\" (seconds or a duration, more than 0: 10, 1m)\n"},
	} {
		var argv []string
		if tc.argv != "" {
			for _, a := range strings.Split(tc.argv, " ") {
				argv = append(argv, strings.ReplaceAll(a, "␠", " "))
			}
		}
		got := parse(tc.posix, argv...)
		if got.act != tc.act || got.status != tc.status || got.stdout != tc.stdout || got.stderr != tc.stderr {
			t.Errorf("%q (posix %v): act %d status %d stdout %q stderr %q; want act %d status %d stdout %q stderr %q",
				argv, tc.posix, got.act, got.status, got.stdout, got.stderr, tc.act, tc.status, tc.stdout, tc.stderr)
			continue
		}
		if tc.check != nil && !tc.check(got.cfg) {
			t.Errorf("%q: config %+v", argv, got.cfg)
		}
	}
}

func TestAtoi(t *testing.T) {
	// Expected values from glibc 2.36's atoi.
	for _, tc := range []struct {
		s    string
		want int
	}{
		{"", 0}, {"0", 0}, {"64", 64}, {"+64", 64}, {"-64", -64}, {" 64", 64},
		{"\t\n\v\f\r 64", 64}, {"64abc", 64}, {"abc", 0}, {"0x40", 0}, {"040", 40},
		{"--5", 0}, {"+-5", 0}, {"- 5", 0}, {"2147483647", 2147483647},
		{"2147483648", -2147483648}, {"-2147483648", -2147483648}, {"-2147483649", 2147483647},
		{"4294967296", 0}, {"4294967297", 1}, {"99999", 99999}, {"99999999999", 1215752191},
		{"9223372036854775807", -1}, {"9223372036854775808", -1}, {"-9223372036854775808", 0},
		{"-9223372036854775809", 0}, {"99999999999999999999999", -1}, {"-99999999999999999999999", 0},
		{"12 34", 12}, {"1e3", 1}, {"٣", 0}, {"0000000000000000000000065", 65}, {"+", 0}, {"-", 0}, {" ", 0},
	} {
		if got := atoi(tc.s); got != tc.want {
			t.Errorf("atoi(%q) = %d, want %d", tc.s, got, tc.want)
		}
	}
}

func TestResolveNumeric(t *testing.T) {
	// Expected values from glibc 2.36's getaddrinfo(host, NULL, AI_NUMERICHOST).
	for _, tc := range []struct {
		host string
		want string // "" = not numeric
	}{
		{"127.0.0.1", "127.0.0.1"}, {"127.1", "127.0.0.1"}, {"0x7f.1", "127.0.0.1"},
		{"0177.0.0.1", "127.0.0.1"}, {"010.0.0.1", "8.0.0.1"}, {"1.2.3", "1.2.0.3"},
		{"1.2.65535", "1.2.255.255"}, {"1.2.65536", ""}, {"4294967295", "255.255.255.255"},
		{"4294967296", ""}, {"0x", ""}, {"0x.1.2.3", ""}, {"1.2.3.4.5", ""}, {"1.2.3.", ""},
		{".1.2.3", ""}, {"08", ""}, {"09.1.1.1", ""}, {"1.2.3.4 ", ""}, {" 1.2.3.4", ""},
		{"::0", "::"}, {"::", "::"}, {"::1", "::1"}, {"fe80::1%1", "fe80::1%1"},
		{"::ffff:1.2.3.4", "::ffff:1.2.3.4"}, {"", ""}, {"256.1.1.1", ""}, {"1.256.1.1", ""},
		{"0", "0.0.0.0"}, {"00", "0.0.0.0"}, {"0x0", "0.0.0.0"}, {"0XfF.1", "255.0.0.1"},
		{"1..2", ""}, {"+1.2.3.4", ""}, {"1.2.3.0x", ""}, {"0x1.0x2.0x3.0x4", "1.2.3.4"},
		{"00000000000000000001.2.3.4", "1.2.3.4"}, {"0x00000000000000ff.1", "255.0.0.1"},
		{"1.2.3.4%1", ""}, {"1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8"}, {"::1.2.3.4", "::102:304"},
		{"[::1]", ""}, {"fe80::1%no-such-interface0", ""},
	} {
		a, code := resolveWith(context.Background(), tc.host, fakeLookup)
		got := ""
		if code == 0 {
			got = a.String()
		} else if code != eaiNoName {
			t.Errorf("%q: code %d", tc.host, code)
		}
		if got != tc.want {
			t.Errorf("resolve(%q) = %q, want %q", tc.host, got, tc.want)
		}
	}
}

func TestResolveInterfaceZone(t *testing.T) {
	ifs, err := net.Interfaces()
	if err != nil || len(ifs) == 0 {
		t.Fatalf("no interfaces to test with: %v", err)
	}
	a, code := resolveWith(context.Background(), "fe80::1%"+ifs[0].Name, fakeLookup)
	if code != 0 || a.Zone() != strconv.Itoa(ifs[0].Index) {
		t.Errorf("fe80::1%%%s → %v code %d, want zone %d", ifs[0].Name, a, code, ifs[0].Index)
	}
}

func TestGaiStrerror(t *testing.T) {
	for code, want := range map[int]string{
		-1: "Bad value for ai_flags", -2: "Name or service not known",
		-3: "Temporary failure in name resolution", -4: "Non-recoverable failure in name resolution",
		-5: "No address associated with hostname", -6: "ai_family not supported",
		-7: "ai_socktype not supported", -8: "Servname not supported for ai_socktype",
		-9: "Address family for hostname not supported", -10: "Memory allocation failure",
		-11: "System error", -12: "Unknown error", 5: "Unknown error",
	} {
		if got := gaiStrerror(code); got != want {
			t.Errorf("gaiStrerror(%d) = %q, want %q", code, got, want)
		}
	}
}

func FuzzParseArgs(f *testing.F) {
	for _, s := range []string{"-s", "-dvsP", "-dS100\x00-s", "-S\x001\x00-a\x00127.0.0.1\x00-s", "--\x00-s", "-t", "--help", "-p"} {
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, joined string, posix bool) {
		argv := strings.Split(joined, "\x00")
		var stdout, stderr bytes.Buffer
		cfg, act, st := parseArgs(context.Background(), argv, posix, &stdout, &stderr, fakeResolve)
		switch act {
		case actRun:
			if st != 0 || cfg.Size < rping.MinSize || cfg.Size > rping.MaxSize {
				t.Fatalf("run with status %d size %d", st, cfg.Size)
			}
		case actUsage:
			if st != exitUsage {
				t.Fatalf("usage with status %d", st)
			}
		case actExit:
			if st != exitUsage && st != 252 && st != 253 && st != 254 && st != 251 {
				t.Fatalf("exit status %d", st)
			}
		case actHelp, actVersion:
		default:
			t.Fatalf("action %d", act)
		}
	})
}
