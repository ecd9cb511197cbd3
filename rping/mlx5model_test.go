//go:build !guest

// The model runs on the host (make unit, make unit-arm64); inside the TCG guests it would
// only add minutes to the rxe tier.

package rping

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorping/gorping/test/mlx5model"
	"golang.org/x/sys/unix"
)

// mlx5Glue is a glueRun over the ConnectX model: the mlx5 provider, its UARs, WQEs,
// CQEs, BlueFlame and arming, with the model executing the work requests.
func mlx5Glue(nic *mlx5model.NIC) glueRun { return modelGlue(nic, "mlx5_0") }

// TestPingLoopMLX5Model runs rping's client and server, connection glue and ping loops
// (client with -V and -v, server with -v), for 10,000 pings over the mlx5 provider
// against the ConnectX model, in event mode with BlueFlame, busy-polling with plain
// doorbells, and with -q (the application moves its QPs), with every ring wrapping many
// times, and checks the output, the exit statuses, that the model saw nothing a device
// would reject and that the glue released every object.
func TestPingLoopMLX5Model(t *testing.T) {
	for _, mode := range []modelMode{
		{name: "events", pings: 10000, bf: 512},
		{name: "poll", pings: 10000, poll: true},
		{name: "selfqp", pings: 2000, selfQP: true, bf: 512},
	} {
		mode.pings = shortPings(mode.pings)
		t.Run(mode.name, func(t *testing.T) {
			nic := mlx5model.NewForTest(t, mlx5model.Config{BfRegSize: mode.bf})
			pingOverModel(t, mlx5Glue(nic), mode)
			st := nic.Stats()
			t.Logf("model: %+v", st)
			modelClean(t, nic)
			// rping: 4 SENDs, 1 READ, 1 WRITE per ping. The CQ has 64 entries, the SQ 64
			// blocks (16 WRs of 256 bytes), the RQ 4 slots: all wrap hundreds of times.
			if st.Sends < 4*mode.pings || st.Reads != mode.pings || st.Writes != mode.pings {
				t.Errorf("model executed %d SENDs, %d READs, %d WRITEs for %d pings", st.Sends, st.Reads, st.Writes, mode.pings)
			}
			if st.CQLaps < mode.pings/10 || st.SQLaps < mode.pings/20 || st.RQLaps < mode.pings {
				t.Errorf("rings wrapped too rarely: %+v", st)
			}
			if !mode.poll && st.Events == 0 {
				t.Error("event mode saw no completion events")
			}
		})
	}
}

// expectedNIC is each ping's NIC round trip as the model stamped it on the client's CQ
// (the one CQ with timestamps): from the first SEND completion to the second receive
// completion (the client's CQ sees, per ping, SEND, go-ahead, SEND, go-ahead).
func expectedNIC(t *testing.T, nic *mlx5model.NIC, pings int) []time.Duration {
	t.Helper()
	cqs := nic.TimestampedCQs()
	if len(cqs) != 1 {
		t.Fatalf("%d CQs with completion timestamps, want the client's", len(cqs))
	}
	st := nic.Stamps(cqs[0])
	if len(st) < 4*pings {
		t.Fatalf("%d stamped CQEs for %d pings", len(st), pings)
	}
	out := make([]time.Duration, pings)
	for i := range out {
		p := st[4*i : 4*i+4]
		if p[0].Opcode != 0 || p[1].Opcode != 2 || p[2].Opcode != 0 || p[3].Opcode != 2 {
			t.Fatalf("ping %d: CQE opcodes %+v, want SEND, RECV, SEND, RECV", i, p)
		}
		out[i] = time.Duration(mlx5model.TimestampNS(p[3].TS) - mlx5model.TimestampNS(p[0].TS))
	}
	return out
}

// pingModel runs pings over the model with the client options set sets, and requires a
// clean run.
func pingModel(t *testing.T, nic *mlx5model.NIC, pings int, set func(cl *Config)) *side {
	t.Helper()
	cl, sv := newSide(false, DefaultSize, pings), newSide(true, DefaultSize, 0)
	set(&cl.cfg)
	if clSt, svSt := runGlue(t, mlx5Glue(nic), cl, sv); clSt != 0 || svSt != 0 {
		t.Fatalf("exit client %d server %d; stderr client %q server %q", clSt, svSt, cl.stderr, sv.stderr)
	}
	modelClean(t, nic)
	return cl
}

