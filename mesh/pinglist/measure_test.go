package pinglist

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// Helpers that measure a plan: what the host tests assert on and what docs/mesh.md
// reports (go test -run TestFigures -v ./mesh/pinglist prints them).

// uniform is groups × size members: host "h<g>-<i>" in group "g<g>".
func uniform(groups, size int) []Member {
	var ms []Member
	for g := 0; g < groups; g++ {
		for i := 0; i < size; i++ {
			ms = append(ms, Member{fmt.Sprintf("h%d-%d", g, i), fmt.Sprintf("g%d", g)})
		}
	}
	return ms
}

// sized is one group per entry of sizes.
func sized(sizes []int) []Member {
	var ms []Member
	for g, n := range sizes {
		for i := 0; i < n; i++ {
			ms = append(ms, Member{fmt.Sprintf("h%d-%d", g, i), fmt.Sprintf("g%d", g)})
		}
	}
	return ms
}

// edges is one epoch's plan: every agent's targets, as member indices in ms.
type edges struct {
	ms    []Member
	group []int32 // member -> group index
	of    [][]int32
}

type index struct {
	id     map[string]int32
	group  []int32
	groups int
}

func indexOf(ms []Member) index {
	x := index{id: make(map[string]int32, len(ms))}
	gid := map[string]int32{}
	for i, m := range ms {
		x.id[m.Host] = int32(i)
		g, ok := gid[m.Group]
		if !ok {
			g = int32(len(gid))
			gid[m.Group] = g
		}
		x.group = append(x.group, g)
	}
	x.groups = len(gid)
	return x
}

func allTargets(t testing.TB, p *Plan, ms []Member, epoch uint64) edges {
	t.Helper()
	x := indexOf(ms)
	e := edges{ms: ms, group: x.group, of: make([][]int32, len(ms))}
	for i, m := range ms {
		ts, err := p.Targets(m.Host, epoch)
		if err != nil {
			t.Fatal(err)
		}
		ids := make([]int32, len(ts))
		for j, tm := range ts {
			id, ok := x.id[tm.Host]
			if !ok || ms[id].Group != tm.Group {
				t.Fatalf("%s: target %v is not a member with that group", m.Host, tm)
			}
			ids[j] = id
		}
		e.of[i] = ids
	}
	return e
}

// checkLists fails unless every list has min(budget, members-1) targets, no duplicate
// and not the agent itself.
func checkLists(t testing.TB, p *Plan, ms []Member, e edges) {
	t.Helper()
	want := min(p.budget, len(ms)-1)
	seen := make([]int, len(ms))
	for a, ts := range e.of {
		if len(ts) != want {
			t.Fatalf("%s has %d targets, want %d (budget %d, %d members)", ms[a].Host, len(ts), want, p.budget, len(ms))
		}
		for _, b := range ts {
			if int(b) == a {
				t.Fatalf("%s probes itself", ms[a].Host)
			}
			if seen[b] == a+1 {
				t.Fatalf("%s probes %s twice", ms[a].Host, ms[b].Host)
			}
			seen[b] = a + 1
		}
	}
}

// groupPairs counts the ordered pairs of distinct groups with at least one probe.
func groupPairs(ms []Member, e edges) (covered, all int) {
	G := 0
	for _, g := range e.group {
		G = max(G, int(g)+1)
	}
	pairs := make([]bool, G*G)
	for a, ts := range e.of {
		for _, b := range ts {
			if ga, gb := e.group[a], e.group[b]; ga != gb && !pairs[int(ga)*G+int(gb)] {
				pairs[int(ga)*G+int(gb)] = true
				covered++
			}
		}
	}
	return covered, G * (G - 1)
}

type spread struct {
	min, max int
	mean, sd float64
}

func (s spread) String() string {
	return fmt.Sprintf("min %d max %d mean %.2f sd %.2f", s.min, s.max, s.mean, s.sd)
}

// inDegree is how many agents probe each member.
func inDegree(ms []Member, e edges) spread {
	in := make([]int, len(ms))
	for _, ts := range e.of {
		for _, b := range ts {
			in[b]++
		}
	}
	s := spread{min: math.MaxInt}
	var sum, sq float64
	for _, d := range in {
		s.min, s.max = min(s.min, d), max(s.max, d)
		sum += float64(d)
		sq += float64(d) * float64(d)
	}
	s.mean = sum / float64(len(in))
	s.sd = math.Sqrt(max(0, sq/float64(len(in))-s.mean*s.mean))
	return s
}

// changed is how many of b's assignments (agent, target) are not in a, and how many b
// has: the connections a switch from a to b opens (and, about as many, closes). Agents
// and targets are matched by name, so a and b may have different members.
func changed(a, b edges) (n, total int) {
	id := indexOf(a.ms).id
	mark := make([]int, len(a.ms))
	for i, ts := range b.of {
		j, ok := id[b.ms[i].Host]
		if ok {
			for _, t := range a.of[j] {
				mark[t] = i + 1
			}
		}
		for _, t := range ts {
			total++
			if k, ok := id[b.ms[t].Host]; !ok || mark[k] != i+1 {
				n++
			}
		}
	}
	return n, total
}

// pairEpochs is how many epochs from 0 pass until agent has probed every member outside
// its group (and inside), or limit if it has not by then.
func pairEpochs(t testing.TB, p *Plan, agent string, limit uint64) (inter, intra uint64) {
	t.Helper()
	me := p.byHost[agent]
	own := p.groups[me.group].name
	left := map[string]bool{}
	for h := range p.byHost {
		if h != agent {
			left[h] = true
		}
	}
	outside := p.Members() - len(p.groups[me.group].hosts)
	inside := len(p.groups[me.group].hosts) - 1
	inter, intra = limit, limit
	for e := uint64(0); e < limit && (outside > 0 || inside > 0); e++ {
		ts, err := p.Targets(agent, e)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ts {
			if left[m.Host] {
				delete(left, m.Host)
				if m.Group == own {
					inside--
				} else {
					outside--
				}
			}
		}
		if outside == 0 && inter == limit {
			inter = e + 1
		}
		if inside == 0 && intra == limit {
			intra = e + 1
		}
	}
	return inter, intra
}

// shuffled is ms in another order.
func shuffled(ms []Member, seed uint64) []Member {
	c := append([]Member(nil), ms...)
	r := rand.New(rand.NewPCG(seed, 1))
	r.Shuffle(len(c), func(i, j int) { c[i], c[j] = c[j], c[i] })
	return c
}

func mustPlan(t testing.TB, ms []Member, k int) *Plan {
	t.Helper()
	p, err := New(ms, k)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
