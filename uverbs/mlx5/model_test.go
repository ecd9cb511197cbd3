package mlx5_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gorping/gorping/test/mlx5model"
	"github.com/gorping/gorping/uverbs"
	"github.com/gorping/gorping/uverbs/driver"
	"github.com/gorping/gorping/uverbs/mlx5"
)

// side is one end of a connection on the model: its own context (as two processes would
// have), a CQ with a completion channel, an RC QP and registered buffers.
type side struct {
	t    testing.TB
	nic  *mlx5model.NIC
	ctx  *uverbs.Context
	pd   *uverbs.PD
	ch   *uverbs.CompChannel
	cq   *uverbs.CQ
	qp   *uverbs.QP
	bufs map[string]*uverbs.Buffer
	mrs  map[string]*uverbs.MR
	poll bool // busy-poll instead of waiting for events
	wc   [4]driver.WC
	have []driver.WC
	// armed: an event is requested and not yet read. Like the product's loop, arm
	// again only after reading that event; re-arming on every call would leave one
	// unread event per arm in the channel (the kernel queues them all too).
	armed bool
}

const (
	access = driver.AccessLocalWrite | driver.AccessRemoteRead | driver.AccessRemoteWrite
	msgLen = 16
)

// page is the kernel page size the provider sees (0: this kernel's).
func newSide(t testing.TB, nic *mlx5model.NIC, page, cqDepth int, cap driver.QPCap) *side {
	t.Helper()
	s := &side{t: t, nic: nic, bufs: map[string]*uverbs.Buffer{}, mrs: map[string]*uverbs.MR{}}
	var err error
	if s.ctx, err = nic.Open("mlx5_0", mlx5.WithPageSize(page)); err != nil {
		t.Fatal(err)
	}
	if s.pd, err = s.ctx.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if s.ch, err = s.ctx.CreateCompChannel(); err != nil {
		t.Fatal(err)
	}
	if s.cq, err = s.ctx.CreateCQ(cqDepth, s.ch, 0); err != nil {
		t.Fatal(err)
	}
	if s.qp, err = s.pd.CreateQP(uverbs.QPInitAttr{SendCQ: s.cq, RecvCQ: s.cq, Type: driver.QPTypeRC, Cap: cap}); err != nil {
		t.Fatal(err)
	}
	for name, size := range map[string]int{"recv": msgLen, "send": msgLen, "rdma": 65536, "start": 65536} {
		b, err := uverbs.NewBuffer(size)
		if err != nil {
			t.Fatal(err)
		}
		mr, err := s.pd.RegMR(b, access)
		if err != nil {
			t.Fatal(err)
		}
		s.bufs[name], s.mrs[name] = b, mr
	}
	return s
}

func (s *side) close() {
	t := s.t
	for name, mr := range s.mrs {
		if err := mr.Dereg(); err != nil {
			t.Error(err)
		}
		s.bufs[name].Free()
	}
	for _, err := range []error{s.qp.Destroy(), s.cq.Destroy(), s.ch.Close(), s.pd.Dealloc(), s.ctx.Close()} {
		if err != nil {
			t.Error(err)
		}
	}
}