// TestPingLoopMLX5ModelTimestamps: the client's glue asks for a CQ with completion
// timestamps (the model stamps CQEs with its simulated clock) when --json or --stats
// reports the pings; --json --stats then reports per ping the client NIC's round trip,
// equal (to the nanosecond rounding of the two conversions) to what the model stamped,
// beside the software time, and the difference as host time; --stats prints it per ping
// and sums it up, and says once where the times come from. A device without timestamps
// gives ts_source "sw" and says why.
func TestPingLoopMLX5ModelTimestamps(t *testing.T) {
	const pings = 300
	t.Run("json", func(t *testing.T) {
		nic := mlx5model.NewForTest(t, mlx5model.Config{BfRegSize: 512, KeepStamps: true})
		cl := pingModel(t, nic, pings, func(cl *Config) { cl.JSON, cl.Stats = true, true })
		want := expectedNIC(t, nic, pings)
		seen := 0
		for _, line := range strings.Split(strings.TrimSpace(cl.stdout.String()), "\n") {
			var o struct {
				Type     string
				Seq      int
				RTTNs    json.RawMessage `json:"rtt_ns"`
				TSSource string          `json:"ts_source"`
				NICRTT   json.RawMessage `json:"nic_rtt_ns"`
				HostNs   int64           `json:"host_ns"`
				NICPings int             `json:"nic_pings"`
			}
			if err := json.Unmarshal([]byte(line), &o); err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			switch o.Type {
			case "ping":
				var rtt, nicRTT int64
				json.Unmarshal(o.RTTNs, &rtt)
				json.Unmarshal(o.NICRTT, &nicRTT)
				w := int64(want[o.Seq])
				if o.TSSource != "nic" || nicRTT < w-2 || nicRTT > w+2 || nicRTT <= 0 || nicRTT > rtt || o.HostNs != rtt-nicRTT {
					t.Errorf("ping %d: %s; want ts_source nic, nic_rtt_ns %d±2 within rtt, host = rtt - nic", o.Seq, line, w)
				}
				seen++
			case "summary", "connection":
				if o.TSSource != "nic" || (o.Type == "summary" && o.NICPings != pings) {
					t.Errorf("%s %s: want ts_source nic (over %d pings)", o.Type, line, pings)
				}
			}
		}
		if seen != pings {
			t.Errorf("%d ping records, want %d", seen, pings)
		}
	})
	t.Run("text", func(t *testing.T) {
		nic := mlx5model.NewForTest(t, mlx5model.Config{BfRegSize: 512})
		cl := pingModel(t, nic, pings, func(cl *Config) { cl.Stats = true })
		re := regexp.MustCompile(`^\d+ bytes from 192\.0\.2\.1: seq=\d+ time=(\d+\.\d{3}) ms nic=(\d+\.\d{3}) ms host=(\d+\.\d{3}) ms$`)
		lines := strings.Split(strings.TrimSpace(cl.stdout.String()), "\n")
		for _, l := range lines[:pings] {
			if m := re.FindStringSubmatch(l); m == nil {
				t.Fatalf("ping line %q", l)
			}
		}
		if last := lines[len(lines)-1]; !regexp.MustCompile(`^nic rtt min/avg/max/mdev = [\d./]+ ms, host avg = \d+\.\d{3} ms \(300 pings, ts_source=nic\)$`).MatchString(last) {
			t.Errorf("summary's last line %q", last)
		}
		stderr := strings.TrimSuffix(cl.stderr.String(), "client DISCONNECT EVENT...\n")
		if want := "gorping: mlx5_0: NIC completion timestamps: "; !strings.HasPrefix(stderr, want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("stderr %q, want one line starting %q", cl.stderr, want)
		}
	})
	t.Run("sw", func(t *testing.T) {
		nic := mlx5model.NewForTest(t, mlx5model.Config{BfRegSize: 512, NoTimestamps: true})
		cl := pingModel(t, nic, 20, func(cl *Config) { cl.JSON, cl.Stats = true, true })
		out := cl.stdout.String()
		if strings.Contains(out, "nic_rtt_ns") || strings.Count(out, `"ts_source":"sw"`) != 22 ||
			!strings.Contains(out, `"ts_note":"the mlx5 driver has none"`) {
			t.Errorf("without timestamps: %s", out)
		}
	})
}

