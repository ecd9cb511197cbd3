package probe

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"time"

	"github.com/gorping/gorping/mesh/target"
	"github.com/gorping/gorping/rping"
)

// Settings are what every target's loops share.
type Settings struct {
	Interval, Timeout, ConnectTimeout time.Duration
	BackoffMax                        time.Duration
	Jitter                            float64
	Paths                             int // --paths: connections (loops) per target
	// Lifetime is --path-lifetime: a path's connection is replaced by a new one (new
	// QPs, new rdma_cm port, so a new flow) after a lifetime drawn in [Lifetime/2,
	// 3·Lifetime/2); 0: never (a connection lives until it fails).
	Lifetime time.Duration
	Hot      Hot // zero: the defaults (defaultHot)
	Dial     Dial
	Resolver target.Resolver
	Log      *slog.Logger
}

// maxParallelDials is how many connections an agent sets up at once: an agent started
// with hundreds of targets, or all of whose peers came back at once, connects a few at a
// time instead of timing every setup out in a storm.
const maxParallelDials = 8

// targetLoop probes one path of a target, one slot per interval, over one connection it
// keeps, reconnecting with capped backoff. With --paths K a target has K loops, each
// with its own connection (QPs, UDP source port) and schedule phase. Each slot has one
// outcome: an RTT, or a failure with the reason of what is wrong at the time (slots that
// pass while waiting to reconnect, or while a dial outlasts them, fail with the reason
// that keeps the path down).
type targetLoop struct {
	t    target.Target
	s    *Settings
	sh   *shared // the target's loops' common state
	path int
	pm   PathRecorder
	rec  Recorder
	log  *slog.Logger
	rnd  *rand.Rand
	conn Conn
	// dials bounds the connection setups in flight (maxParallelDials), shared by the
	// manager's loops.
	dials chan struct{}
	bo    Backoff

	retryAt    time.Time // no dial before this
	lastReason string    // why the target is down ("" while it is up)
	pending    string    // the connection died between slots: the next slot fails with this
	timer      *time.Timer
	warnedPath bool // a rail target's connection left by another device: logged

	// The connection's rotation (--path-lifetime, "sampling the flows" in docs/mesh.md):
	// connAt is when it was set up, draw its lifetime's factor in [0.5, 1.5).
	connAt time.Time
	draw   float64
}

// Sampling the fabric's flows (docs/mesh.md, "Paths: a fault stays visible"). A
// connection on an ECMP member that drops its flow fails; its replacement gets new QPs
// and a new rdma_cm port, so a new flow, and lands on a working member 1−1/M of the
// time: a path that only reconnects on failure settles on the members that work and the
// fault vanishes from its series. So connections are replaced on a schedule, and faster
// while a target has just failed on a connected path (it is "hot"): then every path of
// the target samples a new flow every Hot lifetime, and each new connection whose first
// ping fails (a dead connection: the CM's handshake crossed the fabric, its data flow
// did not) renews the evidence, for as long as the fault lasts.
//
// Hot is how a hot target samples: it stays hot for Hold after its last failure on a
// connected path, and a hot path's connection lives Hot.lifetime.
type Hot struct {
	Hold        time.Duration // a target stays hot this long after its last failure on a connected path
	MinLifetime time.Duration // a hot path's connection lifetime: at least this, and
	// SlotsPerConn: at least this many intervals. Every connection is a set-up at both
	// ends: at 10 intervals the cluster-shaped bed's single-CPU guests, every target of
	// which turned hot at some ping's timeout, spent more on connecting than on probing;
	// at 30 a hot target met the dead member too seldom to show it in every 2-minute
	// window.
	SlotsPerConn int
}

// defaultHot is the agent's Hot (a zero Settings.Hot).
var defaultHot = Hot{Hold: 5 * time.Minute, MinLifetime: 15 * time.Second, SlotsPerConn: 15}

// lifetime is a hot path's connection lifetime.
func (h Hot) lifetime(interval time.Duration) time.Duration {
	return max(h.MinLifetime, time.Duration(h.SlotsPerConn)*interval)
}

func newTargetLoop(t target.Target, s *Settings, sh *shared, rec Recorder, tr TargetRecorder, path int, seed uint64) *targetLoop {
	rnd := rand.New(rand.NewPCG(seed, uint64(time.Now().UnixNano())))
	log := s.Log.With("target", t.Key())
	if t.Device != "" {
		log = log.With("device", t.Device, "port", t.DevPort, "peer", t.Peer)
	}
	if len(sh.working) > 1 {
		log = log.With("path", path)
	}
	return &targetLoop{t: t, s: s, sh: sh, path: path, pm: tr.Path(path), rec: rec, rnd: rnd, log: log,
		bo: Backoff{Base: s.Interval, Max: max(s.BackoffMax, s.Interval), Rnd: rnd}}
}

