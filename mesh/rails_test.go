//go:build !guest

package mesh

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gorping/gorping/internal/hostenv"
	"github.com/gorping/gorping/internal/hostenv/hostenvtest"
	"github.com/gorping/gorping/mesh/agentdesc"
	"github.com/gorping/gorping/uverbs"
)

// fakeRail is one RoCE port of a fake host: an rxe device on its netdev, with the
// netdev's addresses (prefixes) and, per address, a RoCE v2 GID unless noGID.
type fakeRail struct {
	dev, netdev string
	addrs       []string
	noGID       bool
}

// fakeHost is a host's sysfs tree with rails, and the addresses of their netdevs (which
// a test may change: setAddrs).
type fakeHost struct {
	mu    sync.Mutex
	addrs map[string][]netip.Prefix
	rails hostRails
}

func newFakeHost(t *testing.T, rails ...fakeRail) *fakeHost {
	t.Helper()
	env := hostenv.NoRDMA(t.TempDir())
	h := &fakeHost{addrs: map[string][]netip.Prefix{}}
	files := map[string]string{}
	for i, r := range rails {
		uv := fmt.Sprintf("uverbs%d", i)
		base := "class/infiniband/" + r.dev + "/"
		files["class/infiniband_verbs/"+uv+"/ibdev"] = r.dev + "\n"
		files["class/infiniband_verbs/"+uv+"/abi_version"] = "2\n"
		files[base+"node_guid"] = fmt.Sprintf("5054:00ff:fe96:%04x\n", i)
		files[base+"parent"] = r.netdev + "\n"
		p := base + "ports/1/"
		files[p+"state"] = "4: ACTIVE\n"
		files[p+"phys_state"] = "5: LinkUp\n"
		files[p+"link_layer"] = "Ethernet\n"
		files[p+"active_mtu"] = "1024\n"
		// Index 0: the link-local GID every RoCE port has.
		gids := []netip.Addr{netip.MustParseAddr("fe80::5054:ff:fe96:" + fmt.Sprint(i+1))}
		for _, a := range r.addrs {
			pf := netip.MustParsePrefix(a)
			h.addrs[r.netdev] = append(h.addrs[r.netdev], pf)
			if !r.noGID {
				gids = append(gids, netip.AddrFrom16(pf.Addr().As16()))
			}
		}
		for gi, g := range gids {
			b := g.As16()
			var groups []string
			for k := 0; k < 16; k += 2 {
				groups = append(groups, fmt.Sprintf("%02x%02x", b[k], b[k+1]))
			}
			files[p+"gids/"+fmt.Sprint(gi)] = strings.Join(groups, ":") + "\n"
			files[p+"gid_attrs/types/"+fmt.Sprint(gi)] = "RoCE v2\n"
			files[p+"gid_attrs/ndevs/"+fmt.Sprint(gi)] = r.netdev + "\n"
		}
	}
	hostenvtest.WriteTree(t, env.Sysfs, files)
	h.rails = hostRails{env: env, addrs: h.netdevAddrs, mtu: func(uverbs.Device, int) int { return 0 }}
	return h
}

func (h *fakeHost) netdevAddrs(netdev string) ([]netip.Prefix, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	as, ok := h.addrs[netdev]
	if !ok {
		return nil, fmt.Errorf("no netdev %s", netdev)
	}
	return append([]netip.Prefix(nil), as...), nil
}

func (h *fakeHost) setAddrs(netdev string, prefixes ...string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.addrs[netdev] = nil
	for _, p := range prefixes {
		h.addrs[netdev] = append(h.addrs[netdev], netip.MustParsePrefix(p))
	}
}

// twoRails is a host with two rails in the subnets 10.0.1.0/24 and 10.0.2.0/24, host
// number n in both.
func twoRails(t *testing.T, n int) *fakeHost {
	return newFakeHost(t,
		fakeRail{dev: "rxe0", netdev: "eth1", addrs: []string{fmt.Sprintf("10.0.1.%d/24", n)}},
		fakeRail{dev: "rxe1", netdev: "eth2", addrs: []string{fmt.Sprintf("10.0.2.%d/24", n)}})
}