// TestGlueMLX5ModelFailures: the glue's failures on a device that refuses a step print
// rping's lines and status, a server that fails rejects its client, and either way
// every object made before the failure is released (free from every partial state).
func TestGlueMLX5ModelFailures(t *testing.T) {
	einval := func(cmd uint32, nth int) func(uint32) error {
		seen := 0
		return func(c uint32) error {
			if c == cmd {
				if seen++; seen == nth {
					return unix.EINVAL
				}
			}
			return nil
		}
	}
	for _, tc := range []struct {
		name       string
		fail       func(uint32) error
		clSt, svSt int
		clErr      string
		svErr      string
	}{
		// The client's commands come first: its context, PD, CQ, QP, MRs.
		{"client pd", einval(3, 1), 22, -1, "ibv_alloc_pd failed\nsetup_qp failed: 22\n", ""},
		{"client cq", einval(18, 1), 22, -1, "ibv_create_cq failed\nsetup_qp failed: 22\n", ""},
		{"client qp", einval(24, 1), 255, -1, "rdma_create_qp: Invalid argument\nsetup_qp failed: -1\n", ""},
		{"client mr", einval(9, 2), 22, -1, "send_buf reg_mr failed\nrping_setup_buffers failed: 22\n", ""},
		// Then the server's, after the client connected: the client is rejected.
		{"server qp", einval(24, 2), 255, 255,
			"cma event RDMA_CM_EVENT_REJECTED, error 28\nwait for CONNECTED state 4\nconnect error -1\n",
			"rdma_create_qp: Invalid argument\nsetup_qp failed: -1\n"},
		{"server mr", einval(9, 7), 255, 22,
			"cma event RDMA_CM_EVENT_REJECTED, error 28\nwait for CONNECTED state 4\nconnect error -1\n",
			"rdma_buf reg_mr failed\nrping_setup_buffers failed: 22\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nic := mlx5model.NewForTest(t, mlx5model.Config{BfRegSize: 512, Fail: tc.fail})
			cl, sv := newSide(false, DefaultSize, 10), newSide(true, DefaultSize, 0)
			clSt, svSt := runGlue(t, mlx5Glue(nic), cl, sv)
			if clSt != tc.clSt || svSt != tc.svSt || cl.stderr.String() != tc.clErr || sv.stderr.String() != tc.svErr {
				t.Errorf("exit client %d server %d, stderr client %q server %q;\nwant %d %d, %q %q",
					clSt, svSt, cl.stderr, sv.stderr, tc.clSt, tc.svSt, tc.clErr, tc.svErr)
			}
			modelClean(t, nic)
		})
	}
}

// TestGlueConnectionStalls: the bounded connection waits (connectClient, accept) end
// with their one line and status 110 when the peer does not answer, and release
// everything.
func TestGlueConnectionStalls(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fault   func(cm *fakeCM)
		timeout time.Duration
		st      int
		stderr  string
	}{
		{"no answer", func(cm *fakeCM) { cm.silent = true }, 300 * time.Millisecond, exitTimeout,
			"rping client: no answer to the connection request from 192.0.2.1:7174 for 0.3 s: the server's host is down, " +
				"its link is down, the network between is partitioned, or its connection manager cannot receive\n"},
		{"refused", func(cm *fakeCM) { cm.refuse = true }, 0, exitFailure,
			"cma event RDMA_CM_EVENT_REJECTED, error 28\nwait for CONNECTED state 4\nconnect error -1\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nic := mlx5model.NewForTest(t, mlx5model.Config{BfRegSize: 512})
			g := mlx5Glue(nic)
			g.cm = tc.fault
			cl, sv := newSide(false, DefaultSize, 10), newSide(true, DefaultSize, 0)
			cl.cfg.Timeout = tc.timeout
			start := time.Now()
			if st, _ := runGlue(t, g, cl, sv); st != tc.st || cl.stderr.String() != tc.stderr {
				t.Errorf("exit %d stderr %q, want %d and %q", st, cl.stderr, tc.st, tc.stderr)
			}
			if d := time.Since(start); d < tc.timeout {
				t.Errorf("gave up after %v, before the bound", d)
			}
			modelClean(t, nic)
		})
	}
}

