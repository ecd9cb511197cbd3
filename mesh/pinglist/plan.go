package pinglist

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math/bits"
	"slices"
	"strings"
	"sync/atomic"
)

// Plan is the pinglist of every member for a membership and a budget; Targets gives one
// member's list for an epoch. Every agent builds the same Plan from the same membership,
// in whatever order it learnt the members, so their lists fit together. A Plan is safe
// for concurrent use.
type Plan struct {
	budget int     // K: targets per agent, at most members-1
	groups []group // by name
	byHost map[string]ref
	turn   uint64                   // epochs an agent keeps its block of inter-group slots (turnFor)
	want   int64                    // all groups' fill weights
	fills  []atomic.Pointer[[]pick] // each group's fill sequence, made when first needed
}

type group struct {
	name  string
	hosts []string // by name
	start int      // index of hosts[0] among all members, in plan order
	intra int      // group-mates each agent probes
	inter int      // inter-group slots of each agent
	fill  int64    // slots beyond one per other group (0 if short)
	want  int64    // its weight as a fill target: spare capacity, times G-1 (weights)
	hash  uint64   // FNV-1a of the name: fill offsets that do not move when groups come and go
}

type ref struct{ group, rank int }

// New makes the plan of members with a budget of maxPeers targets per agent (0: no
// budget, every agent probes every other). It refuses an empty host, a bad name and a
// host listed twice.
func New(members []Member, maxPeers int) (*Plan, error) {
	if len(members) > MaxMembers {
		return nil, fmt.Errorf("%d members (at most %d)", len(members), MaxMembers)
	}
	if maxPeers < 0 {
		return nil, fmt.Errorf("max peers %d: must be 0 (no limit) or more", maxPeers)
	}
	byName := map[string][]string{}
	p := &Plan{byHost: make(map[string]ref, len(members))}
	for _, m := range members {
		if err := errors.Join(CheckHost(m.Host), CheckGroup(m.Group)); err != nil {
			return nil, err
		}
		if _, dup := p.byHost[m.Host]; dup {
			return nil, fmt.Errorf("host %q is a member twice", m.Host)
		}
		p.byHost[m.Host] = ref{}
		byName[m.Group] = append(byName[m.Group], m.Host)
	}
	n := len(members)
	p.budget = n - 1
	if maxPeers > 0 && maxPeers < p.budget {
		p.budget = maxPeers
	}
	names := make([]string, 0, len(byName))
	for g := range byName {
		names = append(names, g)
	}
	slices.Sort(names)
	others := int64(len(names) - 1) // groups each group must reach to cover its pairs
	largest, start := 0, 0
	for gi, name := range names {
		hosts := byName[name]
		slices.Sort(hosts)
		for r, h := range hosts {
			p.byHost[h] = ref{gi, r}
		}
		fnv := fnv.New64a()
		fnv.Write([]byte(name))
		g := group{name: name, hosts: hosts, start: start, hash: fnv.Sum64()}
		start += len(hosts)
		largest = max(largest, len(hosts))
		size, outside := len(hosts), n-len(hosts)
		if size-1 < p.budget || size-1 == p.budget && (len(names) == 1 || p.budget < 2) {
			g.intra = size - 1
			g.inter = min(p.budget-g.intra, outside)
		} else {
			// As many group-mates as budget or more: keep the inter-group slots the group
			// needs to reach every other group (at most half the budget) and sample the
			// group, rather than leave it blind to the others.
			need := int((others + int64(size) - 1) / int64(size))
			g.inter = min(need, p.budget/2, outside)
			g.intra = p.budget - g.inter
		}
		if s := int64(size) * int64(g.inter); s >= others {
			g.fill = s - others
		}
		p.groups = append(p.groups, g)
	}
	p.turn = turnFor(largest)
	p.fills = make([]atomic.Pointer[[]pick], len(p.groups))
	p.weights()
	return p, nil
}

// weights sets each group's weight as a fill target: how far its slots, n·r (what it
// should be probed from other groups, so that its hosts are probed about K times), exceed
// the coverage slots it gets anyway (one from each covering group, and a share of the
// short groups' slots, which spread over G-1 groups). Times G-1, to stay in integers.
// Short groups get none: they are probed by every covering group already.
func (p *Plan) weights() {
	others := int64(len(p.groups) - 1)
	var covering, shortSlots int64
	for _, g := range p.groups {
		if s := int64(len(g.hosts)) * int64(g.inter); s >= others {
			covering++
		} else {
			shortSlots += s
		}
	}
	for i := range p.groups {
		g := &p.groups[i]
		s := int64(len(g.hosts)) * int64(g.inter)
		if s < others {
			continue
		}
		got := (covering-1)*others + shortSlots
		if w := s*others - got; w > 0 {
			g.want = w
			p.want += w
		}
	}
}

