package rping

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gorping/gorping/internal/trace"
	"github.com/gorping/gorping/rdmacm"
	"github.com/gorping/gorping/rping/explain"
	"github.com/gorping/gorping/uverbs"
)

// Per-connection verbs sizes, as rping's (§3.6 of the spec).
const (
	cqDepth   = 32
	sqDepth   = 16
	rqDepth   = 2
	sendRetry = 7
)

// verbsConn is a conn over one rdma_cm connection: rping's rping_cb minus the
// protocol state. The ping loop polls the CQ and waits on the completion
// channel itself (cqWait), replacing rping's CQ thread and semaphore; one
// goroutine per connection turns its CM events into completions (rping's CM
// thread) and wakes that wait.
type verbsConn struct {
	out    *printer
	id     cmID
	label  string // "parent" or "child" in cma_event debug lines
	role   string // "client" or "server" in "… DISCONNECT EVENT..."
	selfQP bool

	host    uverbs.Host // where the device's sysfs is (diagnostics, the stall cause)
	dev     uverbs.Device
	vctx    *uverbs.Context
	devAttr uverbs.DeviceAttr
	port    uint8
	ib      bool
	pd      *uverbs.PD
	ch      *uverbs.CompChannel
	cq      *uverbs.CQ
	qp      *uverbs.QP
	peerQPN uint32 // the peer's QP number, from the client's connection event (0: not known)
	bufs    [numBufs]*uverbs.Buffer
	mrs     [numBufs]*uverbs.MR

	recvWR  uverbs.RecvWR
	recvSGE [1]uverbs.SGE
	sendWR  uverbs.SendWR
	sendSGE [1]uverbs.SGE
	rdmaWR  uverbs.SendWR
	rdmaSGE [1]uverbs.SGE
	kaWR    uverbs.SendWR // the keepalive: zero-length RDMA WRITE
	kaSGE   [1]uverbs.SGE
	policy  stallPolicy // the stall bound, once the connection is up
	// mtuWarning says that this host cannot send packets of the connection's
	// path MTU ("" if it can; checkPathMTU).
	mtuWarning string

	ts     tsInfo          // completion timestamps (nicts.go)
	busy   bool            // --poll: the ping loop busy-polls the CQ
	spin   func()          // with busy: Config.spin
	tr     *trace.Tracer   // --trace; nil otherwise
	wait   *cqWait         // the ping loop's completion path
	ctx    context.Context // the CM goroutine's context; cancel ends it
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// Once up: the connection's life, which a fatal asynchronous event (the watch aw
	// on the subscription sub) ends with an *asyncFatal, and the prober with its
	// ping deadline.
	life context.Context
	end  context.CancelCauseFunc
	sub  *uverbs.AsyncEvents
	aw   *asyncWatch
}

// newVerbsConn is rping_setup_qp: verbs context, PD, completion channel, CQ
// (armed once) and QP for id, whose device is known (resolved or requested).
// On failure it has printed rping's message and released what it made, and
// returns the status to print with "setup_qp failed: %d".
func newVerbsConn(id cmID, cfg *Config, out *printer, server bool) (*verbsConn, int) {
	c := &verbsConn{out: out, id: id, host: cfg.host, selfQP: cfg.SelfCreateQP, busy: cfg.Poll, spin: cfg.spin,
		label: "parent", role: "client", tr: cfg.tr}
	if server {
		c.label, c.role = "child", "server"
	}
	if ret := c.openDevice(cfg); ret != 0 {
		return nil, ret
	}
	if ret := c.createQueues(cfg, server); ret != 0 {
		return nil, ret
	}
	if ret := c.attachQP(); ret != 0 {
		return nil, ret
	}
	out.debugf("created qp %p\n", c.qp)
	for _, d := range []string{c.vctx.Describe(), c.cq.Describe(), c.qp.Describe()} {
		if d != "" { // the provider's view (mlx5: UAR/bfreg, queue sizes)
			out.debugf("%s\n", d)
		}
	}
	return c, 0
}

