package wire

import (
	"bytes"
	"testing"
)

type pair struct {
	A uint32
	B uint16
	C uint8
	_ uint8
}

func TestBytesDecode(t *testing.T) {
	p := pair{A: 0x04030201, B: 0x0605, C: 7}
	b := Bytes(&p)
	if len(b) != 8 || Size[pair]() != 8 {
		t.Fatalf("len %d size %d, want 8", len(b), Size[pair]())
	}
	// Little- or big-endian: the bytes are the CPU's representation of the fields.
	var q pair
	Decode(&q, b)
	if q != p {
		t.Errorf("round trip %+v, want %+v", q, p)
	}
	b[6] = 9 // aliases p
	if p.C != 9 {
		t.Errorf("Bytes does not alias the struct")
	}
	q = pair{A: 1, B: 2, C: 3}
	Decode(&q, b[:4]) // short: the tail becomes zero
	if q.A != p.A || q.B != 0 || q.C != 0 {
		t.Errorf("short decode %+v", q)
	}
	Decode(&q, append(bytes.Clone(b), 1, 2, 3)) // long: cut
	if q != p {
		t.Errorf("long decode %+v, want %+v", q, p)
	}
}