// turnFor is how many epochs an agent keeps its inter-group slots while their members
// move on: at least the largest group, so that each holder meets every member. It is the
// smallest 2^k or 3·2^(k-1) at least largest (at most 1.5 times it), so that it changes, and
// with it every holder, only when the largest group crosses one of those sizes.
func turnFor(largest int) uint64 {
	for t := uint64(1); ; t <<= 1 {
		if t >= uint64(largest) {
			return t
		}
		if t >= 2 && 3*t/2 >= uint64(largest) {
			return 3 * t / 2
		}
	}
}

// Members is how many members the plan has.
func (p *Plan) Members() int { return len(p.byHost) }

// Targets is host's pinglist in epoch: its group-mates (all of them, or a sample
// rotating with the epoch when the group is larger than the budget) and peers of other
// groups, at most the budget in all, each once, never host itself; by host name.
func (p *Plan) Targets(host string, epoch uint64) ([]Member, error) {
	me, ok := p.byHost[host]
	if !ok {
		return nil, fmt.Errorf("%q is not a member", host)
	}
	g := &p.groups[me.group]
	out := make([]Member, 0, g.intra+g.inter)
	size := len(g.hosts)
	if g.intra == size-1 {
		for r, h := range g.hosts {
			if r != me.rank {
				out = append(out, Member{h, g.name})
			}
		}
	} else {
		// A window of g.intra offsets that moves on by its own length every epoch: each
		// offset is a permutation of the group, so every agent is probed g.intra times.
		span := uint64(size - 1)
		w := (epoch % span) * uint64(g.intra) % span
		for t := 0; t < g.intra; t++ {
			off := 1 + int((w+uint64(t))%span)
			out = append(out, Member{g.hosts[(me.rank+off)%size], g.name})
		}
	}
	if g.inter == p.Members()-size { // every host outside the group
		for b := range p.groups {
			if b != me.group {
				for _, h := range p.groups[b].hosts {
					out = append(out, Member{h, p.groups[b].name})
				}
			}
		}
	} else {
		taken := newIDSet(g.inter, p.Members())
		p.inter(me, epoch, func(b, m int) {
			id := p.groups[b].start + m
			if taken.has(id) {
				b, id = p.nextFree(taken, me.group, b, m)
			}
			taken.add(id)
			out = append(out, Member{p.groups[b].hosts[id-p.groups[b].start], p.groups[b].name})
		})
	}
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.Host, b.Host) })
	return out, nil
}

// inter calls slot(group, rank) for each inter-group slot of agent me in epoch, before
// duplicates are resolved.
//
// Group A's n·r slots are positions 0..n·r-1: position o-1 (o = 1..G-1) probes the group
// o after A in name order (one slot per other group: the coverage slots), the rest are
// fill slots (fillSequence). The agent of rank i holds the block of r positions
// (i - u) mod n, where u = clock/turn: every turn epochs each agent takes over the next
// agent's block. The slot's member in group B is (B's first member for A + clock +
// layer) mod |B|, where the first member spreads B's sources evenly over its members
// (floor(place·|B|/(G-1)) for A's place among B's G-1 sources) and the layer counts A's
// earlier slots to B: B's incoming slots are spread over its members and move on by one
// every epoch.
//
// A group with fewer slots than other groups (short) sweeps them in rounds of
// C = ceil((G-1)/(n·r)) epochs, a window of n·r groups an epoch, and its clock counts
// rounds: what a covering group does in an epoch, it does in a round.
//
// Positions, blocks and first members are all ranges, not residues, so that a member or
// group that comes or goes moves only the slots at the edges of the ranges it shifts.
func (p *Plan) inter(me ref, epoch uint64, slot func(group, rank int)) {
	G := len(p.groups)
	g := &p.groups[me.group]
	if G == 1 || g.inter == 0 {
		return
	}
	n, r := uint64(len(g.hosts)), uint64(g.inter)
	others := uint64(G - 1)
	total := n * r
	clock, phase := epoch, uint64(0)
	short := total < others
	if short {
		rounds := (others + total - 1) / total
		clock, phase = epoch/rounds, epoch%rounds
	}
	block := (uint64(me.rank) + n - clock/p.turn%n) % n
	lo, hi := block*r, block*r+r
	var fill []pick
	if !short && hi > others {
		fill = p.fillOf(me.group)
	}
	for pos := lo; pos < hi; pos++ {
		var off int
		var layer uint64
		switch {
		case short:
			off = 1 + int((phase*total+pos)%others)
		case pos < others:
			off = 1 + int(pos)
		default:
			f := fill[pos-others]
			off, layer = int(f.off), 1+uint64(f.layer)
		}
		b := (me.group + off) % G
		size := uint64(len(p.groups[b].hosts))
		place := uint64((me.group - b - 1 + G) % G) // A's place among B's G-1 sources
		first := place * size / others
		slot(b, int((first+clock%size+layer)%size))
	}
}

