package irdma_test

import (
	"testing"

	"github.com/gorping/gorping/test/irdmamodel"
	"github.com/gorping/gorping/test/providertest"
)

// The conformance suite over the E810 model (test/irdmamodel: irdma and the device on the
// fake kernel): the provider's doorbells are what drives it (the model rings only on
// recorded stores to the doorbell page, so this needs -tags mmiorecord, as make unit
// has), with current firmware (the CQ's shadow area apart), older firmware (after the
// ring) and at 64 KiB pages.
func TestConformance(t *testing.T) {
	for name, cfg := range map[string]irdmamodel.Config{
		"e810": {}, "oldfw": {NoCQResize: true}, "e810@64k": {PageSize: 64 << 10},
	} {
		t.Run(name, func(t *testing.T) {
			providertest.Run(t, func(t *testing.T) providertest.Device { return irdmamodel.NewForTest(t, cfg).Kernel() })
		})
	}
}