// connect moves both QPs to RTS aimed at each other, as rdma_cm would.
func connect(t testing.TB, a, b *side) {
	t.Helper()
	for _, p := range [][2]*side{{a, b}, {b, a}} {
		q, peer := p[0].qp, p[1].qp
		steps := []struct {
			attr driver.QPAttr
			mask driver.QPAttrMask
		}{
			{driver.QPAttr{State: driver.QPSInit, PortNum: 1, AccessFlags: access}, 0x39},
			{driver.QPAttr{State: driver.QPSRTR, PathMTU: driver.MTU1024, DestQPNum: peer.Num(), MaxDestRdAtomic: 1, MinRNRTimer: 12,
				AH: driver.AHAttr{IsGlobal: 1, PortNum: 1}}, 0x129181},
			{driver.QPAttr{State: driver.QPSRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1}, 0x12e01},
		}
		for _, st := range steps {
			if err := q.Modify(&st.attr, st.mask); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// next returns the next completion: busy-polling, or (event mode) polling, arming,
// re-polling and then sleeping on the completion channel.
func (s *side) next() driver.WC {
	s.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if len(s.have) > 0 {
			wc := s.have[0]
			s.have = s.have[1:]
			return wc
		}
		n, err := s.cq.Poll(s.wc[:])
		if err != nil {
			s.t.Fatal(err)
		}
		if n > 0 {
			s.have = append(s.have[:0], s.wc[:n]...)
			continue
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("no completion within 10s; CQ: %s; model violations: %q", s.cq.Describe(), s.nic.Errors())
		}
		if s.poll {
			runtime.Gosched() // the model's engine shares the CPUs
			continue
		}
		if !s.armed {
			if err := s.cq.Arm(false); err != nil {
				s.t.Fatal(err)
			}
			s.armed = true
			continue // re-poll: a completion may have arrived before the arm
		}
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		cq, err := s.ch.Wait(ctx)
		cancel()
		if err != nil {
			s.t.Fatalf("waiting for a completion event: %v; CQ: %s; model violations: %q", err, s.cq.Describe(), s.nic.Errors())
		}
		cq.Ack(1)
		s.armed = false
	}
}

func (s *side) expect(op driver.WCOpcode, n uint32) {
	s.t.Helper()
	wc := s.next()
	if wc.Status != driver.WCSuccess || wc.Opcode != op || (op != driver.WCSend && op != driver.WCRDMAWrite && wc.ByteLen != n) {
		s.t.Fatalf("completion %+v, want %v of %d bytes", wc, op, n)
	}
}

func (s *side) sge(name string, n int) []driver.SGE {
	return []driver.SGE{{Addr: s.bufs[name].Addr(), Length: uint32(n), LKey: s.mrs[name].LKey}}
}

// advert is rping's 16-byte message: buffer address, rkey, size (big-endian).
func (s *side) advert(name string, size int) {
	b := s.bufs["send"].Bytes()
	binary.BigEndian.PutUint64(b[0:], s.bufs[name].Addr())
	binary.BigEndian.PutUint32(b[8:], s.mrs[name].RKey)
	binary.BigEndian.PutUint32(b[12:], uint32(size))
}

func (s *side) post(wr *driver.SendWR) {
	s.t.Helper()
	if err := s.qp.PostSend(wr); err != nil {
		s.t.Fatal(err)
	}
}

func (s *side) postRecv() {
	s.t.Helper()
	if err := s.qp.PostRecv(&driver.RecvWR{ID: 1, SGE: s.sge("recv", msgLen)}); err != nil {
		s.t.Fatal(err)
	}
}

// pingPong runs rping's exchange count times: the client advertises its start buffer, the
// server READs it, acknowledges, the client advertises its RDMA buffer, the server WRITEs
// the payload there and acknowledges; the client checks the echo.
func pingPong(t *testing.T, client, server *side, count int) {
	client.postRecv()
	server.postRecv()
	for i := 0; i < count; i++ {
		size := 23 + i%1000
		payload := client.bufs["start"].Bytes()[:size]
		for j := range payload {
			payload[j] = byte('A' + (i+j)%26)
		}
		inline := driver.SendSignaled
		if i%2 == 1 {
			inline |= driver.SendInline // the inline path every other message
		}
		client.advert("start", size)
		client.post(&driver.SendWR{ID: 10, Opcode: driver.WRSend, Flags: inline, SGE: client.sge("send", msgLen)})
		client.expect(driver.WCSend, 0)

		server.expect(driver.WCRecv, msgLen)
		adv := server.bufs["recv"].Bytes()
		raddr, rkey, n := binary.BigEndian.Uint64(adv), binary.BigEndian.Uint32(adv[8:]), int(binary.BigEndian.Uint32(adv[12:]))
		if n != size {
			t.Fatalf("ping %d: advert size %d, want %d", i, n, size)
		}
		server.postRecv()
		server.post(&driver.SendWR{ID: 20, Opcode: driver.WRRDMARead, Flags: driver.SendSignaled, SGE: server.sge("rdma", n), RemoteAddr: raddr, RKey: rkey})
		server.expect(driver.WCRDMARead, uint32(n))
		if !bytes.Equal(server.bufs["rdma"].Bytes()[:n], payload) {
			t.Fatalf("ping %d: READ brought %q, want %q", i, server.bufs["rdma"].Bytes()[:n], payload)
		}
		server.post(&driver.SendWR{ID: 21, Opcode: driver.WRSend, Flags: driver.SendSignaled | driver.SendInline, SGE: server.sge("send", msgLen)})
		server.expect(driver.WCSend, 0)

		client.expect(driver.WCRecv, msgLen)
		client.postRecv()
		clear(client.bufs["rdma"].Bytes()[:size])
		client.advert("rdma", size)
		client.post(&driver.SendWR{ID: 11, Opcode: driver.WRSend, Flags: driver.SendSignaled, SGE: client.sge("send", msgLen)})
		client.expect(driver.WCSend, 0)

		server.expect(driver.WCRecv, msgLen)
		adv = server.bufs["recv"].Bytes()
		raddr, rkey = binary.BigEndian.Uint64(adv), binary.BigEndian.Uint32(adv[8:])
		server.postRecv()
		server.post(&driver.SendWR{ID: 22, Opcode: driver.WRRDMAWrite, Flags: driver.SendSignaled, SGE: server.sge("rdma", n), RemoteAddr: raddr, RKey: rkey})
		server.expect(driver.WCRDMAWrite, 0)
		server.post(&driver.SendWR{ID: 23, Opcode: driver.WRSend, Flags: driver.SendSignaled, SGE: server.sge("send", msgLen)})
		server.expect(driver.WCSend, 0)

		client.expect(driver.WCRecv, msgLen)
		client.postRecv()
		if !bytes.Equal(client.bufs["rdma"].Bytes()[:size], payload) {
			t.Fatalf("ping %d: echo %q, want %q", i, client.bufs["rdma"].Bytes()[:size], payload)
		}
	}
}

func TestModelPingPong(t *testing.T) {
	for _, c := range []struct {
		name  string
		bf    int
		poll  bool
		page  int // kernel page size the provider and the model see (0: this host's)
		pings int
	}{{"events-blueflame", 512, false, 0, 10000}, {"poll-doorbell", 0, true, 0, 10000},
		// arm64 kernels with 64 KiB pages: 16 UARs per mapping, 32 bfregs.
		{"events-blueflame-64k", 512, false, 64 << 10, 2000}} {
		t.Run(c.name, func(t *testing.T) {
			nic := mlx5model.NewForTest(t, mlx5model.Config{BfRegSize: c.bf, PageSize: c.page})
			// Small rings so that 10,000 pings wrap every ring many times.
			cap := driver.QPCap{MaxSendWR: 4, MaxRecvWR: 2, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 16}
			client, server := newSide(t, nic, c.page, 7, cap), newSide(t, nic, c.page, 7, cap)
			client.poll, server.poll = c.poll, c.poll
			connect(t, client, server)
			if got := client.qp.Cap(); got.MaxInlineData != 60 || got.MaxSendWR != 4 || got.MaxRecvWR != 4 {
				t.Errorf("QP caps %+v, want libmlx5's (4 send WRs, inline 60, 4 receives)", got)
			}
			pings := c.pings
			if testing.Short() { // make check: every ring still wraps hundreds of times
				pings = max(pings/10, 500)
			}
			pingPong(t, client, server, pings)
			st := nic.Stats()
			t.Logf("model: %+v", st)
			t.Logf("client: %s | %s | %s", client.ctx.Describe(), client.qp.Describe(), client.cq.Describe())
			if errs := nic.Errors(); len(errs) > 0 {
				t.Fatalf("the device model saw %d violations, first: %s", len(errs), errs[0])
			}
			if st.Sends != 4*pings || st.Reads != pings || st.Writes != pings || st.ErrorCQEs != 0 {
				t.Errorf("model executed %d SENDs, %d READs, %d WRITEs, %d error CQEs", st.Sends, st.Reads, st.Writes, st.ErrorCQEs)
			}
			// Every post rang once (6 per ping), by BlueFlame where it may (every WQE
			// here is small enough) or by the 8-byte doorbell.
			if st.Doorbells+st.BlueFlames != 6*pings || (c.bf != 0) != (st.BlueFlames == 6*pings) {
				t.Errorf("%d doorbells and %d BlueFlame copies for %d posts (bf_reg_size %d)", st.Doorbells, st.BlueFlames, 6*pings, c.bf)
			}
			if !c.poll && st.Arms == 0 {
				t.Error("event mode armed no CQ through the UAR")
			}
			// 8 CQ slots and 10 CQEs per ping; SQ of 16 blocks, RQ of 4 slots.
			if st.CQLaps < pings || st.SQLaps < pings/4 || st.RQLaps < pings {
				t.Errorf("rings wrapped too rarely: %+v", st)
			}
			if !c.poll && st.Events == 0 {
				t.Error("event mode saw no completion events")
			}
			if c.bf != 0 && !strings.Contains(client.qp.Describe(), "BlueFlame") {
				t.Errorf("QP does not use BlueFlame: %s", client.qp.Describe())
			}
			client.close()
			server.close()
		})
	}
}

// An RDMA WRITE to a key the peer never registered fails with REMOTE_ACCESS_ERR; the error
// CQE's syndrome is named, and the QP's outstanding receive is flushed.
func TestModelRemoteAccessError(t *testing.T) {
	nic := mlx5model.NewForTest(t, mlx5model.Config{BfRegSize: 512})
	cap := driver.QPCap{MaxSendWR: 4, MaxRecvWR: 2, MaxSendSGE: 1, MaxRecvSGE: 1}
	a, b := newSide(t, nic, 0, 7, cap), newSide(t, nic, 0, 7, cap)
	defer a.close()
	defer b.close()
	connect(t, a, b)
	a.postRecv()
	a.post(&driver.SendWR{ID: 99, Opcode: driver.WRRDMAWrite, Flags: driver.SendSignaled, SGE: a.sge("rdma", 64),
		RemoteAddr: b.bufs["rdma"].Addr(), RKey: b.mrs["rdma"].RKey ^ 0xff00})
	wc := a.next()
	if wc.Status != driver.WCRemAccessErr || wc.WRID != 99 {
		t.Fatalf("bad-rkey WRITE completed %+v, want REM_ACCESS_ERR for wr 99", wc)
	}
	if d := a.cq.Describe(); !strings.Contains(d, "REMOTE_ACCESS_ERR (syndrome 0x13") {
		t.Errorf("CQ description does not name the syndrome: %s", d)
	}
	if wc := a.next(); wc.Status != driver.WCWRFlushErr || wc.WRID != 1 {
		t.Errorf("outstanding receive completed %+v, want WR_FLUSH_ERR for wr 1", wc)
	}
	if errs := nic.Errors(); len(errs) != 1 || !strings.Contains(errs[0], "refused") {
		t.Errorf("model errors %q, want the one refused access", errs)
	}
}

// Closing a context with its objects still alive releases them as the kernel's context
// teardown does: the model's engine must not go on reading the freed doorbell records
// (a QP in ERR is flushed from them).
func TestModelContextCloseReleasesObjects(t *testing.T) {
	nic := mlx5model.NewForTest(t, mlx5model.Config{BfRegSize: 512})
	cap := driver.QPCap{MaxSendWR: 4, MaxRecvWR: 2, MaxSendSGE: 1, MaxRecvSGE: 1}
	a, b := newSide(t, nic, 0, 7, cap), newSide(t, nic, 0, 7, cap)
	defer b.close()
	connect(t, a, b)
	a.postRecv()
	if err := a.qp.Modify(&driver.QPAttr{State: driver.QPSErr}, driver.QPAttrState); err != nil {
		t.Fatal(err)
	}
	if err := a.ctx.Close(); err != nil {
		t.Fatal(err)
	}
	if qps, cqs, mrs := nic.Live(); qps != 1 || cqs != 1 || mrs != len(b.mrs) {
		t.Errorf("after closing one of two contexts the model holds %d QPs, %d CQs, %d MRs; want b's 1, 1, %d", qps, cqs, mrs, len(b.mrs))
	}
}
