package uverbs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// RDMA netlink (NETLINK_RDMA, rdma/rdma_netlink.h). nldev messages carry attributes right
// after the nlmsghdr (no generic-netlink header).
const (
	rdmaNLNldev          = 5
	nldevCmdGet          = 1
	nldevCmdGetChardev   = 15
	nldevAttrDevIndex    = 1  // u32
	nldevAttrDevName     = 2  // string
	nldevAttrNodeGUID    = 6  // u64, host order
	nldevAttrChardevType = 69 // string
	nldevAttrChardevName = 70 // string
	nldevAttrChardevABI  = 71 // u64
	nldevAttrChardev     = 72 // u64 dev_t
	nldevAttrDriverID    = 73 // u32 (u64 per the header comment; accept both)

	nlaTypeMask = 0x3fff // strips NLA_F_NESTED / NLA_F_NET_BYTEORDER
	nlmsgHdrLen = 16
)

func nldevType(op uint16) uint16 { return rdmaNLNldev<<10 + op }

type nlMsg struct {
	Type    uint16
	Flags   uint16
	Seq     uint32
	Payload []byte
}

type nlAttr struct {
	Type uint16
	Data []byte
}

// parseNLMessages splits a netlink datagram into messages.
func parseNLMessages(b []byte) ([]nlMsg, error) {
	var msgs []nlMsg
	for len(b) > 0 {
		if len(b) < nlmsgHdrLen {
			return nil, fmt.Errorf("netlink: truncated header (%d bytes)", len(b))
		}
		l := binary.NativeEndian.Uint32(b[0:4])
		if l < nlmsgHdrLen || uint64(l) > uint64(len(b)) {
			return nil, fmt.Errorf("netlink: bad message length %d (%d available)", l, len(b))
		}
		msgs = append(msgs, nlMsg{
			Type:    binary.NativeEndian.Uint16(b[4:6]),
			Flags:   binary.NativeEndian.Uint16(b[6:8]),
			Seq:     binary.NativeEndian.Uint32(b[8:12]),
			Payload: b[nlmsgHdrLen:l],
		})
		al := nlAlign(int(l))
		if al >= len(b) {
			break
		}
		b = b[al:]
	}
	return msgs, nil
}

// parseNLAttrs splits a payload into attributes.
func parseNLAttrs(b []byte) ([]nlAttr, error) {
	var attrs []nlAttr
	for len(b) > 0 {
		if len(b) < 4 {
			return nil, fmt.Errorf("netlink: truncated attribute (%d bytes)", len(b))
		}
		l := int(binary.NativeEndian.Uint16(b[0:2]))
		if l < 4 || l > len(b) {
			return nil, fmt.Errorf("netlink: bad attribute length %d (%d available)", l, len(b))
		}
		attrs = append(attrs, nlAttr{Type: binary.NativeEndian.Uint16(b[2:4]) & nlaTypeMask, Data: b[4:l]})
		al := nlAlign(l)
		if al >= len(b) {
			break
		}
		b = b[al:]
	}
	return attrs, nil
}

func nlAlign(n int) int { return (n + 3) &^ 3 }

func attrU32(d []byte) (uint32, bool) {
	if len(d) < 4 {
		return 0, false
	}
	return binary.NativeEndian.Uint32(d), true
}

func attrUint(d []byte) (uint64, bool) {
	switch {
	case len(d) >= 8:
		return binary.NativeEndian.Uint64(d), true
	case len(d) >= 4:
		return uint64(binary.NativeEndian.Uint32(d)), true
	}
	return 0, false
}

func attrString(d []byte) string {
	for i, c := range d {
		if c == 0 {
			return string(d[:i])
		}
	}
	return string(d)
}

// nlError decodes an NLMSG_ERROR payload: 0 is an ACK.
func nlError(payload []byte) error {
	if len(payload) < 4 {
		return errors.New("netlink: truncated error message")
	}
	code := int32(binary.NativeEndian.Uint32(payload))
	if code == 0 {
		return nil
	}
	return unix.Errno(-code)
}

// nlDevice is one RDMA_NLDEV_CMD_GET answer.
type nlDevice struct {
	Index    uint32
	Name     string
	NodeGUID uint64
}

func parseNLDevice(payload []byte) (nlDevice, error) {
	attrs, err := parseNLAttrs(payload)
	if err != nil {
		return nlDevice{}, err
	}
	var d nlDevice
	var haveIdx bool
	for _, a := range attrs {
		switch a.Type {
		case nldevAttrDevIndex:
			d.Index, haveIdx = attrU32(a.Data)
		case nldevAttrDevName:
			d.Name = attrString(a.Data)
		case nldevAttrNodeGUID:
			d.NodeGUID, _ = attrUint(a.Data)
		}
	}
	if !haveIdx || d.Name == "" {
		return nlDevice{}, errors.New("netlink: device without index or name")
	}
	return d, nil
}

// nlChardev is one RDMA_NLDEV_CMD_GET_CHARDEV answer.
type nlChardev struct {
	Name     string
	ABI      uint64
	DriverID uint32
	Devt     uint64
}

