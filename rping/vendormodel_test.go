//go:build !guest

package rping

import (
	"testing"

	"github.com/gorping/gorping/test/bnxtremodel"
)

// The vendor device models (test/bnxtremodel, …): rping's client and server, connection
// glue and ping loops over each vendor provider, as over the ConnectX and Soft-RoCE
// models: 10,000 validated pings in event mode and busy-polling, 2,000 with -q, every
// ring wrapping many times; the output, the statuses, nothing a device would reject, and
// every object released.

// vendorModel is a device model with the counters the ping tests check.
type vendorModel interface {
	deviceModel
	Stats() bnxtremodel.Stats
}

func vendorPings(t *testing.T, name string, newModel func(t *testing.T) vendorModel) {
	for _, mode := range []modelMode{
		{name: "events", pings: 10000},
		{name: "poll", pings: 10000, poll: true},
		{name: "selfqp", pings: 2000, selfQP: true},
	} {
		t.Run(mode.name, func(t *testing.T) {
			m := newModel(t)
			pingOverModel(t, modelGlue(m, name), mode)
			st := m.Stats()
			t.Logf("model: %+v", st)
			modelClean(t, m)
			// rping: 4 SENDs, 1 READ, 1 WRITE per ping, each rung on its own.
			if st.Sends < 4*mode.pings || st.Reads != mode.pings || st.Writes != mode.pings || st.Doorbells < 6*mode.pings {
				t.Errorf("model executed %d SENDs, %d READs, %d WRITEs on %d doorbells for %d pings", st.Sends, st.Reads, st.Writes, st.Doorbells, mode.pings)
			}
			if st.CQLaps < mode.pings/10 || st.SQLaps < mode.pings/100 || st.RQLaps < mode.pings/10 {
				t.Errorf("rings wrapped too rarely: %+v", st)
			}
			if !mode.poll && (st.Events == 0 || st.Arms == 0) {
				t.Errorf("event mode saw %d completion events after %d arms", st.Events, st.Arms)
			}
		})
	}
}

// TestPingLoopBnxtReModel: rping over the bnxt_re provider and the NetXtreme-E/Thor model,
// in static WQE mode (the 6.1 kernel's) and in variable mode.
func TestPingLoopBnxtReModel(t *testing.T) {
	for name, cfg := range map[string]bnxtremodel.Config{"static": {}, "variable": {Variable: true}} {
		t.Run(name, func(t *testing.T) {
			vendorPings(t, "bnxt_re0", func(t *testing.T) vendorModel { return bnxtremodel.NewForTest(t, cfg) })
		})
	}
}