// setupFailed prints rping's line for a failed verbs call, releases what the
// connection holds and returns err's errno for "setup_qp failed: %d".
func (c *verbsConn) setupFailed(msg string, err error) int {
	c.out.errorf("%s\n", msg)
	c.free()
	return errnoOf(err)
}

// openDevice opens the verbs context of the ID's device (one per device for all
// connections: a -P server's clients share it) and reads the device's and the
// port's attributes.
func (c *verbsConn) openDevice(cfg *Config) int {
	dev, err := c.id.Device()
	if err != nil {
		c.out.hint("gorping: " + err.Error())
		return errnoOf(err)
	}
	c.dev = dev
	if c.vctx, err = cfg.openVerbs(dev, true); err != nil {
		c.out.hint(explain.VerbsOpen(dev, err))
		return errnoOf(err)
	}
	if c.devAttr, err = c.vctx.QueryDevice(); err != nil {
		return c.setupFailed("ibv_query_device failed", err)
	}
	ai, err := c.id.Query()
	if err != nil {
		return c.setupFailed("rdma_query_addr failed", err)
	}
	c.port = ai.PortNum
	pa, err := c.vctx.QueryPort(c.port)
	if err != nil {
		return c.setupFailed("ibv_query_port failed", err)
	}
	c.ib = pa.LinkLayer == uverbs.LinkLayerInfiniBand
	return 0
}

// createQueues makes the PD, the completion channel, the CQ (armed once, with
// completion timestamps where wanted: nicts.go) and the RC QP.
func (c *verbsConn) createQueues(cfg *Config, server bool) int {
	var err error
	if c.pd, err = c.vctx.AllocPD(); err != nil {
		return c.setupFailed("ibv_alloc_pd failed", err)
	}
	c.out.debugf("created pd %p\n", c.pd)
	if c.ch, err = c.vctx.CreateCompChannel(); err != nil {
		return c.setupFailed("ibv_create_comp_channel failed", err)
	}
	c.out.debugf("created channel %p\n", c.ch)
	if c.cq, err = c.createCQ(cfg, server); err != nil {
		return c.setupFailed("ibv_create_cq failed", err)
	}
	c.out.debugf("created cq %p\n", c.cq)
	if err = c.cq.Arm(false); err != nil {
		// rping prints the create message here too (copy-paste); say what failed.
		return c.setupFailed("ibv_req_notify_cq failed", err)
	}
	qpAttr := uverbs.QPInitAttr{SendCQ: c.cq, RecvCQ: c.cq, Type: uverbs.QPTypeRC,
		Cap: uverbs.QPCap{MaxSendWR: sqDepth, MaxRecvWR: rqDepth, MaxSendSGE: 1, MaxRecvSGE: 1}}
	c.qp, err = c.pd.CreateQP(qpAttr)
	if err != nil && c.dropTimestamps(err) {
		qpAttr.SendCQ, qpAttr.RecvCQ = c.cq, c.cq
		c.qp, err = c.pd.CreateQP(qpAttr)
	}
	if err != nil {
		name := "rdma_create_qp"
		if c.selfQP {
			name = "ibv_create_qp"
		}
		perror(c.out.stderr, name, err)
		c.free()
		return -1
	}
	return 0
}

// attachQP readies the QP for the first RECV: rping -q moves it to INIT itself,
// otherwise rdma_cm takes it over (rdma_create_qp's second half).
func (c *verbsConn) attachQP() int {
	if !c.selfQP {
		if err := c.id.AttachQP(c.qp, c.ib); err != nil {
			perror(c.out.stderr, "rdma_create_qp", err)
			c.free()
			return -1
		}
		return 0
	}
	a := uverbs.QPAttr{State: uverbs.QPSInit, PKeyIndex: 0, PortNum: c.port, AccessFlags: 0}
	if err := c.qp.Modify(&a, uverbs.QPAttrState|uverbs.QPAttrPKeyIndex|uverbs.QPAttrPort|uverbs.QPAttrAccessFlags); err != nil {
		perror(c.out.stderr, "ibv_modify_qp", err)
		c.free()
		return -1
	}
	return 0
}

