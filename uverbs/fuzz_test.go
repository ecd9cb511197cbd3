package uverbs

import (
	"encoding/binary"
	"testing"

	"github.com/gorping/gorping/internal/netlink"
	"github.com/gorping/gorping/internal/wire"
)

// Decoders of kernel bytes must never panic, whatever the kernel (or a fake) sends.

func FuzzNetlink(f *testing.F) {
	dev := append(nlAttrBytes(nldevAttrDevIndex, u32b(3)), nlAttrBytes(nldevAttrDevName, []byte("rxe0\x00"))...)
	f.Add(netlink.AppendMessage(nil, nldevType(nldevCmdGet), 2, 1, dev))
	f.Add(netlink.AppendMessage(nil, nldevType(nldevCmdGetChardev), 0, 2, nlAttrBytes(nldevAttrChardevName, []byte("uverbs0"))))
	f.Add(netlink.AppendMessage(nil, 2 /* NLMSG_ERROR */, 0, 2, u32b(0xfffffffe)))
	f.Fuzz(func(t *testing.T, b []byte) {
		msgs, err := netlink.ParseMessages(b)
		if err != nil {
			return
		}
		for _, m := range msgs {
			parseNLDevice(m.Payload)
			parseNLChardev(m.Payload)
			netlink.Error(m.Payload)
			attrs, err := netlink.ParseAttrs(m.Payload)
			if err != nil {
				continue
			}
			for _, a := range attrs {
				if len(a.Data) > len(m.Payload) {
					t.Fatalf("attribute longer than its message")
				}
				netlink.U32(a.Data)
				netlink.Uint(a.Data)
				netlink.String(a.Data)
			}
		}
	})
}

func FuzzResponses(f *testing.F) {
	f.Add(make([]byte, 176))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		var qd queryDeviceResp
		wire.Decode(&qd, b)
		deviceAttrFromWire(&qd)
		var qp queryPortResp
		wire.Decode(&qp, b)
		var q queryQPResp
		wire.Decode(&q, b)
		a := qpAttrFromQuery(&q)
		r := modifyReq(1, &a, QPAttrState)
		if r.Dest.DGID != q.Dest.DGID || r.QPState != q.QPState {
			t.Fatal("query→modify lost the address vector or state")
		}
		var cq createCQResp
		wire.Decode(&cq, b)
		var qpr createQPResp
		wire.Decode(&qpr, b)
		var ev asyncEventDesc
		wire.Decode(&ev, b)
		var ce compEventDesc
		wire.Decode(&ce, b)
		if len(b) >= 8 {
			parseGIDEntries(binary.NativeEndian.Uint64(b), b[8:])
		}
	})
}
