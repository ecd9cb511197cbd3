package vm

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestReportVerdictAndExitCode(t *testing.T) {
	tg := Target{"bookworm", "amd64"}
	res := Result{Kernel: "6.1.0-57-amd64", Boot: 6100 * time.Millisecond, Setup: time.Second, Run: 3200 * time.Millisecond}
	pass := Report{Target: tg, Result: res, Payload: "tests"}
	if got, want := pass.Verdict(), "guest bookworm/amd64 kernel 6.1.0-57-amd64: PASS (boot 6.1s, setup 1.0s, tests 3.2s)"; got != want {
		t.Errorf("verdict %q, want %q", got, want)
	}
	if pass.ExitCode() != 0 || !pass.Passed() {
		t.Errorf("pass: exit %d", pass.ExitCode())
	}
	fail := pass
	fail.Status = 42
	if fail.ExitCode() != 42 || !strings.Contains(fail.Verdict(), "FAIL, exit status 42") {
		t.Errorf("fail: exit %d, %q", fail.ExitCode(), fail.Verdict())
	}
	infra := pass
	infra.Status, infra.Step, infra.Err = -1, StepBoot, &TimeoutError{Step: StepBoot, Limit: time.Minute}
	if infra.ExitCode() != ExitInfra || !strings.Contains(infra.Verdict(), `ERROR in step boot: timeout: step "boot" did not finish within 1m0s`) {
		t.Errorf("infra: exit %d, %q", infra.ExitCode(), infra.Verdict())
	}
	// A reported failure wins over an exit status seen before it.
	both := pass
	both.Err = errors.New("guest kernel panic: x")
	if both.ExitCode() != ExitInfra {
		t.Errorf("panic after exit 0: exit %d", both.ExitCode())
	}
}

func TestFailedStep(t *testing.T) {
	cases := []struct {
		r    Result
		want Step
	}{
		{Result{Err: &TimeoutError{Step: StepSetup}}, StepSetup},
		{Result{Err: ErrPanic}, StepBoot},
		{Result{Err: ErrPanic, Boot: time.Second}, StepSetup},
		{Result{Err: ErrPanic, Boot: time.Second, Setup: time.Second}, StepRun},
	}
	for _, tc := range cases {
		if got := failedStep(tc.r); got != tc.want {
			t.Errorf("failedStep(%+v) = %s, want %s", tc.r, got, tc.want)
		}
	}
}

func TestTestName(t *testing.T) {
	for pkg, want := range map[string]string{
		"github.com/gorping/gorping":            "gorping",
		"github.com/gorping/gorping/test/guest": "test_guest",
		"github.com/gorping/gorping/uverbs/rxe": "uverbs_rxe",
	} {
		if got := TestName("github.com/gorping/gorping", pkg); got != want {
			t.Errorf("TestName(%s) = %s, want %s", pkg, got, want)
		}
	}
}

