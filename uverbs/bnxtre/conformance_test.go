package bnxtre_test

import (
	"testing"

	"github.com/gorping/gorping/test/bnxtremodel"
	"github.com/gorping/gorping/test/providertest"
)

// The conformance suite over the NetXtreme-E/Thor model (test/bnxtremodel: bnxt_re and
// the device on the fake kernel): the provider's doorbells are what drives it (the model
// rings only on recorded stores to the doorbell page, so this needs -tags mmiorecord, as
// make unit has), in both WQE modes and on a gen P4 chip.
func TestConformance(t *testing.T) {
	for name, cfg := range map[string]bnxtremodel.Config{
		"static": {}, "variable": {Variable: true}, "p4": {Chip: 0x16d7}, "variable@64k": {Variable: true, PageSize: 64 << 10},
	} {
		t.Run(name, func(t *testing.T) {
			providertest.Run(t, func(t *testing.T) providertest.Device { return bnxtremodel.NewForTest(t, cfg).Kernel() })
		})
	}
}
