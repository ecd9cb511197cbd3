package pinglist

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// The figures these tests log are docs/mesh.md's:
// go test -run 'TestPlan|TestSteps' -v ./mesh/pinglist | grep figures

const k64 = 64

// TestPlanUniform is the shape, 10,000 agents in 500 groups of 20, and 1,000 in
// 50, with 64 targets each (19 group-mates, 45 in other groups).
func TestPlanUniform(t *testing.T) {
	for _, groups := range []int{50, 500} {
		ms := uniform(groups, 20)
		p := mustPlan(t, ms, k64)
		s := p.Summary()
		if len(s.Short) != 0 || len(s.Sampled) != 0 {
			t.Fatalf("summary %v: want every group covering and none sampled", s)
		}
		name := fmt.Sprintf("%d/%d", len(ms), groups)
		var prev edges
		for _, epoch := range []uint64{0, 1, s.Turn - 1, s.Turn} {
			e := allTargets(t, p, ms, epoch)
			checkLists(t, p, ms, e)
			c, all := groupPairs(ms, e)
			if c != all {
				t.Fatalf("%s epoch %d: %d of %d ordered group pairs probed", name, epoch, c, all)
			}
			in := inDegree(ms, e)
			// 19 from the group, (G-1)/20 coverage slots each, the rest fill: a host
			// probed 8 times more or less than 64 means the spread broke.
			if in.min < k64-8 || in.max > k64+8 {
				t.Errorf("%s epoch %d: in-degree %v, want 64±8", name, epoch, in)
			}
			t.Logf("figures: %s epoch %d: group pairs %d of %d; in-degree %v", name, epoch, c, all, in)
			if epoch == 1 {
				n, total := changed(prev, e)
				// A rotation moves every inter-group slot to the next member of its group
				// and leaves group-mates alone: at most 45 of 64.
				if n > len(ms)*45 {
					t.Errorf("%s: rotation 0->1 changed %d of %d targets, more than the 45 inter-group slots each", name, n, total)
				}
				for a := range e.of {
					if !slices.Equal(intraOf(e, a), intraOf(prev, a)) {
						t.Fatalf("%s: rotation changed %s's group-mates", name, ms[a].Host)
					}
				}
				t.Logf("figures: %s churn per rotation: %d of %d targets (%.1f %%)", name, n, total, pct(n, total))
			}
			if epoch == s.Turn {
				n, total := changed(prev, e)
				t.Logf("figures: %s churn at a turn (epoch %d, blocks move on): %d of %d targets (%.1f %%)", name, epoch, n, total, pct(n, total))
			}
			prev = e
		}
	}
}

func intraOf(e edges, a int) []int32 {
	var out []int32
	for _, b := range e.of[a] {
		if e.group[b] == e.group[a] {
			out = append(out, b)
		}
	}
	return out
}

func pct(n, total int) float64 { return 100 * float64(n) / float64(total) }

// TestPlanMembershipChurn measures what one member joining or leaving changes: the
// assignments of its own group and those next to the fill boundaries its group's
// capacity moves, not a re-plan.
func TestPlanMembershipChurn(t *testing.T) {
	ms := uniform(500, 20)
	base := allTargets(t, mustPlan(t, ms, k64), ms, 7)
	join := append(slices.Clone(ms), Member{"h123-new", "g123"})
	leave := slices.DeleteFunc(slices.Clone(ms), func(m Member) bool { return m.Host == "h321-7" })
	newGroup := append(slices.Clone(ms), Member{"h-new", "g-new"})
	for _, c := range []struct {
		name string
		ms   []Member
		max  float64 // per cent of the assignments
	}{
		{"join", join, 2},
		{"leave", leave, 2},
		{"new group", newGroup, 100}, // every group's coverage slots shift: measured, not bounded
	} {
		e := allTargets(t, mustPlan(t, c.ms, k64), c.ms, 7)
		n, total := changed(base, e)
		if pct(n, total) > c.max {
			t.Errorf("%s changed %d of %d assignments (%.2f %%), want at most %.0f %%", c.name, n, total, pct(n, total), c.max)
		}
		t.Logf("figures: 10000/500 churn per membership change, %s: %d of %d targets (%.2f %%)", c.name, n, total, pct(n, total))
	}
}