// setupBuffers is rping_setup_buffers: mmap'd buffers registered with rping's
// access rights, and the reusable work requests. It returns 0 or the status
// to print with "rping_setup_buffers failed: %d".
func (c *verbsConn) setupBuffers(size int, client bool) int {
	c.out.debugf("rping_setup_buffers called on cb %p\n", c)
	rw := uverbs.AccessLocalWrite | uverbs.AccessRemoteRead | uverbs.AccessRemoteWrite
	type spec struct {
		id     bufID
		size   int
		access uverbs.AccessFlags
		name   string
	}
	specs := []spec{{bufRecv, advertLen, uverbs.AccessLocalWrite, "recv_buf"}, {bufSend, advertLen, 0, "send_buf"},
		{bufRDMA, size, rw, "rdma_buf"}}
	if client {
		specs = append(specs, spec{bufStart, size, rw, "start_buf"})
	}
	for _, s := range specs {
		b, err := uverbs.NewBuffer(s.size)
		if err != nil {
			c.out.errorf("%s malloc failed\n", s.name)
			return -12
		}
		c.traceBuffer(s.name, b)
		mr, err := c.pd.RegMR(b, s.access)
		if err != nil {
			b.Free()
			c.out.errorf("%s reg_mr failed\n", s.name)
			c.out.hint(explain.Memlock(err))
			return errnoOf(err)
		}
		c.bufs[s.id], c.mrs[s.id] = b, mr
	}
	c.recvSGE[0] = uverbs.SGE{Addr: c.mrs[bufRecv].Addr, Length: advertLen, LKey: c.mrs[bufRecv].LKey}
	c.recvWR = uverbs.RecvWR{SGE: c.recvSGE[:]}
	c.sendSGE[0] = uverbs.SGE{Addr: c.mrs[bufSend].Addr, Length: advertLen, LKey: c.mrs[bufSend].LKey}
	c.sendWR = uverbs.SendWR{Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGE: c.sendSGE[:]}
	c.rdmaSGE[0] = uverbs.SGE{Addr: c.mrs[bufRDMA].Addr, LKey: c.mrs[bufRDMA].LKey}
	c.rdmaWR = uverbs.SendWR{Flags: uverbs.SendSignaled, SGE: c.rdmaSGE[:]}
	// One SGE of length 0 (some providers expect an SGE): nothing is read
	// locally or written remotely.
	c.kaSGE[0] = uverbs.SGE{Addr: c.mrs[bufRecv].Addr, LKey: c.mrs[bufRecv].LKey}
	c.kaWR = uverbs.SendWR{ID: keepaliveWRID, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled, SGE: c.kaSGE[:]}
	c.out.debugLine("allocated & registered buffers...\n")
	return 0
}

// start prepares the completion path (rping starts its cq_thread here). The
// ping loop polls the CQ itself (see cqWait); no goroutine runs for it.
func (c *verbsConn) start(ctx context.Context) {
	c.ctx, c.cancel = context.WithCancel(ctx)
	c.wait = newCQWait(c.cq, c.ch, c.out, c.busy, true)
	c.wait.spin = c.spin
	c.out.debugLine("cq_thread started.\n")
}

// watchCM runs the connection's CM event goroutine (rping's CM thread, for
// the events that arrive once the connection is up): it only parks each event
// for the ping loop and wakes its wait. Call after start.
func (c *verbsConn) watchCM() {
	c.wg.Add(1)
	go c.cmLoop(c.ctx)
}

