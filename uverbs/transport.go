package uverbs

import (
	"path/filepath"

	"github.com/gorping/gorping/internal/sysattr"
)

// transportOfNodeType maps a node type (enum rdma_node_type, as sysfs node_type starts
// with it) to its transport, as libibverbs does.
func transportOfNodeType(nodeType int) Transport {
	switch nodeType {
	case 1, 2, 3: // CA, switch, router
		return TransportIB
	case 4: // RNIC
		return TransportIWARP
	}
	return TransportUnknown
}

// Transport reads d's node type from sysfs ("4: RNIC"); TransportUnknown if it cannot.
func (d Device) Transport() Transport {
	return nodeTransport(filepath.Join(d.sysfsRoot(), "class", "infiniband", d.Name))
}

// nodeTransport is the transport of the node_type file in a device's sysfs directory.
func nodeTransport(base string) Transport {
	s, err := sysattr.Read(filepath.Join(base, "node_type"))
	if err != nil {
		return TransportUnknown
	}
	n, _ := sysattr.SplitNumName(s)
	return transportOfNodeType(n)
}

// Transport is the transport of the device qp was created on, as its provider says.
func (qp *QP) Transport() Transport { return qp.ctx.info.Transport }
