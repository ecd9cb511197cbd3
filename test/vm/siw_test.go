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

// A stand-in for siw_cm.c with the shape the patch relies on: the active side's
// reply-like call comes first and must be left alone.
const fakeSiwCM = `int siw_connect(struct iw_cm_id *id, struct iw_cm_conn_param *params)
{
	rv = siw_send_mpareqrep(cep, params->private_data, pd_len);
}

int siw_accept(struct iw_cm_id *id, struct iw_cm_conn_param *params)
{
	bool wait_for_peer_rts = false;
	up_write(&qp->state_lock);

	rv = siw_send_mpareqrep(cep, params->private_data,
				params->private_data_len);
	if (rv != 0)
		goto error;

	if (wait_for_peer_rts) {
		siw_sk_assign_rtr_upcalls(cep);
	} else {
		siw_qp_socket_assoc(cep, qp);
	}
}
`

func TestPatchSiwAccept(t *testing.T) {
	got, err := patchSiwAccept([]byte(fakeSiwCM))
	if err != nil {
		t.Fatal(err)
	}
	s := string(got)
	accept := s[strings.Index(s, "int siw_accept("):]
	assoc := strings.Index(accept, "\tif (!wait_for_peer_rts)\n\t\tsiw_qp_socket_assoc(cep, qp);\n")
	reply := strings.Index(accept, "\trv = siw_send_mpareqrep(")
	if assoc < 0 || reply < 0 || assoc > reply {
		t.Fatalf("the association is not placed before siw_accept's reply:\n%s", accept)
	}
	if !strings.HasPrefix(s, fakeSiwCM[:strings.Index(fakeSiwCM, "int siw_accept(")]) {
		t.Fatalf("siw_connect was changed:\n%s", s)
	}
	if strings.Count(s, "siw_qp_socket_assoc(cep, qp);") != 2 {
		t.Fatalf("want the original association kept and one added:\n%s", s)
	}

	// A source of another shape is refused, naming what to review.
	for name, src := range map[string]string{
		"no siw_accept":  strings.ReplaceAll(fakeSiwCM, "int siw_accept(", "int siw_accept_v2("),
		"reply moved":    strings.ReplaceAll(fakeSiwCM, "\trv = siw_send_mpareqrep(cep, params->private_data,\n", "\tsiw_reply(cep,\n"),
		"no association": strings.ReplaceAll(fakeSiwCM, "\t\tsiw_qp_socket_assoc(cep, qp);\n", ""),
	} {
		if _, err := patchSiwAccept([]byte(src)); err == nil || !strings.Contains(err.Error(), "test/vm/siw.go") {
			t.Errorf("%s: err = %v, want a refusal naming test/vm/siw.go", name, err)
		}
	}
}

func TestDelaySiwAccept(t *testing.T) {
	got, err := delaySiwAccept([]byte(fakeSiwCM), 30*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	s := string(got)
	if !strings.HasPrefix(s, "#include <linux/delay.h>\n") {
		t.Fatalf("no delay.h include:\n%s", s)
	}
	accept := s[strings.Index(s, "int siw_accept("):]
	delay := strings.Index(accept, "\tmdelay(30);")
	reply := strings.Index(accept, "goto error;\n")
	assoc := strings.Index(accept, "siw_qp_socket_assoc(cep, qp);")
	if delay < 0 || delay < reply || delay > assoc {
		t.Fatalf("the delay is not between the reply's error check and the association:\n%s", accept)
	}
	if _, err := delaySiwAccept([]byte(strings.ReplaceAll(fakeSiwCM, "goto error;", "return rv;")), time.Millisecond); err == nil {
		t.Fatal("a reply without its error check was accepted")
	}
}

func TestSiwVariantCachePath(t *testing.T) {
	for v, want := range map[SiwVariant]string{
		{}:                                   siwPatchLevel,
		{Unpatched: true}:                    "unpatched",
		{AcceptDelay: 30 * time.Millisecond}: siwPatchLevel + "-accept-delay-30ms",
		{Unpatched: true, AcceptDelay: 30 * time.Millisecond}: "unpatched-accept-delay-30ms",
	} {
		if got := v.dir(); got != want {
			t.Errorf("%+v: dir %q, want %q", v, got, want)
		}
	}
}
