//go:build !guest

package rping

import (
	"testing"

	"github.com/gorping/gorping/test/bnxtremodel"
	"github.com/gorping/gorping/test/hnsmodel"
	"github.com/gorping/gorping/test/irdmamodel"
	"github.com/gorping/gorping/test/mlx5model"
	"github.com/gorping/gorping/test/rxemodel"
)

// The vendor device models (test/bnxtremodel, test/irdmamodel, test/hnsmodel): rping's
// client and server, connection glue and ping loops over each vendor provider, as over
// the ConnectX and Soft-RoCE models: 10,000 validated pings in event mode and
// busy-polling (a tenth with -short, make check), 2,000 with -q, every ring wrapping
// at least once per 100 pings; the output,
// the statuses, nothing a device would reject, and every object released.

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
		if !mode.selfQP { // -q's queues are larger: 2,000 pings for the laps asserted below
			mode.pings = shortPings(mode.pings)
		}
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
			// Every ring goes round at least once per 100 pings (hns' receive queues have
			// 64 WQEs at least: 4 receives a ping take 16 pings a lap).
			if st.CQLaps < mode.pings/100 || st.SQLaps < mode.pings/100 || st.RQLaps < mode.pings/100 {
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

// TestPingLoopIrdmaModel: rping over the irdma provider and the E810 model, with current
// firmware (the CQ's shadow area apart) and older firmware (after the ring).
func TestPingLoopIrdmaModel(t *testing.T) {
	for name, cfg := range map[string]irdmamodel.Config{"e810": {}, "oldfw": {NoCQResize: true}} {
		t.Run(name, func(t *testing.T) {
			vendorPings(t, "irdma0", func(t *testing.T) vendorModel { return irdmamodel.NewForTest(t, cfg) })
		})
	}
}

// TestPingLoopHnsModel: rping over the hns provider and the HIP08/HIP09 model, with
// record doorbells (HIP08, HIP09) and without (receive and consumer-index doorbells).
func TestPingLoopHnsModel(t *testing.T) {
	for name, cfg := range map[string]hnsmodel.Config{"hip08": {}, "hip08-nodb": {NoRecord: true}, "hip09": {HIP09: true}} {
		t.Run(name, func(t *testing.T) {
			vendorPings(t, "hns_0", func(t *testing.T) vendorModel { return hnsmodel.NewForTest(t, cfg) })
		})
	}
}

// BenchmarkModelPings: the time per ping of rping's client and server over each device
// model, in event mode and busy-polling: the providers' data path, the connection glue
// and the model's device, in one process (the model's engine takes a CPU of its own).
// The figures compare the providers over models, not with hardware (make bench prints
// them; b.N pings a run, connection setup included).
func BenchmarkModelPings(b *testing.B) {
	models := []struct {
		name, dev string
		open      func(b *testing.B) deviceModel
	}{
		{"mlx5", "mlx5_0", func(b *testing.B) deviceModel { return mlx5model.NewForTest(b, mlx5model.Config{BfRegSize: 512}) }},
		{"rxe", "rxe0", func(b *testing.B) deviceModel { return rxemodel.NewForTest(b) }},
		{"bnxt_re", "bnxt_re0", func(b *testing.B) deviceModel { return bnxtremodel.NewForTest(b, bnxtremodel.Config{}) }},
		{"irdma", "irdma0", func(b *testing.B) deviceModel { return irdmamodel.NewForTest(b, irdmamodel.Config{}) }},
		{"hns", "hns_0", func(b *testing.B) deviceModel { return hnsmodel.NewForTest(b, hnsmodel.Config{}) }},
	}
	for _, m := range models {
		for _, poll := range []bool{false, true} {
			mode := "events"
			if poll {
				mode = "poll"
			}
			b.Run(m.name+"/"+mode, func(b *testing.B) {
				model := m.open(b)
				cl, sv := newSide(false, DefaultSize, b.N), newSide(true, DefaultSize, 0)
				cl.cfg.Poll, sv.cfg.Poll = poll, poll
				b.ResetTimer()
				if clSt, svSt := runGlue(b, modelGlue(model, m.dev), cl, sv); clSt != 0 || svSt != 0 {
					b.Fatalf("exit client %d server %d; stderr client %q server %q", clSt, svSt, cl.stderr, sv.stderr)
				}
			})
		}
	}
}
