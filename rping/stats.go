package rping

import (
	"math"
	"math/bits"
	"time"
)

// Round-trip times are kept in a log-linear histogram, so an endless run
// needs fixed memory and recording a ping allocates nothing. Values below
// histExact ns are exact; above, each power of two is split into histSub
// buckets, so a percentile is off by at most 1/(2·histSub) of its value (0.2%).
const (
	histSubBits = 8
	histSub     = 1 << histSubBits // buckets per power of two
	histExact   = 2 * histSub      // values below are their own bucket
	histBuckets = histExact + (64-histSubBits-1)*histSub
)

// rttStats accumulates one client connection's pings, as ping(8) reports them.
type rttStats struct {
	sent, received, errors int // pings started, completed (echo back, validated with -V), failed
	min, max, sum          time.Duration
	sumSq                  float64 // Σ rtt² in ns², for mdev
	hist                   [histBuckets]uint64
}

func (s *rttStats) record(rtt time.Duration) {
	if rtt < 0 {
		rtt = 0
	}
	if s.received == 0 || rtt < s.min {
		s.min = rtt
	}
	if rtt > s.max {
		s.max = rtt
	}
	s.received++
	s.sum += rtt
	f := float64(rtt)
	s.sumSq += f * f
	s.hist[histIndex(uint64(rtt))]++
}

// histIndex maps v to its bucket: exact below histExact, else by the position
// of the top bit (shift) and the histSubBits bits below it.
func histIndex(v uint64) int {
	if v < histExact {
		return int(v)
	}
	shift := bits.Len64(v) - histSubBits - 1 // ≥ 1
	top := v >> shift                        // in [histSub, 2·histSub)
	return histExact + (shift-1)*histSub + int(top-histSub)
}

// histMid is the middle of bucket i's value range.
func histMid(i int) uint64 {
	if i < histExact {
		return uint64(i)
	}
	shift := (i-histExact)/histSub + 1
	top := uint64((i-histExact)%histSub + histSub)
	lo := top << shift
	return lo + (uint64(1)<<shift)/2
}

// avg is the mean round-trip time.
func (s *rttStats) avg() time.Duration {
	if s.received == 0 {
		return 0
	}
	return s.sum / time.Duration(s.received)
}

// mdev is ping(8)'s mdev: the standard deviation, sqrt(E[x²] − E[x]²).
func (s *rttStats) mdev() time.Duration {
	if s.received == 0 {
		return 0
	}
	n := float64(s.received)
	m := float64(s.sum) / n
	v := s.sumSq/n - m*m
	if v <= 0 {
		return 0
	}
	return time.Duration(math.Sqrt(v))
}

// percentile is the nearest-rank p-th percentile (the smallest recorded value
// with at least p% of the pings at or below it), to the histogram's precision
// and clamped to [min, max].
func (s *rttStats) percentile(p float64) time.Duration {
	if s.received == 0 {
		return 0
	}
	rank := uint64(math.Ceil(p / 100 * float64(s.received)))
	rank = max(rank, 1)
	var seen uint64
	for i := range s.hist {
		if seen += s.hist[i]; seen >= rank {
			return min(max(time.Duration(histMid(i)), s.min), s.max)
		}
	}
	return s.max
}

// lossPercent is ping(8)'s integer packet loss.
func (s *rttStats) lossPercent() int {
	if s.sent == 0 {
		return 0
	}
	return (s.sent - s.received) * 100 / s.sent
}
