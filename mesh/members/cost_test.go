package members

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/gorping/gorping/mesh/agentdesc"
	"github.com/gorping/gorping/mesh/pinglist"
)

// simFleet is n simulated agents (groups of 20, 8 rails each, RoCE with IPv4 and IPv6
// GIDs) whose /agent one loopback server serves, by Host, as the agent does: the
// document with its ETag through http.ServeContent. The client's every address dials that
// server; the bytes both ways are counted at the server's connections.
type simFleet struct {
	members []Member
	docs    map[string][]byte // by address
	srv     *httptest.Server
	client  *http.Client
	reqs    atomic.Int64
	bytes   atomic.Int64
}

type countConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func (c countConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.n.Add(int64(n))
	return n, err
}

type countListener struct {
	net.Listener
	n *atomic.Int64
}

func (l countListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countConn{c, l.n}, nil
}

func description(i int) agentdesc.Description {
	d := agentdesc.Description{Version: "1.0", Name: fmt.Sprintf("node%05d", i), Group: fmt.Sprintf("tor-%03d", i/20),
		GorpingVersion: "v1.4.0", ResponderPort: 7174}
	for r := range 8 {
		v4 := netip.AddrFrom4([4]byte{10, byte(r), byte(i >> 8), byte(i)})
		v6 := netip.AddrFrom16([16]byte{0xfd, 0, byte(r), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, byte(i >> 8), byte(i)})
		d.Rails = append(d.Rails, agentdesc.Rail{Device: fmt.Sprintf("mlx5_%d", r), Port: 1, Netdev: fmt.Sprintf("ens%df0np0", r+1),
			LinkLayer: agentdesc.LinkEthernet, ActiveMTU: 4096,
			Addresses: []netip.Prefix{netip.PrefixFrom(v4, 24), netip.PrefixFrom(v6, 64)},
			GIDs: []agentdesc.GID{{Index: 3, GID: netip.AddrFrom16(v4.As16()), Type: agentdesc.GIDTypeRoCEv2},
				{Index: 5, GID: v6, Type: agentdesc.GIDTypeRoCEv2}}})
	}
	return d
}

func newSimFleet(t testing.TB, n int) *simFleet {
	f := &simFleet{docs: make(map[string][]byte, n)}
	for i := range n {
		d := description(i)
		doc, err := d.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		// Addresses in 198.18.0.0/15 (benchmarking): names only, every dial goes to loopback.
		m := Member{Name: d.Name, Group: d.Group, Addr: fmt.Sprintf("198.18.%d.%d:10174", i>>8, i&255)}
		f.members = append(f.members, m)
		f.docs[m.Addr] = doc
	}
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.reqs.Add(1)
		doc, ok := f.docs[r.Host]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("ETag", ETag(doc))
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(doc))
	}))
	f.srv.Listener = countListener{f.srv.Listener, &f.bytes}
	f.srv.Start()
	t.Cleanup(f.srv.Close)
	to := f.srv.Listener.Addr().String()
	var d net.Dialer
	f.client = &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return d.DialContext(ctx, network, to)
	}, MaxIdleConns: 100, MaxIdleConnsPerHost: 1}}
	t.Cleanup(f.client.CloseIdleConnections)
	return f
}

// read reads addrs' descriptions as discovery does, 8 at a time; cond nil: the
// unconditional requests of the fetch-all model.
func (f *simFleet) read(t testing.TB, addrs []string, cond *Conditional) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for _, a := range addrs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			req, _ := http.NewRequest(http.MethodGet, "http://"+a+"/agent", nil)
			if cond != nil {
				cond.Ask(req, a)
			}
			resp, err := f.client.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode == http.StatusNotModified && cond != nil {
				if _, ok := cond.NotModified(a); !ok {
					t.Errorf("%s: a 304 without a description kept", a)
				}
				return
			}
			d, err := agentdesc.Decode(resp.Body)
			if err != nil {
				t.Errorf("%s: %v", a, err)
				return
			}
			if cond != nil {
				cond.Keep(a, resp.Header.Get("ETag"), d)
			}
		})
	}
	wg.Wait()
}

// measure is one refresh's requests and bytes.
func (f *simFleet) measure(t testing.TB, addrs []string, cond *Conditional) (reqs, bytes int64) {
	r0, b0 := f.reqs.Load(), f.bytes.Load()
	f.read(t, addrs, cond)
	return f.reqs.Load() - r0, f.bytes.Load() - b0
}

