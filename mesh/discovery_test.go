//go:build !guest

package mesh

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/gorping/gorping/mesh/discovery"
	"github.com/gorping/gorping/mesh/pinglist"
	"github.com/gorping/gorping/rping"
	"github.com/gorping/gorping/test/meshtest"
)

// railNet is the fabric of the rail tests: a fakeNet where every rail address answers
// on 7174, each dial's source is recorded, and a connection leaves by the device whose
// subnet its source is in (10.0.1.x: rxe0, 10.0.2.x: rxe1).
func railNet(hosts int) *fakeNet {
	fn := newFakeNet()
	fn.sources = map[netip.AddrPort][]netip.Addr{}
	fn.device = func(src netip.Addr) (string, int) {
		if b := src.As4(); src.Is4() && b[2] == 2 {
			return "rxe1", 1
		}
		return "rxe0", 1
	}
	for n := 1; n <= hosts; n++ {
		for rail := 1; rail <= 2; rail++ {
			fn.set(fmt.Sprintf("10.0.%d.%d:7174", rail, n), behavior{rtt: 7 * time.Microsecond})
		}
	}
	return fn
}

// railAgent runs an agent named name on host h, listening on 127.0.0.1:port.
func railAgent(t *testing.T, name string, h *fakeHost, fn *fakeNet, port int, args ...string) *testAgent {
	t.Helper()
	cfg, err := parseArgs(append([]string{"--listen", fmt.Sprintf("127.0.0.1:%d", port), "--agent-name", name,
		"--interval", "50ms", "--agents-refresh", "100ms"}, args...))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Version = "v0.0.0-test"
	d := deps{dial: fn.dial, resolver: &fakeResolver{m: map[string][]netip.Addr{}}, rails: &h.rails,
		respond: func(ctx context.Context, c rping.ResponderConfig) error {
			c.Listening()
			<-ctx.Done()
			return nil
		},
		local: func() map[netip.Addr]bool {
			return map[netip.Addr]bool{netip.MustParseAddr("127.0.0.1"): true, netip.MustParseAddr("::1"): true}
		}}
	return runAgent(t, cfg, d, 10*time.Second)
}

func agentAddr(port int) string { return fmt.Sprintf("127.0.0.1:%d", port) }

// railSeries is the target_up selector of one rail target.
func railSeries(target, device, peer string) string {
	return fmt.Sprintf(`gorping_target_up{target="%s",device="%s",port="1",peer="%s"}`, target, device, peer)
}