func (c *verbsConn) cmLoop(ctx context.Context) {
	defer c.wg.Done()
	disconnected := false
	for {
		ev, err := c.id.Event(ctx)
		if err != nil {
			return
		}
		if c.out.debug {
			c.out.debugf("cma_event type %s cma_id %p (%s)\n", ev.Type, c.id, c.label)
		}
		if ev.Type == rdmacm.EventTimewaitExit && disconnected {
			// The connection's last event. rping destroys its id right after the
			// disconnect and so (nearly) never sees it; gorping's id lives until the
			// connection's teardown, and reporting it as "unhandled" would be noise.
			continue
		}
		comp, ok := cmCompletion(c.out, ev, c.role)
		if comp.kind == compDisconnected {
			disconnected = true
		}
		if ok && !c.wait.deliverCM(ctx, comp) {
			return
		}
	}
}

// cmCompletion is rping_cma_event_handler for a connected ID: it prints
// rping's lines and says which completion, if any, the ping loop gets.
func cmCompletion(out *printer, ev rdmacm.Event, role string) (completion, bool) {
	if out.deviceGone() { // the run ends (its context): nothing for the loop
		return completion{}, false
	}
	switch ev.Type {
	case rdmacm.EventDisconnected:
		out.errorf("%s DISCONNECT EVENT...\n", role)
		return completion{kind: compDisconnected}, true
	case rdmacm.EventDeviceRemoval:
		out.deviceRemoved() // ends the run's context, hence the ping loop
		return completion{}, false
	case rdmacm.EventAddrError, rdmacm.EventRouteError, rdmacm.EventConnectError,
		rdmacm.EventUnreachable, rdmacm.EventRejected:
		out.errorf("cma event %s, error %d\n", ev.Type, ev.Status)
		if ev.Type == rdmacm.EventUnreachable && ev.Status == -int32(unix.ETIMEDOUT) {
			out.hint(explain.MACChanged(role))
		}
		return completion{kind: compError}, true
	case rdmacm.EventEstablished:
		out.debugLine("ESTABLISHED\n")
		return completion{}, false
	}
	out.errorf("unhandled event: %s, ignoring\n", ev.Type)
	return completion{}, false
}

// selfModify is rping_self_modify_qp (-q): INIT, RTR, RTS with the kernel's
// attributes, verbatim.
func (c *verbsConn) selfModify() error {
	for _, s := range []uverbs.QPState{uverbs.QPSInit, uverbs.QPSRTR, uverbs.QPSRTS} {
		a, mask, err := c.id.InitQPAttr(s)
		if err != nil {
			return fmt.Errorf("init qp attr %v: %w", s, err)
		}
		if err := c.qp.Modify(a, mask); err != nil {
			return fmt.Errorf("modify qp to %v: %w", s, err)
		}
	}
	return nil
}

// iwarp reports whether the connection runs over iWARP (e.g. siw), where the
// kernel's iw_cm, not the application, moves the QP to RTS.
func (c *verbsConn) iwarp() bool { return c.qp != nil && c.qp.Transport() == uverbs.TransportIWARP }

// disconnect is rping_disconnect: in -q mode the QP goes to ERR first (rdma_cm
// does that only for QPs it owns), so posted work requests flush.
func (c *verbsConn) disconnect() {
	if c.selfQP {
		a := uverbs.QPAttr{State: uverbs.QPSErr}
		c.qp.Modify(&a, uverbs.QPAttrState)
	}
	c.id.Disconnect()
}

// close stops the goroutines, destroys the ID and frees the verbs resources.
func (c *verbsConn) close() {
	if c.aw != nil {
		c.aw.stop()
		c.sub.Close()
	}
	if c.end != nil {
		c.end(nil)
	}
	if c.cancel != nil {
		c.cancel()
		c.wg.Wait()
		c.wait.stop()
	}
	c.out.debugf("destroy cm_id %p\n", c.id)
	c.id.Destroy()
	c.free()
}

