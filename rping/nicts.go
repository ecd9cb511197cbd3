package rping

import (
	"errors"
	"strconv"
	"time"

	"github.com/gorping/gorping/internal/trace"
	"github.com/gorping/gorping/uverbs"
	"golang.org/x/sys/unix"
)

// NIC completion timestamps. With --stats, --json or --trace a client (and every Prober:
// probe.go) asks for its CQ with completion timestamps where the device has them (mlx5: QUERY_DEVICE_EX reports a
// timestamp mask); each ping's round trip is then split into the client NIC's part, from
// the first SEND's send completion to the arrival of the last go-ahead (both stamped by
// the NIC), and the rest, this host's software: posting, polling, waking up, and the
// first SEND's way out. Where there are none (rxe, siw) gorping says so once and reports
// software time only. ts_source says which: "nic" or "sw".

// tsInfo is what a connection knows about its completion timestamps.
type tsInfo struct {
	device string
	conv   func(ts uint64) (ns uint64, ok bool) // the CQ's conversion; nil: software only
	note   string                               // why software only
}

func (t tsInfo) source() string {
	if t.conv != nil {
		return "nic"
	}
	return "sw"
}

// timestamped is a conn that knows its completion timestamps.
type timestamped interface{ timestamps() tsInfo }

func (c *verbsConn) timestamps() tsInfo { return c.ts }

// wantTimestamps: only a client's round trips are split, and only when they are
// reported: --stats, --json, --trace, or a Prober's (the mesh agent's metrics).
func wantTimestamps(cfg *Config, server bool) bool {
	return !server && (cfg.Stats || cfg.JSON || cfg.Trace || cfg.probe)
}

// createCQ is rping's CQ, with completion timestamps where wanted and possible; c.ts
// says what it got and why.
func (c *verbsConn) createCQ(cfg *Config, server bool) (*uverbs.CQ, error) {
	c.ts = tsInfo{device: c.dev.Name}
	if !wantTimestamps(cfg, server) {
		return c.vctx.CreateCQ(cqDepth, c.ch, 0)
	}
	a, err := c.vctx.QueryDeviceEx()
	switch {
	case err != nil:
		c.ts.note = "the extended device query failed: " + err.Error()
	case a.CompletionTimestampMask == 0:
		c.ts.note = "the " + c.dev.Driver + " driver has none"
	default:
		cq, err := c.vctx.CreateCQEx(cqDepth, c.ch, 0, uverbs.CQTimestamps)
		if err == nil {
			c.ts.conv = cq.TimestampNS
			return cq, nil
		}
		c.ts.note = "the device refused a CQ with them: " + err.Error()
	}
	return c.vctx.CreateCQ(cqDepth, c.ch, 0)
}

// dropTimestamps handles mlx5_ib refusing the QP (EOPNOTSUPP) because the device cannot
// stamp the free-running format a timestamp CQ asks for: the CQ is made (and armed)
// again without timestamps, and the caller creates the QP once more.
func (c *verbsConn) dropTimestamps(err error) bool {
	if c.ts.conv == nil || !errors.Is(err, unix.EOPNOTSUPP) {
		return false
	}
	cq, cerr := c.vctx.CreateCQ(cqDepth, c.ch, 0)
	if cerr != nil {
		return false
	}
	if cerr = cq.Arm(false); cerr != nil {
		cq.Destroy()
		return false
	}
	c.cq.Destroy()
	c.cq = cq
	c.ts.conv = nil
	c.ts.note = "the device cannot stamp completions in the free-running format (create QP: " + err.Error() + ")"
	return true
}

// nicClock splits one client connection's pings (nil: not reported).
type nicClock struct {
	ts                 tsInfo
	sendTS, recvTS     uint64
	haveSend, haveRecv bool
	// The last ping's split, valid if ok.
	ok        bool
	nic, host time.Duration
	anomalies int // pings whose NIC time did not fit in the software time
	out       *printer
}

