// Package campaign is a fault-injection campaign for gorping mesh: a simulated
// rail-optimised fabric (hosts with R rails, a ToR per group and rail, spines per rail,
// ECMP over the ToR uplinks), the real agent code for every host behind mesh.NewIn's
// seams, the agents' metrics appended into Prometheus' TSDB and the shipped rules
// evaluated on it, all on testing/synctest's virtual clock. It lives under test/ and
// never in the binary.
package campaign

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net/netip"
	"sync"
	"time"

	"github.com/gorping/gorping/internal/meshenv"
	"github.com/gorping/gorping/mesh/agentdesc"
	"github.com/gorping/gorping/rping"
)

// Hash kinds of a rail's ECMP groups.
const (
	HashUDPSport = "udp_sport" // the RoCEv2 UDP source port
	HashDestQP   = "dest_qp"   // the BTH destination QP
)

// Shape is a fabric's size.
type Shape struct {
	Hosts     int // hosts, numbered 0..Hosts-1
	GroupSize int // hosts per ToR group
	Rails     int // rails per host (a ToR per group and rail)
	Spines    int // spines per rail: a ToR's ECMP group has this many uplinks
}

// Groups is the number of ToR groups.
func (s Shape) Groups() int { return (s.Hosts + s.GroupSize - 1) / s.GroupSize }

// Latencies of the model, one way.
const (
	hopLatency  = 1 * time.Microsecond    // a link plus a switch
	nicLatency  = 1500 * time.Nanosecond  // each NIC's processing, both ends
	hostLatency = 3 * time.Microsecond    // the hosts' software part of an RTT
	jitterMax   = 400 * time.Nanosecond   // uniform noise per ping
	slowExtra   = 50 * time.Microsecond   // a slow link's added latency
	stallEvery  = 20 * time.Second        // a stalled CPU stalls this often...
	stallFor    = 1500 * time.Millisecond // ...for this long (over a ping's 1s timeout)
	flapEvery   = 30 * time.Second        // a flapping NIC goes down this often...
	flapDown    = 10 * time.Second        // ...for this long
)

// isDown says whether s is down now (a flapping element in its down phase).
func (s linkState) isDown() bool {
	if s.flapSince.IsZero() {
		return s.down
	}
	return time.Since(s.flapSince)%flapEvery < flapDown
}

// uplink is the link between a ToR (group g, rail r) and spine m of that rail.
type uplink struct{ g, r, m int }

// dialKey is one path of a pair: its connections are numbered.
type dialKey struct{ src, dst, rail, path int }

// nic is host h's port on rail r.
type nic struct{ h, r int }

// tor is group g's switch on rail r.
type tor struct{ g, r int }

// linkState is what a fault does to an element.
type linkState struct {
	down      bool          // drops everything and routing knows (NIC, ToR)
	flapSince time.Time     // non-zero: down for flapDown of every flapEvery from then (a flapping NIC)
	blackhole bool          // drops everything, routing does not know (ECMP member)
	loss      float64       // drops this share of packets, each direction
	extra     time.Duration // added one-way latency
}

// Fabric is the simulated network: its state and the agents' responders. Safe for
// concurrent use.
type Fabric struct {
	Shape
	HashKind []string // per rail

	mu      sync.Mutex
	seed    uint64
	dials   map[dialKey]int
	nics    map[nic]linkState
	tors    map[tor]linkState
	uplinks map[uplink]linkState
	stalled map[int]time.Time // host -> when its CPU stall began
	running map[int]bool      // hosts whose agent runs (responder up)
	conns   map[*conn]bool
}

// NewFabric builds a healthy fabric. Rail r hashes with kinds[r % len(kinds)].
func NewFabric(s Shape, seed uint64, kinds ...string) *Fabric {
	f := &Fabric{Shape: s, seed: seed, dials: map[dialKey]int{}, nics: map[nic]linkState{}, tors: map[tor]linkState{},
		uplinks: map[uplink]linkState{}, stalled: map[int]time.Time{}, running: map[int]bool{}, conns: map[*conn]bool{}}
	for r := range s.Rails {
		f.HashKind = append(f.HashKind, kinds[r%len(kinds)])
	}
	return f
}

// Group is host h's group number.
func (f *Fabric) Group(h int) int { return h / f.GroupSize }

// GroupName is group g's name (the agents' --group).
func GroupName(g int) string { return fmt.Sprintf("tor%03d", g) }

// HostName is host h's agent name.
func HostName(h int) string { return fmt.Sprintf("h%04d", h) }

// Device is rail r's device name.
func Device(r int) string { return fmt.Sprintf("mlx5_%d", r) }

// RailAddr is host h's address on rail r: 10.(r+1).0.0/16.
func RailAddr(h, r int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, byte(r + 1), byte(h / 250), byte(h%250 + 1)})
}

// NodeAddr is host h's management address, where its agent listens.
func NodeAddr(h int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, 200, byte(h / 250), byte(h%250 + 1)})
}

// AgentPort is the agents' HTTP port.
const AgentPort = 10174

