package hns_test

import (
	"testing"

	"github.com/gorping/gorping/test/hnsmodel"
	"github.com/gorping/gorping/test/providertest"
)

// The conformance suite over the HIP08/HIP09 model (test/hnsmodel: hns and the engine on
// the fake kernel): the provider's doorbells are what drives it (the model rings only on
// recorded stores to the UAR page, so this needs -tags mmiorecord, as make unit has),
// with record doorbells, without them, and on a HIP09.
func TestConformance(t *testing.T) {
	for name, cfg := range map[string]hnsmodel.Config{
		"hip08": {}, "hip08-nodb": {NoRecord: true}, "hip09": {HIP09: true},
	} {
		t.Run(name, func(t *testing.T) {
			providertest.Run(t, func(t *testing.T) providertest.Device { return hnsmodel.NewForTest(t, cfg).Kernel() })
		})
	}
}
