package mlx5_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/gorping/gorping/test/mlx5oracle"
	"github.com/gorping/gorping/uverbs/mlx5"
)

// clockVectors makes n conversion inputs: realistic clocks (masks of 64, 63, 48 and 40 bits,
// 1 ns to 10 ns per cycle), timestamps just after and before the snapshot, around half the
// mask (where the older/newer guess flips), around the wrap of the counter, and wholly
// random fields (wrapping multiplications, any shift below 64).
func clockVectors(n int) []mlx5oracle.ClockVector {
	r := rand.New(rand.NewPCG(16, 0x5eed))
	masks := []uint64{^uint64(0), 1<<63 - 1, 1<<48 - 1, 1<<40 - 1}
	vs := make([]mlx5oracle.ClockVector, n)
	for i := range vs {
		v := &vs[i]
		mask := masks[r.IntN(len(masks))]
		v.Mask = mask
		v.Shift = uint32(r.IntN(32))
		v.Mult = uint32(r.Uint64N(1 << 32))
		v.Frac = r.Uint64() >> (64 - v.Shift) // a fraction below 2^shift, as the kernel keeps it
		v.Nsec = r.Uint64()
		v.Cycles = r.Uint64() & mask
		switch i % 6 {
		case 0: // shortly after the snapshot
			v.TS = (v.Cycles + r.Uint64N(1<<32)) & mask
		case 1: // shortly before it
			v.TS = (v.Cycles - r.Uint64N(1<<32)) & mask
		case 2: // around half the mask
			v.TS = (v.Cycles + mask/2 + r.Uint64N(5) - 2) & mask
		case 3: // the counter wrapped since the snapshot
			v.Cycles = mask - r.Uint64N(1<<20)
			v.TS = r.Uint64N(1 << 20)
		case 4: // anything, bits above the mask included
			v.TS = r.Uint64()
			v.Frac = r.Uint64()
			v.Shift = uint32(r.IntN(64))
		default: // a ConnectX-like 63-bit clock at 156.25 MHz
			v.Mask, v.Mult, v.Shift = 1<<63-1, 3435973837, 29
			v.Cycles &= v.Mask
			v.TS = (v.Cycles + r.Uint64N(1<<40) - 1<<39) & v.Mask
		}
	}
	return vs
}

// TestTsToNSMatchesLibmlx5: gorping's conversion of a completion timestamp gives, on a
// million vectors, bit for bit what mlx5dv_ts_to_ns (compiled from Debian's mlx5dv.h)
// gives.
func TestTsToNSMatchesLibmlx5(t *testing.T) {
	const n = 1_000_000
	vs := clockVectors(n)
	want, err := mlx5oracle.TsToNS(context.Background(), vs)
	if errors.Is(err, mlx5oracle.ErrUnavailable) {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skipf("*** SKIPPING: %v ***", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	bad := 0
	for i, v := range vs {
		if got := mlx5.TsToNS(v.Nsec, v.Cycles, v.Frac, v.Mult, v.Shift, v.Mask, v.TS); got != want[i] {
			if bad++; bad <= 5 {
				t.Errorf("vector %d %+v: gorping %d, mlx5dv_ts_to_ns %d", i, v, got, want[i])
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d vectors differ", bad, n)
	}
}
