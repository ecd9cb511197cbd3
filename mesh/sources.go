package mesh

import (
	"context"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"github.com/gorping/gorping/mesh/source"
	"github.com/gorping/gorping/mesh/target"
)

// sources turns --targets, --peers and --targets-dns into the target list.
type sources struct {
	file     *source.File
	peers    []target.Target
	dns      *source.DNS
	selfPort uint16                     // the responder's port; 0: no responder, nothing is "self"
	local    func() map[netip.Addr]bool // this host's addresses
	log      *slog.Logger
	m        *metrics

	rails       []target.Target // discovery's rail targets (already paired: no self check)
	skipped     map[string]bool // self targets already logged
	selfNames   map[string]bool // by key: whether a name on the responder's port is this host
	maxTargets  int
	lastOver    int  // the number of targets when --max-targets was last logged; 0: under it
	warnedEmpty bool // the list is empty and that was logged
}

// targetList is what the sources give at one time.
type targetList struct {
	probe []target.Target // to probe
	names []target.Target // host names on the responder's port: to check against this host's addresses
	// unchecked counts the names not checked yet: they wait (they are neither probed nor
	// skipped) until the background check answers for them.
	unchecked int
	keys      map[string]bool // the agent's targets, for /probe: probe and the unchecked names
}

// targets is the union of the sources, each target once, without this agent itself: a
// target on the responder's port at one of this host's addresses. An address literal is
// checked here; a name needs DNS, so it is checked in the background (checkSelf) and
// its last answer (selfNames) used, never on the reload's path.
func (s *sources) targets() targetList {
	local := s.local()
	seen := map[string]bool{}
	count := map[string]int{target.SourceFile: 0, target.SourcePeers: 0, target.SourceDNS: 0, target.SourceRails: 0}
	l := targetList{keys: map[string]bool{}}
	over := 0 // targets beyond --max-targets
	for _, list := range [][]target.Target{s.file.List(), s.peers, s.dns.List(), s.rails} {
		for _, t := range list {
			k := t.ID()
			if seen[k] {
				continue
			}
			seen[k] = true
			self, known := false, true
			if s.selfPort != 0 && t.Port == s.selfPort && t.Source != target.SourceRails {
				if a, ok := t.Addr(); ok {
					self = local[a]
				} else {
					l.names = append(l.names, t)
					self, known = s.selfNames[k]
				}
			}
			if self && known {
				if !s.skipped[k] {
					s.skipped[k] = true
					s.log.Info("skipping a target that is this agent", "target", k, "source", t.Source)
				}
				continue
			}
			if len(l.probe)+l.unchecked >= s.maxTargets {
				over++
				continue
			}
			l.keys[t.Key()] = true
			if !known {
				l.unchecked++
				continue
			}
			l.probe = append(l.probe, t)
			count[t.Source]++
		}
	}
	for src, n := range count {
		s.m.targets.WithLabelValues(src).Set(float64(n))
	}
	s.m.ignored.WithLabelValues("max_targets").Set(float64(over))
	if all := len(l.probe) + l.unchecked + over; over > 0 && all != s.lastOver {
		s.log.Error("more than --max-targets: probing the first ones (the file's in order, then --peers, then --targets-dns by address, then the rail targets); raise --max-targets or shorten the list",
			"targets", all, "max_targets", s.maxTargets, "not_probed", over)
	}
	s.lastOver = 0
	if over > 0 {
		s.lastOver = len(l.probe) + l.unchecked + over
	}
	if none := len(l.keys) == 0; none && !s.warnedEmpty {
		s.log.Warn("no targets: this agent probes nothing (give --targets, --peers, --targets-dns or agents to find rails from; a list naming only this agent is empty too)")
		s.warnedEmpty = true
	} else if !none {
		s.warnedEmpty = false
	}
	return l
}

// selfCheckParallel bounds the lookups of one self-check; selfCheckTimeout each one.
const (
	selfCheckParallel = 8
	selfCheckTimeout  = 2 * time.Second
)

// checkSelf resolves names and reports, by target key, which are this host. A name that
// does not resolve is not (it fails as its own target, with reason resolve_error).
func checkSelf(ctx context.Context, r target.Resolver, local map[netip.Addr]bool, names []target.Target) map[string]bool {
	out := make(map[string]bool, len(names))
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, selfCheckParallel)
	for _, t := range names {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			lctx, cancel := context.WithTimeout(ctx, selfCheckTimeout)
			defer cancel()
			addrs, err := r.LookupNetIP(lctx, "ip", t.Host)
			self := false
			for _, a := range addrs {
				self = self || err == nil && local[a.Unmap()]
			}
			mu.Lock()
			out[t.Key()] = self
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}
