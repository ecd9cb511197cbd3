package rping

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// fakeNet is an in-memory RDMA fabric for the ping loops: memory regions keyed
// by rkey, RC connections whose SEND lands in the peer's posted RECV, and RDMA
// READ/WRITE checked against MR bounds like a NIC would.
type fakeNet struct {
	mu       sync.Mutex
	mrs      map[uint32]*fakeMR
	nextKey  uint32
	nextAddr uint64
	// violations counts RDMA operations a NIC would have failed (local length,
	// remote access). The ping loops must never cause one.
	violations int
}

type fakeMR struct {
	b          []byte
	addr       uint64
	lkey, rkey uint32
	owner      *fakeConn
}

type fakeConn struct {
	net        *fakeNet
	peer       *fakeConn
	mrs        [numBufs]*fakeMR
	cq         chan completion
	recvPosted int
	pending    [4][advertLen]byte // SENDs that arrived before a RECV was posted
	npending   int
	dead       bool // disconnected: posts complete with WR_FLUSH_ERR

	growErr     error
	postSendErr error
	// partitioned: nothing this side posts reaches the peer or completes (a
	// cut cable, a peer host powered off), as on rxe, which retries for ever.
	partitioned bool
	policy      stallPolicy
	stallTimer  *time.Timer
	keepalives  int              // keepalives posted
	onWrite     func(dst []byte) // runs on the peer memory an RDMA WRITE from this conn filled
}

func newFakeNet() *fakeNet {
	return &fakeNet{mrs: map[uint32]*fakeMR{}, nextKey: 0x1000, nextAddr: 0x7f0000010000}
}

// reg registers a new zeroed buffer; called with n.mu held or before use.
func (n *fakeNet) reg(owner *fakeConn, size int) *fakeMR {
	n.nextKey++
	mr := &fakeMR{b: make([]byte, size), addr: n.nextAddr, lkey: n.nextKey, rkey: n.nextKey, owner: owner}
	n.nextAddr += uint64(size+4095)&^4095 + 4096 // leave a hole after each buffer
	n.mrs[mr.rkey] = mr
	return mr
}

func (n *fakeNet) newConn(size int, client bool) *fakeConn {
	c := &fakeConn{net: n, cq: make(chan completion, 256)}
	c.mrs[bufRecv] = n.reg(c, advertLen)
	c.mrs[bufSend] = n.reg(c, advertLen)
	c.mrs[bufRDMA] = n.reg(c, size)
	if client {
		c.mrs[bufStart] = n.reg(c, size)
	}
	c.recvPosted = 1 // the glue posts the first RECV before connecting
	return c
}

// pair connects a client conn of clientSize to a server conn of serverSize.
func (n *fakeNet) pair(clientSize, serverSize int) (cl, sv *fakeConn) {
	n.mu.Lock()
	defer n.mu.Unlock()
	cl, sv = n.newConn(clientSize, true), n.newConn(serverSize, false)
	cl.peer, sv.peer = sv, cl
	return cl, sv
}

func (n *fakeNet) violationCount() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.violations
}

// disconnect is rdma_disconnect on c: both sides flush their posted RECV and
// get DISCONNECTED (only c, if c is partitioned).
func (c *fakeConn) disconnect() {
	c.net.mu.Lock()
	defer c.net.mu.Unlock()
	for _, x := range []*fakeConn{c, c.peer} {
		if x.dead || x != c && c.partitioned { // the DREQ does not get through
			continue
		}
		x.dead = true
		for ; x.recvPosted > 0; x.recvPosted-- {
			x.cq <- completion{kind: compRecv, status: wcWRFlushErr}
		}
		x.cq <- completion{kind: compDisconnected}
	}
}

// inject queues a completion as if the transport had produced it.
func (c *fakeConn) inject(comp completion) { c.cq <- comp }

func (c *fakeConn) Region(id bufID) region {
	c.net.mu.Lock()
	defer c.net.mu.Unlock()
	mr := c.mrs[id]
	return region{b: mr.b, addr: mr.addr, lkey: mr.lkey, rkey: mr.rkey}
}

func (c *fakeConn) PostRecv() error {
	c.net.mu.Lock()
	defer c.net.mu.Unlock()
	switch {
	case c.dead:
		c.cq <- completion{kind: compRecv, status: wcWRFlushErr}
	case c.npending > 0:
		copy(c.mrs[bufRecv].b, c.pending[0][:])
		copy(c.pending[:], c.pending[1:c.npending])
		c.npending--
		c.cq <- completion{kind: compRecv, byteLen: advertLen}
	default:
		c.recvPosted++
	}
	return nil
}

func (c *fakeConn) PostSend() error {
	c.net.mu.Lock()
	defer c.net.mu.Unlock()
	if c.postSendErr != nil {
		return c.postSendErr
	}
	if c.partitioned {
		return nil
	}
	if c.dead {
		c.cq <- completion{kind: compSend, status: wcWRFlushErr}
		return nil
	}
	c.cq <- completion{kind: compSend}
	p, msg := c.peer, c.mrs[bufSend].b[:advertLen]
	if p.recvPosted > 0 {
		p.recvPosted--
		copy(p.mrs[bufRecv].b, msg)
		p.cq <- completion{kind: compRecv, byteLen: advertLen}
		return nil
	}
	copy(p.pending[p.npending][:], msg)
	p.npending++
	return nil
}