// newNICClock returns nil unless the client's pings are reported (--stats, --json,
// --trace); it says once which time the reports give (stderr, except with --json, whose
// "connection" record says it).
func newNICClock(c conn, out *printer, rep *pingReport, tr *trace.Tracer) *nicClock {
	if rep == nil && tr == nil {
		return nil
	}
	k := &nicClock{out: out}
	if t, ok := c.(timestamped); ok {
		k.ts = t.timestamps()
	}
	if rep != nil {
		rep.nic = k
	}
	if rep != nil && rep.r.js != nil && tr == nil {
		return k
	}
	if k.ts.conv != nil {
		out.errorf("gorping: %s: NIC completion timestamps: nic= is the client NIC's round trip (first SEND's completion to the last go-ahead's arrival), host= the rest, this host's software (ts_source=nic)\n", k.ts.device)
	} else {
		dev, why := k.ts.device, k.ts.note
		if dev == "" {
			dev, why = "this connection", "its transport has none"
		}
		out.errorf("gorping: %s: no NIC completion timestamps (%s); round-trip times are software time (ts_source=sw)\n", dev, why)
	}
	return k
}

// completion notes a completion's timestamp: the first SEND completion and the last
// receive completion of a ping. It does not allocate.
func (k *nicClock) completion(c completion) {
	if k == nil || k.ts.conv == nil || c.ts == 0 || c.status != wcSuccess {
		return
	}
	switch c.kind {
	case compSend:
		if !k.haveSend {
			k.sendTS, k.haveSend = c.ts, true
		}
	case compRecv:
		k.recvTS, k.haveRecv = c.ts, true
	}
}

// end splits the ping that took rtt of software time and starts the next. A NIC time
// that does not fit in it (allowing the two clocks' rates a 0.1% disagreement) is not a
// measurement of this ping: it is reported as software time, and said once.
func (k *nicClock) end(rtt time.Duration) {
	if k == nil {
		return
	}
	k.ok = false
	if k.haveSend && k.haveRecv {
		a, okA := k.ts.conv(k.sendTS)
		b, okB := k.ts.conv(k.recvTS)
		nic := time.Duration(b - a)
		switch {
		case okA && okB && b > a && nic <= rtt+rtt/1000:
			k.ok, k.nic, k.host = true, nic, max(rtt-nic, 0)
		case okA && okB:
			if k.anomalies++; k.anomalies == 1 {
				k.out.errorf("gorping: %s: the NIC's timestamps do not fit this host's clock (NIC round trip %v, software %v); such pings are reported as software time\n", k.ts.device, time.Duration(int64(b-a)), rtt)
			}
		}
	}
	k.haveSend, k.haveRecv = false, false
}

// source is the last ping's ts_source.
func (k *nicClock) source() string {
	if k != nil && k.ok {
		return "nic"
	}
	return "sw"
}

// trace records the last ping's times (--trace): kind "rtt", one per ping, beside the
// "ping done" record of the counts.
func (k *nicClock) trace(tr *trace.Tracer, seq int, rtt time.Duration) {
	if tr == nil || k == nil {
		return
	}
	f := []trace.Field{trace.F("seq", seq), trace.F("rtt_ns", int64(rtt)), trace.F("ts_source", k.source())}
	if k.ok {
		f = append(f, trace.F("nic_rtt_ns", int64(k.nic)), trace.F("host_ns", int64(k.host)))
	}
	tr.Emit("rtt", "ping", f, nil, nil)
}

// appendText adds the last ping's split to a --stats line.
func (k *nicClock) appendText(b []byte) []byte {
	if k == nil || !k.ok {
		return b
	}
	b = append(b, " nic="...)
	b = strconv.AppendFloat(b, msec(k.nic), 'f', 3, 64)
	b = append(b, " ms host="...)
	b = strconv.AppendFloat(b, msec(k.host), 'f', 3, 64)
	return append(b, " ms"...)
}

// appendJSON adds the last ping's ts_source and split to a "ping" record.
func (k *nicClock) appendJSON(b []byte) []byte {
	b = append(b, `,"ts_source":"`...)
	b = append(b, k.source()...)
	b = append(b, '"')
	if k != nil && k.ok {
		b = append(b, `,"nic_rtt_ns":`...)
		b = strconv.AppendInt(b, int64(k.nic), 10)
		b = append(b, `,"host_ns":`...)
		b = strconv.AppendInt(b, int64(k.host), 10)
	}
	return b
}