// fillOf is group a's whole fill sequence, made once: it depends on the membership
// alone. Two callers may both make it; they make the same.
func (p *Plan) fillOf(a int) []pick {
	if f := p.fills[a].Load(); f != nil {
		return *f
	}
	f := p.fillSequence(a, int(p.groups[a].fill))
	p.fills[a].Store(&f)
	return f
}

// pick is one fill slot: the target group's offset after the source, and how many fill
// slots to it come before.
type pick struct{ off, layer int32 }

// fillSequence is the first count fill slots of group a: the other groups in the order
// of a divisor method over their fill weights (weights): each next slot goes to the
// group with the largest w/(f+u), f its slots so far and u in (0, 1] a hash of the two
// groups' names. Every prefix is then a share in proportion to the weights, and a longer
// sequence only adds slots at its end: a group whose budget changes moves few of its
// slots. The hash makes each source round differently: with one rounding for all (u the
// same everywhere), a group whose share of each source's fill is under half a slot would
// get none from any. With no weight anywhere else the groups share equally.
func (p *Plan) fillSequence(a, count int) []pick {
	G := len(p.groups)
	equal := p.want == p.groups[a].want
	h := make(fillHeap, 0, G-1)
	for off := 1; off < G; off++ {
		b := (a + off) % G
		w := p.groups[b].want
		if equal {
			w = 1
		}
		if w > 0 {
			u := mix(p.groups[a].hash, p.groups[b].hash)>>32 + 1 // 1..2^32: u·2^32
			h = append(h, fillEntry{w: w, u: u, off: int32(off)})
		}
	}
	h.init()
	out := make([]pick, count)
	for i := range out {
		out[i] = pick{h[0].off, h[0].f}
		h[0].f++
		h.down(0)
	}
	return out
}

type fillEntry struct {
	w   int64  // fill weight
	u   uint64 // the divisor's offset, times 2^32
	f   int32  // slots so far
	off int32  // offset after the source
}

// before: e's next slot comes before o's: w_e/(f_e+u_e) > w_o/(f_o+u_o), compared as
// 128-bit products (weights < 2^60, divisors < 2^64).
func (e *fillEntry) before(o *fillEntry) bool {
	h1, l1 := bits.Mul64(uint64(e.w), uint64(o.f)<<32+o.u)
	h2, l2 := bits.Mul64(uint64(o.w), uint64(e.f)<<32+e.u)
	if h1 != h2 || l1 != l2 {
		return h1 > h2 || h1 == h2 && l1 > l2
	}
	return e.off < o.off
}

type fillHeap []fillEntry

