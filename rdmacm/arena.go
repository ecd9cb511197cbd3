package rdmacm

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// arena is anonymous mmap'd memory cut into fixed command slots. The kernel
// copies responses to the u64 user address a command carries, so that memory
// must never be movable Go memory: a slot holds the header, the body and the
// response buffer of one command.
type arena struct {
	mem   []byte
	slots chan []byte
	done  chan struct{}
}

const (
	slotSize   = 1024
	slotResp   = 512 // response buffer offset inside a slot
	arenaSlots = 16  // concurrent commands; more wait for a free slot
)

// Everything a command writes must fit its half of the slot, every response
// the other half.
var _ = [1]struct{}{}[(8+sizeofAccept)/slotResp]
var _ = [1]struct{}{}[(8+maxPathRecs*sizeofPathRecData)/(slotSize-slotResp)]
var _ = [1]struct{}{}[sizeofEventResp/(slotSize-slotResp)]

func newArena() (*arena, error) {
	mem, err := unix.Mmap(-1, 0, slotSize*arenaSlots, unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("rdmacm: mmap command arena: %w", err)
	}
	a := &arena{mem: mem, slots: make(chan []byte, arenaSlots), done: make(chan struct{})}
	for i := range arenaSlots {
		a.slots <- mem[i*slotSize : (i+1)*slotSize : (i+1)*slotSize]
	}
	return a, nil
}

// get returns a free slot, waiting for one if all are in use.
func (a *arena) get() ([]byte, error) {
	select {
	case <-a.done:
		return nil, ErrClosed
	default:
	}
	select {
	case s := <-a.slots:
		return s, nil
	case <-a.done:
		return nil, ErrClosed
	}
}

func (a *arena) put(s []byte) { a.slots <- s }

// free waits until every slot is back, then unmaps the memory.
func (a *arena) free() error {
	close(a.done)
	for range arenaSlots {
		<-a.slots
	}
	if err := unix.Munmap(a.mem); err != nil {
		return fmt.Errorf("rdmacm: munmap command arena: %w", err)
	}
	return nil
}

// addr is the user virtual address of b's first byte, as the kernel wants it.
func addr(b []byte) uint64 { return uint64(uintptr(unsafe.Pointer(&b[0]))) }
