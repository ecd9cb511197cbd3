package rxe

import (
	"fmt"
	"sync/atomic"
	"unsafe"
)

// ring is one mmap'd rxe queue (struct rxe_queue_buf followed by the slots). Each side
// writes only its own index: user space produces SQ/RQ WQEs and consumes CQEs. The indices
// are accessed with sync/atomic, whose loads are acquire and stores release on every
// architecture Go supports, which is what the ring protocol needs.
type ring struct {
	mem   []byte // the mapping
	mask  uint32 // slots - 1
	shift uint32 // log2 of the slot stride
	prod  *uint32
	cons  *uint32
	// own is our private copy of the index we own (producer for SQ/RQ, consumer for CQ):
	// never trust shared memory for our own position.
	own uint32
}

// newRing validates the kernel-written header of a mapped queue: the stride must be at
// least minElem bytes and all slots must lie inside the mapping.
func newRing(mem []byte, minElem int) (*ring, error) {
	if len(mem) < ringDataOff {
		return nil, fmt.Errorf("rxe: queue mapping of %d bytes is smaller than its header", len(mem))
	}
	h := (*queueBuf)(unsafe.Pointer(&mem[0]))
	shift, mask := atomic.LoadUint32(&h.Log2ElemSize), atomic.LoadUint32(&h.IndexMask)
	if shift > 20 || 1<<shift < minElem {
		return nil, fmt.Errorf("rxe: queue slot size 2^%d is below the %d bytes needed", shift, minElem)
	}
	if mask&(mask+1) != 0 || mask > 1<<24 {
		return nil, fmt.Errorf("rxe: queue index mask %#x is not 2^n-1", mask)
	}
	if need := uint64(ringDataOff) + uint64(mask+1)<<shift; need > uint64(len(mem)) {
		return nil, fmt.Errorf("rxe: queue of %d slots of %d bytes needs %d bytes, mapping has %d", mask+1, 1<<shift, need, len(mem))
	}
	r := &ring{mem: mem, mask: mask, shift: shift, prod: &h.ProducerIndex, cons: &h.ConsumerIndex}
	return r, nil
}

// capacity is the number of usable slots (one always stays empty).
func (r *ring) capacity() int { return int(r.mask) }

// elemSize is the slot stride in bytes.
func (r *ring) elemSize() int { return 1 << r.shift }

// slot returns a pointer to slot i (i is masked).
func (r *ring) slot(i uint32) unsafe.Pointer {
	return unsafe.Pointer(&r.mem[ringDataOff+int(i&r.mask)<<r.shift])
}

// Producer side (SQ, RQ).

// producerFull reports whether no slot is free.
func (r *ring) producerFull() bool {
	return (r.own+1)&r.mask == atomic.LoadUint32(r.cons)&r.mask
}

// produceSlot is the slot to fill next.
func (r *ring) produceSlot() unsafe.Pointer { return r.slot(r.own) }

// publish hands the filled slot to the kernel (store-release of the producer index).
func (r *ring) publish() {
	r.own = (r.own + 1) & r.mask
	atomic.StoreUint32(r.prod, r.own)
}

// Consumer side (CQ).

// available is how many filled slots the kernel published.
func (r *ring) available() uint32 {
	return (atomic.LoadUint32(r.prod) - r.own) & r.mask
}

// release returns n read slots to the kernel (store-release of the consumer index), after
// the reads are done.
func (r *ring) release(n uint32) {
	r.own = (r.own + n) & r.mask
	atomic.StoreUint32(r.cons, r.own)
}
