package mlx5

// SetPageSize makes the provider believe the kernel's pages are n bytes (oracle runs as
// on 16/64 KiB-page kernels) until restore is called.
func SetPageSize(n int) (restore func()) {
	old := pageSize
	pageSize = func() int { return n }
	return func() { pageSize = old }
}

// TsToNS is the provider's conversion of a completion timestamp with a clock_info
// snapshot (the arithmetic of libmlx5's mlx5dv_ts_to_ns).
func TsToNS(nsec, cycles, frac uint64, mult, shift uint32, mask, ts uint64) uint64 {
	c := clockInfo{Nsec: nsec, Cycles: cycles, Frac: frac, Mult: mult, Shift: shift, Mask: mask}
	return tsToNS(&c, ts)
}
