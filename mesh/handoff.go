package mesh

import (
	"context"
	"sync"

	"github.com/gorping/gorping/mesh/target"
)

// railHandoff is how discovery hands its rail targets on: put gives the reloader a new
// list and waits until it is reconciled (the pinglist's steps are paced on it); the
// reloader takes the latest list and marks its generation applied. Data goes one way:
// discovery never reaches into the agent.
type railHandoff struct {
	mu      sync.Mutex
	gen     uint64          // generation of list
	list    []target.Target // the latest list
	applied uint64          // the latest generation reconciled
	ch      chan struct{}   // closed and replaced when applied moves
	kick    func()          // asks the reloader to take the list
}

func newRailHandoff(kick func()) *railHandoff {
	return &railHandoff{ch: make(chan struct{}), kick: kick}
}

// put hands ts on and waits until the reloader has reconciled them (false: ctx ended
// first).
func (h *railHandoff) put(ctx context.Context, ts []target.Target) bool {
	h.mu.Lock()
	h.gen++
	gen := h.gen
	h.list = ts
	h.mu.Unlock()
	h.kick()
	for {
		h.mu.Lock()
		done, ch := h.applied >= gen, h.ch
		h.mu.Unlock()
		if done {
			return true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// take is the latest list and its generation.
func (h *railHandoff) take() ([]target.Target, uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.list, h.gen
}

// done marks generation gen reconciled.
func (h *railHandoff) done(gen uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if gen > h.applied {
		h.applied = gen
		close(h.ch)
		h.ch = make(chan struct{})
	}
}
