package members

import (
	"context"
	"encoding/binary"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
)

// maxMessage is a DNS message's size limit over TCP (RFC 1035 §4.2.2: a two-byte
// length). An answer within one record of it has been cut by the server, TC or not.
const (
	maxMessage = 65535
	maxRecord  = 28 + 2 // an AAAA record with a compressed name
)

// DNS resolves agent names like Go's resolver (which it is: PreferGo, the system's
// configuration) and watches the answers on the wire: a headless Service's name answers
// with every agent's address in one message, and a message holds at most 64 KiB (about
// 4,000 A records). An answer that the server truncated (TC over TCP), or that reached
// the limit, is missing agents without any error: DNS says so once, with what to use
// instead, and Cut reports it.
type DNS struct {
	r       *net.Resolver
	server  string // "": the system's name servers; else every query goes here (tests)
	log     *slog.Logger
	option  string // the option whose name is resolved, for the log line
	instead string // what to use instead
	said    atomic.Bool
	cut     atomic.Bool
}

// NewDNS makes a resolver for option's name (e.g. "--agents-dns"); instead names the
// sources that scale (said when an answer is cut). server, if not "", is the name
// server to ask instead of the system's (host:port).
func NewDNS(log *slog.Logger, option, instead, server string) *DNS {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &DNS{server: server, log: log, option: option, instead: instead}
	var dialer net.Dialer
	d.r = &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
		if d.server != "" {
			address = d.server
		}
		c, err := dialer.DialContext(ctx, network, address)
		if err != nil {
			return nil, err
		}
		st, _ := ctx.Value(lookupKey{}).(*lookupState)
		if st == nil {
			return c, nil
		}
		if u, ok := c.(*net.UDPConn); ok {
			// A PacketConn still: Go's resolver reads one message per read from those.
			return &watchPacket{UDPConn: u, st: st}, nil
		}
		return &watchConn{Conn: c, st: st}, nil
	}}
	return d
}

// Cut reports whether the last answer was cut.
func (d *DNS) Cut() bool { return d.cut.Load() }

// LookupNetIP is net.Resolver's, watching the answers (mesh/target's Resolver).
func (d *DNS) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	st := &lookupState{}
	addrs, err := d.r.LookupNetIP(context.WithValue(ctx, lookupKey{}, st), network, host)
	if err != nil {
		return addrs, err
	}
	st.mu.Lock()
	cut, size := st.cut, st.largest
	st.mu.Unlock()
	d.cut.Store(cut)
	if cut && d.said.CompareAndSwap(false, true) {
		d.log.Warn("the DNS answer was cut at the DNS message limit: agents beyond it are missing; a headless Service's name does not scale past about 4,000 agents",
			"option", d.option, "name", host, "addresses", len(addrs), "bytes", size, "instead", d.instead)
	}
	return addrs, nil
}

type lookupKey struct{}

// lookupState is what the answers of one lookup looked like on the wire.
type lookupState struct {
	mu      sync.Mutex
	cut     bool
	largest int
}

func (s *lookupState) message(flags uint16, size int, stream bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.largest = max(s.largest, size)
	// TC over UDP is the normal way to TCP (Go's resolver retries there); over TCP the
	// server had no room left.
	if stream && (flags&0x0200 != 0 || size > maxMessage-maxRecord) {
		s.cut = true
	}
}

// watchPacket notes each UDP answer's flags and size: one message per read.
type watchPacket struct {
	*net.UDPConn
	st *lookupState
}

func (c *watchPacket) Read(p []byte) (int, error) {
	n, err := c.UDPConn.Read(p)
	if n >= 4 {
		c.st.message(binary.BigEndian.Uint16(p[2:4]), n, false)
	}
	return n, err
}

// watchConn notes the flags and size of each TCP answer, after its two-byte length.
type watchConn struct {
	net.Conn
	st   *lookupState
	hdr  []byte // TCP: the length and the header's first four bytes, as they come
	size int    // TCP: the current message's length
	left int    // TCP: its bytes still to come; 0: its length comes next
}

func (c *watchConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	for _, x := range p[:n] { // a byte at a time: answers are at most 64 KiB
		if c.left == 0 {
			c.hdr = append(c.hdr, x)
			if len(c.hdr) == 2 {
				c.size = int(binary.BigEndian.Uint16(c.hdr))
				c.left = c.size
				if c.left == 0 {
					c.hdr = c.hdr[:0]
				}
			}
			continue
		}
		if len(c.hdr) < 6 {
			if c.hdr = append(c.hdr, x); len(c.hdr) == 6 {
				c.st.message(binary.BigEndian.Uint16(c.hdr[4:6]), c.size, true)
			}
		}
		if c.left--; c.left == 0 {
			c.hdr = c.hdr[:0]
		}
	}
	return n, err
}