func parseNLChardev(payload []byte) (nlChardev, error) {
	attrs, err := parseNLAttrs(payload)
	if err != nil {
		return nlChardev{}, err
	}
	var c nlChardev
	for _, a := range attrs {
		switch a.Type {
		case nldevAttrChardevName:
			c.Name = attrString(a.Data)
		case nldevAttrChardevABI:
			c.ABI, _ = attrUint(a.Data)
		case nldevAttrDriverID:
			v, _ := attrUint(a.Data)
			c.DriverID = uint32(v)
		case nldevAttrChardev:
			c.Devt, _ = attrUint(a.Data)
		}
	}
	if c.Name == "" {
		return nlChardev{}, errors.New("netlink: chardev answer without a name")
	}
	return c, nil
}

// appendNLMsg appends a request message with the given attributes (already encoded).
func appendNLMsg(b []byte, typ, flags uint16, seq uint32, attrs []byte) []byte {
	l := nlmsgHdrLen + len(attrs)
	b = binary.NativeEndian.AppendUint32(b, uint32(l))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = binary.NativeEndian.AppendUint16(b, flags)
	b = binary.NativeEndian.AppendUint32(b, seq)
	b = binary.NativeEndian.AppendUint32(b, 0) // pid: kernel assigns
	return append(b, attrs...)
}

func appendNLAttr(b []byte, typ uint16, data []byte) []byte {
	b = binary.NativeEndian.AppendUint16(b, uint16(4+len(data)))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, data...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// chardevRequest builds RDMA_NLDEV_CMD_GET_CHARDEV for the "uverbs" chardev of device idx.
func chardevRequest(seq, idx uint32) []byte {
	var attrs []byte
	attrs = appendNLAttr(attrs, nldevAttrDevIndex, binary.NativeEndian.AppendUint32(nil, idx))
	attrs = appendNLAttr(attrs, nldevAttrChardevType, []byte("uverbs\x00"))
	return appendNLMsg(nil, nldevType(nldevCmdGetChardev), unix.NLM_F_REQUEST, seq, attrs)
}

// dumpRequest builds the RDMA_NLDEV_CMD_GET dump request.
func dumpRequest(seq uint32) []byte {
	return appendNLMsg(nil, nldevType(nldevCmdGet), unix.NLM_F_REQUEST|unix.NLM_F_DUMP, seq, nil)
}

type nlConn struct {
	fd  int
	buf []byte
}

func dialNL() (*nlConn, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_RDMA)
	if err != nil {
		return nil, fmt.Errorf("netlink socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netlink bind: %w", err)
	}
	// Never hang discovery on a kernel that does not answer.
	tv := unix.Timeval{Sec: 2}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netlink SO_RCVTIMEO: %w", err)
	}
	return &nlConn{fd: fd, buf: make([]byte, 1<<16)}, nil
}

func (c *nlConn) close() { unix.Close(c.fd) }

func (c *nlConn) send(msg []byte) error {
	return unix.Sendto(c.fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
}

// recv returns the messages of the next datagram that answer seq.
func (c *nlConn) recv(seq uint32) ([]nlMsg, error) {
	for {
		n, _, err := unix.Recvfrom(c.fd, c.buf, 0)
		if err != nil {
			if err == unix.EINTR {
				continue
			}
			return nil, fmt.Errorf("netlink recv: %w", err)
		}
		msgs, err := parseNLMessages(c.buf[:n])
		if err != nil {
			return nil, err
		}
		var mine []nlMsg
		for _, m := range msgs {
			if m.Seq == seq {
				// Copy: c.buf is reused by the next recv.
				m.Payload = append([]byte(nil), m.Payload...)
				mine = append(mine, m)
			}
		}
		if len(mine) > 0 {
			return mine, nil
		}
	}
}

// netlinkDevices enumerates devices with RDMA_NLDEV_CMD_GET and asks each for its uverbs
// chardev. Devices without one (ib_uverbs not loaded) are left out.
func netlinkDevices() ([]Device, error) {
	c, err := dialNL()
	if err != nil {
		return nil, err
	}
	defer c.close()
	const dumpSeq = 1
	if err := c.send(dumpRequest(dumpSeq)); err != nil {
		return nil, fmt.Errorf("netlink send: %w", err)
	}
	var nds []nlDevice
dump:
	for {
		msgs, err := c.recv(dumpSeq)
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			switch m.Type {
			case unix.NLMSG_DONE:
				break dump
			case unix.NLMSG_ERROR:
				if err := nlError(m.Payload); err != nil {
					return nil, fmt.Errorf("netlink device dump: %w", err)
				}
			case nldevType(nldevCmdGet):
				d, err := parseNLDevice(m.Payload)
				if err != nil {
					return nil, err
				}
				nds = append(nds, d)
			}
		}
	}
	devs := []Device{}
	for i, nd := range nds {
		seq := uint32(dumpSeq + 1 + i)
		if err := c.send(chardevRequest(seq, nd.Index)); err != nil {
			return nil, fmt.Errorf("netlink send: %w", err)
		}
		msgs, err := c.recv(seq)
		if err != nil {
			return nil, err
		}
		m := msgs[0]
		if m.Type == unix.NLMSG_ERROR {
			continue // no uverbs chardev for this device (ib_uverbs not loaded)
		}
		cd, err := parseNLChardev(m.Payload)
		if err != nil {
			return nil, err
		}
		devs = append(devs, Device{
			Name:     nd.Name,
			Index:    int(nd.Index),
			Uverbs:   cd.Name,
			Path:     filepath.Join(devRoot, cd.Name),
			NodeGUID: nd.NodeGUID,
			Driver:   driverNames[cd.DriverID],
			DriverID: cd.DriverID,
			ABI:      int(cd.ABI),
		})
	}
	return devs, nil
}
