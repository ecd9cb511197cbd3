package uverbs

import (
	"encoding/binary"
	"reflect"
	"testing"
)

// fillDistinct sets every numeric field (and array element) reachable from v to a
// different non-zero value, so a swapped or dropped field in a conversion shows.
func fillDistinct(v reflect.Value, next *uint64) {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			fillDistinct(v.Field(i), next)
		}
	case reflect.Array:
		for i := range v.Len() {
			fillDistinct(v.Index(i), next)
		}
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if !v.CanSet() {
			return // padding
		}
		*next++
		v.SetUint(*next)
	}
}

func TestQPAttrWire(t *testing.T) {
	t.Parallel()
	var a QPAttr
	n := uint64(0)
	fillDistinct(reflect.ValueOf(&a).Elem(), &n)
	b, _ := a.MarshalBinary()
	if len(b) != 144 {
		t.Fatalf("encoded %d bytes, want 144", len(b))
	}
	var got QPAttr
	if got.UnmarshalBinary(b); got != a {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, a)
	}
	// A few offsets of struct ib_uverbs_qp_attr, independent of the Go mirror.
	ne := binary.NativeEndian
	for _, c := range []struct {
		what string
		off  int
		got  uint64
		want uint64
	}{
		{"qp_state", 4, uint64(ne.Uint32(b[4:])), uint64(a.State)},
		{"dest_qp_num", 32, uint64(ne.Uint32(b[32:])), uint64(a.DestQPNum)},
		{"ah_attr.grh.dgid[0]", 40, uint64(b[40]), uint64(a.AH.GRH.DGID[0])},
		{"ah_attr.dlid", 64, uint64(ne.Uint16(b[64:])), uint64(a.AH.DLID)},
		{"max_send_wr", 104, uint64(ne.Uint32(b[104:])), uint64(a.MaxSendWR)},
		{"port_num", 133, uint64(b[133]), uint64(a.PortNum)},
		{"alt_timeout", 138, uint64(b[138]), uint64(a.AltTimeout)},
	} {
		if c.got != c.want {
			t.Errorf("%s at %d = %d, want %d", c.what, c.off, c.got, c.want)
		}
	}
	// Short input is zero-extended, never a panic.
	var short QPAttr
	if short.UnmarshalBinary(b[:8]); short.State != a.State || short.PortNum != 0 {
		t.Errorf("short decode %+v", short)
	}
}

func TestDeviceAttrFromWire(t *testing.T) {
	t.Parallel()
	var w queryDeviceResp
	n := uint64(0)
	fillDistinct(reflect.ValueOf(&w).Elem(), &n)
	w.NodeGUID = [8]byte{0x50, 0x54, 0x00, 0xff, 0xfe, 0x96, 0xb7, 0x07}
	a := deviceAttrFromWire(&w)
	if a.NodeGUID != 0x505400fffe96b707 {
		t.Errorf("NodeGUID %#x, want the big-endian number", a.NodeGUID)
	}
	if a.FWVer != w.FwVer || a.MaxQPWR != w.MaxQPWR || a.MaxSRQSGE != w.MaxSRQSGE ||
		a.MaxPKeys != w.MaxPkeys || a.PhysPortCnt != w.PhysPortCnt || a.LocalCAAckDelay != w.LocalCaAckDelay {
		t.Errorf("fields lost: %+v from %+v", a, w)
	}
}
