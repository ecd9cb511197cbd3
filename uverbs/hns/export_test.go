package hns

import "github.com/gorping/gorping/uverbs"

// WithPageSize opens a context on a provider that believes the kernel's pages are n
// bytes (the oracle's 64 KiB-page runs).
func WithPageSize(n int) uverbs.Option { return uverbs.WithProvider(provider{pageSize: n}) }
