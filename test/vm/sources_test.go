package vm

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseDeb822URIs(t *testing.T) {
	in := `Types: deb
# a comment
URIs: http://mirror.example/debian
Suites: bookworm bookworm-updates
Components: main

Types: deb-src
URIs: http://src.example/debian

Types: deb deb-src
URIs: http://mirror.example/debian-security
  http://second.example/debian-security/
Suites: bookworm-security

Types: deb
Enabled: no
URIs: http://disabled.example/debian
`
	got := ParseDeb822URIs(strings.NewReader(in))
	want := []string{
		"http://mirror.example/debian",
		"http://mirror.example/debian-security",
		"http://second.example/debian-security/",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestParseListURIs(t *testing.T) {
	in := `# deb http://commented.example/debian bookworm main
deb http://mirror.example/debian bookworm main
deb-src http://src.example/debian bookworm main
deb [arch=amd64 signed-by=/k.gpg] http://opt.example/debian-security bookworm-security main
deb [ arch=amd64 ] https://other.example/apt stable main
`
	got := ParseListURIs(strings.NewReader(in))
	want := []string{"http://mirror.example/debian", "http://opt.example/debian-security", "https://other.example/apt"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestPickMirrors(t *testing.T) {
	uris := []string{"https://other.example/apt", "http://a.example/debian/", "http://b.example/debian-security", "http://c.example/debian"}
	m, err := PickMirrors(uris, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if m.Main != "http://a.example/debian" || m.Security != "http://b.example/debian-security" {
		t.Fatalf("got %+v", m)
	}
	m, err = PickMirrors(uris, "http://x.example/mirror/", "http://y.example/sec")
	if err != nil {
		t.Fatal(err)
	}
	if m.Main != "http://x.example/mirror" || m.Security != "http://y.example/sec" {
		t.Fatalf("overrides ignored: %+v", m)
	}
	if _, err := PickMirrors([]string{"http://a.example/debian"}, "", ""); err == nil || !strings.Contains(err.Error(), EnvSecurityMirror) {
		t.Fatalf("missing security archive: err = %v", err)
	}
	if _, err := PickMirrors(nil, "", "http://y.example/sec"); err == nil || !strings.Contains(err.Error(), EnvMirror) {
		t.Fatalf("missing main archive: err = %v", err)
	}
}