// remote finds n bytes at raddr in an MR of the peer covered by rkey.
func (c *fakeConn) remote(n int, raddr uint64, rkey uint32) []byte {
	mr, ok := c.net.mrs[rkey]
	if !ok || mr.owner != c.peer || raddr < mr.addr || raddr+uint64(n) > mr.addr+uint64(len(mr.b)) {
		return nil
	}
	off := raddr - mr.addr
	return mr.b[off : off+uint64(n)]
}

func (c *fakeConn) rdma(kind compKind, n int, raddr uint64, rkey uint32) error {
	c.net.mu.Lock()
	defer c.net.mu.Unlock()
	if c.dead {
		c.cq <- completion{kind: kind, status: wcWRFlushErr}
		return nil
	}
	if c.partitioned {
		return nil
	}
	local := c.mrs[bufRDMA].b
	if n > len(local) {
		c.net.violations++
		c.cq <- completion{kind: kind, status: 1} // IBV_WC_LOC_LEN_ERR
		return nil
	}
	rem := c.remote(n, raddr, rkey)
	if rem == nil {
		c.net.violations++
		c.cq <- completion{kind: kind, status: 10} // IBV_WC_REM_ACCESS_ERR
		return nil
	}
	if kind == compRead {
		copy(local, rem)
	} else {
		copy(rem, local[:n])
		if c.onWrite != nil {
			c.onWrite(rem)
		}
	}
	c.cq <- completion{kind: kind}
	return nil
}

func (c *fakeConn) PostRead(n int, raddr uint64, rkey uint32) error {
	return c.rdma(compRead, n, raddr, rkey)
}

func (c *fakeConn) PostWrite(n int, raddr uint64, rkey uint32) error {
	return c.rdma(compWrite, n, raddr, rkey)
}

func (c *fakeConn) Next(ctx context.Context) (completion, error) {
	select {
	case comp := <-c.cq:
		return comp, nil
	case <-ctx.Done():
		return completion{}, ctx.Err()
	}
}

func (c *fakeConn) Stall(from time.Time, d time.Duration) {
	c.net.mu.Lock()
	defer c.net.mu.Unlock()
	if c.stallTimer != nil {
		c.stallTimer.Stop()
	}
	if d > 0 {
		c.stallTimer = time.AfterFunc(max(d-time.Since(from), 0), func() {
			select {
			case c.cq <- completion{kind: compStall}:
			default:
			}
		})
	}
}

func (c *fakeConn) PostKeepalive(raddr uint64, rkey uint32) error {
	c.net.mu.Lock()
	defer c.net.mu.Unlock()
	c.keepalives++
	if !c.partitioned && !c.peer.partitioned {
		c.cq <- completion{kind: compKeepalive}
	}
	return nil
}

func (c *fakeConn) stallPolicy() stallPolicy { return c.policy }

func (c *fakeConn) Grow(size int) error {
	c.net.mu.Lock()
	defer c.net.mu.Unlock()
	if c.growErr != nil {
		return c.growErr
	}
	delete(c.net.mrs, c.mrs[bufRDMA].rkey)
	c.mrs[bufRDMA] = c.net.reg(c, size)
	return nil
}

// syncBuffer is a bytes.Buffer safe for the concurrent writers of a test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// side is one end of a test run: its config, output and exit status.
type side struct {
	cfg            Config
	stdout, stderr *syncBuffer
	status         chan int
}

func newSide(server bool, size, count int) *side {
	s := &side{stdout: &syncBuffer{}, stderr: &syncBuffer{}, status: make(chan int, 1)}
	s.cfg = DefaultConfig()
	s.cfg.Server, s.cfg.Size, s.cfg.Count = server, size, count
	s.cfg.Stdout, s.cfg.Stderr = s.stdout, s.stderr
	return s
}

// wait returns the side's exit status, failing the test after a deadline.
func (s *side) wait(t *testing.T) int {
	t.Helper()
	select {
	case st := <-s.status:
		return st
	case <-time.After(30 * time.Second):
		t.Fatalf("ping loop did not finish; stdout %q stderr %q", s.stdout, s.stderr)
		return -1
	}
}

// startServer runs runPingServer on sv in a goroutine.
func (s *side) startServer(ctx context.Context, sv *fakeConn) {
	go func() { s.status <- runPingServer(ctx, sv, &s.cfg) }()
}

// startClient runs runPingClient on cl in a goroutine and then, like the glue,
// disconnects.
func (s *side) startClient(ctx context.Context, cl *fakeConn) {
	go func() {
		st := runPingClient(ctx, cl, &s.cfg)
		cl.disconnect()
		s.status <- st
	}()
}

// pingLines is what -v prints for pings 0..n-1 of size.
func pingLines(prefix string, n, size int) string {
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, "%s%s\n", prefix, PayloadString(i, size))
	}
	return b.String()
}

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }
