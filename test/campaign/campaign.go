package campaign

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gorping/gorping/internal/meshenv"
	"github.com/gorping/gorping/mesh"
	"github.com/gorping/gorping/mesh/agentdesc"
)

// Fault kinds.
const (
	KindRailDown   = "host rail down"
	KindNICFlap    = "NIC flapping"
	KindUplinkLoss = "ToR-spine loss 1-5 %"
	KindBlackSport = "ECMP black hole, UDP sport hash"
	KindBlackQP    = "ECMP black hole, dest QP hash"
	KindToRDown    = "whole ToR down"
	KindSlowLink   = "slow link +50 µs"
	KindCPUStall   = "host CPU stall"
	KindRestart    = "agent restart"
	KindRailCut    = "rail cut at fleet start"
)

// Kinds are every kind, in the table's order (KindRailCut is always the first fault:
// it begins with the fleet).
var Kinds = []string{KindRailDown, KindNICFlap, KindUplinkLoss, KindBlackSport, KindBlackQP, KindToRDown,
	KindSlowLink, KindCPUStall, KindRestart, KindRailCut}

// hard faults are to be detected within 2 minutes, gray ones within 5; quiet ones are
// not network faults and should raise nothing (recall does not apply).
func kindClass(k string) string {
	switch k {
	case KindUplinkLoss, KindSlowLink, KindNICFlap:
		return "gray"
	case KindCPUStall, KindRestart:
		return "quiet"
	}
	return "hard"
}

// Config is one campaign.
type Config struct {
	Shape
	Paths, MaxPeers int
	Interval        time.Duration
	Seed            uint64
	Quiet           time.Duration // the fault-free time after the fleet start (the rail cut excepted)
	FaultFor        time.Duration // how long each fault lasts
	Gap             time.Duration // between a repair and the next fault
	Kinds           []string      // the kinds injected (KindRailCut is injected when listed)
	Pairs           bool          // then pairs of kinds, two at once
	Rules           []string      // the rule files
	Progress        io.Writer     // a line per fault; nil: none
	Debug           []string      // expressions printed on Progress at every minute
}

// scrapeEvery is the scrape and rule evaluation interval (the shipped prometheus.yml's).
const scrapeEvery = 15 * time.Second

// Fault is one injected fault: what, where, when.
type Fault struct {
	Kind       string
	Host, Rail int // rail down, flap, cut, stall, restart: the host; its rail
	Group      int // ToR, uplink faults: the group (ToR) on Rail
	Spine      int // uplink faults: the member
	Loss       float64
	Start, End time.Time
	Pair       bool // injected two at once
}

func (f Fault) String() string {
	switch f.Kind {
	case KindToRDown:
		return fmt.Sprintf("%s: %s rail %d", f.Kind, GroupName(f.Group), f.Rail)
	case KindUplinkLoss:
		return fmt.Sprintf("%s: %s rail %d spine %d, %.1f %%", f.Kind, GroupName(f.Group), f.Rail, f.Spine, f.Loss*100)
	case KindBlackSport, KindBlackQP, KindSlowLink:
		return fmt.Sprintf("%s: %s rail %d spine %d", f.Kind, GroupName(f.Group), f.Rail, f.Spine)
	case KindCPUStall, KindRestart:
		return fmt.Sprintf("%s: %s", f.Kind, HostName(f.Host))
	}
	return fmt.Sprintf("%s: %s rail %d", f.Kind, HostName(f.Host), f.Rail)
}

// fleet runs an agent per host over the fabric.
type fleet struct {
	cfg  Config
	fab  *Fabric
	net  *memNet
	mu   sync.Mutex
	runs map[int]*agentRun
}

type agentRun struct {
	cancel context.CancelFunc
	done   chan error
	g      prometheus.Gatherer
}

func (fl *fleet) agentConfig(h int) mesh.Config {
	c := mesh.DefaultConfig()
	c.AgentName, c.Group = HostName(h), GroupName(fl.fab.Group(h))
	for i := range fl.fab.Hosts {
		c.Agents = append(c.Agents, netip.AddrPortFrom(NodeAddr(i), AgentPort).String())
	}
	c.Paths, c.MaxPeers, c.Interval = fl.cfg.Paths, fl.cfg.MaxPeers, fl.cfg.Interval
	c.Log, c.Version = io.Discard, "campaign"
	if h == 0 && len(fl.cfg.Debug) > 0 && fl.cfg.Progress != nil {
		c.Log = fl.cfg.Progress // one agent's log, to see what it does
	}
	return c
}

