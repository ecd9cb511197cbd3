//go:build !guest

package mesh

// The agent binary on this RDMA-less host, scraped by a real Prometheus (Debian's) over
// TLS with basic auth, with the shipped rules loaded: the agent runs, serves its metrics
// and reports its targets down with a reason, and the queries and rules see that.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/gorping/gorping/internal/hostenv"
	"github.com/gorping/gorping/internal/hostenv/hostenvtest"
	"github.com/gorping/gorping/test/meshtest"
	"github.com/gorping/gorping/test/promtest"
)

// buildGorping builds the gorping binary with the gorping_hostenv tag (it then takes its
// sysfs and /dev from GORPING_HOSTENV_*: no RDMA whatever this machine has).
func buildGorping(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gorping")
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	out, err := exec.Command(gobin, "build", "-tags", "gorping_hostenv", "-ldflags",
		"-X main.buildVersion=v9.9.9-e2e -X github.com/prometheus/common/version.Revision=e2e0c0ffee -X github.com/prometheus/common/version.Branch=e2e-branch",
		"-o", bin, "github.com/gorping/gorping").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// tlsFiles writes a CA and a server certificate for 127.0.0.1 signed by it.
func tlsFiles(t *testing.T, dir string) (caFile, certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gorping test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "gorping mesh"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pool = x509.NewCertPool()
	pool.AddCert(caCert)
	return write("ca.pem", "CERTIFICATE", caDER), write("cert.pem", "CERTIFICATE", leafDER),
		write("key.pem", "EC PRIVATE KEY", keyDER), pool
}

type basicAuth struct {
	user, pass string
	rt         http.RoundTripper
}

func (b basicAuth) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.SetBasicAuth(b.user, b.pass)
	return b.rt.RoundTrip(r)
}