// TestPlanHostPairs follows agents over epochs: each probes every host of every other
// group within Summary.PairEpochs.
func TestPlanHostPairs(t *testing.T) {
	for _, c := range []struct {
		name   string
		ms     []Member
		agents []string
	}{
		{"1000/50", uniform(50, 20), []string{"h0-0", "h17-3", "h25-19", "h49-11"}},
		{"10000/500", uniform(500, 20), []string{"h0-0", "h17-3", "h250-19", "h499-11"}},
		{"uneven", sized([]int{20, 1, 7, 33, 12, 2, 20, 40}), []string{"h0-0", "h1-0", "h5-1", "h7-39"}},
	} {
		p := mustPlan(t, c.ms, k64)
		bound := p.Summary().PairEpochs
		worst := uint64(0)
		for _, a := range c.agents {
			inter, _ := pairEpochs(t, p, a, bound+1)
			if inter > bound {
				t.Fatalf("%s: %s has not probed every host outside its group after %d epochs (bound)", c.name, a, bound)
			}
			worst = max(worst, inter)
		}
		t.Logf("figures: %s: every inter-group host pair of %v within %d epochs (bound %d, turn %d)", c.name, c.agents, worst, bound, p.Summary().Turn)
	}
}

// TestPlanUneven covers the shapes the issue names: uneven groups, groups of one,
// groups larger than the budget, and groups whose budget cannot reach every other
// group (probed in rounds).
func TestPlanUneven(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	var random, alternating, withOne, withBig []int
	for g := 0; g < 500; g++ {
		random = append(random, 1+r.IntN(40))
		alternating = append(alternating, 10+20*(g%2))
		withOne = append(withOne, 20)
	}
	withOne[0] = 1
	for g := 0; g < 50; g++ {
		withBig = append(withBig, 20)
	}
	withBig[10] = 200
	for _, c := range []struct {
		name  string
		sizes []int
		k     int
	}{
		{"500 groups of 1-40", random, k64},
		{"500 groups of 10 and 30", alternating, k64},
		{"499 groups of 20 and one of 1", withOne, k64},
		{"49 groups of 20 and one of 200", withBig, k64},
		{"two groups, 50 and 3", []int{50, 3}, 20},
		{"one group of 300", []int{300}, k64},
		{"groups of one", []int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 4},
	} {
		ms := sized(c.sizes)
		p := mustPlan(t, ms, c.k)
		s := p.Summary()
		e := allTargets(t, p, ms, 5)
		checkLists(t, p, ms, e)
		covered, all := groupPairs(ms, e)
		if len(s.Short) == 0 && covered != all {
			t.Errorf("%s: %d of %d group pairs probed, want all (no group short)", c.name, covered, all)
		}
		checkShort(t, c.name, p, ms)
		checkSampled(t, c.name, p, ms)
		t.Logf("figures: %s, K %d: %d members; group pairs %d of %d (%d groups short); in-degree %v; %d sampled groups",
			c.name, c.k, len(ms), covered, all, len(s.Short), inDegree(ms, e), len(s.Sampled))
	}
}

// checkShort: a short group probes n·r distinct groups in an epoch (as many as its
// slots: no plan does better) and all of them within a round.
func checkShort(t *testing.T, name string, p *Plan, ms []Member) {
	t.Helper()
	for gi, g := range p.groups {
		total := len(g.hosts) * g.inter
		if total >= len(p.groups)-1 || total == 0 {
			continue
		}
		rounds := p.rounds(g)
		union := map[string]bool{}
		for e := uint64(0); e < rounds; e++ {
			seen := map[string]bool{}
			for _, h := range g.hosts {
				ts, _ := p.Targets(h, 100*rounds+e)
				for _, m := range ts {
					if m.Group != g.name {
						seen[m.Group] = true
						union[m.Group] = true
					}
				}
			}
			if len(seen) != total {
				t.Fatalf("%s: short group %s (%d slots) probed %d groups in an epoch", name, g.name, total, len(seen))
			}
		}
		if len(union) != len(p.groups)-1 {
			t.Fatalf("%s: short group %s probed %d of %d other groups in a round of %d epochs", name, g.name, len(union), len(p.groups)-1, rounds)
		}
		_ = gi
	}
}

