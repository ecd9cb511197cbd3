package mesh

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/gorping/gorping/mesh/target"
)

// maxTargetFileBytes bounds the target file read into memory.
const maxTargetFileBytes = 8 << 20

// sources turns --targets, --peers and --targets-dns into the target list.
type sources struct {
	file        string
	peers       []target.Target
	dnsName     string
	dnsPort     uint16
	defaultPort uint16
	selfPort    uint16 // the responder's port; 0: no responder, nothing is "self"
	resolver    target.Resolver
	local       func() map[netip.Addr]bool // this host's addresses
	log         *slog.Logger
	m           *metrics

	fileData    []byte
	fileLoaded  bool
	fileErr     string // the last read error, "" after a good read
	fileTargets []target.Target
	dnsTargets  []target.Target
	rails       []target.Target // discovery's rail targets (already paired: no self check)
	skipped     map[string]bool // self targets already logged
	selfNames   map[string]bool // by key: whether a name on the responder's port is this host
	maxTargets  int
	lastOver    int  // the number of targets when --max-targets was last logged; 0: under it
	warnedEmpty bool // the list is empty and that was logged
}

// loadFile reads the target file and reports whether its targets may have changed. A
// file that cannot be read keeps the targets it last gave (a log line and a metric,
// once per change of the error, and again on SIGHUP). Its bad lines are logged once
// per change of the file and counted by gorping_target_file_bad_lines.
func (s *sources) loadFile(force bool) bool {
	if s.file == "" {
		return false
	}
	data, err := readTargetFile(s.file)
	if err != nil {
		if msg := err.Error(); msg != s.fileErr || force {
			s.fileErr = msg
			s.log.Error("cannot read the target file; keeping its last targets", "file", s.file, "err", err)
			s.m.configErrors.WithLabelValues(target.SourceFile, "read").Inc()
		}
		s.fileData, s.fileLoaded = nil, false
		return false
	}
	s.fileErr = ""
	if s.fileLoaded && string(data) == string(s.fileData) {
		return force // unchanged: nothing to log again
	}
	s.fileData, s.fileLoaded = data, true
	ts, errs := target.ParseFile(data, s.defaultPort)
	const each = 10
	for i, e := range errs {
		if i == each {
			s.log.Warn("more bad lines in the target file, not logged", "file", s.file, "count", len(errs)-each)
			break
		}
		s.log.Warn("bad line in the target file", "file", s.file, "line", e.Line, "err", e.Err)
	}
	s.m.badLines.Set(float64(len(errs)))
	s.log.Info("target file loaded", "file", s.file, "targets", len(ts), "bad_lines", len(errs))
	s.fileTargets = ts
	return true
}

// readTargetFile reads the target file if it is a regular file (or a symlink to one, as
// a ConfigMap's is) of at most maxTargetFileBytes. It opens without blocking, so a FIFO
// in its place is refused at once instead of waiting for a writer, and a device
// (/dev/zero) is never read.
func readTargetFile(path string) ([]byte, error) { return readRegularFile(path, maxTargetFileBytes) }

// readRegularFile reads path if it is a regular file of at most limit bytes.
func readRegularFile(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s)", path, fileKind(fi.Mode()))
	}
	if fi.Size() > limit {
		return nil, fmt.Errorf("%s is larger than %d KiB (%d bytes)", path, limit>>10, fi.Size())
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is larger than %d KiB (it grew while read)", path, limit>>10)
	}
	return data, nil
}

func fileKind(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "a named pipe"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a device"
	case m.IsDir():
		return "a directory"
	}
	return "mode " + m.Type().String()
}

// refreshDNS resolves --targets-dns. A failure keeps the last answer (a log line and a
// metric), so a DNS hiccup does not drop every peer.
func (s *sources) refreshDNS(ctx context.Context) {
	if s.dnsName == "" {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ts, err := target.ResolveDNS(ctx, s.resolver, s.dnsName, s.dnsPort)
	if err != nil {
		s.log.Warn("cannot resolve --targets-dns; keeping its last targets", "name", s.dnsName, "err", err)
		s.m.configErrors.WithLabelValues(target.SourceDNS, "resolve").Inc()
		return
	}
	s.dnsTargets = ts
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
	for _, list := range [][]target.Target{s.fileTargets, s.peers, s.dnsTargets, s.rails} {
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
