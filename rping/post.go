package rping

import (
	"context"
	"fmt"
	"time"

	"github.com/gorping/gorping/uverbs"
)

// The connection's data path as the ping loop sees it (conn): its buffers, the posts
// and the completions. verbs.go sets the connection up; this is what the loop uses of it.

// ensure the verbs conn satisfies the ping loops' interface.
var _ conn = (*verbsConn)(nil)

func (c *verbsConn) Region(id bufID) region {
	mr := c.mrs[id]
	return region{b: c.bufs[id].Bytes()[:mr.Len], addr: mr.Addr, lkey: mr.LKey, rkey: mr.RKey}
}

func (c *verbsConn) PostRecv() error { return c.qp.PostRecv(&c.recvWR) }

func (c *verbsConn) PostSend() error { return c.qp.PostSend(&c.sendWR) }

func (c *verbsConn) PostRead(n int, raddr uint64, rkey uint32) error {
	return c.postRDMA(uverbs.WRRDMARead, n, raddr, rkey)
}

func (c *verbsConn) PostWrite(n int, raddr uint64, rkey uint32) error {
	return c.postRDMA(uverbs.WRRDMAWrite, n, raddr, rkey)
}

func (c *verbsConn) postRDMA(op uverbs.WROpcode, n int, raddr uint64, rkey uint32) error {
	c.rdmaWR.Opcode, c.rdmaWR.RemoteAddr, c.rdmaWR.RKey = op, raddr, rkey
	c.rdmaSGE[0].Length = uint32(n)
	return c.qp.PostSend(&c.rdmaWR)
}

func (c *verbsConn) Next(ctx context.Context) (completion, error) { return c.wait.next(ctx) }

func (c *verbsConn) Stall(from time.Time, d time.Duration) { c.wait.stall(from, d) }

func (c *verbsConn) PostKeepalive(raddr uint64, rkey uint32) error {
	c.kaWR.RemoteAddr, c.kaWR.RKey = raddr, rkey
	return c.qp.PostSend(&c.kaWR)
}

// stallPolicy is the connection's stall bound (set once it is established).
func (c *verbsConn) stallPolicy() stallPolicy { return c.policy }

func (c *verbsConn) Grow(size int) error {
	b, err := uverbs.NewBuffer(size)
	if err != nil {
		return fmt.Errorf("rdma_buf of %d bytes: %w", size, err)
	}
	mr, err := c.pd.RegMR(b, uverbs.AccessLocalWrite|uverbs.AccessRemoteRead|uverbs.AccessRemoteWrite)
	if err != nil {
		b.Free()
		return fmt.Errorf("rdma_buf of %d bytes: reg_mr: %w", size, err)
	}
	c.traceBuffer("rdma_buf", b)
	c.mrs[bufRDMA].Dereg()
	c.bufs[bufRDMA].Free()
	c.bufs[bufRDMA], c.mrs[bufRDMA] = b, mr
	c.rdmaSGE[0].Addr, c.rdmaSGE[0].LKey = mr.Addr, mr.LKey
	return nil
}