// slowDestroy is how long a QP's destruction may take before gorping says it waits.
const slowDestroy = 5 * time.Second

// free releases the verbs resources in rping's order: buffers, QP, CQ,
// channel, PD, then the device context.
func (c *verbsConn) free() {
	if c.mrs[bufRecv] != nil {
		c.out.debugf("rping_free_buffers called on cb %p\n", c)
	}
	for i := range c.mrs {
		if c.mrs[i] != nil {
			c.mrs[i].Dereg()
			c.mrs[i] = nil
		}
		if c.bufs[i] != nil {
			c.bufs[i].Free()
			c.bufs[i] = nil
		}
	}
	var errs []error
	if c.qp != nil {
		// rxe's DESTROY_QP first drains the QP's send work, which a link that
		// went down can hold up; a teardown that waits says so.
		slow := time.AfterFunc(slowDestroy, func() {
			c.out.hint(fmt.Sprintf("gorping: %s: the kernel has not destroyed the connection's QP after %s (the driver is still draining its send queue; a link that went down can hold it); waiting",
				c.vctx.Device().Name, secs(slowDestroy)))
		})
		errs = append(errs, c.qp.Destroy())
		slow.Stop()
	}
	if c.cq != nil {
		errs = append(errs, c.cq.Destroy())
	}
	if c.ch != nil {
		errs = append(errs, c.ch.Close())
	}
	if c.pd != nil {
		errs = append(errs, c.pd.Dealloc())
	}
	if c.vctx != nil {
		errs = append(errs, c.vctx.Close())
	}
	if err := errors.Join(errs...); err != nil && c.out.debug {
		c.out.debugf("teardown: %v\n", err)
	}
}

// conn implementation.

// remote is the peer's address, for the server's session report.
func (c *verbsConn) remote() string {
	ai, err := c.id.Query()
	if err != nil {
		return ""
	}
	return ai.Dst.String()
}

// describe says which device, port and GID the connection uses (--json).
// The GID is the port's entry for the connection's source address (RoCE),
// else the port's first (InfiniBand).
func (c *verbsConn) describe() connInfo {
	ci := connInfo{Role: c.role, Device: c.dev.Name, Driver: c.dev.Driver, Port: c.port, GIDIndex: -1}
	if c.role == "client" && c.ts.device != "" {
		ci.TSSource, ci.TSNote = c.ts.source(), c.ts.note
	}
	ai, err := c.id.Query()
	if err != nil {
		return ci
	}
	ci.Local, ci.Remote = ai.Src.String(), ai.Dst.String()
	gids, err := c.vctx.GIDTable()
	if err != nil {
		return ci
	}
	src := ai.Src.Addr().Unmap().WithZone("")
	var first, match *uverbs.GIDEntry
	for i := range gids {
		g := &gids[i]
		if g.Port != uint32(c.port) {
			continue
		}
		if first == nil || g.Index < first.Index {
			first = g
		}
		if netip.AddrFrom16(g.GID).Unmap() == src && (match == nil || g.Type == uverbs.GIDTypeRoCEv2) {
			match = g
		}
	}
	pick := first
	if match != nil {
		pick = match
	}
	if pick != nil {
		ci.GID, ci.GIDIndex, ci.GIDType = netip.AddrFrom16(pick.GID).String(), int(pick.Index), pick.Type.String()
	}
	return ci
}

// traceBuffer records the anonymous mapping behind one of rping's buffers (--trace):
// registered memory the NIC reads and writes by DMA, never Go heap.
func (c *verbsConn) traceBuffer(name string, b *uverbs.Buffer) {
	if c.tr == nil {
		return
	}
	c.tr.Emit("mmap", "anonymous buffer "+name, []trace.Field{trace.F("addr", fmt.Sprintf("%#x", b.Addr())),
		trace.F("length", len(b.Bytes()))}, nil, nil)
}