func TestE2EPrometheus(t *testing.T) {
	promtest.Tool(t, "prometheus")
	promtool := promtest.Tool(t, "promtool")
	bin := buildGorping(t)
	dir := t.TempDir()
	env := append(os.Environ(), hostenvtest.BinaryEnv(hostenv.NoRDMA(filepath.Join(dir, "host")))...)

	caFile, certFile, keyFile, pool := tlsFiles(t, dir)
	const user, pass = "prometheus", "s3cret-scrape"
	hash, err := bcrypt.GenerateFromPassword([]byte(pass), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	webConfig := filepath.Join(dir, "web.yml")
	if err := os.WriteFile(webConfig, []byte("tls_server_config:\n  cert_file: "+certFile+"\n  key_file: "+keyFile+
		"\nbasic_auth_users:\n  "+user+": "+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	const t4, t6 = "198.51.100.10:7174", "[2001:db8:100::10]:7300"
	a := meshtest.Start(t, bin, env, "--web.listen-address", "127.0.0.1:0", "--web.config.file", webConfig,
		"--peers", "198.51.100.10,"+t6, "--interval", "0.5", "--probe-allow", "198.51.100.0/24")
	tlsTransport := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	a.Scheme = "https"
	a.Client = &http.Client{Timeout: 10 * time.Second, Transport: basicAuth{user, pass, tlsTransport}}

	// TLS and basic auth hold: no password, a wrong one, plain HTTP all fail.
	noAuth := &http.Client{Timeout: 5 * time.Second, Transport: tlsTransport}
	if resp, err := noAuth.Get(a.URL("/metrics")); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("scrape without credentials: %v %v, want 401", resp, err)
	} else {
		resp.Body.Close()
	}
	wrong := &http.Client{Timeout: 5 * time.Second, Transport: basicAuth{user, "wrong", tlsTransport}}
	if resp, err := wrong.Get(a.URL("/metrics")); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("scrape with a wrong password: %v %v, want 401", resp, err)
	} else {
		resp.Body.Close()
	}
	if resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + a.Addr + "/metrics"); err == nil && resp.StatusCode == 200 {
		t.Error("plain HTTP scrape succeeded on a TLS listener")
	}

	// The agent reports its targets down with the reason, and its exposition passes
	// promtool check metrics.
	meshtest.WaitFor(t, 30*time.Second, "no_device failures", func() (bool, string) {
		v, err := a.Value(`gorping_probe_failures_total{target="` + t4 + `",reason="no_device"}`)
		return err == nil && v >= 2, err2s(err)
	})
	_, text, err := a.Get("/metrics")
	if err != nil {
		t.Fatal(err)
	}
	check := exec.Command(promtool, "check", "metrics")
	check.Stdin = strings.NewReader(text)
	if out, err := check.CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}

	// A real Prometheus scrapes it over TLS with basic auth, /probe too, with the rules.
	rules, err := filepath.Abs("../deploy/prometheus/gorping-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	relabel := "      - source_labels: [__address__]\n        target_label: __param_target\n" +
		"      - source_labels: [__param_target]\n        target_label: target\n" +
		"      - target_label: __address__\n        replacement: " + a.Addr + "\n"
	prom := promtest.Start(t, promtest.Config{
		NativeHistograms: true,
		RuleFiles:        []string{rules},
		Jobs: []promtest.Job{
			{Name: "gorping-mesh", Targets: []string{a.Addr}, Scheme: "https", CAFile: caFile, Username: user, Password: pass},
			{Name: "gorping-probe", Targets: []string{"198.51.100.20:7174"}, Scheme: "https", CAFile: caFile,
				Username: user, Password: pass, MetricsPath: "/probe", Params: map[string][]string{"count": {"2"}}, Relabel: relabel},
		},
	})
	const wait = 60 * time.Second
	prom.WaitFor(t, wait, `up{job="gorping-mesh"} == 1`, promtest.NonEmpty)
	prom.WaitFor(t, wait, `up{job="gorping-probe"} == 1`, promtest.NonEmpty)
	v := prom.WaitFor(t, wait, `gorping_target_up == 0`, func(v promtest.Vector) bool { return len(v) == 2 })
	t.Logf("targets down: %v", v)
	prom.WaitFor(t, wait, `increase(gorping_probe_failures_total{reason="no_device"}[10s]) > 0`,
		func(v promtest.Vector) bool { return len(v) == 2 })
	prom.WaitFor(t, wait, `gorping_responder_up{job="gorping-mesh"} == 0`, promtest.NonEmpty)
	// The build's labels as the Makefile links them (its LDFLAGS).
	prom.WaitFor(t, wait, `gorping_build_info{version="v9.9.9-e2e",revision="e2e0c0ffee",branch="e2e-branch",goos="`+
		runtime.GOOS+`",goarch="`+runtime.GOARCH+`",goversion="`+runtime.Version()+`"} == 1`, promtest.NonEmpty)
	prom.WaitFor(t, wait, `probe_success{job="gorping-probe",target="198.51.100.20:7174"} == 0`, promtest.NonEmpty)
	prom.WaitFor(t, wait, `gorping_probe_failures_total{job="gorping-probe",reason="no_device"} == 2`, promtest.NonEmpty)
	// The rules on real series: all slots lost, the down alert pending (its `for` is 2m).
	prom.WaitFor(t, wait, `gorping:probe_loss:ratio_5m == 1`, func(v promtest.Vector) bool { return len(v) == 2 })
	v = prom.WaitFor(t, wait, `ALERTS{alertname="GorpingTargetDown",alertstate="pending"}`,
		func(v promtest.Vector) bool { return len(v) == 2 })
	t.Logf("alerts: %v", v)
	if v, err := prom.Query(`ALERTS{alertname="GorpingProbeLossHigh"}`); err != nil || len(v) != 0 {
		t.Errorf("loss alert for targets that are down entirely: %v %v", v, err)
	}

	if code := a.Terminate(t, 30*time.Second); code != 0 {
		t.Errorf("exit %d after SIGTERM\n%s", code, a.Logs())
	}
	prom.WaitFor(t, wait, `up{job="gorping-mesh"} == 0`, promtest.NonEmpty)
}

func err2s(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
