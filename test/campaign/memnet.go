package campaign

import (
	"context"
	"fmt"
	"net"
	"sync"
	"syscall"
)

// memNet is the management network the agents' HTTP runs over: in-memory listeners by
// address and net.Pipe connections, which block on channels (testing/synctest's clock
// moves on while they wait).
type memNet struct {
	mu  sync.Mutex
	lns map[string]*memListener
}

func newMemNet() *memNet { return &memNet{lns: map[string]*memListener{}} }

// listen opens a listener on addr (host:port); an address in use is an error.
func (n *memNet) listen(addr string) (*memListener, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.lns[addr] != nil {
		return nil, fmt.Errorf("listen %s: address in use", addr)
	}
	l := &memListener{n: n, addr: memAddr(addr), conns: make(chan net.Conn), done: make(chan struct{})}
	n.lns[addr] = l
	return l, nil
}

// dial connects to addr's listener; none listening is ECONNREFUSED.
func (n *memNet) dial(ctx context.Context, _, addr string) (net.Conn, error) {
	n.mu.Lock()
	l := n.lns[addr]
	n.mu.Unlock()
	if l == nil {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	}
	a, b := net.Pipe()
	select {
	case l.conns <- b:
		return a, nil
	case <-l.done:
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type memAddr string

func (a memAddr) Network() string { return "tcp" }
func (a memAddr) String() string  { return string(a) }

type memListener struct {
	n     *memNet
	addr  memAddr
	conns chan net.Conn
	once  sync.Once
	done  chan struct{}
}

func (l *memListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *memListener) Close() error {
	l.once.Do(func() {
		close(l.done)
		l.n.mu.Lock()
		if l.n.lns[string(l.addr)] == l {
			delete(l.n.lns, string(l.addr))
		}
		l.n.mu.Unlock()
	})
	return nil
}

func (l *memListener) Addr() net.Addr { return l.addr }