func (l *targetLoop) run(ctx context.Context) {
	defer l.closeConn()
	sched := NewSchedule(time.Now(), l.s.Interval, l.s.Jitter, l.rnd)
	l.timer = time.NewTimer(time.Hour)
	defer l.timer.Stop()
	for {
		due := sched.Next()
		if !l.waitUntil(ctx, due) {
			return
		}
		l.rec.SlotDelay(max(time.Since(due), 0))
		l.slot(ctx)
		// Slots that passed while the slot ran (a dial up to --connect-timeout, a slow
		// ping): while the target is down they fail with its reason; a target that is
		// up was busy answering, and its skipped slots are not counted.
		if n := sched.SkipPast(time.Now()); n > 0 && l.lastReason != "" {
			l.failed(l.lastReason, n)
		}
	}
}

// waitUntil sleeps until t; a connection that dies meanwhile is released at once (a
// removed device waits for every user to let go). It returns false when ctx ends.
func (l *targetLoop) waitUntil(ctx context.Context, t time.Time) bool {
	l.timer.Reset(time.Until(t))
	for {
		var dead <-chan struct{}
		if l.conn != nil {
			dead = l.conn.Done()
		}
		select {
		case <-l.timer.C:
			return true
		case <-ctx.Done():
			return false
		case <-dead:
			_, err := l.conn.Ping(0) // a spent connection answers at once with its reason
			l.connFailed()
			l.closeConn()
			l.pending = Reason(err)
			l.down(l.pending, err)
		}
	}
}

// slot runs one probe slot.
func (l *targetLoop) slot(ctx context.Context) {
	if l.pending != "" {
		// The connection died since the last slot: this slot fails with that, and the
		// connection is set up again for the next one.
		l.failure(l.pending)
		l.pending = ""
		l.dial(ctx)
		return
	}
	if l.conn != nil && l.rotateDue(time.Now()) && !l.rotate(ctx) {
		return
	}
	if l.conn == nil {
		if time.Now().Before(l.retryAt) {
			l.failure(l.downReason())
			return
		}
		if reason := l.dial(ctx); reason != "" {
			if ctx.Err() == nil {
				l.failure(reason)
			}
			return
		}
	}
	rtt, err := l.conn.Ping(l.s.Timeout)
	if err != nil {
		if ctx.Err() != nil {
			return // shutting down: not the target's failure
		}
		reason := Reason(err)
		l.failure(reason)
		l.connFailed()
		l.closeConn()
		l.retryAt = time.Time{} // redial at the next slot; repeated dial failures back off
		l.down(reason, err)
		return
	}
	nic, host, split := l.conn.LastSplit()
	l.pm.Success(rtt, nic, host, split)
	l.sh.setWorking(l.path, true)
	if l.lastReason != "" {
		l.log.Info("target up", "device", l.conn.Device(), "port", l.conn.Port(), "rtt", rtt)
		l.lastReason = ""
	}
}

// dial connects, returning "" or the failure reason (also recorded as the target's
// down reason, with the backoff until the next attempt).
func (l *targetLoop) dial(ctx context.Context) string {
	conn, addr, err := l.connect(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return rping.ReasonCanceled
		}
		reason := Reason(err)
		var dc *deadConnError
		if errors.As(err, &dc) {
			// The set-up worked: the next connection, a new flow, is tried at the next slot.
			l.retryAt = time.Time{}
			l.markHotIfOthersWork()
		} else {
			l.retryAt = time.Now().Add(l.bo.Next())
		}
		l.down(reason, err)
		return reason
	}
	l.bo.Reset()
	l.use(conn, addr)
	return ""
}

// connect sets up a new connection to the target, holding one of the agent's dial
// slots. Its error is a *rping.ProbeError; ReasonCanceled when ctx ended.
func (l *targetLoop) connect(ctx context.Context) (Conn, netip.Addr, error) {
	select {
	case l.dials <- struct{}{}:
		defer func() { <-l.dials }()
	case <-ctx.Done():
		return nil, netip.Addr{}, &rping.ProbeError{Reason: rping.ReasonCanceled, Err: ctx.Err()}
	}
	rctx, cancel := context.WithTimeout(ctx, l.s.ConnectTimeout)
	addr, err := target.Resolve(rctx, l.s.Resolver, l.t)
	cancel()
	if err != nil {
		return nil, netip.Addr{}, &rping.ProbeError{Reason: ReasonResolve, Err: err}
	}
	conn, err := l.s.Dial(ctx, l.t.Src, netip.AddrPortFrom(addr, l.t.Port), l.path, LineLog{l.log})
	if err != nil {
		if ctx.Err() != nil {
			return nil, addr, &rping.ProbeError{Reason: rping.ReasonCanceled, Err: err}
		}
		return nil, addr, err
	}
	// The first ping proves the connection's own flow, with the set-up's bound rather
	// than a ping's: a host slow at its first exchange (a loaded guest) is not a dropped
	// flow, a flow that answers nothing within --connect-timeout is. Its RTT is not a
	// slot's. One that fails is a dead connection.
	if _, err := conn.Ping(max(l.s.ConnectTimeout, l.s.Timeout)); err != nil {
		conn.Close()
		if ctx.Err() != nil {
			return nil, addr, &rping.ProbeError{Reason: rping.ReasonCanceled, Err: err}
		}
		l.pm.DeadConnection()
		return nil, addr, &deadConnError{err}
	}
	return conn, addr, nil
}

