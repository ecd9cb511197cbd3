package vm

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// An ECMP group between two sets of a switch's ports: the links between two
// switches, modelled inside one. Every RoCEv2 frame from a port of one side to
// a port of the other crosses one member, chosen by ECMPMember from its flow
// (UDP source port, BTH destination QP), as a fabric that hashes on the
// destination QP (Meta's E-ECMP) places RC flows. Each member can black-hole,
// lose or delay what crosses it, in both directions. Frames that are not
// RoCEv2 (ARP, neighbour discovery, IP of other protocols) cross unhashed and
// unharmed: the test bed's faults are the RDMA flows'.
type ECMP struct {
	side    []int // per switch port: 0 or 1
	members []ecmpMember

	mu    sync.Mutex
	flows map[Flow]*flowCount
}

// Flow is one direction of a RoCEv2 flow across an ECMP group: from side
// From (0 or 1) to the other, its UDP source port and BTH destination QP.
type Flow struct {
	From  int
	SPort uint16
	DQPN  uint32
}

// FlowStats is what an ECMP group saw of one Flow.
type FlowStats struct {
	Member            int
	Frames, Discarded uint64
}

type flowCount struct {
	member            int
	frames, discarded uint64
}

type ecmpMember struct {
	mu     sync.Mutex
	imp    Impairment
	rnd    *rand.Rand
	frames [2]atomic.Uint64 // crossed, per direction (from side 0, from side 1)
	lost   [2]atomic.Uint64 // discarded
}

// Impairment is what an ECMP member does to the frames that cross it.
type Impairment struct {
	Blackhole bool          // discard everything
	Loss      float64       // discard this share (0..1), at random
	Delay     time.Duration // hold each frame this long
}

// ECMPMember is the member (0..n-1) that a flow's frames cross: a hash of the
// UDP source port and the BTH destination QP, as the tests predict it from a
// path's gorping_path_info labels.
func ECMPMember(sport uint16, dqpn uint32, n int) int {
	var b [5]byte
	binary.BigEndian.PutUint16(b[0:], sport)
	b[2], b[3], b[4] = byte(dqpn>>16), byte(dqpn>>8), byte(dqpn)
	h := fnv.New32a()
	h.Write(b[:])
	return int(h.Sum32() % uint32(n))
}

// SetECMP puts an ECMP group of n members between the ports in sideB and the
// others (0-based port numbers), replacing any group before. n 0 removes it.
func (s *Switch) SetECMP(n int, sideB ...int) (*ECMP, error) {
	if n == 0 {
		s.ecmp.Store(nil)
		return nil, nil
	}
	if n < 1 || n > 64 {
		return nil, fmt.Errorf("ECMP group of %d members: 1..64", n)
	}
	g := &ECMP{side: make([]int, len(s.ports)), members: make([]ecmpMember, n), flows: map[Flow]*flowCount{}}
	for _, p := range sideB {
		if p < 0 || p >= len(s.ports) {
			return nil, fmt.Errorf("ECMP side port %d: the switch has ports 0..%d", p, len(s.ports)-1)
		}
		g.side[p] = 1
	}
	for i := range g.members {
		g.members[i].rnd = rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))
	}
	s.ecmp.Store(g)
	return g, nil
}

// Members is the group's member count.
func (g *ECMP) Members() int { return len(g.members) }

// Impair sets what member m does from now on (the zero Impairment: nothing).
func (g *ECMP) Impair(m int, imp Impairment) {
	mb := &g.members[m]
	mb.mu.Lock()
	mb.imp = imp
	mb.mu.Unlock()
}

// MemberFrames is how many RoCEv2 frames crossed member m from side from, and
// how many of those it discarded.
func (g *ECMP) MemberFrames(m, from int) (crossed, discarded uint64) {
	return g.members[m].frames[from].Load(), g.members[m].lost[from].Load()
}

// Flows is every flow the group has carried, with its member and counts.
func (g *ECMP) Flows() map[Flow]FlowStats {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[Flow]FlowStats, len(g.flows))
	for f, c := range g.flows {
		out[f] = FlowStats{Member: c.member, Frames: c.frames, Discarded: c.discarded}
	}
	return out
}

// cross decides the fate of a frame from port from to port to: false to
// discard it, else the delay to hold it first. Frames that do not cross the
// group, or are not RoCEv2, pass at once.
func (g *ECMP) cross(frame []byte, from, to int) (bool, time.Duration) {
	if g.side[from] == g.side[to] {
		return true, 0
	}
	sport, dqpn, ok := roceFlow(frame)
	if !ok {
		return true, 0
	}
	dir := g.side[from]
	m := ECMPMember(sport, dqpn, len(g.members))
	mb := &g.members[m]
	mb.mu.Lock()
	imp := mb.imp
	drop := imp.Blackhole || imp.Loss > 0 && mb.rnd.Float64() < imp.Loss
	mb.mu.Unlock()
	// Discards are counted before crossings, so a reader that sees a frame crossed
	// also sees whether it was discarded.
	if drop {
		mb.lost[dir].Add(1)
	}
	mb.frames[dir].Add(1)
	f := Flow{From: dir, SPort: sport, DQPN: dqpn}
	g.mu.Lock()
	c := g.flows[f]
	if c == nil {
		c = &flowCount{member: m}
		g.flows[f] = c
	}
	c.frames++
	if drop {
		c.discarded++
	}
	g.mu.Unlock()
	if drop {
		return false, 0
	}
	return true, imp.Delay
}

// roceFlow returns a RoCEv2 frame's UDP source port and BTH destination QP
// (IPv4 or IPv6, no VLAN tag).
func roceFlow(f []byte) (sport uint16, dqpn uint32, ok bool) {
	if !isRoCEv2(f) {
		return 0, 0, false
	}
	udp := 14 + 40
	if binary.BigEndian.Uint16(f[12:14]) == 0x0800 {
		udp = 14 + int(f[14]&0x0f)*4
	}
	bth := udp + 8
	if len(f) < bth+12 {
		return 0, 0, false
	}
	return binary.BigEndian.Uint16(f[udp:]), uint32(f[bth+5])<<16 | uint32(f[bth+6])<<8 | uint32(f[bth+7]), true
}