func (fl *fleet) start(h int) error {
	ln, err := fl.net.listen(netip.AddrPortFrom(NodeAddr(h), AgentPort).String())
	if err != nil {
		return err
	}
	run := &agentRun{done: make(chan error, 1)}
	a, err := mesh.NewIn(fl.agentConfig(h), meshenv.Env{
		Dial:      fl.fab.Dialer(h),
		Local:     func() map[netip.Addr]bool { return fl.fab.LocalAddrs(h) },
		Rails:     func() []agentdesc.Rail { return fl.fab.RailsOf(h) },
		Listener:  ln,
		AgentDial: fl.net.dial,
		Registered: func(g prometheus.Gatherer) {
			run.g = g
		},
	})
	if err != nil {
		ln.Close()
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	run.cancel = cancel
	fl.fab.SetRunning(h, true)
	go func() { run.done <- a.Run(ctx) }()
	fl.mu.Lock()
	fl.runs[h] = run
	fl.mu.Unlock()
	return nil
}

func (fl *fleet) stop(h int) error {
	fl.mu.Lock()
	run := fl.runs[h]
	delete(fl.runs, h)
	fl.mu.Unlock()
	if run == nil {
		return nil
	}
	fl.fab.SetRunning(h, false)
	run.cancel()
	return <-run.done
}

func (fl *fleet) gatherer(h int) prometheus.Gatherer {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if r := fl.runs[h]; r != nil {
		return r.g
	}
	return nil
}

// plan draws the faults: the rail cut at the start, then every kind alone, then (with
// Pairs) each kind with the next one at once, each at a fresh place.
func plan(cfg Config, t0 time.Time) []Fault {
	rnd := rand.New(rand.NewPCG(cfg.Seed, 0xfa17))
	s := cfg.Shape
	place := func(k string, avoidGroup int) Fault {
		f := Fault{Kind: k}
		for {
			f.Host = rnd.IntN(s.Hosts)
			f.Group = rnd.IntN(s.Groups())
			if f.Host/s.GroupSize != avoidGroup && f.Group != avoidGroup {
				break
			}
		}
		f.Rail = rnd.IntN(s.Rails)
		f.Spine = rnd.IntN(s.Spines)
		switch k {
		case KindUplinkLoss:
			f.Loss = 0.01 + 0.04*rnd.Float64()
		case KindBlackSport, KindBlackQP:
			// A rail hashing the way the kind says.
			want := HashUDPSport
			if k == KindBlackQP {
				want = HashDestQP
			}
			for r := range s.Rails {
				if hashKind(r) == want {
					f.Rail = r
					break
				}
			}
		}
		return f
	}
	var out []Fault
	has := func(k string) bool {
		for _, x := range cfg.Kinds {
			if x == k {
				return true
			}
		}
		return false
	}
	if has(KindRailCut) {
		f := place(KindRailCut, -1)
		f.Start, f.End = t0, t0.Add(cfg.FaultFor)
		out = append(out, f)
	}
	at := t0.Add(cfg.Quiet)
	var alone []string
	for _, k := range cfg.Kinds {
		if k != KindRailCut {
			alone = append(alone, k)
		}
	}
	for _, k := range alone {
		f := place(k, -1)
		f.Start, f.End = at, at.Add(cfg.FaultFor)
		out = append(out, f)
		at = f.End.Add(cfg.Gap)
	}
	if cfg.Pairs {
		for i, k := range alone {
			a := place(k, -1)
			b := place(alone[(i+1)%len(alone)], groupOf(a, s))
			for _, f := range []*Fault{&a, &b} {
				f.Start, f.End, f.Pair = at, at.Add(cfg.FaultFor), true
			}
			out = append(out, a, b)
			at = a.End.Add(cfg.Gap)
		}
	}
	return out
}

// groupOf is the group a fault is in.
func groupOf(f Fault, s Shape) int {
	switch f.Kind {
	case KindToRDown, KindUplinkLoss, KindBlackSport, KindBlackQP, KindSlowLink:
		return f.Group
	}
	return f.Host / s.GroupSize
}

// hashKind is rail r's ECMP hash: even rails the UDP source port, odd ones the QP.
func hashKind(r int) string {
	if r%2 == 0 {
		return HashUDPSport
	}
	return HashDestQP
}

// apply starts (on) or repairs a fault.
func (fl *fleet) apply(f Fault, on bool, now time.Time) error {
	fab := fl.fab
	var s linkState
	switch f.Kind {
	case KindRailDown, KindRailCut:
		s.down = on
		fab.SetNIC(f.Host, f.Rail, s)
	case KindNICFlap:
		if on {
			s.flapSince = now
		}
		fab.SetNIC(f.Host, f.Rail, s)
	case KindToRDown:
		s.down = on
		fab.SetToR(f.Group, f.Rail, s)
	case KindUplinkLoss:
		if on {
			s.loss = f.Loss
		}
		fab.SetUplink(f.Group, f.Rail, f.Spine, s)
	case KindBlackSport, KindBlackQP:
		s.blackhole = on
		fab.SetUplink(f.Group, f.Rail, f.Spine, s)
	case KindSlowLink:
		if on {
			s.extra = slowExtra
		}
		fab.SetUplink(f.Group, f.Rail, f.Spine, s)
	case KindCPUStall:
		fab.SetStall(f.Host, on)
	case KindRestart:
		if on {
			return fl.stop(f.Host)
		}
		return fl.start(f.Host)
	}
	return nil
}

// restartDown is how long a restarting agent is away.
const restartDown = 30 * time.Second

// Result is a campaign's outcome.
type Result struct {
	Cfg     Config
	Faults  []Fault
	Ticks   []tick
	Elapsed time.Duration // fabric time
}

type tick struct {
	at     time.Time
	firing map[alertKey]firingAlert
}

// Run runs the campaign. It must run inside a synctest bubble (its clock is virtual).
func Run(cfg Config) (*Result, error) {
	fab := NewFabric(cfg.Shape, cfg.Seed, HashUDPSport, HashDestQP)
	fl := &fleet{cfg: cfg, fab: fab, net: newMemNet(), runs: map[int]*agentRun{}}
	p, err := newProm(cfg.Rules, scrapeEvery)
	if err != nil {
		return nil, err
	}
	defer p.close()
	t0 := time.Now()
	faults := plan(cfg, t0)
	end := t0.Add(cfg.Quiet)
	for _, f := range faults {
		end = maxTime(end, f.End.Add(cfg.Gap))
	}
	// The rail cut is there before the fleet starts.
	for _, f := range faults {
		if f.Kind == KindRailCut {
			fl.apply(f, true, t0)
			logf(cfg.Progress, "t=%s start %s", time.Duration(0), f)
		}
	}
	for h := range cfg.Hosts {
		if err := fl.start(h); err != nil {
			return nil, fmt.Errorf("agent %s: %w", HostName(h), err)
		}
	}
	defer func() {
		for h := range cfg.Hosts {
			fl.stop(h)
		}
	}()
	res := &Result{Cfg: cfg, Faults: faults}
	type event struct {
		at  time.Time
		f   Fault
		on  bool
		msg string
	}
	var events []event
	for _, f := range faults {
		if f.Kind != KindRailCut {
			events = append(events, event{at: f.Start, f: f, on: true})
		}
		if f.Kind == KindRestart {
			events = append(events, event{at: f.Start.Add(restartDown), f: f, on: false})
		} else {
			events = append(events, event{at: f.End, f: f, on: false})
		}
	}
	for now := t0; !now.After(end); now = now.Add(scrapeEvery) {
		// Events between the last tick and this one, at their own times.
		for {
			next := -1
			for i, e := range events {
				if !e.at.After(now) && (next < 0 || e.at.Before(events[next].at)) {
					next = i
				}
			}
			if next < 0 {
				break
			}
			e := events[next]
			events = append(events[:next], events[next+1:]...)
			sleepUntil(e.at)
			if err := fl.apply(e.f, e.on, e.at); err != nil {
				return nil, fmt.Errorf("%s: %w", e.f, err)
			}
			verb := "start"
			if !e.on {
				verb = "repair"
			}
			logf(cfg.Progress, "t=%s %s %s", e.at.Sub(t0), verb, e.f)
		}
		sleepUntil(now)
		for h := range cfg.Hosts {
			inst := netip.AddrPortFrom(NodeAddr(h), AgentPort).String()
			if err := p.scrape(inst, fl.gatherer(h), now); err != nil {
				return nil, fmt.Errorf("scrape %s: %w", inst, err)
			}
		}
		p.eval(now)
		if now.Sub(t0)%time.Minute == 0 {
			for _, q := range cfg.Debug {
				logf(cfg.Progress, "t=%s %s:\n%s", now.Sub(t0), q, p.query(q, now))
			}
		}
		res.Ticks = append(res.Ticks, tick{at: now, firing: p.firing()})
	}
	res.Elapsed = end.Sub(t0)
	return res, nil
}

func sleepUntil(t time.Time) {
	if d := time.Until(t); d > 0 {
		time.Sleep(d)
	}
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func logf(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format+"\n", args...)
	}
}

