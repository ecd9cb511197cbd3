package uverbs

import (
	"encoding/binary"
	"fmt"
	"strings"
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

func FuzzSysfsText(f *testing.F) {
	f.Add("5054:00ff:fe96:b707")
	f.Add("fe80:0000:0000:0000:5054:00ff:fe12:3456")
	f.Fuzz(func(t *testing.T, s string) {
		if g, err := parseGUID(s); err == nil {
			back := fmt.Sprintf("%04x:%04x:%04x:%04x", g>>48, g>>32&0xffff, g>>16&0xffff, g&0xffff)
			if g2, err := parseGUID(back); err != nil || g2 != g {
				t.Fatalf("GUID %q → %#x → %q does not round-trip", s, g, back)
			}
		}
		if g, err := parseGID(s); err == nil {
			var parts []string
			for k := 0; k < 16; k += 2 {
				parts = append(parts, fmt.Sprintf("%02x%02x", g[k], g[k+1]))
			}
			if g2, err := parseGID(strings.Join(parts, ":")); err != nil || g2 != g {
				t.Fatalf("GID %q does not round-trip", s)
			}
		}
	})
}