// checkSampled: in a group larger than the budget every agent is probed by exactly
// intra group-mates, and every pair of group-mates within ceil((n-1)/intra) epochs.
func checkSampled(t *testing.T, name string, p *Plan, ms []Member) {
	t.Helper()
	for _, g := range p.groups {
		if g.intra == len(g.hosts)-1 || g.intra == 0 {
			continue
		}
		epochs := uint64((len(g.hosts) - 2 + g.intra) / g.intra)
		pairs := map[[2]string]bool{}
		for e := uint64(0); e < epochs; e++ {
			in := map[string]int{}
			for _, h := range g.hosts {
				ts, _ := p.Targets(h, e)
				for _, m := range ts {
					if m.Group == g.name {
						in[m.Host]++
						pairs[[2]string{h, m.Host}] = true
					}
				}
			}
			for _, h := range g.hosts {
				if in[h] != g.intra {
					t.Fatalf("%s: sampled group %s: %s probed by %d group-mates in epoch %d, want %d", name, g.name, h, in[h], e, g.intra)
				}
			}
		}
		if n := len(g.hosts); len(pairs) != n*(n-1) {
			t.Fatalf("%s: sampled group %s: %d of %d pairs of group-mates in %d epochs", name, g.name, len(pairs), n*(n-1), epochs)
		}
	}
}

// TestPlanRandomShapes checks the guarantees on many small random memberships and
// budgets, where the corner cases live (dense budgets, a pair of groups with more slots
// than the target group has members).
func TestPlanRandomShapes(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for it := 0; it < 400; it++ {
		var sizes []int
		for g := 1 + r.IntN(14); g > 0; g-- {
			sizes = append(sizes, 1+r.IntN(12))
		}
		ms := sized(sizes)
		k := r.IntN(len(ms) + 2)
		p := mustPlan(t, ms, k)
		s := p.Summary()
		name := fmt.Sprintf("sizes %v K %d", sizes, k)
		for _, epoch := range []uint64{0, 1, 5, 77} {
			e := allTargets(t, p, ms, epoch)
			checkLists(t, p, ms, e)
			if c, all := groupPairs(ms, e); len(s.Short) == 0 && c != all {
				t.Fatalf("%s epoch %d: %d of %d group pairs", name, epoch, c, all)
			}
		}
		checkShort(t, name, p, ms)
		checkSampled(t, name, p, ms)
		if it%10 == 0 {
			for _, m := range ms[:min(3, len(ms))] {
				g := p.groups[p.byHost[m.Host].group]
				if g.inter == 0 {
					continue
				}
				if inter, _ := pairEpochs(t, p, m.Host, s.PairEpochs+1); inter > s.PairEpochs {
					t.Fatalf("%s: %s not done with other groups' hosts after %d epochs", name, m.Host, s.PairEpochs)
				}
			}
		}
	}
}

// TestPlanDeterministic: the members in any order give every agent the same list.
func TestPlanDeterministic(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	var sizes []int
	for g := 0; g < 60; g++ {
		sizes = append(sizes, 1+r.IntN(30))
	}
	ms := sized(sizes)
	want := mustPlan(t, ms, 40)
	for seed := uint64(1); seed <= 3; seed++ {
		got := mustPlan(t, shuffled(ms, seed), 40)
		for _, epoch := range []uint64{0, 3, 1 << 40} {
			for _, m := range ms {
				a, _ := want.Targets(m.Host, epoch)
				b, _ := got.Targets(m.Host, epoch)
				if !slices.Equal(a, b) {
					t.Fatalf("seed %d epoch %d: %s's list depends on the members' order:\n%v\n%v", seed, epoch, m.Host, a, b)
				}
			}
		}
	}
}