func TestRailsDiscovery(t *testing.T) {
	fn := railNet(4)
	ports := []int{meshtest.FreePort(t), meshtest.FreePort(t), meshtest.FreePort(t)}
	all := agentAddr(ports[0]) + "," + agentAddr(ports[1]) + "," + agentAddr(ports[2])
	a1 := railAgent(t, "node1", twoRails(t, 1), fn, ports[0], "--agents", all, "--group", "tor-a", "--agents-keep", "2s")
	railAgent(t, "node2", twoRails(t, 2), fn, ports[1], "--agents", all, "--group", "tor-a")
	a3 := railAgent(t, "node3", twoRails(t, 3), fn, ports[2], "--agents", all, "--group", "tor-b")

	// Each agent, given only the agents' HTTP addresses, probes the same-subnet rail of
	// each peer from its own rail, and nothing else.
	for _, s := range []string{railSeries("10.0.1.2:7174", "rxe0", "node2"), railSeries("10.0.2.2:7174", "rxe1", "node2"),
		railSeries("10.0.1.3:7174", "rxe0", "node3"), railSeries("10.0.2.3:7174", "rxe1", "node3")} {
		a1.wait(t, s, eq(1))
	}
	a1.wait(t, `gorping_targets{source="rails"}`, eq(4))
	a1.wait(t, `gorping_peer_up{peer="node2"}`, eq(1))
	a1.wait(t, `gorping_peer_info{peer="node3",peer_group="tor-b",peer_version="v0.0.0-test"}`, eq(1))
	a3.wait(t, railSeries("10.0.2.1:7174", "rxe1", "node1"), eq(1))
	m, err := a1.Scrape()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range m.Samples() {
		if s.Name != "gorping_target_up" {
			continue
		}
		l := s.Labels
		if strings.HasPrefix(l["target"], "10.0.1.1:") || strings.HasPrefix(l["target"], "10.0.2.1:") {
			t.Errorf("node1 probes its own rail: %v", l)
		}
		if (l["device"] == "rxe0") != strings.HasPrefix(l["target"], "10.0.1.") {
			t.Errorf("a rail target across subnets with --rails same-subnet: %v", l)
		}
	}
	if n := seriesPerTarget(m)["10.0.1.2:7174"]; n == 0 || n > maxSeriesPerTarget {
		t.Errorf("10.0.1.2:7174 has %d series, want 1..%d", n, maxSeriesPerTarget)
	}
	// The probes leave by their rail: the source is the local rail's address.
	fn.mu.Lock()
	for _, src := range fn.sources[netip.MustParseAddrPort("10.0.2.2:7174")] {
		if src != netip.MustParseAddr("10.0.2.1") && src != netip.MustParseAddr("10.0.2.3") {
			t.Errorf("10.0.2.2 probed from %s, not from a 10.0.2.0/24 rail", src)
		}
	}
	fn.mu.Unlock()
	if !strings.Contains(a1.logs.String(), "skipping an agent address that is this agent's listener") {
		t.Error("node1 did not say it skips its own address")
	}

	// --rails all: every local rail probes every peer rail (2 × 2 × 3 peers).
	a4 := railAgent(t, "node4", twoRails(t, 4), fn, meshtest.FreePort(t), "--agents", all, "--rails", "all")
	a4.wait(t, `gorping_targets{source="rails"}`, eq(12))
	a4.wait(t, railSeries("10.0.2.3:7174", "rxe0", "node3"), eq(1))

	// A peer that stops answering keeps its rails for --agents-keep, with peer_up 0.
	// The agent counts the keep from node3's last answer, which precedes the stop by
	// up to one --agents-refresh (100ms), more when a loaded machine delays the poll
	// rounds: allow 0.5s of it, still far from forgetting at the first failure.
	const keep = 2*time.Second - 500*time.Millisecond
	stopped := time.Now()
	a3.stop(t, 10*time.Second)
	a1.wait(t, `gorping_peer_up{peer="node3"}`, eq(0))
	if _, err := a1.Value(railSeries("10.0.1.3:7174", "rxe0", "node3")); err != nil && time.Since(stopped) < keep {
		t.Errorf("node3's rails gone before --agents-keep: %v", err)
	}
	meshtest.WaitFor(t, 10*time.Second, "node3's rail targets removed after --agents-keep", func() (bool, string) {
		v, err := a1.Value(`gorping_targets{source="rails"}`)
		return err == nil && v == 2, fmt.Sprint(v, err)
	})
	if held := time.Since(stopped); held < keep {
		t.Errorf("node3's rails removed %s after it stopped, before --agents-keep 2s (less 0.5s for its last answer)", held)
	}
	if n := strings.Count(a1.logs.String(), "peer agent does not answer"); n != 1 {
		t.Errorf("node3 stopping was logged %d times, want once", n)
	}
	if !strings.Contains(a1.logs.String(), "forgetting its rails") {
		t.Error("no log line when node3's rails were forgotten")
	}
}

func TestRailsAgentsFile(t *testing.T) {
	fn := railNet(3)
	p2, p3 := meshtest.FreePort(t), meshtest.FreePort(t)
	railAgent(t, "node2", twoRails(t, 2), fn, p2)
	railAgent(t, "node3", twoRails(t, 3), fn, p3)
	file := filepath.Join(t.TempDir(), "agents")
	writeTestFile(t, file, agentAddr(p2)+"\nnot an agent\n")
	a1 := railAgent(t, "node1", twoRails(t, 1), fn, meshtest.FreePort(t), "--agents-file", file, "--targets-reload", "100ms")
	a1.wait(t, railSeries("10.0.1.2:7174", "rxe0", "node2"), eq(1))
	a1.wait(t, `gorping_agents_file_bad_lines`, eq(1))
	a1.wait(t, `gorping_targets{source="rails"}`, eq(2))
	writeTestFile(t, file, agentAddr(p3)+"\n")
	a1.wait(t, railSeries("10.0.2.3:7174", "rxe1", "node3"), eq(1))
	a1.wait(t, `gorping_targets{source="rails"}`, eq(2)) // node2's are gone: no longer listed
	a1.wait(t, `gorping_agents_file_bad_lines`, eq(0))
	if n := strings.Count(a1.logs.String(), "bad line in the agents file"); n != 1 {
		t.Errorf("the bad line was logged %d times, want once", n)
	}
}

