//go:build !guest

// The model runs on the host (make unit, make unit-arm64); inside the TCG guests it would
// only add minutes to the rxe tier.

package rping

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gorping/gorping/test/mlx5model"
	"github.com/gorping/gorping/uverbs"
)

// mlx5Conn is a conn over the mlx5 provider on the in-process ConnectX model: the same
// uverbs calls the verbs glue makes (context, PD, channel, CQ, RC QP, registered buffers,
// signaled SEND/READ/WRITE and RECV), connected by moving the QPs to RTS as rdma_cm
// would. Next is the product's completion path (cqWait): it polls, arms, re-polls and
// sleeps on the completion channel, or busy-polls.
type mlx5Conn struct {
	t    testing.TB
	ctx  *uverbs.Context
	pd   *uverbs.PD
	ch   *uverbs.CompChannel
	cq   *uverbs.CQ
	qp   *uverbs.QP
	bufs [numBufs]*uverbs.Buffer
	mrs  [numBufs]*uverbs.MR
	wait *cqWait

	recvWR uverbs.RecvWR
	sendWR uverbs.SendWR
	rdmaWR uverbs.SendWR
	ts     bool // the CQ has completion timestamps
}

// timestamps: the model's CQ converts its timestamps as the product's verbsConn does.
func (c *mlx5Conn) timestamps() tsInfo {
	if !c.ts {
		return tsInfo{device: "mlx5_0", note: "not asked for"}
	}
	return tsInfo{device: "mlx5_0", conv: c.cq.TimestampNS}
}

const mlx5Access = uverbs.AccessLocalWrite | uverbs.AccessRemoteRead | uverbs.AccessRemoteWrite

func newMLX5Conn(t testing.TB, nic *mlx5model.NIC, size int, client, poll, ts bool) *mlx5Conn {
	t.Helper()
	c := &mlx5Conn{t: t, ts: ts}
	var err error
	must := func(e error) {
		t.Helper()
		if e != nil {
			t.Fatal(e)
		}
	}
	c.ctx, err = nic.Open("mlx5_0")
	must(err)
	c.pd, err = c.ctx.AllocPD()
	must(err)
	c.ch, err = c.ctx.CreateCompChannel()
	must(err)
	var flags uverbs.CQFlags
	if ts {
		flags = uverbs.CQTimestamps
	}
	c.cq, err = c.ctx.CreateCQEx(cqDepth, c.ch, 0, flags)
	must(err)
	// A failure of the completion path reaches the ping loop as compError, which fails the run.
	c.wait = newCQWait(c.cq, c.ch, &printer{stdout: io.Discard, stderr: io.Discard}, poll, false)
	if poll {
		// --poll never yields; here the "NIC" is a goroutine on the same CPUs, and on
		// a 2-CPU machine two loops that never yield would leave it only the runtime's
		// 10 ms preemptions.
		c.wait.spin = runtime.Gosched
	}
	c.qp, err = c.pd.CreateQP(uverbs.QPInitAttr{SendCQ: c.cq, RecvCQ: c.cq, Type: uverbs.QPTypeRC,
		Cap: uverbs.QPCap{MaxSendWR: sqDepth, MaxRecvWR: rqDepth, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: advertLen}})
	must(err)
	sizes := [numBufs]int{bufRecv: advertLen, bufSend: advertLen, bufRDMA: size}
	if client {
		sizes[bufStart] = size
	}
	for id, n := range sizes {
		if n > 0 {
			must(c.reg(bufID(id), n))
		}
	}
	c.recvWR = uverbs.RecvWR{ID: 1, SGE: []uverbs.SGE{{Addr: c.bufs[bufRecv].Addr(), Length: advertLen, LKey: c.mrs[bufRecv].LKey}}}
	// The 16-byte adverts go inline: the WQE carries them, no DMA read of the buffer.
	c.sendWR = uverbs.SendWR{ID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled | uverbs.SendInline,
		SGE: []uverbs.SGE{{Addr: c.bufs[bufSend].Addr(), Length: advertLen, LKey: c.mrs[bufSend].LKey}}}
	c.rdmaWR = uverbs.SendWR{ID: 3, Flags: uverbs.SendSignaled, SGE: make([]uverbs.SGE, 1)}
	return c
}

