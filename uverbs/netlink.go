package uverbs

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/gorping/gorping/internal/hostenv"
	"github.com/gorping/gorping/internal/netlink"
)

// RDMA netlink device discovery (RDMA_NLDEV_CMD_GET, RDMA_NLDEV_CMD_GET_CHARDEV); the
// framing is internal/netlink's, the nldev constants are in abi.go.

func nldevType(op uint16) uint16 { return rdmaNLNldev<<10 + op }

// nlDevice is one RDMA_NLDEV_CMD_GET answer.
type nlDevice struct {
	Index    uint32
	Name     string
	NodeGUID uint64
}

func parseNLDevice(payload []byte) (nlDevice, error) {
	attrs, err := netlink.ParseAttrs(payload)
	if err != nil {
		return nlDevice{}, err
	}
	var d nlDevice
	var haveIdx bool
	for _, a := range attrs {
		switch a.Type {
		case nldevAttrDevIndex:
			d.Index, haveIdx = netlink.U32(a.Data)
		case nldevAttrDevName:
			d.Name = netlink.String(a.Data)
		case nldevAttrNodeGUID:
			d.NodeGUID, _ = netlink.Uint(a.Data)
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
	attrs, err := netlink.ParseAttrs(payload)
	if err != nil {
		return nlChardev{}, err
	}
	var c nlChardev
	for _, a := range attrs {
		switch a.Type {
		case nldevAttrChardevName:
			c.Name = netlink.String(a.Data)
		case nldevAttrChardevABI:
			c.ABI, _ = netlink.Uint(a.Data)
		case nldevAttrDriverID:
			v, _ := netlink.Uint(a.Data)
			c.DriverID = uint32(v)
		case nldevAttrChardev:
			c.Devt, _ = netlink.Uint(a.Data)
		}
	}
	if c.Name == "" {
		return nlChardev{}, errors.New("netlink: chardev answer without a name")
	}
	return c, nil
}

// chardevRequest builds RDMA_NLDEV_CMD_GET_CHARDEV for the "uverbs" chardev of device idx.
func chardevRequest(seq, idx uint32) []byte {
	var attrs []byte
	attrs = netlink.AppendAttr(attrs, nldevAttrDevIndex, binary.NativeEndian.AppendUint32(nil, idx))
	attrs = netlink.AppendAttr(attrs, nldevAttrChardevType, []byte("uverbs\x00"))
	return netlink.AppendMessage(nil, nldevType(nldevCmdGetChardev), unix.NLM_F_REQUEST, seq, attrs)
}

// dumpRequest builds the RDMA_NLDEV_CMD_GET dump request.
func dumpRequest(seq uint32) []byte {
	return netlink.AppendMessage(nil, nldevType(nldevCmdGet), unix.NLM_F_REQUEST|unix.NLM_F_DUMP, seq, nil)
}

// netlinkDevices enumerates devices with RDMA_NLDEV_CMD_GET and asks each for its uverbs
// chardev. Devices without one (ib_uverbs not loaded) are left out.
func netlinkDevices(env hostenv.Env) ([]Device, error) {
	c, err := env.Netlink(unix.NETLINK_RDMA)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	const dumpSeq = 1
	if err := c.Send(dumpRequest(dumpSeq)); err != nil {
		return nil, err
	}
	var nds []nlDevice
dump:
	for {
		msgs, err := c.Recv(dumpSeq)
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			switch m.Type {
			case unix.NLMSG_DONE:
				break dump
			case unix.NLMSG_ERROR:
				if err := netlink.Error(m.Payload); err != nil {
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
		if err := c.Send(chardevRequest(seq, nd.Index)); err != nil {
			return nil, err
		}
		msgs, err := c.Recv(seq)
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
			Path:     env.DevPath(cd.Name),
			NodeGUID: nd.NodeGUID,
			Driver:   driverNames[cd.DriverID],
			DriverID: cd.DriverID,
			ABI:      int(cd.ABI),
			sysfs:    env.Sysfs,
		})
	}
	return devs, nil
}
