package rdmacm

import (
	"fmt"

	"github.com/gorping/gorping/internal/umem"
)

// arena is anonymous mmap'd memory (umem) cut into fixed command slots. The
// kernel copies responses to the u64 user address a command carries, so that
// memory must never be movable Go memory: a slot holds the header, the body
// and the response buffer of one command.
type arena struct {
	mem   *umem.Mem
	slots chan slot
	done  chan struct{}
}

// slot is one command's share of the arena.
type slot struct {
	b    []byte
	addr uint64 // user address of b[0]
}

const (
	slotSize   = 1024
	slotResp   = 512 // response buffer offset inside a slot
	arenaSlots = 16  // concurrent commands; more wait for a free slot
)

// Everything a command writes must fit its half of the slot, every response
// the other half.
var _ = [1]struct{}{}[(8+sizeofAcceptCmd)/slotResp]
var _ = [1]struct{}{}[(8+maxPathRecs*sizeofPathRecData)/(slotSize-slotResp)]
var _ = [1]struct{}{}[sizeofEventResp/(slotSize-slotResp)]

func newArena() (*arena, error) {
	mem, err := umem.Anon(slotSize * arenaSlots)
	if err != nil {
		return nil, fmt.Errorf("rdmacm: command arena: %w", err)
	}
	a := &arena{mem: mem, slots: make(chan slot, arenaSlots), done: make(chan struct{})}
	b := mem.Bytes()
	for i := range arenaSlots {
		a.slots <- slot{b: b[i*slotSize : (i+1)*slotSize : (i+1)*slotSize], addr: mem.AddrAt(i * slotSize)}
	}
	return a, nil
}

// get returns a free slot, waiting for one if all are in use.
func (a *arena) get() (slot, error) {
	select {
	case <-a.done:
		return slot{}, ErrClosed
	default:
	}
	select {
	case s := <-a.slots:
		return s, nil
	case <-a.done:
		return slot{}, ErrClosed
	}
}

func (a *arena) put(s slot) { a.slots <- s }

// free waits until every slot is back, then unmaps the memory.
func (a *arena) free() error {
	close(a.done)
	for range arenaSlots {
		<-a.slots
	}
	if err := a.mem.Free(); err != nil {
		return fmt.Errorf("rdmacm: command arena: %w", err)
	}
	return nil
}
