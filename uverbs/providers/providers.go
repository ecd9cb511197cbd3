// Package providers registers the providers gorping ships: importing it (package main does,
// the one place the product chooses them; tests that open real devices do too) makes
// uverbs.Open find them. A new provider is one line here and a package of its own
// (docs/adding-a-provider.md).
package providers

import (
	_ "github.com/gorping/gorping/uverbs/bnxtre"
	_ "github.com/gorping/gorping/uverbs/hns"
	_ "github.com/gorping/gorping/uverbs/irdma"
	_ "github.com/gorping/gorping/uverbs/mlx5"
	_ "github.com/gorping/gorping/uverbs/rxe"
	_ "github.com/gorping/gorping/uverbs/siw"
)