// hostOf maps a rail address back to its host and rail.
func (f *Fabric) hostOf(a netip.Addr) (h, r int, ok bool) {
	if !a.Is4() {
		return 0, 0, false
	}
	b := a.As4()
	if b[0] != 10 || b[1] == 0 || int(b[1]) > f.Rails || b[3] == 0 {
		return 0, 0, false
	}
	h = int(b[2])*250 + int(b[3]) - 1
	if h >= f.Hosts {
		return 0, 0, false
	}
	return h, int(b[1]) - 1, true
}

// Rails are host h's rails as its description carries them.
func (f *Fabric) RailsOf(h int) []agentdesc.Rail {
	var out []agentdesc.Rail
	for r := range f.Rails {
		a := RailAddr(h, r)
		out = append(out, agentdesc.Rail{Device: Device(r), Port: 1, Netdev: fmt.Sprintf("ens%dnp0", r), LinkLayer: agentdesc.LinkEthernet,
			ActiveMTU: 4096, Addresses: []netip.Prefix{netip.PrefixFrom(a, 16)},
			GIDs: []agentdesc.GID{{Index: 3, GID: netip.AddrFrom16(a.As16()), Type: agentdesc.GIDTypeRoCEv2}}})
	}
	return out
}

// LocalAddrs are host h's addresses.
func (f *Fabric) LocalAddrs(h int) map[netip.Addr]bool {
	m := map[netip.Addr]bool{NodeAddr(h): true}
	for r := range f.Rails {
		m[RailAddr(h, r)] = true
	}
	return m
}

// SetRunning marks host h's agent (and so its responder) up or down.
func (f *Fabric) SetRunning(h int, up bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.running[h] = up
	if !up {
		// The peers' connections to it end: their next ping fails at once.
		for c := range f.conns {
			if c.dst == h {
				c.broken = true
			}
		}
	}
}

// Fault setters, each undone by calling it again with the zero state.
func (f *Fabric) SetNIC(h, r int, s linkState) { f.set(func() { f.nics[nic{h, r}] = s }) }
func (f *Fabric) SetToR(g, r int, s linkState) { f.set(func() { f.tors[tor{g, r}] = s }) }
func (f *Fabric) SetUplink(g, r, m int, s linkState) {
	f.set(func() { f.uplinks[uplink{g, r, m}] = s })
}

// SetStall starts (on) or ends host h's CPU stalls.
func (f *Fabric) SetStall(h int, on bool) {
	f.set(func() {
		if on {
			f.stalled[h] = time.Now()
		} else {
			delete(f.stalled, h)
		}
	})
}

func (f *Fabric) set(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn()
}

// member is the ECMP member (spine) group g's ToR on rail r picks for a packet of flow
// fl going toward dqp (the BTH destination QP).
func (f *Fabric) member(g, r int, sport uint16, dqp uint32) int {
	if f.HashKind[r] == HashDestQP {
		return int(dqp) % f.Spines
	}
	h := fnv.New32a()
	fmt.Fprintf(h, "%d/%d/%d", g, r, sport)
	return int(h.Sum32()) % f.Spines
}

// way is one direction's outcome: dropped, or its latency.
type way struct {
	dead  bool // a hard drop (down, black hole)
	loss  float64
	extra time.Duration
	hops  int
}

func (w *way) add(s linkState) {
	if s.isDown() || s.blackhole {
		w.dead = true
	}
	w.loss = 1 - (1-w.loss)*(1-s.loss)
	w.extra += s.extra
}

// path is one direction from host a to host b on rail r, the ToR of a hashing with
// sport and dqp. Called with f.mu held.
func (f *Fabric) path(a, b, r int, sport uint16, dqp uint32) way {
	var w way
	ga, gb := f.Group(a), f.Group(b)
	w.add(f.nics[nic{a, r}])
	w.add(f.tors[tor{ga, r}])
	w.add(f.nics[nic{b, r}])
	w.hops = 2
	if ga != gb {
		m := f.member(ga, r, sport, dqp)
		w.add(f.uplinks[uplink{ga, r, m}])
		w.add(f.uplinks[uplink{gb, r, m}])
		w.add(f.tors[tor{gb, r}])
		w.hops = 4
	}
	return w
}

// reachable says whether the CM's exchange from a to b on rail r gets through: the
// NICs and ToRs are up (a black-holed or lossy uplink is hashed per flow and the CM's
// MADs are retried, so only what routing knows is down stops a dial). f.mu held.
func (f *Fabric) reachable(a, b, r int) bool {
	ga, gb := f.Group(a), f.Group(b)
	if f.nics[nic{a, r}].isDown() || f.nics[nic{b, r}].isDown() || f.tors[tor{ga, r}].isDown() || f.tors[tor{gb, r}].isDown() {
		return false
	}
	return true
}

