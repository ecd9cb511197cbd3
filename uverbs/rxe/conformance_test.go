package rxe

import (
	"testing"

	"github.com/gorping/gorping/test/providertest"
	"github.com/gorping/gorping/test/rxemodel"
)

// The conformance suite over the Soft-RoCE model (test/rxemodel: rdma_rxe's rings in
// the fake kernel), the same in-process rxe rping's glue tests run on.
func TestConformance(t *testing.T) {
	t.Parallel()
	providertest.Run(t, func(t *testing.T) providertest.Device { return rxemodel.NewForTest(t).Kernel() })
}
