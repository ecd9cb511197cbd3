package probe

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestSchedule(t *testing.T) {
	const interval = time.Second
	now := time.Unix(1000, 0)
	var phases []time.Duration
	for seed := range uint64(200) {
		s := NewSchedule(now, interval, 0.1, rand.New(rand.NewPCG(seed, 1)))
		first := s.Next()
		phase := first.Sub(now)
		if phase < -interval/10 || phase >= interval+interval/10 {
			t.Fatalf("seed %d: first slot %v after start", seed, phase)
		}
		phases = append(phases, phase)
		grid := s.start
		for k := 1; k < 1000; k++ {
			at := s.Next()
			off := at.Sub(grid.Add(time.Duration(k) * interval))
			if off < -interval/10 || off > interval/10 {
				t.Fatalf("seed %d slot %d: %v off its grid time, jitter is ±10%%", seed, k, off)
			}
		}
	}
	// Phases spread over the interval: agents started together do not beat in step.
	var buckets [10]int
	for _, p := range phases {
		buckets[min(max(int(p*10/interval), 0), 9)]++
	}
	for i, n := range buckets {
		if n < 5 {
			t.Errorf("phase decile %d holds %d of 200 agents: %v", i, n, buckets)
		}
	}
	// Jitter varies from slot to slot (it is not a fixed offset).
	s := NewSchedule(now, interval, 0.1, rand.New(rand.NewPCG(7, 7)))
	a, b := s.Next().Sub(s.start), s.Next().Sub(s.start)-interval
	if a == b {
		t.Errorf("two slots with the same offset %v", a)
	}
	// A dial that outlasted slots skips them, counted.
	s = NewSchedule(now, interval, 0, rand.New(rand.NewPCG(1, 1)))
	s.Next()
	if n := s.SkipPast(s.start.Add(3*interval + interval/2)); n != 3 {
		t.Errorf("skipPast 3.5 intervals later skipped %d slots, want 3", n)
	}
	if got := s.Next().Sub(s.start); got != 4*interval {
		t.Errorf("next slot after skipping at %v, want %v", got, 4*interval)
	}
	if n := s.SkipPast(s.start); n != 0 {
		t.Errorf("skipPast in the past skipped %d", n)
	}
}

func TestBackoff(t *testing.T) {
	b := Backoff{Base: time.Second, Max: 30 * time.Second, Rnd: rand.New(rand.NewPCG(1, 2))}
	want := []time.Duration{1, 2, 4, 8, 16, 30, 30, 30}
	for i, w := range want {
		d := b.Next()
		lo, hi := time.Duration(float64(w*time.Second)*0.8), time.Duration(float64(w*time.Second)*1.2)
		if d < lo || d >= hi {
			t.Errorf("attempt %d: %v, want in [%v, %v)", i+1, d, lo, hi)
		}
	}
	b.Reset()
	if d := b.Next(); d >= 1200*time.Millisecond {
		t.Errorf("after reset: %v, want about the base", d)
	}
	// Jitter: many agents reconnecting after the same failure spread out.
	seen := map[time.Duration]bool{}
	for seed := range uint64(50) {
		bb := Backoff{Base: time.Second, Max: time.Minute, Rnd: rand.New(rand.NewPCG(seed, 9))}
		seen[bb.Next().Round(10*time.Millisecond)] = true
	}
	if len(seen) < 20 {
		t.Errorf("50 agents' first backoff takes only %d distinct values", len(seen))
	}
}

// TestSkipPastComputed: the schedule's catch-up is computed, not counted.
func TestSkipPastComputed(t *testing.T) {
	// a gap of 10^12 slots is skipped at once.
	s := NewSchedule(time.Unix(0, 0), time.Nanosecond, 0, rand.New(rand.NewPCG(1, 1)))
	s.Next()
	done := make(chan int, 1)
	go func() { done <- s.SkipPast(s.start.Add(1000 * time.Second)) }()
	select {
	case n := <-done:
		if n != 1e12-1 {
			t.Errorf("skipPast over 10^12 slots skipped %d", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("skipPast over 10^12 slots still counting after 10 s")
	}
}
