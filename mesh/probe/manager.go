package probe

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorping/gorping/mesh/target"
	"github.com/gorping/gorping/rping"
)

// Recorder is where the probers' outcomes go (the agent's metrics). Recording a slot
// must not allocate: the ping loop does not.
type Recorder interface {
	// Target gives the recorder of a target started with paths loops.
	Target(t target.Target, paths int) TargetRecorder
	// SlotDelay records how late a slot started after its due time.
	SlotDelay(late time.Duration)
}

// TargetRecorder records one target's outcomes.
type TargetRecorder interface {
	Path(i int) PathRecorder
	// Remove ends the target's record: it left the target list and its loops ended.
	Remove()
}

// PathRecorder records one path's outcomes; only the path's loop calls it.
type PathRecorder interface {
	// Success is a slot's RTT and, where split (ok), its NIC-timed and host parts.
	Success(rtt, nic, host time.Duration, ok bool)
	// Failed is n failed slots with reason; the path is down.
	Failed(reason string, n int)
	// Down: the path does not work (its connection died), and why.
	Down(reason string)
	// Connected is a new connection of the path: its local device and port, its flow,
	// and where its RTT split comes from (Conn.TSSource).
	Connected(device, port string, f rping.Flow, tsSource string)
	// DeadConnection is a connection set up whose first ping failed.
	DeadConnection()
}

// Manager runs a target's targetLoops (one per path, --paths) and reconciles them with the target list: a
// reload starts the new targets and stops the removed ones, and leaves every other loop
// (its connection and its series) alone.
type Manager struct {
	ctx     context.Context
	s       *Settings
	rec     Recorder
	dials   chan struct{} // maxParallelDials
	mu      sync.Mutex
	running map[string]*running
	seed    uint64
}

type running struct {
	t      target.Target
	tr     TargetRecorder
	cancel context.CancelFunc // ends every path's loop
	left   atomic.Int32       // loops still running: the last one closes done
	done   chan struct{}
}

// NewManager is the manager of loops that run until ctx ends (or Reconcile, StopAll end
// them), probing with s and recording into rec.
func NewManager(ctx context.Context, s Settings, rec Recorder) *Manager {
	return &Manager{ctx: ctx, s: &s, rec: rec, dials: make(chan struct{}, maxParallelDials), running: map[string]*running{}}
}

// Reconcile makes the running loops those of targets. It stops the removed loops all
// at once and deletes their series in time linear in their number; if ctx ends first it
// returns, and StopAll releases what is left.
func (mg *Manager) Reconcile(ctx context.Context, targets []target.Target) {
	want := make(map[string]target.Target, len(targets))
	for _, t := range targets {
		want[t.ID()] = t
	}
	mg.mu.Lock()
	var stop []*running
	for k, r := range mg.running {
		if _, ok := want[k]; !ok {
			stop = append(stop, r)
			delete(mg.running, k)
		}
	}
	var started []string
	for _, t := range targets {
		k := t.ID()
		if _, ok := mg.running[k]; ok {
			continue
		}
		lctx, cancel := context.WithCancel(mg.ctx)
		paths := max(mg.s.Paths, 1)
		r := &running{t: t, tr: mg.rec.Target(t, paths), cancel: cancel, done: make(chan struct{})}
		sh := &shared{working: make([]bool, paths)}
		r.left.Store(int32(paths))
		mg.running[k] = r
		for p := range paths {
			mg.seed++ // each path its own random phase and backoff
			l := newTargetLoop(t, mg.s, sh, mg.rec, r.tr, p, mg.seed)
			l.dials = mg.dials
			go func() {
				defer func() {
					if r.left.Add(-1) == 0 {
						close(r.done)
					}
				}()
				l.run(lctx)
			}()
		}
		started = append(started, k)
	}
	mg.mu.Unlock()
	for _, r := range stop {
		r.cancel()
	}
	var removed []string
	for _, r := range stop {
		select {
		case <-r.done:
		case <-ctx.Done():
			return
		}
		r.tr.Remove()
		removed = append(removed, r.t.ID())
	}
	slices.Sort(removed)
	logTargets(mg.s.Log, "target removed", removed)
	logTargets(mg.s.Log, "target added", started)
}

// logTargets logs one line per target, or for a long list the first few and a count:
// a reload that replaces 10,000 targets is two lines, not 20,000.
func logTargets(log *slog.Logger, msg string, keys []string) {
	const each = 10
	if len(keys) <= each {
		for _, k := range keys {
			log.Info(msg, "target", k)
		}
		return
	}
	log.Info(msg+" (a long list: the first few)", "count", len(keys), "first", strings.Join(keys[:each], ","))
}

// StopAll stops every loop and waits until each has released its connection. The
// series stay, so a last scrape shows the last state.
func (mg *Manager) StopAll() {
	mg.mu.Lock()
	rs := make([]*running, 0, len(mg.running))
	for _, r := range mg.running {
		rs = append(rs, r)
	}
	mg.mu.Unlock()
	for _, r := range rs {
		r.cancel()
	}
	for _, r := range rs {
		<-r.done
	}
}

// Running is how many targets have loops.
func (mg *Manager) Running() int {
	mg.mu.Lock()
	defer mg.mu.Unlock()
	return len(mg.running)
}

// shared is what a target's loops share: which of its paths work (the last slot
// succeeded), and until when the target is hot (its paths sample new flows fast).
type shared struct {
	hotUntil atomic.Int64 // unix ns
	mu       sync.Mutex
	working  []bool
}

func (sh *shared) setWorking(path int, w bool) {
	sh.mu.Lock()
	sh.working[path] = w
	sh.mu.Unlock()
}

// othersWork says whether a path of the target other than path works.
func (sh *shared) othersWork(path int) bool {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for i, w := range sh.working {
		if w && i != path {
			return true
		}
	}
	return false
}

// markHot makes the target hot for hold from now.
func (sh *shared) markHot(now time.Time, hold time.Duration) {
	sh.hotUntil.Store(now.Add(hold).UnixNano())
}

// hot says whether the target is hot at now.
func (sh *shared) hot(now time.Time) bool { return now.UnixNano() < sh.hotUntil.Load() }