// named is what an alert names: source and target host, rail, groups.
type named struct {
	src, dst   int // hosts, -1: none
	rail       int // -1: none
	groups     []int
	alertName  string
	exactHost  int // TargetRailDown's peer, SourceRailDown's agent
	pathLevel  bool
	groupLevel bool
}

func parseHost(name string) int {
	if !strings.HasPrefix(name, "h") {
		return -1
	}
	n, err := strconv.Atoi(name[1:])
	if err != nil {
		return -1
	}
	return n
}

func parseGroup(name string) int {
	if !strings.HasPrefix(name, "tor") {
		return -1
	}
	n, err := strconv.Atoi(name[3:])
	if err != nil {
		return -1
	}
	return n
}

func (fab *Fabric) hostOfAddrPort(s string) (int, int) {
	host, _, err := net.SplitHostPort(s)
	if err != nil {
		return -1, -1
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return -1, -1
	}
	if h, r, ok := fab.hostOf(a); ok {
		return h, r
	}
	b := a.As4()
	if b[0] == 10 && b[1] == 200 {
		return int(b[2])*250 + int(b[3]) - 1, -1
	}
	return -1, -1
}

func (fab *Fabric) parseAlert(a firingAlert) named {
	n := named{src: -1, dst: -1, rail: -1, exactHost: -1, alertName: a.name}
	l := a.labels
	if v := l.Get("instance"); v != "" {
		n.src, _ = fab.hostOfAddrPort(v)
	}
	if v := l.Get("agent"); v != "" {
		n.src = parseHost(v)
	}
	if v := l.Get("target"); v != "" {
		n.dst, n.rail = fab.hostOfAddrPort(v)
	}
	if v := l.Get("peer"); v != "" {
		n.dst = parseHost(v)
	}
	if v := l.Get("device"); strings.HasPrefix(v, "mlx5_") {
		n.rail, _ = strconv.Atoi(v[5:])
	}
	for _, k := range []string{"group", "peer_group"} {
		if g := parseGroup(l.Get(k)); g >= 0 {
			n.groups = append(n.groups, g)
		}
	}
	switch a.name {
	case "GorpingTargetRailDown", "GorpingTargetRailLoss":
		n.exactHost = n.dst
	case "GorpingSourceRailDown":
		n.exactHost = n.src
		n.groups = nil
	case "GorpingPathBlackhole":
		n.pathLevel = true
	case "GorpingGroupPairLoss", "GorpingGroupPairLatency", "GorpingFlowBlackhole", "GorpingGroupRailDown":
		// A pair of groups on a rail, or one group's switch on it (GroupRailDown).
		n.groupLevel = true
	}
	return n
}

