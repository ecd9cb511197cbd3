package rxe

import (
	"encoding/binary"
	"testing"

	"github.com/gorping/gorping/internal/umem"
	"github.com/gorping/gorping/uverbs/driver"
)

// FuzzRing feeds arbitrary kernel-written ring headers, indices and CQE bytes: mapping must
// either be refused or every access must stay inside the mapping.
func FuzzRing(f *testing.F) {
	f.Add(uint32(7), uint32(3), uint32(2), uint32(0), []byte{1, 2, 3})
	f.Add(uint32(40), uint32(0xffffffff), uint32(0xffffffff), uint32(5), []byte{})
	f.Add(uint32(6), uint32(63), uint32(100), uint32(63), make([]byte, 48))
	f.Fuzz(func(t *testing.T, log2, mask, prod, cons uint32, cqe []byte) {
		const size = 64 << 10
		m, err := umem.Anon(size)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Free()
		mem := m.Bytes()
		binary.LittleEndian.PutUint32(mem[0:], log2)
		binary.LittleEndian.PutUint32(mem[4:], mask)
		binary.LittleEndian.PutUint32(mem[ringProdOff:], prod)
		binary.LittleEndian.PutUint32(mem[ringConsOff:], cons)
		copy(mem[ringDataOff:], cqe)
		r, err := newRing(m.Bytes(), cqeMinSize)
		if err != nil {
			return
		}
		if ringDataOff+(r.capacity()+1)*r.elemSize() > len(mem) {
			t.Fatalf("accepted a ring larger than its mapping")
		}
		q := &cq{ring: r}
		wc := make([]driver.WC, 8)
		for i := 0; i < 3; i++ {
			n, err := q.Poll(wc)
			if err != nil || n < 0 || n > len(wc) {
				t.Fatalf("Poll = %d, %v", n, err)
			}
		}
		// Producer side on the same ring: fill until full, never past the mapping.
		for i := 0; i <= r.capacity() && i < 4096; i++ {
			if r.producerFull() {
				break
			}
			_ = r.produceSlot()
			r.publish()
		}
	})
}