func (h fillHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h fillHeap) down(i int) {
	for {
		c := 2*i + 1
		if c >= len(h) {
			return
		}
		if c+1 < len(h) && h[c+1].before(&h[c]) {
			c++
		}
		if !h[c].before(&h[i]) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}

// mix is a 64-bit mix of two names' hashes (splitmix64's finaliser), ordered: the
// tie-break of group a's fill slots between groups of equal weight.
func mix(a, b uint64) uint64 {
	x := a*0x9e3779b97f4a7c15 ^ b
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// nextFree is where a slot goes whose member the agent already probes (only when a pair
// of groups has more slots than the target group has members): the next member of the
// same group, else the first free member of the following groups (never the agent's own).
func (p *Plan) nextFree(taken *idSet, own, b, m int) (int, int) {
	gb := &p.groups[b]
	for s := 1; s < len(gb.hosts); s++ {
		if id := gb.start + (m+s)%len(gb.hosts); !taken.has(id) {
			return b, id
		}
	}
	for t := 1; t < len(p.groups); t++ {
		bb := (b + t) % len(p.groups)
		if bb == own {
			continue
		}
		for r := range p.groups[bb].hosts {
			if id := p.groups[bb].start + r; !taken.has(id) {
				return bb, id
			}
		}
	}
	panic("pinglist: more inter-group slots than hosts outside the group") // New caps them
}

// idSet is the members an agent already probes in other groups: a list while it is
// short (no allocation past the budget's worth), a bitmap of all members when it is not.
type idSet struct {
	list []int
	bits []uint64
}

func newIDSet(n, members int) *idSet {
	if n <= 64 {
		return &idSet{list: make([]int, 0, n)}
	}
	return &idSet{bits: make([]uint64, (members+63)/64)}
}

func (s *idSet) has(id int) bool {
	if s.bits != nil {
		return s.bits[id/64]&(1<<(id%64)) != 0
	}
	return slices.Contains(s.list, id)
}

func (s *idSet) add(id int) {
	if s.bits != nil {
		s.bits[id/64] |= 1 << (id % 64)
		return
	}
	s.list = append(s.list, id)
}

// Summary is what a plan guarantees, for operators and logs.
type Summary struct {
	Members, Groups int
	MaxPeers        int      // the budget in effect (members-1 when there is none)
	Full            bool     // no budget short of members-1: every agent probes every other member in every epoch
	Short           []string // groups with fewer inter-group slots than other groups: their pairs are probed in turn, not every epoch
	Closed          []string // groups whose budget goes to group-mates alone: they probe no other group (also Short)
	Sampled         []string // groups larger than the budget: their agents probe a rotating sample of group-mates
	Turn            uint64   // epochs an agent keeps its inter-group slots
	PairEpochs      uint64   // from epoch 0 (and from every multiple of Turn, in a group that is not short), every pair of hosts in different groups is probed within this many epochs (if the source's group has an inter-group slot)
}

// rounds is how many epochs group g takes to probe every other group: 1, or more for a
// short group.
func (p *Plan) rounds(g group) uint64 {
	others, total := uint64(len(p.groups)-1), uint64(len(g.hosts))*uint64(g.inter)
	if total == 0 || total >= others {
		return 1
	}
	return (others + total - 1) / total
}

// Summary is the plan's Summary.
func (p *Plan) Summary() Summary {
	s := Summary{Members: p.Members(), Groups: len(p.groups), MaxPeers: p.budget, Turn: p.turn}
	s.Full = p.budget == s.Members-1
	for _, g := range p.groups {
		if int64(len(g.hosts))*int64(g.inter) < int64(len(p.groups)-1) {
			s.Short = append(s.Short, g.name)
			if g.inter == 0 {
				s.Closed = append(s.Closed, g.name)
			}
		}
		if g.intra < len(g.hosts)-1 {
			s.Sampled = append(s.Sampled, g.name)
		}
		if g.inter > 0 {
			s.PairEpochs = max(s.PairEpochs, uint64(len(g.hosts))*p.turn*p.rounds(g))
		}
	}
	return s
}

func (s Summary) String() string {
	b := fmt.Sprintf("%s in %s, ", plural(s.Members, "member"), plural(s.Groups, "group"))
	if s.Full {
		// Nothing rotates: no epoch, no bound to state.
		return b + fmt.Sprintf("a full mesh: every member probes the other %s", plural(s.MaxPeers, "member"))
	}
	b += fmt.Sprintf("at most %s each; ", plural(s.MaxPeers, "target"))
	if len(s.Short) == 0 {
		b += "every ordered pair of groups probed in every epoch"
	} else {
		b += fmt.Sprintf("%s %s fewer inter-group slots than other groups (%s): %s pairs are probed in turn",
			plural(len(s.Short), "group"), verb(len(s.Short), "has", "have"), list(s.Short), verb(len(s.Short), "its", "their"))
	}
	if len(s.Closed) > 0 {
		b += fmt.Sprintf("; %s %s the budget on group-mates and %s no other group (%s): raise --max-peers",
			plural(len(s.Closed), "group"), verb(len(s.Closed), "spends", "spend"), verb(len(s.Closed), "probes", "probe"), list(s.Closed))
	}
	if len(s.Sampled) > 0 {
		b += fmt.Sprintf("; %s larger than the budget %s sampled (%s)", plural(len(s.Sampled), "group"), verb(len(s.Sampled), "is", "are"), list(s.Sampled))
	}
	if s.Groups > 1 {
		b += fmt.Sprintf("; every pair of hosts in different groups within %s", plural(int(s.PairEpochs), "epoch"))
	}
	return b
}

// plural is "1 member", "2 members".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// verb is one's verb for one, many's for more: "1 group is", "2 groups are".
func verb(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func list(names []string) string {
	if len(names) > 5 {
		return strings.Join(names[:5], ", ") + ", ..."
	}
	return strings.Join(names, ", ")
}