func TestPlanBadInput(t *testing.T) {
	for _, c := range []struct {
		ms   []Member
		k    int
		want string
	}{
		{[]Member{{"a", "g"}, {"a", "h"}}, 0, `host "a" is a member twice`},
		{[]Member{{"", "g"}}, 0, "empty host"},
		{[]Member{{"a b", "g"}}, 0, `host "a b": byte 2 is ' '`},
		{[]Member{{"a", "g#1"}}, 0, `group "g#1": byte 2 is '#'`},
		{[]Member{{"a", "g"}}, -1, "max peers -1"},
	} {
		_, err := New(c.ms, c.k)
		if err == nil || !contains(err.Error(), c.want) {
			t.Errorf("New(%v, %d) = %v, want %q", c.ms, c.k, err, c.want)
		}
	}
	p := mustPlan(t, uniform(2, 2), 0)
	if _, err := p.Targets("nobody", 0); err == nil || !contains(err.Error(), `"nobody" is not a member`) {
		t.Errorf("Targets(nobody) = %v", err)
	}
	if ts, _ := p.Targets("h0-0", 0); len(ts) != 3 {
		t.Errorf("no budget: %v, want every other member", ts)
	}
	// Groups of K+1 are sampled, not blind to the others; with K = 1 nothing is left.
	if s := mustPlan(t, sized([]int{5, 5, 2}), 4).Summary(); len(s.Closed) != 0 || len(s.Sampled) != 2 {
		t.Errorf("groups of K+1: %v, want sampled", s)
	}
	// One of a kind reads as one: "1 group is", "1 group has", "1 epoch".
	if s := mustPlan(t, sized([]int{5, 1}), 3).Summary().String(); !strings.Contains(s, "; 1 group larger than the budget is sampled (g0)") {
		t.Errorf("one sampled group: %s", s)
	}
	if s := mustPlan(t, sized([]int{1, 5, 5, 5, 5}), 2).Summary().String(); !strings.Contains(s, "; 1 group has fewer inter-group slots than other groups (g0): its pairs are probed in turn;") {
		t.Errorf("one short group: %s", s)
	}
	if s := mustPlan(t, sized([]int{2, 2}), 3).Summary(); !s.Full || strings.Contains(s.String(), "epoch") {
		t.Errorf("budget of members-1: %+v %s, want a full mesh without epochs", s, s)
	}
	if s := mustPlan(t, sized([]int{2, 2, 1}), 1).Summary(); len(s.Closed) != 2 ||
		!strings.Contains(s.String(), "2 groups spend the budget on group-mates and probe no other group (g0, g1)") {
		t.Errorf("K = 1: %v", s)
	}
	one := mustPlan(t, []Member{{"solo", ""}}, 5)
	if ts, err := one.Targets("solo", 9); err != nil || len(ts) != 0 {
		t.Errorf("a mesh of one: %v %v", ts, err)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func BenchmarkNew10000(b *testing.B) {
	ms := uniform(500, 20)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := New(ms, k64); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTargets10000 is what one agent computes each epoch.
func BenchmarkTargets10000(b *testing.B) {
	ms := uniform(500, 20)
	p := mustPlan(b, ms, k64)
	b.ReportAllocs()
	epoch := uint64(0)
	for b.Loop() {
		if _, err := p.Targets("h250-7", epoch); err != nil {
			b.Fatal(err)
		}
		epoch++
	}
}

// BenchmarkPlanAll10000 is `gorping mesh plan --all` on 10,000 members, less the output.
func BenchmarkPlanAll10000(b *testing.B) {
	ms := uniform(500, 20)
	b.ReportAllocs()
	for b.Loop() {
		p, _ := New(ms, k64)
		for _, m := range ms {
			if _, err := p.Targets(m.Host, 3); err != nil {
				b.Fatal(err)
			}
		}
	}
}