// Dialer is host h's meshenv dial function.
func (f *Fabric) Dialer(h int) func(ctx context.Context, src netip.Addr, addr netip.AddrPort, path int, log io.Writer) (meshenv.ProbeConn, error) {
	return func(ctx context.Context, src netip.Addr, addr netip.AddrPort, path int, _ io.Writer) (meshenv.ProbeConn, error) {
		sh, sr, ok := f.hostOf(src)
		dh, dr, ok2 := f.hostOf(addr.Addr())
		if !ok || !ok2 || sh != h || sr != dr {
			// No route from this rail to that address: rdma_cm's address resolution.
			return nil, &rping.ProbeError{Reason: rping.ReasonAddrError, Err: fmt.Errorf("no route from %s to %s", src, addr)}
		}
		f.mu.Lock()
		reach := f.reachable(sh, dh, sr)
		running := f.running[dh]
		f.mu.Unlock()
		if !reach {
			// The REQ goes unanswered until the connect timeout (the agent bounds it by ctx).
			t := time.NewTimer(5 * time.Second)
			defer t.Stop()
			select {
			case <-ctx.Done():
				return nil, &rping.ProbeError{Reason: rping.ReasonCanceled, Err: ctx.Err()}
			case <-t.C:
			}
			return nil, &rping.ProbeError{Reason: rping.ReasonUnreachable, Err: fmt.Errorf("%s: no answer to the connection request", addr)}
		}
		if !running {
			return nil, &rping.ProbeError{Reason: rping.ReasonConnectRefused, Err: fmt.Errorf("%s: connection refused", addr)}
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		// The connection's draws (its QPs, rdma_cm port, losses) come from the seed, the
		// path and how many times it was dialled, not from the order in which the
		// agents' goroutines dial: a run replays from its seed.
		k := dialKey{sh, dh, sr, path}
		f.dials[k]++
		h := fnv.New64a()
		fmt.Fprintf(h, "%d/%d/%d/%d/%d/%d", f.seed, sh, dh, sr, path, f.dials[k])
		rnd := rand.New(rand.NewPCG(h.Sum64(), 1))
		c := &conn{f: f, src: sh, dst: dh, rail: sr, rnd: rnd}
		cmPort := uint16(rnd.IntN(28232) + 32768)
		fl := (uint32(cmPort)*31 + uint32(addr.Port())) & 0xFFFFF
		c.flow = rping.Flow{LocalQPN: 0x100 + rnd.Uint32N(0xFFFF00), RemoteQPN: 0x100 + rnd.Uint32N(0xFFFF00), SrcPort: cmPort,
			DstPort: addr.Port(), UDPSourcePort: uint16((fl&0x3FFF)^((fl&0xFC000)>>14)) | 0xC000}
		f.conns[c] = true
		return c, nil
	}
}

// conn is one probing connection over the fabric.
type conn struct {
	f               *Fabric
	src, dst, rail  int
	flow            rping.Flow
	rnd             *rand.Rand
	broken          bool // the peer's agent went away
	closed          bool
	lastNIC, lastSW time.Duration
	split           bool
}

func (c *conn) Ping(timeout time.Duration) (time.Duration, error) {
	f := c.f
	f.mu.Lock()
	if c.closed || c.broken {
		f.mu.Unlock()
		return 0, &rping.ProbeError{Reason: rping.ReasonDisconnected, Err: fmt.Errorf("connection closed")}
	}
	fwd := f.path(c.src, c.dst, c.rail, c.flow.UDPSourcePort, c.flow.RemoteQPN)
	rev := f.path(c.dst, c.src, c.rail, c.flow.UDPSourcePort, c.flow.LocalQPN)
	// A CPU stall holds the prober's or the responder's software part of the ping.
	var held time.Duration
	now := time.Now()
	for _, h := range []int{c.src, c.dst} {
		if at, ok := f.stalled[h]; ok {
			phase := now.Sub(at) % stallEvery
			if phase < stallFor {
				held = max(held, stallFor-phase)
			}
		}
	}
	f.mu.Unlock()
	lost := fwd.dead || rev.dead || c.rnd.Float64() < fwd.loss || c.rnd.Float64() < rev.loss
	if !lost && held > 0 && held >= timeout {
		lost = true
	}
	if lost {
		// rping's RC ping: the NIC's retries run out, the ping times out, the QP is spent.
		if timeout > 0 {
			time.Sleep(timeout)
		}
		c.split = false
		return 0, &rping.ProbeError{Reason: rping.ReasonTimeout, Err: fmt.Errorf("ping timed out after %s", timeout)}
	}
	network := time.Duration(fwd.hops+rev.hops)*hopLatency + 2*nicLatency + fwd.extra + rev.extra +
		time.Duration(c.rnd.Int64N(int64(jitterMax)))
	host := hostLatency + held
	if held > 0 {
		time.Sleep(held)
	}
	c.lastNIC, c.lastSW, c.split = network, host, true
	return network + host, nil
}

func (c *conn) LastSplit() (nic, host time.Duration, ok bool) { return c.lastNIC, c.lastSW, c.split }
func (c *conn) TSSource() string                              { return "nic" }
func (c *conn) Done() <-chan struct{}                         { return nil }
func (c *conn) Device() string                                { return Device(c.rail) }
func (c *conn) Port() int                                     { return 1 }
func (c *conn) Flow() rping.Flow                              { return c.flow }
func (c *conn) Close() error {
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	c.closed = true
	delete(c.f.conns, c)
	return nil
}
