package rping

import (
	"context"
	"time"
)

// bufID names the registered buffers of one connection (rping's recv_buf,
// send_buf, rdma_buf and the client's start_buf).
type bufID uint8

const (
	bufRecv  bufID = iota // 16 B RECV target (access LOCAL_WRITE)
	bufSend               // 16 B SEND source; the server's stays all zero (the "go ahead")
	bufRDMA               // Size B, LOCAL_WRITE|REMOTE_READ|REMOTE_WRITE: server READs into and WRITEs from it, client gets the echo in it
	bufStart              // client only, Size B, same access: the ping payload the server READs
	numBufs
)

// region is a registered buffer as the protocol core sees it. b is the mmap'd
// memory itself (never Go heap: the NIC reaches it by address), len(b) is the
// registered length, addr the address advertised to the peer (MR iova).
type region struct {
	b          []byte
	addr       uint64
	lkey, rkey uint32
}

// compKind says what a completion reports.
type compKind uint8

const (
	compSend  compKind = iota + 1 // SEND of the send buffer finished
	compRecv                      // a message landed in the recv buffer; byteLen is its size
	compRead                      // RDMA READ into the RDMA buffer finished
	compWrite                     // RDMA WRITE from the RDMA buffer finished
	// compDisconnected is RDMA_CM_EVENT_DISCONNECTED for this connection. The
	// transport has already printed "client/server DISCONNECT EVENT...".
	compDisconnected
	// compError is a fatal event for this connection (error CM event, device
	// removal, async QP error) that the transport has already reported.
	compError
	// compStall says that the watch set with Stall ran out with no completion
	// since (see stall.go).
	compStall
	// compKeepalive is the completion of a keepalive (PostKeepalive).
	compKeepalive
)

// IB work-completion status numbers the core treats specially (enum ibv_wc_status).
const (
	wcSuccess    = 0
	wcWRFlushErr = 5
)

// completion is one CQ entry or connection event, delivered in order by conn.Next.
type completion struct {
	kind    compKind
	status  int    // ibv_wc_status for send/recv/read/write; 0 is success
	byteLen uint32 // compRecv: bytes received
	ts      uint64 // the NIC's completion timestamp (device ticks), 0 if none (nicts.go)
}

// conn is what the ping loops need from one RC connection. The verbs/rdma_cm glue
// implements it; tests implement it with an in-memory fake.
//
// Contract:
//   - Before the loops start the glue has registered the buffers, posted the
//     first RECV (before connect/accept, as rping does) and completed the
//     connection; from then on the core reposts one RECV per RECV completion,
//     so exactly one is outstanding.
//   - All sends are signaled, each yields one compSend.
//   - Post* and Next must not allocate; Next blocks until a completion or
//     event is available or ctx is done (then it returns ctx.Err()). It sleeps
//     while it waits, unless the connection busy-polls (--poll). Completions
//     that reached the CQ before a connection event are delivered before it.
//     A non-nil error other than ctx's means the completion path itself broke
//     (e.g. reading the completion channel failed); the core prints it.
//   - Post* errors are returned as the provider's errno (syscall.Errno) where
//     there is one: rping prints and exits with that number.
type conn interface {
	// Region returns buffer id. It may change only across Grow.
	Region(id bufID) region
	// PostRecv posts one RECV of advertLen bytes into bufRecv.
	PostRecv() error
	// PostSend posts a signaled SEND of the advertLen bytes in bufSend.
	PostSend() error
	// PostRead posts a signaled RDMA READ of n bytes from (raddr, rkey) into bufRDMA[:n].
	PostRead(n int, raddr uint64, rkey uint32) error
	// PostWrite posts a signaled RDMA WRITE of bufRDMA[:n] to (raddr, rkey).
	PostWrite(n int, raddr uint64, rkey uint32) error
	// Next returns the next completion or connection event.
	Next(ctx context.Context) (completion, error)
	// Stall arms a one-shot watch: once d has passed since from (when the
	// wait began, a time the caller has read anyway) without a re-arm or a
	// disarm, Next returns a compStall. d <= 0 disarms it. A compStall may
	// still arrive shortly after a disarm or a completion: the core checks
	// the time itself.
	Stall(from time.Time, d time.Duration)
	// PostKeepalive posts a signaled zero-length RDMA WRITE to (raddr, rkey),
	// which completes as compKeepalive once the peer's host acknowledged it.
	PostKeepalive(raddr uint64, rkey uint32) error
	// Grow replaces bufRDMA with a registration of at least size bytes
	// (size <= MaxSize), keeping nothing of the old contents. The core calls it
	// only on the server, only while no operation on bufRDMA is outstanding,
	// when a client advertises more than the server's -S.
	Grow(size int) error
}