func TestInitScript(t *testing.T) {
	b, err := InitScript(InitSpec{
		Nonce:        "n1",
		Modules:      []LoadStep{{Name: "ib_core", Required: true}, {Name: "configfs"}},
		SetupTimeout: 30 * time.Second,
		Tests:        []GuestTest{{Name: "test_guest", Path: "/guest/tests/test_guest.test"}},
		TestRun:      "TestA|Test'B",
		TestTimeout:  time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, want := range []string{
		"#!/usr/bin/busybox sh\n",
		"load ib_core /modules/00-ib_core.ko required\n",
		"load configfs /modules/01-configfs.ko optional\n",
		"IP='/usr/bin/ip'\n",
		"$IP link add d0 type dummy\nnetdev=d0\nipv4=192.0.2.1\nipv6=2001:db8::1\n",
		"$RDMA link add rxe0 type rxe netdev $netdev",
		"if [ $i -ge 300 ]",
		`/guest/tests/test_guest.test -test.v -test.timeout=1m0s -test.run='TestA|Test'\''B'`,
		"mark test-end test_guest $s\n",
		"GORPING_BIN=/usr/local/bin/gorping GORPING_IPV4=$ipv4 GORPING_IPV6=$ipv6 GORPING_RDMA_TOOL=$RDMA",
		`mark() { echo "@@gr-n1 $*"; }`,
		"mark exit $st\npoweroff -f\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("init script lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "after-script") {
		t.Errorf("init script runs an after-script it was not given:\n%s", s)
	}
	b, err = InitScript(InitSpec{Nonce: "n1", SetupTimeout: time.Second, TestTimeout: time.Minute, After: GuestAfterScript,
		Tests: []GuestTest{{Name: "test_guest", Path: "/guest/tests/test_guest.test"}}})
	if err != nil {
		t.Fatal(err)
	}
	// After the last test binary, its status counted as theirs, before the exit mark.
	if s := string(b); !strings.Contains(s, "mark test-end test_guest $s\n[ $st -eq 0 ] && st=$s\n"+
		"mark test-start after-script\ncd \"$(mktemp -d /tmp/after.XXXXXX)\"\nsh /guest/after.sh\ns=$?\n"+
		"mark test-end after-script $s\n[ $st -eq 0 ] && st=$s\nmark exit $st\n") {
		t.Errorf("init script with an after-script:\n%s", s)
	}
	b, err = InitScript(InitSpec{Nonce: "n2", Cmd: "echo hi", SetupTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if s := string(b); !strings.Contains(s, "sh /guest/cmd.sh\nst=$?\n") || strings.Contains(s, "test-start") {
		t.Errorf("cmd script:\n%s", s)
	}
	b, err = InitScript(InitSpec{Nonce: "n3", Cluster: true, SetupTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s = string(b)
	for _, want := range []string{
		"run_or_fail $IP link set $data name eth0\n",
		"ipv4=10.0.3.$host\nipv6=2001:db8:3::$(printf %x $host)\n",
		"gid4=0000:0000:0000:0000:0000:ffff:0a00:03$(printf %02x $host)\n",
		"$RDMA link add rxe0 type rxe netdev $netdev",
		"/usr/local/bin/guestagent -listen 10.0.2.15:7070\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("cluster init script lacks %q:\n%s", want, s)
		}
	}
	for _, unwanted := range []string{"type dummy", "mark exit", "siw: NOT AVAILABLE"} {
		if strings.Contains(s, unwanted) {
			t.Errorf("cluster init script has %q:\n%s", unwanted, s)
		}
	}
	if strings.Contains(s, "nic_by_mac") {
		t.Errorf("a one-rail cluster's init script sets up other rails:\n%s", s)
	}
	b, err = InitScript(InitSpec{Nonce: "n4", Cluster: true, SetupTimeout: time.Second, Rails: 3, NodeNet: true})
	if err != nil {
		t.Fatal(err)
	}
	s = string(b)
	for _, want := range []string{
		"run_or_fail $IP link set $data name eth0\n",
		"nic=$(nic_by_mac 52:54:00:04:00:$(printf %02x $host))\n",
		"run_or_fail $IP link set $nic name rail2\n",
		"run_or_fail $IP addr add 10.0.9.$host/24 dev node0\n",
		"run_or_fail $IP addr add 10.0.5.$host/24 dev eth2\n",
		"run_or_fail $IP addr add 2001:db8:4::$(printf %x $host)/64 dev eth1 nodad\n",
		"$RDMA link add rxe2 type rxe netdev eth2",
		"wait_rxe rxe1 0000:0000:0000:0000:0000:ffff:0a00:04$(printf %02x $host) 2001:0db8:0004:0000:0000:0000:0000:$(printf %04x $host)\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("three-rail cluster init script lacks %q:\n%s", want, s)
		}
	}
	// Every NIC is named by role before any becomes eth<r>.
	if i, j := strings.LastIndex(s, "name rail"), strings.Index(s, "rail1 name eth1"); i < 0 || j < i {
		t.Errorf("a rail NIC is renamed to eth<r> before every NIC has its role name:\n%s", s)
	}
	if sh, err := exec.LookPath("sh"); err == nil {
		if out, err := exec.Command(sh, "-n", "-c", s).CombinedOutput(); err != nil {
			t.Errorf("sh -n: %v: %s", err, out)
		}
	}
}

func TestMergedUsr(t *testing.T) {
	for in, want := range map[string]string{
		"/bin/ip":                        "/usr/bin/ip",
		"lib/x86_64-linux-gnu/libc.so.6": "/usr/lib/x86_64-linux-gnu/libc.so.6",
		"/lib64/ld-linux-x86-64.so.2":    "/usr/lib64/ld-linux-x86-64.so.2",
		"/usr/bin/rping":                 "/usr/bin/rping",
		"/etc/libibverbs.d/rxe.driver":   "/etc/libibverbs.d/rxe.driver",
		"/library/x":                     "/library/x",
	} {
		if got := MergedUsr(in); got != want {
			t.Errorf("MergedUsr(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestGuestViewResolve(t *testing.T) {
	v := guestView{
		"/usr/lib64/ld-linux-x86-64.so.2":                {link: "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"},
		"/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2": {host: "/h/ld"},
		"/usr/lib/x86_64-linux-gnu/libnl-3.so.200":       {link: "libnl-3.so.200.26.0"},
		"/usr/lib/x86_64-linux-gnu/libnl-3.so.200.26.0":  {host: "/h/nl"},
		"/usr/lib/loop": {link: "loop"},
	}
	chain, err := v.resolve("/lib64/ld-linux-x86-64.so.2")
	if err != nil || len(chain) != 2 || chain[1] != "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2" {
		t.Fatalf("absolute link through /lib: %q, %v", chain, err)
	}
	chain, err = v.resolve("/usr/lib/x86_64-linux-gnu/libnl-3.so.200")
	if err != nil || len(chain) != 2 || chain[1] != "/usr/lib/x86_64-linux-gnu/libnl-3.so.200.26.0" {
		t.Fatalf("relative link: %q, %v", chain, err)
	}
	if _, err := v.resolve("/usr/lib/loop"); err == nil {
		t.Fatal("symlink loop not detected")
	}
	if _, err := v.resolve("/usr/lib/missing"); err == nil {
		t.Fatal("missing file not reported")
	}
}

func TestParseDependsAndPrintURIs(t *testing.T) {
	deps := ParseDepends([]byte(`iproute2
 |Depends: debconf
  Depends: <debconf-2.0>
    cdebconf
    debconf
  Depends: libbpf1
  PreDepends: libc6
  Recommends: libatm1
rdmacm-utils
  Depends: librdmacm1t64
linux-image-amd64
  Depends: linux-image-6.12.118+deb13-amd64
`))
	if got := deps["iproute2"]; len(got) != 3 || got[0][0] != "debconf" || len(got[0]) != 1 || got[1][0] != "libbpf1" || got[2][0] != "libc6" {
		t.Errorf("iproute2 groups: %q", got)
	}
	if got := deps["linux-image-amd64"]; len(got) != 1 || got[0][0] != "linux-image-6.12.118+deb13-amd64" {
		t.Errorf("kernel metapackage: %q", got)
	}
	files := ParsePrintURIs([]byte(`'http://mirror.example/debian/pool/main/g/glibc/libc6_2.41-12%2bdeb13u5_amd64.deb' libc6_2.41-12+deb13u5_amd64.deb 2850108 SHA256:b5
'http://mirror.example/debian/pool/main/b/busybox/busybox-static_1%3a1.37.0-6_amd64.deb' busybox-static_1%3a1.37.0-6_amd64.deb 1 SHA256:00
`))
	if files["libc6"] != "libc6_2.41-12+deb13u5_amd64.deb" || files["busybox-static"] != "busybox-static_1%3a1.37.0-6_amd64.deb" || len(files) != 2 {
		t.Errorf("print-uris: %q", files)
	}
	for name, want := range map[string]bool{"libc6": true, "zlib1g": true, "libcap2-bin": false, "libtirpc-common": false, "debconf": false, "libpam-modules": false} {
		if isLibraryPackage(name) != want {
			t.Errorf("isLibraryPackage(%s) = %v", name, !want)
		}
	}
}

func TestDiffGuestPackages(t *testing.T) {
	plain := "m/a [a_test.go] []\nm/b [] []\nm/test/guest [] []\nm/c [c_test.go] []\nm/d [d_test.go host_test.go] []\n"
	// m/d only loses a //go:build !guest file: no guest tests there.
	tagged := "m/a [a_test.go] []\nm/b [b_guest_test.go] []\nm/test/guest [helpers_test.go sanity_test.go] []\nm/c [c_test.go] [x_test.go]\nm/d [d_test.go] []\n"
	got := diffGuestPackages(plain, tagged, "m/test/guest")
	if strings.Join(got, " ") != "m/test/guest m/b m/c" {
		t.Fatalf("got %q", got)
	}
}

func TestClusterRailAddresses(t *testing.T) {
	// Rail 0 is the data NIC every test of the bed has always used.
	if ClusterRailIPv4(0, 7) != ClusterIPv4(7) || ClusterRailIPv6(0, 7) != ClusterIPv6(7) || ClusterRailMAC(0, 7) != ClusterDataMAC+"07" {
		t.Errorf("rail 0 of host 7: %s %s %s, want eth0's %s %s %s07", ClusterRailIPv4(0, 7), ClusterRailIPv6(0, 7), ClusterRailMAC(0, 7),
			ClusterIPv4(7), ClusterIPv6(7), ClusterDataMAC)
	}
	if got := ClusterRailIPv4(1, 12) + " " + ClusterRailIPv6(1, 12) + " " + ClusterRailMAC(1, 12) + " " + ClusterNodeIPv4(12); got != "10.0.4.12 2001:db8:4::c 52:54:00:04:00:0c 10.0.9.12" {
		t.Errorf("rail 1 and node address of host 12: %s", got)
	}
	for r := 0; r < MaxClusterRails; r++ {
		if ClusterRailIPv4(r, 1) == ClusterNodeIPv4(1) || ClusterRailMAC(r, 1) == ClusterNodeMAC+"01" || ClusterRailMAC(r, 1) == ClusterMgmtMAC+"01" {
			t.Errorf("rail %d shares an address with the node or management network", r)
		}
	}
}

func TestHostOnlyTests(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a_test.go", "package a\nimport \"testing\"\n"+
		"func TestMain(m *testing.M) {}\nfunc TestA(t *testing.T) {}\nfunc Test(t *testing.T) {}\nfunc Testify(t *testing.T) {}\n"+
		"func FuzzB(f *testing.F) {}\nfunc ExampleC() {}\nfunc helper() {}\ntype x struct{}\nfunc (x) TestMethod(t *testing.T) {}\n")
	write("x_test.go", "package a_test\nimport \"testing\"\nfunc TestX(t *testing.T) {}\n")
	write("g_test.go", "//go:build guest\npackage a\nimport \"testing\"\nfunc TestGuest(t *testing.T) {}\n")
	gorun := func(args ...string) ([]byte, error) {
		tagged := slices.Contains(args, "guest")
		var out string
		for _, pkg := range args[slices.Index(args, "-f")+2:] {
			switch {
			case pkg == "m/a" && tagged:
				out += "m/a " + dir + " [a_test.go g_test.go] [x_test.go]\n"
			case pkg == "m/a":
				out += "m/a " + dir + " [a_test.go] [x_test.go]\n"
			case pkg == "m/hostonly": // asked for by name, no guest-tagged file: runs in full
				out += "m/hostonly " + dir + " [a_test.go] []\n"
			}
		}
		return []byte(out), nil
	}
	got, err := hostOnlyTests(gorun, []string{"m/a", "m/hostonly"})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string][]string{"m/a": {"ExampleC", "FuzzB", "Test", "TestA", "TestX"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("host tests %q, want %q", got, want)
	}
	if s := hostTestsSkip("", got["m/a"]); s != "^(ExampleC|FuzzB|Test|TestA|TestX)$" {
		t.Errorf("skip %q", s)
	}
	if s := hostTestsSkip("TestBench|TestY/sub", []string{"TestA"}); s != "TestBench|TestY/sub|^(TestA)$" {
		t.Errorf("skip with the run's own %q", s)
	}
	b, err := InitScript(InitSpec{Nonce: "n1", SetupTimeout: time.Second, TestSkip: "TestBench", TestTimeout: time.Minute,
		Tests: []GuestTest{{Name: "a", Path: "/a.test", Skip: "TestBench|^(TestA)$"}, {Name: "b", Path: "/b.test"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"/a.test -test.v -test.timeout=1m0s -test.skip='TestBench|^(TestA)$'\n", "/b.test -test.v -test.timeout=1m0s -test.skip='TestBench'\n"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("init script lacks %q:\n%s", want, b)
		}
	}
}
