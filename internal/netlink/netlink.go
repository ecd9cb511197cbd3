// Package netlink is gorping's one netlink framing (linux/netlink.h): messages, attributes,
// errors and a request/answer socket. RDMA netlink device discovery (uverbs) and the
// rtnetlink route lookup of rping's hints both use it.
package netlink

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// HdrLen is sizeof(struct nlmsghdr).
const HdrLen = unix.SizeofNlMsghdr

// typeMask strips NLA_F_NESTED and NLA_F_NET_BYTEORDER from an attribute type.
const typeMask = 0x3fff

// Message is one netlink message; Payload is what follows its struct nlmsghdr.
type Message struct {
	Type    uint16
	Flags   uint16
	Seq     uint32
	Payload []byte
}

// Attr is one attribute (struct nlattr / struct rtattr); Type has the flag bits cleared.
type Attr struct {
	Type uint16
	Data []byte
}

// Align rounds n up to the 4-byte netlink alignment.
func Align(n int) int { return (n + 3) &^ 3 }

// ParseMessages splits a datagram into messages. The payloads alias b.
func ParseMessages(b []byte) ([]Message, error) {
	var msgs []Message
	for len(b) > 0 {
		if len(b) < HdrLen {
			return nil, fmt.Errorf("netlink: truncated header (%d bytes)", len(b))
		}
		l := binary.NativeEndian.Uint32(b[0:4])
		if l < HdrLen || uint64(l) > uint64(len(b)) {
			return nil, fmt.Errorf("netlink: bad message length %d (%d available)", l, len(b))
		}
		msgs = append(msgs, Message{
			Type:    binary.NativeEndian.Uint16(b[4:6]),
			Flags:   binary.NativeEndian.Uint16(b[6:8]),
			Seq:     binary.NativeEndian.Uint32(b[8:12]),
			Payload: b[HdrLen:l],
		})
		al := Align(int(l))
		if al >= len(b) {
			break
		}
		b = b[al:]
	}
	return msgs, nil
}

// ParseAttrs splits a run of attributes. The data alias b.
func ParseAttrs(b []byte) ([]Attr, error) {
	var attrs []Attr
	for len(b) > 0 {
		if len(b) < 4 {
			return nil, fmt.Errorf("netlink: truncated attribute (%d bytes)", len(b))
		}
		l := int(binary.NativeEndian.Uint16(b[0:2]))
		if l < 4 || l > len(b) {
			return nil, fmt.Errorf("netlink: bad attribute length %d (%d available)", l, len(b))
		}
		attrs = append(attrs, Attr{Type: binary.NativeEndian.Uint16(b[2:4]) & typeMask, Data: b[4:l]})
		al := Align(l)
		if al >= len(b) {
			break
		}
		b = b[al:]
	}
	return attrs, nil
}

// U32 decodes a u32 attribute.
func U32(d []byte) (uint32, bool) {
	if len(d) < 4 {
		return 0, false
	}
	return binary.NativeEndian.Uint32(d), true
}

// Uint decodes a u64 attribute, or a u32 one where the kernel sends the smaller size.
func Uint(d []byte) (uint64, bool) {
	switch {
	case len(d) >= 8:
		return binary.NativeEndian.Uint64(d), true
	case len(d) >= 4:
		return uint64(binary.NativeEndian.Uint32(d)), true
	}
	return 0, false
}

// String decodes a NUL-terminated (or unterminated) string attribute.
func String(d []byte) string {
	for i, c := range d {
		if c == 0 {
			return string(d[:i])
		}
	}
	return string(d)
}

// Error decodes an NLMSG_ERROR payload (struct nlmsgerr): nil for an ACK, else the errno.
func Error(payload []byte) error {
	if len(payload) < 4 {
		return errors.New("netlink: truncated error message")
	}
	code := int32(binary.NativeEndian.Uint32(payload))
	if code == 0 {
		return nil
	}
	return unix.Errno(-code)
}

// AppendMessage appends a request: a struct nlmsghdr (pid 0: the kernel assigns it) and
// body, which is the family header and attributes, already encoded.
func AppendMessage(b []byte, typ, flags uint16, seq uint32, body []byte) []byte {
	b = binary.NativeEndian.AppendUint32(b, uint32(HdrLen+len(body)))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = binary.NativeEndian.AppendUint16(b, flags)
	b = binary.NativeEndian.AppendUint32(b, seq)
	b = binary.NativeEndian.AppendUint32(b, 0)
	return append(b, body...)
}

// AppendAttr appends one attribute, padded to the netlink alignment.
func AppendAttr(b []byte, typ uint16, data []byte) []byte {
	b = binary.NativeEndian.AppendUint16(b, uint16(4+len(data)))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, data...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// Conn is a request/answer netlink socket.
type Conn interface {
	// Send sends one request message.
	Send(msg []byte) error
	// Recv returns the messages of the next datagram that answer seq (copies).
	Recv(seq uint32) ([]Message, error)
	Close() error
}

// Dialer opens a netlink socket of a protocol (unix.NETLINK_RDMA, unix.NETLINK_ROUTE).
type Dialer func(protocol int) (Conn, error)

// Dial is the real Dialer. Receives time out after two seconds so that a kernel that does
// not answer never hangs gorping.
func Dial(protocol int) (Conn, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, protocol)
	if err != nil {
		return nil, fmt.Errorf("netlink socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netlink bind: %w", err)
	}
	tv := unix.Timeval{Sec: 2}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netlink SO_RCVTIMEO: %w", err)
	}
	return &sockConn{fd: fd, buf: make([]byte, 1<<16)}, nil
}

type sockConn struct {
	fd  int
	buf []byte
}

func (c *sockConn) Close() error { return unix.Close(c.fd) }

func (c *sockConn) Send(msg []byte) error {
	if err := unix.Sendto(c.fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("netlink send: %w", err)
	}
	return nil
}

func (c *sockConn) Recv(seq uint32) ([]Message, error) {
	for {
		n, _, err := unix.Recvfrom(c.fd, c.buf, 0)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return nil, fmt.Errorf("netlink recv: %w", err)
		}
		msgs, err := ParseMessages(c.buf[:n])
		if err != nil {
			return nil, err
		}
		var mine []Message
		for _, m := range msgs {
			if m.Seq == seq {
				// Copy: c.buf is reused by the next Recv.
				m.Payload = append([]byte(nil), m.Payload...)
				mine = append(mine, m)
			}
		}
		if len(mine) > 0 {
			return mine, nil
		}
	}
}