// setupConn is what rping's client and server do with their connection's ID before
// connecting: rping_setup_qp, rping_setup_buffers and the first RECV (posted before
// connect or accept, as rping does). On failure it has printed rping's line, rejected a
// server's connection request, released everything including id, and returns the exit
// status.
func setupConn(id cmID, cfg *Config, out *printer, server bool) (*verbsConn, int) {
	c, ret := newVerbsConn(id, cfg, out, server)
	if ret != 0 {
		out.errorf("setup_qp failed: %d\n", ret)
		if server {
			id.Reject()
		} else {
			out.debugf("destroy cm_id %p\n", id)
		}
		id.Destroy()
		return nil, statusOf(ret)
	}
	fail := func(ret int) (*verbsConn, int) {
		if server {
			id.Reject()
		}
		c.close()
		return nil, statusOf(ret)
	}
	if ret := c.setupBuffers(cfg.Size, !server); ret != 0 {
		out.errorf("rping_setup_buffers failed: %d\n", ret)
		return fail(ret)
	}
	if err := c.PostRecv(); err != nil {
		out.errorf("ibv_post_recv failed: %d\n", errnoOf(err))
		return fail(errnoOf(err))
	}
	return c, 0
}

// up brings a set-up connection up, the same way for rping's client, its server and
// the prober: it watches the verbs context's asynchronous events (subscribed before
// connecting, so no event of this QP is missed; a fatal one, a QP or CQ error, a port
// error, a fatal device, ends the connection's life with its message), starts the
// completion path, connects (connectClient) or accepts (accept), then starts the CM
// goroutine and sets the stall bound from the QP. ctx is the run's; the connection's
// life (c.life) ends with it. On failure it has printed rping's lines and what the port
// and the events tell, and returns the exit status; the caller still closes c.
func (c *verbsConn) up(ctx context.Context, cfg *Config, connect func(context.Context) int) int {
	c.life, c.end = context.WithCancelCause(ctx)
	c.sub = c.vctx.SubscribeAsync() // the context may be shared: other connections see its events too
	c.aw = watchAsync(c.life, c.sub.Next, c.dev.Name, c.qp, c.cq, c.port, c.out, c.end)
	c.start(c.life)
	if ret := connect(c.life); ret != 0 {
		if ret == exitInterrupted || ret == exitTimeout {
			return asyncStatus(c.life, ret)
		}
		c.out.errorf("connect error %d\n", ret)
		c.explain()
		return statusOf(ret)
	}
	c.watchCM()
	c.policy = qpPolicy(c.qp, cfg.Timeout)
	c.checkPathMTU(cfg)
	return 0
}

// explain says, after a failure, what the connection's port and asynchronous events
// tell about it (the async watch prints at most one line per connection).
func (c *verbsConn) explain() {
	pa, err := c.vctx.QueryPort(c.port)
	// A link that went down fails the QP's work requests at once, a
	// moment before rxe marks the port DOWN and queues PORT_ERR: for a
	// failure a lost link can cause, give the port's state (or the
	// watcher's event) a bounded moment to catch up.
	if c.wait != nil && linkLossStatus(c.wait.firstErr) {
		for deadline := time.Now().Add(time.Second); err == nil && pa.State == uverbs.PortActive &&
			!c.aw.said.Load() && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
			pa, err = c.vctx.QueryPort(c.port)
		}
	}
	c.aw.explain(c.dev.Name, c.port, pa.State, err)
}

// linkLossStatus reports whether a failed completion's status is one a link
// going down produces (the local QP's send failed, or the peer never answered).
func linkLossStatus(st uverbs.WCStatus) bool {
	return st == uverbs.WCLocQPOpErr || st == uverbs.WCRetryExcErr
}

// asyncStatus is 255 if a fatal asynchronous event ended the connection (its
// message is out), else st.
func asyncStatus(ctx context.Context, st int) int {
	var af *asyncFatal
	if errors.As(context.Cause(ctx), &af) {
		return exitFailure
	}
	return st
}
