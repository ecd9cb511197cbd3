//go:build !guest

// The model runs on the host (make unit, make unit-arm64); inside the TCG guests it would
// only add minutes to the rxe tier.

package rping

import (
	"context"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/gorping/gorping/uverbs"
	"github.com/gorping/gorping/uverbs/mlx5/mlx5model"
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
}

const mlx5Access = uverbs.AccessLocalWrite | uverbs.AccessRemoteRead | uverbs.AccessRemoteWrite

func newMLX5Conn(t testing.TB, nic *mlx5model.NIC, size int, client, poll bool) *mlx5Conn {
	t.Helper()
	c := &mlx5Conn{t: t}
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
	c.cq, err = c.ctx.CreateCQ(cqDepth, c.ch, 0)
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
			cl, sv := newSide(false, DefaultSize, pings), newSide(true, DefaultSize, 0)
			cl.cfg.Verbose, cl.cfg.Validate, sv.cfg.Verbose = true, true, true
			c := newMLX5Conn(t, nic, DefaultSize, true, mode.poll)
			s := newMLX5Conn(t, nic, DefaultSize, false, mode.poll)
			// The glue posts the first RECV before connecting.
			if err := c.PostRecv(); err != nil {
				t.Fatal(err)
			}
			if err := s.PostRecv(); err != nil {
				t.Fatal(err)
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
			select {
			case clSt = <-cl.status:
			case <-ctx.Done():
				t.Fatalf("client did not finish: %v", ctx.Err())
			}
			select {
			case svSt = <-sv.status:
			case <-ctx.Done():
				t.Fatalf("server did not finish: %v", ctx.Err())
			}
			if clSt != 0 || svSt != 0 {
				t.Fatalf("exit client %d server %d; stderr client %q server %q", clSt, svSt, cl.stderr, sv.stderr)
			}
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
			c.close()
			s.close()
		})
	}
}
