package probe

import (
	"math/rand/v2"
	"time"
)

// Schedule places a target's probe slots: slot k is due at phase + k·interval, moved by
// up to ±jitter·interval. The phase is random in [0, interval), so agents started
// together do not probe in step, and the jitter does not accumulate, so the long-run
// rate stays exactly one probe per interval.
type Schedule struct {
	start    time.Time // slot 0's grid time
	interval time.Duration
	jitter   float64 // fraction of the interval, [0, 0.5)
	rnd      *rand.Rand
	k        int64 // the next slot
}

// NewSchedule is the schedule of a path started at now.
func NewSchedule(now time.Time, interval time.Duration, jitter float64, rnd *rand.Rand) *Schedule {
	jitter = min(max(jitter, 0), 0.49)
	phase := time.Duration(rnd.Int64N(int64(interval)))
	return &Schedule{start: now.Add(phase), interval: interval, jitter: jitter, rnd: rnd}
}

// Next returns when the next slot is due and advances to the one after.
func (s *Schedule) Next() time.Time {
	t := s.start.Add(time.Duration(s.k) * s.interval)
	if s.jitter > 0 {
		j := (s.rnd.Float64()*2 - 1) * s.jitter * float64(s.interval)
		t = t.Add(time.Duration(j))
	}
	s.k++
	return t
}

// SkipPast moves past the slots whose grid time is already before now (a dial or a ping
// outlasted them) and returns how many it skipped, computed rather than counted.
func (s *Schedule) SkipPast(now time.Time) int {
	elapsed := now.Sub(s.start)
	if elapsed <= 0 {
		return 0
	}
	// Slot j is before now while j·interval < elapsed: j <= (elapsed-1ns)/interval.
	last := int64((elapsed - 1) / s.interval)
	n := last + 1 - s.k
	if n <= 0 {
		return 0
	}
	s.k += n
	return int(n)
}

// Backoff is the capped exponential wait between reconnection attempts: base, 2·base,
// 4·base, ... up to max, each scaled by a random factor in [0.8, 1.2) so that the
// agents that lost the same peer do not reconnect in step.
type Backoff struct {
	Base, Max time.Duration
	Rnd       *rand.Rand
	fails     int
}

// Next returns the wait after one more failure.
func (b *Backoff) Next() time.Duration {
	b.fails++
	d := b.Base
	for i := 1; i < b.fails && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	return time.Duration(float64(d) * (0.8 + 0.4*b.Rnd.Float64()))
}

// Reset forgets the failures (a connection succeeded).
func (b *Backoff) Reset() { b.fails = 0 }