// TestDiscoveryCost measures one agent's discovery per refresh at 1,000 and 10,000
// members (K = 64): before, every member's /agent in full (what discovery by descriptions
// alone must do: the plan needs every member's group); after, the members from a
// membership source, only the 64 chosen peers' /agent, conditionally: in full the first
// time, 304s while unchanged. The fleet's total is n agents doing the same. docs/mesh.md
// has the table: go test -run TestDiscoveryCost -v ./mesh/members | grep cost
func TestDiscoveryCost(t *testing.T) {
	sizes := []int{1000, 10000}
	if testing.Short() {
		sizes = []int{1000}
	}
	for _, n := range sizes {
		f := newSimFleet(t, n)
		all := make([]string, n)
		for i, m := range f.members {
			all[i] = m.Addr
		}
		f.measure(t, all[:1], nil) // warm the client
		beforeR, beforeB := f.measure(t, all, nil)

		self := f.members[0]
		chosen, err := Choose(self.Pinglist(), f.members, 64, 7)
		if err != nil {
			t.Fatal(err)
		}
		addrs := make([]string, len(chosen))
		for i, m := range chosen {
			addrs[i] = m.Addr
		}
		var cond Conditional
		coldR, coldB := f.measure(t, addrs, &cond)
		warmR, warmB := f.measure(t, addrs, &cond)
		if beforeR != int64(n) || coldR != 64 || warmR != 64 {
			t.Fatalf("%d members: %d requests before, %d and %d after, want %d, 64 and 64", n, beforeR, coldR, warmR, n)
		}
		if warmB*10 > coldB {
			t.Errorf("%d members: unchanged descriptions cost %d bytes, changed ones %d: the 304s carry a body", n, warmB, coldB)
		}
		nn := int64(n)
		t.Logf("cost n=%d doc=%dB | before: %d req, %d B per agent per refresh; fleet %d req, %d B | after, first: %d req, %d B | after, unchanged: %d req, %d B per agent; fleet %d req, %d B",
			n, len(f.docs[all[0]]), beforeR, beforeB, beforeR*nn, beforeB*nn, coldR, coldB, warmR, warmB, warmR*nn, warmB*nn)
	}
}

// Choose picks the same lists whatever the order of the members, and every list is the
// plan's: the agents' lists fit together.
func TestChoose(t *testing.T) {
	f := make([]Member, 0, 200)
	for i := range 200 {
		f = append(f, Member{Name: fmt.Sprintf("n%03d", i), Group: fmt.Sprintf("g%d", i/20), Addr: fmt.Sprintf("198.18.0.%d:10174", i)})
	}
	rev := make([]Member, len(f))
	for i := range f {
		rev[len(f)-1-i] = f[i]
	}
	pl := make([]pinglist.Member, len(f))
	for i, m := range f {
		pl[i] = m.Pinglist()
	}
	plan, err := pinglist.New(pl, 16)
	if err != nil {
		t.Fatal(err)
	}
	for _, self := range []int{0, 57, 199} {
		a, err := Choose(f[self].Pinglist(), f, 16, 3)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := Choose(f[self].Pinglist(), rev, 16, 3)
		want, _ := plan.Targets(f[self].Name, 3)
		if len(a) != 16 || len(b) != 16 {
			t.Fatalf("%d and %d chosen, want 16", len(a), len(b))
		}
		for i := range a {
			if a[i] != b[i] || a[i].Name != want[i].Host || a[i].Addr == "" {
				t.Errorf("self %d: %v, reversed %v, plan %v", self, a[i], b[i], want[i])
			}
		}
	}
}

// BenchmarkKubernetesMembers: the store of n agents' pods as the informer keeps them
// (stripped), its memory, and the time to make the members list of it (once per change)
// once per round after a change), the plan of them (the same), and one agent's choice of
// 64 of a plan kept (every round: the ns/op). docs/mesh.md has the
// figures: go test -run XXX -bench KubernetesMembers -benchmem ./mesh/members
func BenchmarkKubernetesMembers(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			k, err := NewKubernetes(KubernetesConfig{REST: &rest.Config{Host: "https://127.0.0.1:1"}, Namespace: ns, Selector: selector, Port: 10174})
			if err != nil {
				b.Fatal(err)
			}
			var m0, m1 runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&m0)
			for i := range n {
				p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("gorping-mesh-%06d", i), Namespace: ns,
					UID: types.UID(fmt.Sprintf("9a3c1f0e-4b7d-4e2a-8f61-%012d", i)), ResourceVersion: fmt.Sprint(1000000 + i),
					Labels: map[string]string{"app.kubernetes.io/name": "gorping-mesh", DefaultGroupLabel: fmt.Sprintf("tor-%04d", i/20),
						"controller-revision-hash": "6d4f8b9c7", "pod-template-generation": "1"}},
					Spec:   corev1.PodSpec{NodeName: fmt.Sprintf("gpu-node-%06d", i), Containers: []corev1.Container{{Name: "gorping", Image: "registry.example.com/gorping:v1.4.0"}}},
					Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: fmt.Sprintf("198.18.%d.%d", i>>8&255, i&255)}}
				s, _ := k.strip(p)
				if err := k.informer.GetStore().Add(s); err != nil {
					b.Fatal(err)
				}
			}
			runtime.GC()
			runtime.ReadMemStats(&m1)
			k.touch()
			t0 := time.Now()
			ms := k.Members()
			list := time.Since(t0)
			if len(ms) != n {
				b.Fatalf("%d members, want %d", len(ms), n)
			}
			var p Planner
			t0 = time.Now()
			if _, err := p.Choose(ms[0].Pinglist(), ms, 64, 3); err != nil {
				b.Fatal(err)
			}
			plan := time.Since(t0)
			b.ResetTimer()
			for i := range b.N {
				if _, err := p.Choose(ms[0].Pinglist(), ms, 64, uint64(i)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(m1.HeapAlloc-m0.HeapAlloc)/float64(n), "store-B/member")
			b.ReportMetric(float64(list.Microseconds())/1000, "members-ms")
			b.ReportMetric(float64(plan.Microseconds())/1000, "plan-ms")
		})
	}
}
