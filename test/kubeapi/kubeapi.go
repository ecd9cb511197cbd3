// Package kubeapi runs a real Kubernetes API server for tests: Debian's etcd (package
// etcd-server) and kube-apiserver built from the k8s.io/kubernetes module into the test
// cache by build.sh (make kubeapi), both on 127.0.0.1 with temporary data, stopped by
// the test's cleanup. Authorization is RBAC with static tokens: Admin is system:masters,
// Agent is the service account gorping/gorping-mesh, which can do only what a test
// grants it (deploy/kubernetes' Role, say).
//
//	s := kubeapi.Start(t)
//	c := kubernetes.NewForConfigOrDie(s.Admin())
//
// A missing etcd or kube-apiserver skips the test with a loud message, and fails it
// under CI=true.
package kubeapi

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/gorping/gorping/test/freeport"
	"github.com/gorping/gorping/test/vm"
)

// Version is the kube-apiserver build.sh builds (build/go.mod's k8s.io/kubernetes).
const Version = "v1.37.2"

// AgentUser is the Agent token's user: the DaemonSet's service account.
const AgentUser = "system:serviceaccount:gorping:gorping-mesh"

// startTimeout bounds each server's start (the API server bootstraps its RBAC roles and
// priority levels before /readyz; a loaded 2-core machine took tens of seconds).
const startTimeout = 3 * time.Minute

// Server is a running API server.
type Server struct {
	URL        string // https://127.0.0.1:PORT
	adminToken string
	agentToken string
	t          testing.TB
	apiserver  *proc
	args       []string
	logFile    string
}

// Stop stops the API server (etcd goes on): clients see it gone.
func (s *Server) Stop() { s.apiserver.stop() }

// Restart starts the API server again on the same port and data, and waits until it is
// ready.
func (s *Server) Restart() {
	s.t.Helper()
	s.apiserver = run(s.t, s.logFile, s.args[0], s.args[1:]...)
	waitReady(s.t, s.apiserver, s.logFile, s.URL+"/readyz", s.adminToken, "kube-apiserver")
}

// Admin is a client configuration with every right.
func (s *Server) Admin() *rest.Config { return s.config(s.adminToken) }

// Agent is a client configuration as the service account gorping/gorping-mesh.
func (s *Server) Agent() *rest.Config { return s.config(s.agentToken) }

func (s *Server) config(token string) *rest.Config {
	// The server's certificate is self-signed at start: the test trusts its loopback.
	return &rest.Config{Host: s.URL, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		QPS: 1000, Burst: 2000}
}

func missing(t testing.TB, msg string) {
	t.Helper()
	msg = "*** " + msg + " ***"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// Binary is the cached kube-apiserver's path.
func Binary() (string, error) {
	root, err := vm.CacheRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "kubeapi", "kube-apiserver-"+Version), nil
}

// Start starts etcd and kube-apiserver and waits until the API server is ready.
func Start(t testing.TB) *Server {
	t.Helper()
	etcd, err := exec.LookPath("etcd")
	if err != nil {
		missing(t, "etcd not found (Debian package etcd-server; `make host-deps` as root installs it)")
	}
	apiserver, err := Binary()
	if err == nil {
		_, err = os.Stat(apiserver)
	}
	if err != nil {
		missing(t, fmt.Sprintf("kube-apiserver %s not built (`make kubeapi` builds it into the test cache once): %v", Version, err))
	}
	dir := t.TempDir()
	port := func() int {
		p, err := freeport.Port("tcp4")
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	client, peer := port(), port()
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(client)
	etcdProc := run(t, filepath.Join(dir, "etcd.log"), etcd, "--data-dir", filepath.Join(dir, "etcd"), "--name", "test",
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", "http://127.0.0.1:"+strconv.Itoa(peer),
		"--initial-advertise-peer-urls", "http://127.0.0.1:"+strconv.Itoa(peer),
		"--initial-cluster", "test=http://127.0.0.1:"+strconv.Itoa(peer),
		"--unsafe-no-fsync", "--log-level", "warn")
	waitReady(t, etcdProc, filepath.Join(dir, "etcd.log"), etcdURL+"/health", "", "etcd")

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "sa.key")
	write(t, keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	s := &Server{adminToken: token(t), agentToken: token(t)}
	tokens := filepath.Join(dir, "tokens.csv")
	write(t, tokens, []byte(s.adminToken+",admin,admin,system:masters\n"+
		s.agentToken+","+AgentUser+",agent,system:serviceaccounts\n"))
	secure := port()
	s.URL = "https://127.0.0.1:" + strconv.Itoa(secure)
	s.t, s.logFile = t, filepath.Join(dir, "apiserver.log")
	s.args = []string{apiserver,
		"--etcd-servers", etcdURL, "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(secure), "--cert-dir", filepath.Join(dir, "certs"),
		"--token-auth-file", tokens, "--authorization-mode", "RBAC",
		"--service-account-issuer", "https://kubernetes.default.svc", "--service-account-key-file", keyFile,
		"--service-account-signing-key-file", keyFile,
		// No controller manager makes service accounts: pods are admitted without one.
		"--disable-admission-plugins", "ServiceAccount",
		"--service-cluster-ip-range", "10.96.0.0/24", "--enable-priority-and-fairness=false",
		// The kubernetes Service's endpoint would be the loopback address, which the
		// reconciler refuses: no endpoint (nothing here reaches the API server that way).
		"--endpoint-reconciler-type", "none"}
	s.apiserver = run(t, s.logFile, s.args[0], s.args[1:]...)
	waitReady(t, s.apiserver, s.logFile, s.URL+"/readyz", s.adminToken, "kube-apiserver")
	return s
}

func token(t testing.TB) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", b)
}

func write(t testing.TB, name string, data []byte) {
	if err := os.WriteFile(name, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// proc is a server process.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// stop stops it (SIGTERM, then SIGKILL after 10 s) and waits for it; again is a no-op.
func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

// run starts a server with its output appended to logFile; the cleanup stops it.
func run(t testing.TB, logFile, name string, args ...string) *proc {
	t.Helper()
	f, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("%s: %v", name, err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); f.Close(); close(p.done) }()
	t.Cleanup(p.stop)
	return p
}

// waitReady polls url until it answers 200, for at most startTimeout or until the server
// exits; a failure shows the end of the server's log.
func waitReady(t testing.TB, p *proc, logFile, url, bearer, what string) {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second, Transport: insecure()}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	var last string
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
		case <-p.done:
			last = "it exited"
			cancel()
		case <-time.After(200 * time.Millisecond):
		}
	}
	log, _ := os.ReadFile(logFile)
	if len(log) > 4000 {
		log = log[len(log)-4000:]
	}
	t.Fatalf("%s not ready at %s within %s (last: %s); the end of its log:\n%s", what, url, startTimeout, last, strings.TrimSpace(string(log)))
}

func insecure() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} // the server's self-signed certificate, on loopback
	return tr
}
