package rdmacm

import (
	"fmt"

	"github.com/gorping/gorping/uverbs"
	"golang.org/x/sys/unix"
)

// AttachQP makes qp librdmacm-owned (rdma_create_qp's second half): it moves
// the QP RESET→INIT now with the kernel's attributes; Connect uses its QPN;
// on CONNECT_RESPONSE the reader moves it INIT→RTR→RTS and sends the RTU,
// Accept does the same before accepting, REJECTED and Disconnect move it to
// ERR (Disconnect on iWARP to SQD; iWARP has no CONNECT_RESPONSE: the kernel
// moves the QP to RTS and reports ESTABLISHED). ib says the QP's port has InfiniBand link layer (uverbs.PortAttr), for
// which librdmacm clears mask bits 21-24 of the RTR transition. The QP must
// not be destroyed while the ID may still use it (before Disconnect/Destroy).
func (id *ID) AttachQP(qp *uverbs.QP, ib bool) error {
	if qp == nil {
		return fmt.Errorf("rdmacm: attach qp: no qp: %w", unix.EINVAL)
	}
	return id.attachQP(verbsQP{qp}, ib)
}

// verbsQP adapts *uverbs.QP to the transitions' seam.
type verbsQP struct{ qp *uverbs.QP }

func (v verbsQP) modify(a *uverbs.QPAttr, mask uverbs.QPAttrMask) error {
	return v.qp.Modify(a, mask)
}

func (v verbsQP) qpNum() uint32 { return v.qp.Num() }

func (v verbsQP) iwarp() bool { return v.qp.Transport() == uverbs.TransportIWARP }

// InitQPAttr asks the kernel for the attributes and mask that move this ID's
// QP to state (rdma_init_qp_attr), for a QP the application drives itself.
func (id *ID) InitQPAttr(state uverbs.QPState) (*uverbs.QPAttr, uverbs.QPAttrMask, error) {
	a, err := id.initQPAttr(state)
	if err != nil {
		return nil, 0, err
	}
	return &a, a.AttrMask, nil
}

// Device returns the verbs device the ID is bound to: QUERY(ADDR)'s node GUID
// and ib_device index matched against the channel host's devices (librdmacm's
// ucma_get_device). ENODEV if no device is bound yet (before address
// resolution, or listening on a wildcard) or none matches.
func (id *ID) Device() (uverbs.Device, error) {
	info, err := id.Query()
	if err != nil {
		return uverbs.Device{}, err
	}
	if info.NodeGUID == 0 {
		return uverbs.Device{}, fmt.Errorf("rdmacm: id is not bound to an RDMA device: %w", unix.ENODEV)
	}
	devs, err := id.ch.host.Devices()
	if err != nil {
		return uverbs.Device{}, fmt.Errorf("rdmacm: list verbs devices: %w", err)
	}
	return matchDevice(devs, info)
}

// matchDevice picks the device with the ID's node GUID and, when both sides
// know it, the same ib_device index (several soft devices on one netdev share
// a GUID).
func matchDevice(devs []uverbs.Device, info AddrInfo) (uverbs.Device, error) {
	for _, d := range devs {
		if d.NodeGUID != info.NodeGUID {
			continue
		}
		if info.IbdevIndex == -1 || d.Index == -1 || d.Index == info.IbdevIndex {
			return d, nil
		}
	}
	return uverbs.Device{}, fmt.Errorf("rdmacm: no verbs device with node GUID %016x and index %d: %w",
		info.NodeGUID, info.IbdevIndex, unix.ENODEV)
}
