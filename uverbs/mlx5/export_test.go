package mlx5

// SetPageSize makes the provider believe the kernel's pages are n bytes (oracle runs as
// on 16/64 KiB-page kernels) until restore is called.
func SetPageSize(n int) (restore func()) {
	old := pageSize
	pageSize = func() int { return n }
	return func() { pageSize = old }
}
