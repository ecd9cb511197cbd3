package rping

import (
	"encoding/json"
	"io"
	"strconv"
	"time"

	"github.com/gorping/gorping/internal/trace"
)

// reporter writes gorping's own output for --stats and --json; rping prints
// nothing of the kind, so without those options it does not exist (nil) and
// rping's output is untouched.
//
// --stats: the client prints one line per ping and ping(8)'s summary on
// stdout; a server prints one line per finished session.
//
// --json: JSON lines (one object per line, "type" says which) on the stdout
// the run was given, and rping's own stdout lines (-v, -d) move to stderr so
// that stdout stays parseable: "config" first, "connection" once a connection
// is up, "ping" per ping (client, with --stats), "summary" (client) or
// "session" (server) when a connection ends, and "exit" last.
//
// Each line is one Write, so concurrent sessions (-P) never interleave.
type reporter struct {
	text  io.Writer // --stats lines; nil without --stats or with --json
	js    io.Writer // JSON lines; nil without --json
	pings bool      // report every ping
}

// newReporter returns nil, or the reporter for cfg after moving cfg's stdout
// lines to stderr for --json.
func newReporter(cfg *Config) *reporter {
	if !cfg.Stats && !cfg.JSON {
		return nil
	}
	r := &reporter{pings: cfg.Stats}
	if cfg.JSON {
		r.js = cfg.Stdout
		cfg.Stdout = cfg.Stderr
	} else {
		r.text = cfg.Stdout
	}
	return r
}

// writeJSON writes v as one JSON line.
func (r *reporter) writeJSON(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only our own types, all marshalable
	}
	r.js.Write(append(b, '\n'))
}

type jsonConfig struct {
	Type         string  `json:"type"`
	Mode         string  `json:"mode"`
	Addr         string  `json:"addr"`
	SrcAddr      string  `json:"src_addr,omitempty"`
	Port         uint16  `json:"port"`
	Size         int     `json:"size"`
	Count        int     `json:"count"`
	Verbose      bool    `json:"verbose"`
	Validate     bool    `json:"validate"`
	Persistent   bool    `json:"persistent"`
	SelfCreateQP bool    `json:"self_create_qp"`
	Poll         bool    `json:"poll"`
	Stats        bool    `json:"stats"`
	Trace        bool    `json:"trace"`
	IntervalS    float64 `json:"interval_s"`
	DeadlineS    float64 `json:"deadline_s"`
	// TimeoutS is --timeout: nil when unset (the connection's budget), 0 never.
	TimeoutS *float64 `json:"timeout_s,omitempty"`
}

// config reports the run's configuration (--json).
func (r *reporter) config(cfg *Config) {
	if r == nil || r.js == nil {
		return
	}
	c := jsonConfig{Type: "config", Mode: "client", Addr: cfg.Addr.String(), Port: cfg.Port, Size: cfg.Size,
		Count: cfg.Count, Verbose: cfg.Verbose, Validate: cfg.Validate, Persistent: cfg.Persistent,
		SelfCreateQP: cfg.SelfCreateQP, Poll: cfg.Poll, Stats: cfg.Stats, Trace: cfg.Trace,
		IntervalS: cfg.Interval.Seconds(), DeadlineS: cfg.Deadline.Seconds()}
	if cfg.Server {
		c.Mode = "server"
	}
	if cfg.Timeout != 0 {
		v := max(cfg.Timeout.Seconds(), 0)
		c.TimeoutS = &v
	}
	if cfg.HasSrcAddr() {
		c.SrcAddr = cfg.SrcAddr.String()
	}
	r.writeJSON(c)
}

// connInfo is what a connection reports about itself once it is up.
type connInfo struct {
	Type     string `json:"type"`
	Role     string `json:"role"`
	Device   string `json:"device"`
	Driver   string `json:"driver"`
	Port     uint8  `json:"port"`
	GID      string `json:"gid,omitempty"`
	GIDIndex int    `json:"gid_index"` // -1 if not found
	GIDType  string `json:"gid_type,omitempty"`
	Local    string `json:"local"`
	Remote   string `json:"remote"`
	// Path diagnostics: the port's netdev and link layer, the QP's path MTU, the port's
	// active MTU, the netdev's MTU (bytes; 0 unknown) and a warning if they do not fit.
	Netdev     string `json:"netdev,omitempty"`
	LinkLayer  string `json:"link_layer,omitempty"`
	PathMTU    int    `json:"path_mtu"`
	ActiveMTU  int    `json:"active_mtu"`
	NetdevMTU  int    `json:"netdev_mtu"`
	MTUWarning string `json:"mtu_warning,omitempty"`
	// TimeoutS is the stall bound in seconds (0: none); TimeoutBasis says
	// where it comes from (stall.go).
	TimeoutS     float64 `json:"timeout_s"`
	TimeoutBasis string  `json:"timeout_basis"`
	// Client with --stats/--json: "nic" if its round trips are split with the NIC's
	// completion timestamps, else "sw" and why (nicts.go).
	TSSource string `json:"ts_source,omitempty"`
	TSNote   string `json:"ts_note,omitempty"`
}