func (c *mlx5Conn) reg(id bufID, n int) error {
	b, err := uverbs.NewBuffer(n)
	if err != nil {
		return err
	}
	mr, err := c.pd.RegMR(b, mlx5Access)
	if err != nil {
		b.Free()
		return err
	}
	c.bufs[id], c.mrs[id] = b, mr
	return nil
}

// connectMLX5 moves both QPs to RTS aimed at each other, as rdma_cm's hidden steps would.
func connectMLX5(t testing.TB, a, b *mlx5Conn) {
	t.Helper()
	for _, p := range [][2]*mlx5Conn{{a, b}, {b, a}} {
		for _, st := range []struct {
			attr uverbs.QPAttr
			mask uverbs.QPAttrMask
		}{
			{uverbs.QPAttr{State: uverbs.QPSInit, PortNum: 1, AccessFlags: mlx5Access}, 0x39},
			{uverbs.QPAttr{State: uverbs.QPSRTR, PathMTU: uverbs.MTU1024, DestQPNum: p[1].qp.Num(), MaxDestRdAtomic: 1,
				MinRNRTimer: 12, AH: uverbs.AHAttr{IsGlobal: 1, PortNum: 1}}, 0x129181},
			{uverbs.QPAttr{State: uverbs.QPSRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1}, 0x12e01},
		} {
			if err := p[0].qp.Modify(&st.attr, st.mask); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// disconnect moves both QPs to ERR (the model flushes what is posted) and delivers
// DISCONNECTED to both sides.
func disconnectMLX5(a, b *mlx5Conn) {
	for _, c := range []*mlx5Conn{a, b} {
		c.qp.Modify(&uverbs.QPAttr{State: uverbs.QPSErr}, uverbs.QPAttrState)
		c.wait.deliverCM(context.Background(), completion{kind: compDisconnected})
	}
}

func (c *mlx5Conn) Region(id bufID) region {
	b := c.bufs[id]
	return region{b: b.Bytes(), addr: b.Addr(), lkey: c.mrs[id].LKey, rkey: c.mrs[id].RKey}
}

func (c *mlx5Conn) PostRecv() error { return c.qp.PostRecv(&c.recvWR) }
func (c *mlx5Conn) PostSend() error { return c.qp.PostSend(&c.sendWR) }
func (c *mlx5Conn) PostRead(n int, raddr uint64, rkey uint32) error {
	return c.rdma(uverbs.WRRDMARead, n, raddr, rkey)
}
func (c *mlx5Conn) PostWrite(n int, raddr uint64, rkey uint32) error {
	return c.rdma(uverbs.WRRDMAWrite, n, raddr, rkey)
}

func (c *mlx5Conn) rdma(op uverbs.WROpcode, n int, raddr uint64, rkey uint32) error {
	c.rdmaWR.Opcode, c.rdmaWR.RemoteAddr, c.rdmaWR.RKey = op, raddr, rkey
	c.rdmaWR.SGE[0] = uverbs.SGE{Addr: c.bufs[bufRDMA].Addr(), Length: uint32(n), LKey: c.mrs[bufRDMA].LKey}
	return c.qp.PostSend(&c.rdmaWR)
}

func (c *mlx5Conn) Next(ctx context.Context) (completion, error) { return c.wait.next(ctx) }

func (c *mlx5Conn) Stall(d time.Duration) { c.wait.stall(d) }

func (c *mlx5Conn) PostKeepalive(raddr uint64, rkey uint32) error {
	return c.qp.PostSend(&uverbs.SendWR{ID: keepaliveWRID, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
		SGE: []uverbs.SGE{{Addr: c.mrs[bufRecv].Addr, LKey: c.mrs[bufRecv].LKey}}, RemoteAddr: raddr, RKey: rkey})
}

func (c *mlx5Conn) Grow(size int) error {
	if err := c.mrs[bufRDMA].Dereg(); err != nil {
		return err
	}
	c.bufs[bufRDMA].Free()
	return c.reg(bufRDMA, size)
}

func (c *mlx5Conn) close() {
	for id := range c.mrs {
		if c.mrs[id] != nil {
			c.mrs[id].Dereg()
			c.bufs[id].Free()
		}
	}
	for _, err := range []error{c.qp.Destroy(), c.cq.Destroy(), c.ch.Close(), c.pd.Dealloc(), c.ctx.Close()} {
		if err != nil {
			c.t.Error(err)
		}
	}
}

// TestPingLoopMLX5Model runs rping's real ping loops (client with -V and -v, server with
// -v) for 10,000 pings over the mlx5 provider against the ConnectX model, in event mode
// and busy-polling, with every ring wrapping many times, and checks the output, the
// exit status and that the model saw nothing a device would reject.
func TestPingLoopMLX5Model(t *testing.T) {
	const pings = 10000
	for _, mode := range []struct {
		name string
		poll bool
		bf   int
	}{{"events", false, 512}, {"poll", true, 0}} {
		t.Run(mode.name, func(t *testing.T) {
			nic := mlx5model.NewForTest(t, mlx5model.Config{BfRegSize: mode.bf})
			cl, sv, _ := runMLX5Pings(t, nic, pings, mlx5Run{poll: mode.poll, setup: func(cl, sv *Config) {
				cl.Verbose, cl.Validate, sv.Verbose = true, true, true
			}})
			if got, want := cl.stdout.String(), pingLines("ping data: ", pings, DefaultSize); got != want {
				t.Errorf("client stdout differs: %d bytes, want %d", len(got), len(want))
			}
			if got, want := sv.stdout.String(), pingLines("server ping data: ", pings, DefaultSize); got != want {
				t.Errorf("server stdout differs: %d bytes, want %d", len(got), len(want))
			}
			if cl.stderr.String() != "" || sv.stderr.String() != "" {
				t.Errorf("stderr: client %q server %q", cl.stderr, sv.stderr)
			}
			st := nic.Stats()
			t.Logf("model: %+v", st)
			if errs := nic.Errors(); len(errs) > 0 {
				t.Fatalf("the device model saw %d violations, first: %s", len(errs), errs[0])
			}
			// rping: 4 SENDs, 1 READ, 1 WRITE per ping. The CQ has 64 entries, the SQ 64
			// blocks (16 WRs of 256 bytes), the RQ 4 slots: all wrap hundreds of times.
			if st.Sends < 4*pings || st.Reads != pings || st.Writes != pings {
				t.Errorf("model executed %d SENDs, %d READs, %d WRITEs for %d pings", st.Sends, st.Reads, st.Writes, pings)
			}
			if st.CQLaps < pings/10 || st.SQLaps < pings/20 || st.RQLaps < pings {
				t.Errorf("rings wrapped too rarely: %+v", st)
			}
			if !mode.poll && st.Events == 0 {
				t.Error("event mode saw no completion events")
			}
		})
	}
}

// mlx5Run shapes one runMLX5Pings run.
type mlx5Run struct {
	poll  bool                 // both sides busy-poll
	ts    bool                 // the client's CQ has completion timestamps
	setup func(cl, sv *Config) // options beyond count and size
}

// runMLX5Pings runs rping's client and server loops over the model until the client has
// done count pings (or failed), as Run would (the reporter made from the options), and
// returns both sides and the client's connection. It fails t unless both exit 0 and the
// model saw nothing a device would reject.
func runMLX5Pings(t *testing.T, nic *mlx5model.NIC, count int, o mlx5Run) (cl, sv *side, c *mlx5Conn) {
	t.Helper()
	cl, sv = newSide(false, DefaultSize, count), newSide(true, DefaultSize, 0)
	cl.cfg.Addr = netip.MustParseAddr("192.0.2.1")
	if o.setup != nil {
		o.setup(&cl.cfg, &sv.cfg)
	}
	cl.cfg.rep = newReporter(&cl.cfg)
	c = newMLX5Conn(t, nic, DefaultSize, true, o.poll, o.ts)
	s := newMLX5Conn(t, nic, DefaultSize, false, o.poll, false)
	t.Cleanup(func() { c.close(); s.close() })
	// The glue posts the first RECV before connecting.
	for _, x := range []*mlx5Conn{c, s} {
		if err := x.PostRecv(); err != nil {
			t.Fatal(err)
		}
	}
	connectMLX5(t, c, s)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	go func() { sv.status <- runPingServer(ctx, s, &sv.cfg) }()
	go func() {
		st := runPingClient(ctx, c, &cl.cfg)
		disconnectMLX5(c, s)
		cl.status <- st
	}()
	var clSt, svSt int
	for _, w := range []struct {
		who string
		ch  chan int
		st  *int
	}{{"client", cl.status, &clSt}, {"server", sv.status, &svSt}} {
		select {
		case *w.st = <-w.ch:
		case <-ctx.Done():
			t.Fatalf("%s did not finish: %v", w.who, ctx.Err())
		}
	}
	if clSt != 0 || svSt != 0 {
		t.Fatalf("exit client %d server %d; stderr client %q server %q", clSt, svSt, cl.stderr, sv.stderr)
	}
	if errs := nic.Errors(); len(errs) > 0 {
		t.Fatalf("the device model saw %d violations, first: %s", len(errs), errs[0])
	}
	return cl, sv, c
}

// expectedNIC is each ping's NIC round trip as the model stamped it: from the client's
// first SEND completion to its second receive completion (the client's CQ sees, per
// ping, SEND, go-ahead, SEND, go-ahead).
func expectedNIC(t *testing.T, nic *mlx5model.NIC, c *mlx5Conn, pings int) []time.Duration {
	t.Helper()
	var cqn uint32
	if _, err := fmt.Sscanf(c.cq.Describe(), "mlx5 CQ %v:", &cqn); err != nil {
		t.Fatalf("CQ number from %q: %v", c.cq.Describe(), err)
	}
	st := nic.Stamps(cqn)
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

// TestPingLoopMLX5ModelTimestamps: with completion timestamps (the model stamps CQEs with
// its simulated clock) --json --stats reports per ping the client NIC's round trip,
// equal (to the nanosecond rounding of the two conversions) to what the model stamped,
// beside the software time, and the difference as host time; --stats prints it per ping
// and sums it up, and says once where the times come from. Without timestamps the same
// run reports ts_source "sw".
func TestPingLoopMLX5ModelTimestamps(t *testing.T) {
	const pings = 300
	t.Run("json", func(t *testing.T) {
		nic := mlx5model.NewForTest(t, mlx5model.Config{BfRegSize: 512, KeepStamps: true})
		cl, _, c := runMLX5Pings(t, nic, pings, mlx5Run{ts: true, setup: func(cl, _ *Config) { cl.JSON, cl.Stats = true, true }})
		want := expectedNIC(t, nic, c, pings)
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
			case "summary":
				if o.TSSource != "nic" || o.NICPings != pings {
					t.Errorf("summary %s: want ts_source nic over %d pings", line, pings)
				}
			}
		}
		if seen != pings {
			t.Errorf("%d ping records, want %d", seen, pings)
		}
	})
	t.Run("text", func(t *testing.T) {
		nic := mlx5model.NewForTest(t, mlx5model.Config{BfRegSize: 512})
		cl, _, _ := runMLX5Pings(t, nic, pings, mlx5Run{ts: true, setup: func(cl, _ *Config) { cl.Stats = true }})
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
		if want := "gorping: mlx5_0: NIC completion timestamps: "; !strings.HasPrefix(cl.stderr.String(), want) || strings.Count(cl.stderr.String(), "\n") != 1 {
			t.Errorf("stderr %q, want one line starting %q", cl.stderr, want)
		}
	})
	t.Run("sw", func(t *testing.T) {
		nic := mlx5model.NewForTest(t, mlx5model.Config{BfRegSize: 512})
		cl, _, _ := runMLX5Pings(t, nic, 20, mlx5Run{setup: func(cl, _ *Config) { cl.JSON, cl.Stats = true, true }})
		if out := cl.stdout.String(); strings.Contains(out, "nic_rtt_ns") || strings.Count(out, `"ts_source":"sw"`) != 21 {
			t.Errorf("without timestamps: %s", out)
		}
	})
}
