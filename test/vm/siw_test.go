package vm

import (
	"strings"
	"testing"
	"time"
)

func TestSiwPackages(t *testing.T) {
	deps := ParseDepends([]byte("linux-headers-6.1.0-57-amd64\n  Depends: linux-headers-6.1.0-57-common\n  Depends: linux-kbuild-6.1\n  Depends: linux-compiler-gcc-12-x86\n"))
	got := SiwPackages("linux-headers-6.1.0-57-amd64", deps["linux-headers-6.1.0-57-amd64"])
	want := SiwPkgs{Headers: "linux-headers-6.1.0-57-amd64", Common: "linux-headers-6.1.0-57-common",
		Kbuild: "linux-kbuild-6.1", Source: "linux-source-6.1", Compiler: "gcc-12"}
	if got != want {
		t.Fatalf("SiwPackages = %+v, want %+v", got, want)
	}
	deps = ParseDepends([]byte("linux-headers-6.12.118+deb13-amd64\n  Depends: linux-base\n  Depends: linux-headers-6.12.118+deb13-common\n |Depends: linux-image-6.12.118+deb13-amd64\n  Depends: linux-image-6.12.118+deb13-amd64-unsigned\n  Depends: linux-kbuild-6.12.118+deb13\n  Depends: gcc-14\n"))
	got = SiwPackages("linux-headers-6.12.118+deb13-amd64", deps["linux-headers-6.12.118+deb13-amd64"])
	want = SiwPkgs{Headers: "linux-headers-6.12.118+deb13-amd64", Common: "linux-headers-6.12.118+deb13-common",
		Kbuild: "linux-kbuild-6.12.118+deb13", Source: "linux-source-6.12", Compiler: "gcc-14"}
	if got != want {
		t.Fatalf("trixie: SiwPackages = %+v, want %+v", got, want)
	}
	if got := SiwPackages("linux-headers-x", nil); got.Compiler != "" || got.Kbuild != "" {
		t.Fatalf("no dependencies gave %+v", got)
	}
}

func TestInitScriptSiw(t *testing.T) {
	with, err := InitScript(InitSpec{Nonce: "n", SetupTimeout: time.Second, Siw: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"type siw netdev iw0", "GORPING_SIW_DEV=siw0", GuestSiwIPv4 + "/24 dev iw0"} {
		if !strings.Contains(string(with), s) {
			t.Errorf("init with siw lacks %q", s)
		}
	}
	without, err := InitScript(InitSpec{Nonce: "n", SetupTimeout: time.Second, SiwWhy: "no gcc-14 (it's missing)"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(without), "type siw") {
		t.Error("init without siw still adds a siw link")
	}
	if !strings.Contains(string(without), `GORPING_SIW_UNAVAILABLE='no gcc-14 (it'\''s missing)'`) {
		t.Error("init without siw does not export the reason, quoted")
	}
}

func TestVerdictNamesMissingSiw(t *testing.T) {
	r := Report{Target: Target{"trixie", "amd64"}, Payload: "tests", SiwWhy: "needs gcc-14"}
	if v := r.Verdict(); !strings.Contains(v, "siw NOT AVAILABLE: needs gcc-14") {
		t.Fatalf("verdict %q hides the missing siw", v)
	}
}