// judge says whether alert n names fault f (match) and names its culprit (exact).
func (fab *Fabric) judge(f Fault, n named) (match, exact bool) {
	g := fab.Group
	ends := func(h int) bool { return n.src == h || n.dst == h }
	inGroup := func(x int) bool { return x >= 0 && g(x) == f.Group }
	switch f.Kind {
	case KindRailDown, KindRailCut, KindNICFlap:
		if n.rail != f.Rail && n.rail >= 0 {
			return false, false
		}
		if n.exactHost == f.Host {
			return true, true
		}
		return ends(f.Host) && !n.groupLevel, false
	case KindToRDown:
		if n.rail != f.Rail {
			return false, false
		}
		if n.groupLevel {
			for _, x := range n.groups {
				if x == f.Group {
					return true, true
				}
			}
			return false, false
		}
		if n.exactHost >= 0 {
			return inGroup(n.exactHost), false
		}
		return inGroup(n.src) || inGroup(n.dst), false
	case KindUplinkLoss, KindBlackSport, KindBlackQP, KindSlowLink:
		if n.rail != f.Rail {
			return false, false
		}
		if n.groupLevel {
			if len(n.groups) == 2 && n.groups[0] != n.groups[1] && (n.groups[0] == f.Group || n.groups[1] == f.Group) {
				return true, true
			}
			return false, false
		}
		cross := n.src >= 0 && n.dst >= 0 && g(n.src) != g(n.dst) && (inGroup(n.src) || inGroup(n.dst))
		return cross, cross && n.pathLevel
	case KindCPUStall, KindRestart:
		if n.exactHost == f.Host || ends(f.Host) {
			return true, false
		}
		if n.alertName == "GorpingAgentDown" && n.src == f.Host {
			return true, true
		}
	}
	return false, false
}
