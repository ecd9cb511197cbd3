//go:build !guest

package rping

import (
	"strings"
	"testing"
	"time"

	"github.com/gorping/gorping/test/rxemodel"
)

// rxeGlue is a glueRun over the Soft-RoCE model: the rxe provider's mmap'd rings, POST_SEND
// doorbell and CQ arming, with the model executing the sends inline as rxe does.
func rxeGlue(t *testing.T) (glueRun, *rxemodel.NIC) {
	t.Helper()
	nic, err := rxemodel.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nic.Close)
	return modelGlue(nic, "rxe0"), nic
}

// TestPingLoopRxeModel runs rping's client and server, glue and ping loops, over the rxe
// provider against the Soft-RoCE model (client -V -v, server -v): event mode, busy
// polling and -q, with every ring wrapping, and checks the output, the statuses, that the
// model saw nothing rxe would reject and that the glue released everything.
func TestPingLoopRxeModel(t *testing.T) {
	for _, mode := range []modelMode{
		{name: "events", pings: 10000},
		{name: "poll", pings: 3000, poll: true},
		{name: "selfqp", pings: 2000, selfQP: true},
	} {
		mode.pings = shortPings(mode.pings)
		t.Run(mode.name, func(t *testing.T) {
			g, nic := rxeGlue(t)
			pingOverModel(t, g, mode)
			st := nic.Stats()
			t.Logf("model: %+v", st)
			modelClean(t, nic)
			// Per ping 4 SENDs, 1 READ, 1 WRITE, each its own doorbell; the rings have
			// 64 (CQ), 32 (SQ) and 4 (RQ) slots.
			if st.Sends != 4*mode.pings || st.Reads != mode.pings || st.Writes != mode.pings || st.Doorbells < 6*mode.pings {
				t.Errorf("model executed %d SENDs, %d READs, %d WRITEs on %d doorbells for %d pings",
					st.Sends, st.Reads, st.Writes, st.Doorbells, mode.pings)
			}
			if st.CQLaps < mode.pings/10 || st.SQLaps < mode.pings/10 || st.RQLaps < mode.pings {
				t.Errorf("rings wrapped too rarely: %+v", st)
			}
			if !mode.poll && st.Events == 0 {
				t.Error("event mode saw no completion events")
			}
		})
	}
}

// TestGlueRxeModelReports: --json and --stats over rxe, which has no completion
// timestamps: software time, said once and why; the connection record names the device.
func TestGlueRxeModelReports(t *testing.T) {
	g, nic := rxeGlue(t)
	cl, sv := newSide(false, DefaultSize, 20), newSide(true, DefaultSize, 0)
	cl.cfg.JSON, cl.cfg.Stats = true, true
	if clSt, svSt := runGlue(t, g, cl, sv); clSt != 0 || svSt != 0 {
		t.Fatalf("exit client %d server %d; stderr client %q server %q", clSt, svSt, cl.stderr, sv.stderr)
	}
	out := cl.stdout.String()
	if strings.Contains(out, "nic_rtt_ns") || strings.Count(out, `"ts_source":"sw"`) != 22 ||
		!strings.Contains(out, `"ts_note":"the rxe driver has none"`) || !strings.Contains(out, `"device":"rxe0"`) {
		t.Errorf("--json over rxe: %s", out)
	}
	modelClean(t, nic)
}

// TestGlueRxeModelKeepalive: a server between pings of a slow client (-i) waits longer
// than half its stall bound: it posts keepalives (zero-length RDMA WRITEs, which the
// provider and the model carry like any WRITE) and, as each is acknowledged, goes on
// waiting; the run ends normally.
func TestGlueRxeModelKeepalive(t *testing.T) {
	g, nic := rxeGlue(t)
	cl, sv := newSide(false, DefaultSize, 3), newSide(true, DefaultSize, 0)
	cl.cfg.Interval = 600 * time.Millisecond
	cl.cfg.Timeout, sv.cfg.Timeout = 400*time.Millisecond, 400*time.Millisecond
	if clSt, svSt := runGlue(t, g, cl, sv); clSt != 0 || svSt != 0 {
		t.Fatalf("exit client %d server %d; stderr client %q server %q", clSt, svSt, cl.stderr, sv.stderr)
	}
	normalEnd(t, "server", sv, true)
	// 3 pings' WRITEs, plus at least one keepalive per idle 600 ms (a tick is 200 ms).
	if st := nic.Stats(); st.Writes < 3+2 {
		t.Errorf("%d RDMA WRITEs: no keepalive went out (%+v)", st.Writes, st)
	}
	modelClean(t, nic)
}
