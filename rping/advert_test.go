package rping

import (
	"bytes"
	"testing"
)

func TestAdvertWireFormat(t *testing.T) {
	a := advert{addr: 0x0102030405060708, rkey: 0x090a0b0c, size: 0x0d0e0f10}
	var b [advertLen]byte
	a.encode(b[:])
	want := []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	if !bytes.Equal(b[:], want) {
		t.Fatalf("encoded % x, want % x", b, want)
	}
	if got := decodeAdvert(b[:]); got != a {
		t.Fatalf("decoded %+v, want %+v", got, a)
	}
}

func TestAdvertCheck(t *testing.T) {
	for _, tc := range []struct {
		a  advert
		ok bool
	}{
		{advert{addr: 0x1000, size: 23}, true},
		{advert{addr: 0x1000, size: 65535}, true},
		{advert{addr: 1<<64 - 65535, size: 65535}, true},
		{advert{addr: 0x1000, size: 22}, false},
		{advert{addr: 0x1000, size: 0}, false},
		{advert{addr: 0x1000, size: 65536}, false},
		{advert{addr: 0, size: 64}, false},
		{advert{addr: 1<<64 - 63, size: 64}, false},
	} {
		if err := tc.a.check(); (err == nil) != tc.ok {
			t.Errorf("%+v: check() = %v, want ok=%v", tc.a, err, tc.ok)
		}
	}
}

func FuzzAdvert(f *testing.F) {
	f.Add(make([]byte, advertLen))
	f.Add([]byte{0, 0, 0x7f, 0xff, 0, 0, 0x10, 0, 0, 0, 0x12, 0x34, 0, 0, 0, 64})
	f.Add(bytes.Repeat([]byte{0xff}, advertLen))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < advertLen {
			return
		}
		a := decodeAdvert(b)
		var out [advertLen]byte
		a.encode(out[:])
		if !bytes.Equal(out[:], b[:advertLen]) {
			t.Fatalf("round trip % x -> % x", b[:advertLen], out)
		}
		if err := a.check(); err == nil {
			if a.size < MinSize || a.size > MaxSize || a.addr == 0 || a.addr+uint64(a.size)-1 < a.addr {
				t.Fatalf("check accepted %+v", a)
			}
		}
	})
}

// A server fed arbitrary 16-byte messages (any byte_len) never crashes and
// never issues an out-of-bounds RDMA operation.
func FuzzServerRecv(f *testing.F) {
	f.Add([]byte{0, 0, 0x7f, 0xff, 0, 0, 0x10, 0, 0, 0, 0x12, 0x34, 0, 0, 0, 64}, uint32(16))
	f.Add(make([]byte, advertLen), uint32(3))
	f.Fuzz(func(t *testing.T, msg []byte, byteLen uint32) {
		if len(msg) < advertLen {
			return
		}
		n := newFakeNet()
		c, s := n.pair(64, 64)
		if byteLen == advertLen {
			copy(c.Region(bufSend).b, msg)
			c.PostSend()
		} else {
			copy(s.Region(bufRecv).b, msg)
			s.inject(completion{kind: compRecv, byteLen: byteLen})
		}
		c.disconnect()
		sv := newSide(true, 64, 0)
		sv.startServer(t.Context(), s)
		st := sv.wait(t)
		if st != 0 && st != 255 {
			t.Fatalf("exit %d", st)
		}
		if n.violationCount() > 0 && st == 0 {
			t.Fatalf("out-of-bounds RDMA on a successful run")
		}
	})
}