func TestRailsAgentsTLS(t *testing.T) {
	fn := railNet(3)
	dir := t.TempDir()
	caFile, certFile, keyFile, _ := tlsFiles(t, dir)
	const user, pass = "mesh", "s3cret-agents"
	hash, err := bcrypt.GenerateFromPassword([]byte(pass), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	web := filepath.Join(dir, "web.yml")
	writeTestFile(t, web, "tls_server_config:\n  cert_file: "+certFile+"\n  key_file: "+keyFile+
		"\nbasic_auth_users:\n  "+user+": "+string(hash)+"\n")
	client := func(name, password string) string {
		p := filepath.Join(dir, name)
		writeTestFile(t, p, "scheme: https\ntls_config:\n  ca_file: "+filepath.Base(caFile)+"\nbasic_auth:\n  username: "+user+
			"\n  password: "+password+"\n")
		return p
	}
	p2 := meshtest.FreePort(t)
	railAgent(t, "node2", twoRails(t, 2), fn, p2, "--web.config.file", web)
	good := railAgent(t, "node1", twoRails(t, 1), fn, meshtest.FreePort(t), "--agents", agentAddr(p2),
		"--agents.http-config", client("good.yml", pass))
	good.wait(t, railSeries("10.0.1.2:7174", "rxe0", "node2"), eq(1))
	good.wait(t, `gorping_peer_up{peer="node2"}`, eq(1))

	bad := railAgent(t, "node3", twoRails(t, 3), fn, meshtest.FreePort(t), "--agents", agentAddr(p2),
		"--agents.http-config", client("bad.yml", "wrong"))
	bad.wait(t, `gorping_agent_fetch_failures_total{reason="unauthorized"}`, ge(2))
	bad.wait(t, `gorping_peer_up{peer="`+agentAddr(p2)+`"}`, eq(0))
	if l := bad.logs.String(); strings.Count(l, "401 Unauthorized: check the credentials in --agents.http-config") != 1 {
		t.Errorf("want one line saying the credentials are refused:\n%s", l)
	}
	if v, err := bad.Value(`gorping_targets{source="rails"}`); err != nil || v != 0 {
		t.Errorf("rail targets without a description: %v %v", v, err)
	}

	// Plain HTTP against the TLS listener fails as unreachable or a bad status, never
	// with a description.
	plain := railAgent(t, "node4", twoRails(t, 4), fn, meshtest.FreePort(t), "--agents", agentAddr(p2))
	meshtest.WaitFor(t, 10*time.Second, "plain HTTP refused", func() (bool, string) {
		v, _ := plain.Value(`gorping_agent_fetches_total`)
		f, _ := plain.Value(`gorping_peer_up{peer="` + agentAddr(p2) + `"}`)
		return v >= 2 && f == 0, fmt.Sprint(v, f)
	})
}

func TestRailsFamilyMismatch(t *testing.T) {
	fn := railNet(0)
	p7 := meshtest.FreePort(t)
	v6 := newFakeHost(t, fakeRail{dev: "mlx5_0", netdev: "ens1", addrs: []string{"fd00:7::2/64"}})
	railAgent(t, "node7", v6, fn, p7)
	v4 := newFakeHost(t, fakeRail{dev: "mlx5_0", netdev: "ens1", addrs: []string{"10.0.7.1/24"}})
	a6 := railAgent(t, "node6", v4, fn, meshtest.FreePort(t), "--agents", agentAddr(p7), "--rails", "all")
	a6.wait(t, `gorping_peer_up{peer="node7"}`, eq(1))
	a6.wait(t, `gorping_agent_fetches_total`, ge(6)) // several rounds with the same problem
	m, err := a6.Scrape()
	if err != nil {
		t.Fatal(err)
	}
	if v, err := m.Sum(`gorping_rail_problems`); err != nil || v != 1 {
		t.Errorf("rail problems: %v %v, want 1", v, err)
	}
	if v, err := m.Value(`gorping_targets{source="rails"}`); err != nil || v != 0 {
		t.Errorf("rail targets: %v %v, want none", v, err)
	}
	if n := strings.Count(a6.logs.String(), "a rail pair that cannot be probed"); n != 1 {
		t.Errorf("the family mismatch was logged %d times, want once:\n%s", n, a6.logs)
	}
}

func TestAgentsArgs(t *testing.T) {
	dir := t.TempDir()
	hc := filepath.Join(dir, "http.yml")
	writeTestFile(t, hc, "scheme: https\nbasic_auth:\n  username: u\n  password: p\n")
	c, err := checkArgs([]string{"--agents", "node1,node2:9000", "--agents", "[2001:db8::1]", "--agents-dns", "mesh.svc:10175",
		"--agents.http-config", hc, "--rails", "all", "--max-peers", "64", "--rotate", "300s"})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.agents) != 3 || c.agents[0].Port != discovery.DefaultAgentPort || c.agents[1].Port != 9000 || c.agentsDNSPort != 10175 ||
		c.agentsHTTP.Scheme != "https" || c.agentsHTTP.Client.BasicAuth == nil || c.MaxPeers != 64 || c.Rotate != 300*time.Second {
		t.Errorf("checkArgs: %+v", c)
	}
	// Bad values, and a client configuration that cannot be used, as the command line
	// reports them: cli's TestMeshAgentsOptions.
}