// TestGlueDebugLines: rping's -d lines of one ping over the model, client and server,
// in rping's order (pointers and addresses masked; the provider's own lines and either
// side's racy last CM event left out of the sequence).
func TestGlueDebugLines(t *testing.T) {
	nic := mlx5model.NewForTest(t, mlx5model.Config{BfRegSize: 512})
	cl, sv := newSide(false, DefaultSize, 1), newSide(true, DefaultSize, 0)
	cl.cfg.Debug, sv.cfg.Debug = true, true
	if clSt, svSt := runGlue(t, mlx5Glue(nic), cl, sv); clSt != 0 || svSt != 0 {
		t.Fatalf("exit client %d server %d; stderr client %q server %q", clSt, svSt, cl.stderr, sv.stderr)
	}
	hex := regexp.MustCompile(`\b(0x)?[0-9a-f]{4,}\b`)
	mask := func(s string, racy string) string {
		var keep []string
		for _, l := range strings.Split(s, "\n") {
			if strings.HasPrefix(l, "mlx5 ") || (racy != "" && strings.Contains(l, racy)) {
				continue
			}
			keep = append(keep, hex.ReplaceAllString(l, "X"))
		}
		return strings.Join(keep, "\n")
	}
	wantCl := `created cm_id X
cma_event type RDMA_CM_EVENT_ADDR_RESOLVED cma_id X (parent)
cma_event type RDMA_CM_EVENT_ROUTE_RESOLVED cma_id X (parent)
rdma_resolve_addr - rdma_resolve_route successful
created pd X
created channel X
created cq X
created qp X
rping_setup_buffers called on cb X
allocated & registered buffers...
cq_thread started.
cma_event type RDMA_CM_EVENT_ESTABLISHED cma_id X (parent)
ESTABLISHED
rdma_connect successful
RDMA addr X rkey X len 64
send completion
recv completion
RDMA addr X rkey X len 64
send completion
recv completion
destroy cm_id X
rping_free_buffers called on cb X
`
	wantSv := `created pd X
created channel X
created cq X
created qp X
rping_setup_buffers called on cb X
allocated & registered buffers...
cq_thread started.
accepting client connection request
cma_event type RDMA_CM_EVENT_ESTABLISHED cma_id X (child)
ESTABLISHED
recv completion
Received rkey X addr X len 64 from peer
server received sink adv
server posted rdma read req 
rdma read completion
server received read complete
server posted go ahead
send completion
recv completion
Received rkey X addr X len 64 from peer
server received sink adv
rdma write from lkey X laddr X len 64
rdma write completion
server rdma write complete 
server posted go ahead
send completion
destroy cm_id X
rping_free_buffers called on cb X
`
	if got := mask(cl.stdout.String(), "DISCONNECTED"); got != wantCl {
		t.Errorf("client -d lines:\n%s\nwant\n%s", got, wantCl)
	}
	checkServerDisconnect(t, mask(sv.stdout.String(), ""), wantSv)
}

// checkServerDisconnect compares the server's -d lines with want, where the
// DISCONNECTED line may stand anywhere after the last "server rdma write complete":
// the CM goroutine prints it (as rping's cm_thread does) as soon as the client, which
// got the last go-ahead, disconnects, independently of the ping loop printing
// "server posted go ahead" and the go-ahead's "send completion" (the order seen is
// logged). Every other line, and the DISCONNECTED line's presence once and before
// "destroy cm_id", is exact.
func checkServerDisconnect(t *testing.T, got, want string) {
	t.Helper()
	const disc = "cma_event type RDMA_CM_EVENT_DISCONNECTED"
	strip := func(s string) ([]string, int) {
		var rest []string
		at := -1
		for _, l := range strings.Split(s, "\n") {
			if strings.HasPrefix(l, disc) {
				if at >= 0 {
					t.Errorf("server printed DISCONNECTED twice:\n%s", s)
				}
				at = len(rest)
				continue
			}
			rest = append(rest, l)
		}
		return rest, at
	}
	gotRest, gotAt := strip(got)
	wantRest, _ := strip(want)
	if !slices.Equal(gotRest, wantRest) || gotAt < 0 {
		t.Fatalf("server -d lines:\n%s\nwant (DISCONNECTED anywhere after the last rdma write complete)\n%s", got, want)
	}
	lastWrite := slices.Index(gotRest, "server rdma write complete ")
	for i := lastWrite + 1; i < len(gotRest); i++ {
		if gotRest[i] == "server rdma write complete " {
			lastWrite = i
		}
	}
	destroy := slices.Index(gotRest, "destroy cm_id X")
	if gotAt <= lastWrite || gotAt > destroy {
		t.Fatalf("server's DISCONNECTED line at %d, want after the last rdma write complete (%d) and before destroy cm_id (%d):\n%s",
			gotAt, lastWrite, destroy, got)
	}
	t.Logf("server's DISCONNECTED came after %q", gotRest[gotAt-1])
}