// deadConnError is a connection set up whose first ping failed.
type deadConnError struct{ err error }

func (e *deadConnError) Error() string {
	return "the new connection's first ping failed: " + e.err.Error()
}
func (e *deadConnError) Unwrap() error { return e.err }

// use makes conn the path's connection.
func (l *targetLoop) use(conn Conn, addr netip.Addr) {
	l.conn = conn
	l.connAt, l.draw = time.Now(), 0.5+l.rnd.Float64()
	l.pm.Connected(conn.Device(), strconv.Itoa(conn.Port()), conn.Flow(), conn.TSSource())
	if l.t.Device != "" && (conn.Device() != l.t.Device || conn.Port() != l.t.DevPort) && !l.warnedPath {
		// The source address picks the device; another one means the host's addresses
		// and its description disagree (an address moved since it was described).
		l.warnedPath = true
		l.log.Warn("a rail target's connection left by another device than its rail", "rail", l.t.Device+"/"+strconv.Itoa(l.t.DevPort),
			"device", conn.Device(), "port", conn.Port(), "source", l.t.Src)
	}
	l.log.Debug("connected", "address", addr, "device", conn.Device(), "port", conn.Port(), "ts_source", conn.TSSource())
}

// rotateDue says whether the path's connection has lived its lifetime at now: the
// drawn share of --path-lifetime, or of the Hot lifetime while the target is hot.
func (l *targetLoop) rotateDue(now time.Time) bool {
	life := l.s.Lifetime
	if life <= 0 {
		return false
	}
	if l.sh.hot(now) {
		life = min(life, l.hot().lifetime(l.s.Interval))
	}
	return now.Sub(l.connAt) >= time.Duration(l.draw*float64(life))
}

// rotate replaces the path's connection with a new one, made before the old one is
// broken so that the path never goes down for it. It waits for no dial slot: with every
// slot taken (targets reconnecting, a busy host) the rotation waits for a later slot. It
// returns false when the new connection was set up but its first ping failed (a dead
// connection): that is the slot's outcome, recorded here, and the old connection stays
// in use. One that cannot be set up at all keeps the old one too, only logged: the
// path works.
func (l *targetLoop) rotate(ctx context.Context) bool {
	if len(l.dials) == cap(l.dials) {
		return true
	}
	conn, addr, err := l.connect(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return true
		}
		l.connAt = time.Now()
		var dc *deadConnError
		if errors.As(err, &dc) {
			l.failure(Reason(err))
			l.markHotIfOthersWork()
			l.log.Debug("a new connection of the path died at its first ping: keeping the old one", "err", err)
			return false
		}
		l.log.Debug("cannot replace the path's connection: keeping it", "reason", Reason(err), "err", err)
		return true
	}
	l.closeConn()
	l.use(conn, addr)
	return true
}

// connFailed records that the path's connection failed after carrying pings: the
// target turns hot if another of its paths works.
func (l *targetLoop) connFailed() { l.markHotIfOthersWork() }

// markHotIfOthersWork makes the target hot when another of its paths works: a flow
// dropped, not the host or its rail (rotating connections to a host that fails them all
// would only add to its load).
func (l *targetLoop) markHotIfOthersWork() {
	if l.sh.othersWork(l.path) {
		l.sh.markHot(time.Now(), l.hot().Hold)
	}
}

// failure records a failed slot of the path.
func (l *targetLoop) failure(reason string) { l.failed(reason, 1) }

// failed records n failed slots of the path with reason.
func (l *targetLoop) failed(reason string, n int) {
	l.pm.Failed(reason, n)
	l.sh.setWorking(l.path, false)
}

// hot is the loop's Hot: its settings', or the default.
func (l *targetLoop) hot() Hot {
	if l.s.Hot == (Hot{}) {
		return defaultHot
	}
	return l.s.Hot
}

// down records why the path is down, logging when the reason changes.
func (l *targetLoop) down(reason string, err error) {
	l.pm.Down(reason)
	l.sh.setWorking(l.path, false)
	if reason == l.lastReason {
		return
	}
	l.lastReason = reason
	l.log.Warn("target down", "reason", reason, "err", err)
}

func (l *targetLoop) downReason() string {
	if l.lastReason != "" {
		return l.lastReason
	}
	return rping.ReasonConnectError
}

func (l *targetLoop) closeConn() {
	if l.conn != nil {
		l.conn.Close()
		l.conn = nil
	}
}

// LineLog logs rping's lines about a connection at debug level.
type LineLog struct{ Log *slog.Logger }

func (w LineLog) Write(p []byte) (int, error) {
	if w.Log.Enabled(context.Background(), slog.LevelDebug) {
		s := string(p)
		for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == '\r') {
			s = s[:len(s)-1]
		}
		w.Log.Debug("rping", "line", s)
	}
	return len(p), nil
}