// writeTestFile replaces path's content atomically, as a ConfigMap update does.
func writeTestFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path+".tmp", []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

func TestRailsPinglist(t *testing.T) {
	fn := railNet(4)
	ports := []int{meshtest.FreePort(t), meshtest.FreePort(t), meshtest.FreePort(t), meshtest.FreePort(t)}
	var addrs []string
	for _, p := range ports {
		addrs = append(addrs, agentAddr(p))
	}
	all := strings.Join(addrs, ",")
	groups := []string{"tor-a", "tor-a", "tor-b", "tor-b"}
	var a1 *testAgent
	for i := range ports {
		name := fmt.Sprintf("node%d", i+1)
		args := []string{"--agents", all, "--group", groups[i]}
		if i == 0 {
			args = append(args, "--max-peers", "2", "--rotate", "1h")
		}
		ta := railAgent(t, name, twoRails(t, i+1), fn, ports[i], args...)
		if i == 0 {
			a1 = ta
		}
	}
	members := []pinglist.Member{{Host: "node1", Group: "tor-a"}, {Host: "node2", Group: "tor-a"},
		{Host: "node3", Group: "tor-b"}, {Host: "node4", Group: "tor-b"}}
	plan, err := pinglist.New(members, 2)
	if err != nil {
		t.Fatal(err)
	}
	// node1 probes its group-mate and the one peer of tor-b the plan gives it, on both rails.
	meshtest.WaitFor(t, 10*time.Second, "node1's pinglist", func() (bool, string) {
		want, err := plan.Targets("node1", uint64(time.Now().Unix())/3600)
		if err != nil {
			return false, err.Error()
		}
		m, err := a1.Scrape()
		if err != nil {
			return false, err.Error()
		}
		got := map[string]int{}
		ss, _ := m.Select(`gorping_target_up`)
		for _, s := range ss {
			if s.Value == 1 {
				got[s.Labels["peer"]]++
			}
		}
		ok := len(got) == len(want)
		for _, w := range want {
			ok = ok && got[w.Host] == 2
		}
		return ok, fmt.Sprintf("probing %v, want %v on 2 rails each", got, want)
	})
	a1.wait(t, `gorping_targets{source="rails"}`, eq(4))
}

// TestDuplicateNames: three agents, two of them named "node" (cloned hosts). The two
// know themselves by their instance IDs, not their names: each probes the other (as
// node~INSTANCE) and says so once at WARN, with gorping_peer_name_conflicts 1; the third
// probes both, each under its own peer name, and counts 2.
func TestDuplicateNames(t *testing.T) {
	fn := railNet(3)
	ports := []int{meshtest.FreePort(t), meshtest.FreePort(t), meshtest.FreePort(t)}
	all := agentAddr(ports[0]) + "," + agentAddr(ports[1]) + "," + agentAddr(ports[2])
	a1 := railAgent(t, "node", twoRails(t, 1), fn, ports[0], "--agents", all)
	a2 := railAgent(t, "node", twoRails(t, 2), fn, ports[1], "--agents", all)
	a3 := railAgent(t, "other", twoRails(t, 3), fn, ports[2], "--agents", all)
	peerOf := func(a *testAgent) string {
		inst := a.a.instance
		return "node~" + inst[:8]
	}
	for _, c := range []struct {
		a    *testAgent
		peer *testAgent
		addr string
	}{{a1, a2, "10.0.1.2:7174"}, {a2, a1, "10.0.1.1:7174"}, {a3, a1, "10.0.1.1:7174"}, {a3, a2, "10.0.1.2:7174"}} {
		c.a.wait(t, railSeries(c.addr, "rxe0", peerOf(c.peer)), eq(1))
	}
	a1.wait(t, `gorping_peer_name_conflicts`, eq(1))
	a2.wait(t, `gorping_peer_name_conflicts`, eq(1))
	a3.wait(t, `gorping_peer_name_conflicts`, eq(2))
	a1.wait(t, `gorping_targets{source="rails"}`, eq(4))
	time.Sleep(300 * time.Millisecond) // a few more discovery rounds: still one line
	for _, a := range []*testAgent{a1, a2} {
		logs := a.logs.String()
		if n := strings.Count(logs, "two agents answer with one name"); n != 1 {
			t.Errorf("%d warnings of the duplicate name, want 1:\n%s", n, logs)
		}
		if !strings.Contains(logs, "level=WARN") {
			t.Errorf("the duplicate name is not at WARN:\n%s", logs)
		}
		if strings.Contains(logs, "answers as this agent: skipping it") {
			t.Errorf("an agent of the same name was taken for this agent:\n%s", logs)
		}
	}
}