func TestDescribeLocal(t *testing.T) {
	h := twoRails(t, 5)
	d, notes, err := h.rails.describe("node5", "tor-a", "v1.2.3", 7174)
	if err != nil || len(notes) != 0 {
		t.Fatalf("describe: %v %q", err, notes)
	}
	if d.Name != "node5" || d.Group != "tor-a" || d.GorpingVersion != "v1.2.3" || d.ResponderPort != 7174 || len(d.Rails) != 2 {
		t.Fatalf("description %+v", d)
	}
	r := d.Rails[1]
	if r.Device != "rxe1" || r.Port != 1 || r.Netdev != "eth2" || r.LinkLayer != agentdesc.LinkEthernet || r.ActiveMTU != 1024 ||
		len(r.Addresses) != 1 || r.Addresses[0].String() != "10.0.2.5/24" || len(r.GIDs) != 2 ||
		r.GIDs[1].GID.String() != "::ffff:10.0.2.5" || r.GIDs[1].Type != agentdesc.GIDTypeRoCEv2 || r.GIDs[1].Index != 1 {
		t.Errorf("rail %+v", r)
	}
	if p := d.RailProblems(); len(p) != 0 {
		t.Errorf("problems of good rails: %v", p)
	}
	doc, err := d.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := agentdesc.Unmarshal(doc)
	if err != nil || len(back.Rails) != 2 {
		t.Errorf("round trip: %v %+v", err, back)
	}

	// A host without RDMA: no rails, no error.
	none := hostRails{env: hostenv.NoRDMA(t.TempDir()), addrs: h.netdevAddrs}
	if d, _, err := none.describe("x", "", "v", 1); err != nil || len(d.Rails) != 0 {
		t.Errorf("no RDMA: %+v %v", d, err)
	}
	// An address without its GID is a rail problem, logged once per change.
	g := newFakeHost(t, fakeRail{dev: "rxe0", netdev: "eth1", addrs: []string{"10.0.9.1/24"}, noGID: true})
	d, _, _ = g.rails.describe("n", "", "v", 1)
	if p := d.RailProblems(); len(p) != 1 || p[0].Reason != agentdesc.ReasonNoGID {
		t.Errorf("rail problems: %v, want one %s", p, agentdesc.ReasonNoGID)
	}
	if !strings.Contains(filepath.ToSlash(g.rails.env.Sysfs), "sys") {
		t.Errorf("sysfs root %s", g.rails.env.Sysfs)
	}
}

func TestDescribeSelfRefresh(t *testing.T) {
	h := twoRails(t, 7)
	cfg := DefaultConfig()
	cfg.AgentName, cfg.Version = "node7", "v0"
	a, err := newAgent(cfg, deps{rails: &h.rails})
	if err != nil {
		t.Fatal(err)
	}
	logs := &strings.Builder{}
	a.log = newLogger(a.cfg.Config, logs)
	var notes []string
	if !a.describeSelf(&notes) || len(a.self.Load().desc.Rails) != 2 {
		t.Fatalf("first description: %v", a.self.Load())
	}
	if a.describeSelf(&notes) {
		t.Error("an unchanged host changed the description")
	}
	h.setAddrs("eth2", "10.0.2.7/24", "10.0.3.7/24") // a new address on a rail, without its GID
	if !a.describeSelf(&notes) {
		t.Fatal("a new address did not change the description")
	}
	if got := a.self.Load().desc.Rails[1].Addresses; len(got) != 2 {
		t.Errorf("addresses after the change: %v", got)
	}
	a.describeSelf(&notes)
	if n := strings.Count(logs.String(), "no_gid"); n != 1 {
		t.Errorf("the missing GID was logged %d times, want once:\n%s", n, logs)
	}
}

func TestAgentEndpoint(t *testing.T) {
	h := twoRails(t, 1)
	ta := startAgent(t, deps{dial: newFakeNet().dial, resolver: &fakeResolver{m: map[string][]netip.Addr{}}, rails: &h.rails},
		"--agent-name", "node1", "--group", "tor-a", "--port", "7174")
	resp, err := ta.Client.Get(ta.URL("/agent"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "application/json" {
		t.Fatalf("/agent: %d %q, want 200 application/json", resp.StatusCode, ct)
	}
	d, err := agentdesc.Decode(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "node1" || d.Group != "tor-a" || d.GorpingVersion != "v0.0.0-test" || d.ResponderPort != 7174 || len(d.Rails) != 2 ||
		d.Rails[0].Device != "rxe0" || d.Rails[0].Addresses[0].String() != "10.0.1.1/24" {
		t.Errorf("/agent: %+v", d)
	}
	_, body, _ := ta.Get("/agent")
	t.Logf("/agent: %s", body)
	if r, err := ta.Client.Post(ta.URL("/agent"), "application/json", strings.NewReader("{}")); err != nil || r.StatusCode != 405 {
		t.Errorf("POST /agent: %v %v, want 405", r, err)
	} else {
		r.Body.Close()
	}
	ta.wait(t, `gorping_agent_info{agent="node1",group="tor-a",version="v0.0.0-test"}`, eq(1))
}
