package mlx5

import "github.com/gorping/gorping/uverbs"

// WithPageSize opens a context on a provider that believes the kernel's pages are n
// bytes (oracle and model runs as on 16/64 KiB-page kernels); 0 is this kernel's.
func WithPageSize(n int) uverbs.Option { return uverbs.WithProvider(provider{pageSize: n}) }

// TsToNS is the provider's conversion of a completion timestamp with a clock_info
// snapshot (the arithmetic of libmlx5's mlx5dv_ts_to_ns).
func TsToNS(nsec, cycles, frac uint64, mult, shift uint32, mask, ts uint64) uint64 {
	c := clockInfo{Nsec: nsec, Cycles: cycles, Frac: frac, Mult: mult, Shift: shift, Mask: mask}
	return tsToNS(&c, ts)
}