func (r *reporter) connection(ci connInfo) {
	if r == nil || r.js == nil {
		return
	}
	ci.Type = "connection"
	r.writeJSON(ci)
}

// exit reports the run's exit status (--json), the last line.
func (r *reporter) exit(status int) {
	if r == nil || r.js == nil {
		return
	}
	r.writeJSON(struct {
		Type   string `json:"type"`
		Status int    `json:"status"`
	}{"exit", status})
}

// session reports a finished server session.
func (r *reporter) session(remote string, pings int, d time.Duration, status int) {
	if r == nil {
		return
	}
	if r.js != nil {
		r.writeJSON(struct {
			Type   string  `json:"type"`
			Remote string  `json:"remote"`
			Pings  int     `json:"pings"`
			TimeMS float64 `json:"time_ms"`
			Status int     `json:"status"`
		}{"session", remote, pings, msec(d), status})
		return
	}
	b := strconv.AppendInt([]byte("rping server: "), int64(pings), 10)
	b = append(b, " pings served to "...)
	b = append(b, remote...)
	b = append(b, " in "...)
	b = strconv.AppendInt(b, d.Milliseconds(), 10)
	b = append(b, "ms\n"...)
	r.text.Write(b)
}

func msec(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// pingReport is one client connection's statistics and per-ping output.
type pingReport struct {
	r     *reporter
	peer  string // the server's address, as in ping(8)'s lines
	size  int
	start time.Time
	rttStats
	line []byte    // reused: reporting a ping allocates nothing
	nic  *nicClock // the split of each ping with NIC timestamps (nicts.go); nil if none
	// The NIC's part of the pings that had one (nicts.go), and their software time.
	nicStats rttStats
	nicSWSum time.Duration
}

func (r *reporter) newPingReport(peer string, size int) *pingReport {
	if r == nil {
		return nil
	}
	return &pingReport{r: r, peer: peer, size: size, start: time.Now(), line: make([]byte, 0, 128)}
}

// ping records and reports one completed ping.
func (p *pingReport) ping(seq int, rtt time.Duration) {
	p.record(rtt)
	if p.nic != nil && p.nic.ok {
		p.nicStats.record(p.nic.nic)
		p.nicSWSum += rtt
	}
	if !p.r.pings {
		return
	}
	b := p.line[:0]
	if p.r.js != nil {
		b = append(b, `{"type":"ping","seq":`...)
		b = strconv.AppendInt(b, int64(seq), 10)
		b = append(b, `,"rtt_ns":`...)
		b = strconv.AppendInt(b, int64(rtt), 10)
		b = p.nic.appendJSON(b)
		b = append(b, "}\n"...)
		p.r.js.Write(b)
	} else {
		// ping(8): "64 bytes from 192.0.2.1: icmp_seq=1 ttl=64 time=0.045 ms"
		b = strconv.AppendInt(b, int64(p.size), 10)
		b = append(b, " bytes from "...)
		b = append(b, p.peer...)
		b = append(b, ": seq="...)
		b = strconv.AppendInt(b, int64(seq), 10)
		b = append(b, " time="...)
		b = strconv.AppendFloat(b, msec(rtt), 'f', 3, 64)
		b = append(b, " ms"...)
		b = p.nic.appendText(b)
		b = append(b, '\n')
		p.r.text.Write(b)
	}
	p.line = b
}

type jsonRTT struct {
	Min  int64 `json:"min"`
	Avg  int64 `json:"avg"`
	Max  int64 `json:"max"`
	Mdev int64 `json:"mdev"`
	P50  int64 `json:"p50"`
	P99  int64 `json:"p99"`
}

func (s *rttStats) json() *jsonRTT {
	return &jsonRTT{Min: int64(s.min), Avg: int64(s.avg()), Max: int64(s.max), Mdev: int64(s.mdev()),
		P50: int64(s.percentile(50)), P99: int64(s.percentile(99))}
}

// summary reports the connection's totals, as ping(8) does at its end.
func (p *pingReport) summary() {
	elapsed := time.Since(p.start)
	if p.r.js != nil {
		s := struct {
			Type        string   `json:"type"`
			Peer        string   `json:"peer"`
			Transmitted int      `json:"transmitted"`
			Received    int      `json:"received"`
			LossPct     int      `json:"loss_pct"`
			Errors      int      `json:"errors"`
			TimeMS      float64  `json:"time_ms"`
			RTTNs       *jsonRTT `json:"rtt_ns,omitempty"`
			TSSource    string   `json:"ts_source"`
			NICPings    int      `json:"nic_pings,omitempty"`
			NICRTTNs    *jsonRTT `json:"nic_rtt_ns,omitempty"`
			HostNsAvg   int64    `json:"host_ns_avg,omitempty"`
		}{Type: "summary", Peer: p.peer, Transmitted: p.sent, Received: p.received, LossPct: p.lossPercent(),
			Errors: p.errors, TimeMS: msec(elapsed), TSSource: "sw"}
		if p.received > 0 {
			s.RTTNs = p.rttStats.json()
		}
		if n := &p.nicStats; n.received > 0 {
			s.TSSource, s.NICPings, s.HostNsAvg = "nic", n.received, int64(p.hostAvg())
			s.NICRTTNs = n.json()
		}
		p.r.writeJSON(s)
		return
	}
	b := append([]byte("\n--- "), p.peer...)
	b = append(b, " rping statistics ---\n"...)
	b = strconv.AppendInt(b, int64(p.sent), 10)
	b = append(b, " pings transmitted, "...)
	b = strconv.AppendInt(b, int64(p.received), 10)
	b = append(b, " received, "...)
	b = strconv.AppendInt(b, int64(p.lossPercent()), 10)
	b = append(b, "% loss, "...)
	b = strconv.AppendInt(b, int64(p.errors), 10)
	b = append(b, " errors, time "...)
	b = strconv.AppendInt(b, elapsed.Milliseconds(), 10)
	b = append(b, "ms\n"...)
	if p.received > 0 {
		b = append(b, "rtt min/avg/max/mdev = "...)
		b = appendMinAvgMaxMdev(b, &p.rttStats)
		b = append(b, " ms, p50/p99 = "...)
		b = strconv.AppendFloat(b, msec(p.percentile(50)), 'f', 3, 64)
		b = append(b, '/')
		b = strconv.AppendFloat(b, msec(p.percentile(99)), 'f', 3, 64)
		b = append(b, " ms\n"...)
	}
	if n := &p.nicStats; n.received > 0 {
		// The NIC's part of the pings that had NIC timestamps, and the host's mean rest.
		b = append(b, "nic rtt min/avg/max/mdev = "...)
		b = appendMinAvgMaxMdev(b, n)
		b = append(b, " ms, host avg = "...)
		b = strconv.AppendFloat(b, msec(p.hostAvg()), 'f', 3, 64)
		b = append(b, " ms ("...)
		b = strconv.AppendInt(b, int64(n.received), 10)
		b = append(b, " pings, ts_source=nic)\n"...)
	}
	p.r.text.Write(b)
}

// appendMinAvgMaxMdev appends ping(8)'s "min/avg/max/mdev" in milliseconds.
func appendMinAvgMaxMdev(b []byte, s *rttStats) []byte {
	for i, d := range []time.Duration{s.min, s.avg(), s.max, s.mdev()} {
		if i > 0 {
			b = append(b, '/')
		}
		b = strconv.AppendFloat(b, msec(d), 'f', 3, 64)
	}
	return b
}

// hostAvg is the mean software time beyond the NIC's, over the pings that had both.
func (p *pingReport) hostAvg() time.Duration {
	n := &p.nicStats
	if n.received == 0 {
		return 0
	}
	return max(p.nicSWSum-n.sum, 0) / time.Duration(n.received)
}

// newTracer returns nil without --trace, else the run's tracer: human-readable lines on
// stderr, or with --json "trace" records on the JSON stream.
func newTracer(cfg *Config) *trace.Tracer {
	if !cfg.Trace {
		return nil
	}
	if cfg.rep != nil && cfg.rep.js != nil {
		return trace.New(cfg.rep.js, true)
	}
	return trace.New(cfg.Stderr, false)
}
