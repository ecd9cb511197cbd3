package rping

import (
	"fmt"
	"io"
	"strings"

	"github.com/gorping/gorping/uverbs"
	"github.com/gorping/gorping/uverbs/diag"
)

// diagnostics reports what a connection uses and why it may fail: the device, port,
// GID and netdev chosen, the MTUs along the path, decoded error completions and the
// port counters that moved. Text lines go to stderr with --trace or -d (rping's stdout
// stays untouched); with --json the same facts are JSON records. nil: neither.
type diagnostics struct {
	text io.Writer // "gorping: ..." lines; nil: none
	rep  *reporter // JSON records; nil: none
}

func newDiagnostics(cfg *Config) *diagnostics {
	d := &diagnostics{}
	if cfg.Trace || cfg.Debug {
		d.text = cfg.Stderr
	}
	if cfg.rep != nil && cfg.rep.js != nil {
		d.rep = cfg.rep
	}
	if d.text == nil && d.rep == nil {
		return nil
	}
	return d
}

func (d *diagnostics) printf(format string, args ...any) {
	if d.text != nil {
		fmt.Fprintf(d.text, "gorping: "+format+"\n", args...)
	}
}

// completionError explains a failed work completion (rping printed its status number).
func (d *diagnostics) completionError(status int) {
	if d == nil {
		return
	}
	s := uverbs.WCStatus(status)
	d.printf("completion error: %s", s.Cause())
	if d.rep != nil {
		d.rep.writeJSON(struct {
			Type   string `json:"type"`
			Status int    `json:"status"`
			Name   string `json:"name"`
			Cause  string `json:"cause"`
		}{"completion_error", status, s.String(), s.Cause()})
	}
}

// pathFacts adds the port's link layer and netdev, the MTUs along the path and the MTU
// warning ("" if they fit) to ci.
func (c *verbsConn) pathFacts(ci *connInfo) {
	f := diag.MTUFacts{}
	if a, err := c.qp.Query(uverbs.QPAttrPathMTU); err == nil {
		f.PathMTU = a.PathMTU
	}
	if pa, err := c.vctx.QueryPort(c.port); err == nil {
		f.ActiveMTU, f.LinkLayer = pa.ActiveMTU, pa.LinkLayer
	}
	if ports, err := diag.ReadPorts(c.host, c.dev.Name, false); err == nil {
		for _, p := range ports {
			if p.Port == int(c.port) {
				f.Netdev = p.Netdev
			}
		}
	}
	if f.Netdev != "" {
		f.NetdevMTU, _ = diag.NetdevMTU(c.host, f.Netdev)
	}
	ci.Netdev, ci.LinkLayer = f.Netdev, f.LinkLayer.String()
	ci.PathMTU, ci.ActiveMTU, ci.NetdevMTU = f.PathMTU.Bytes(), f.ActiveMTU.Bytes(), f.NetdevMTU
	ci.MTUWarning = diag.CheckMTU(f)
	ci.TimeoutS, ci.TimeoutBasis = c.policy.bound.Seconds(), c.policy.String()
}

// checkPathMTU warns, always, when this host cannot send packets of the
// connection's path MTU (the diagnostics of -d, --trace and --json report it
// anyway): the connecting side chooses the path MTU from its own netdev and
// the accepting side takes it as is, so a server whose MTU is smaller than
// its client's stalls every message larger than its own MTU.
func (c *verbsConn) checkPathMTU(cfg *Config) {
	var ci connInfo
	c.pathFacts(&ci)
	c.mtuWarning = ci.MTUWarning
	if c.mtuWarning == "" || (cfg.dg != nil && cfg.dg.text != nil) {
		return
	}
	who := ""
	if c.role == "server" {
		who = "the client chose the path MTU (the connecting side's netdev decides): "
	}
	c.out.hint("gorping: warning: " + who + c.mtuWarning)
}

// mtuProblem is checkPathMTU's warning ("" if the path MTU fits this host).
func (c *verbsConn) mtuProblem() string { return c.mtuWarning }

// path prints the connection's path (the JSON "connection" record carries the same).
func (d *diagnostics) path(ci connInfo) {
	if d == nil || d.text == nil {
		return
	}
	nd := ""
	if ci.Netdev != "" {
		nd = ", netdev " + ci.Netdev
	}
	d.printf("path: %s %s port %d (%s, driver %s%s), GID index %d %s (%s), %s -> %s", ci.Role, ci.Device, ci.Port,
		ci.LinkLayer, ci.Driver, nd, ci.GIDIndex, ci.GID, ci.GIDType, ci.Local, ci.Remote)
	d.printf("path: MTU: path %s, port active %s, netdev %s", mtuText(ci.PathMTU), mtuText(ci.ActiveMTU), mtuText(ci.NetdevMTU))
	if ci.MTUWarning != "" {
		d.printf("warning: %s", ci.MTUWarning)
	}
	d.printf("path: stall bound %s", ci.TimeoutBasis)
}

func mtuText(n int) string {
	if n == 0 {
		return "unknown"
	}
	return fmt.Sprint(n)
}

// runDiag is what a connection's diagnostics remember between its start and its end.
type runDiag struct {
	d       *diagnostics
	ci      connInfo
	before  diag.CounterSnapshot
	counted bool
}

// beginDiag reports the connection's path (JSON: the "connection" record, which --json
// always writes) and takes the first counter snapshot. nil: nothing to report.
func (c *verbsConn) beginDiag(d *diagnostics, rep *reporter) *runDiag {
	json := rep != nil && rep.js != nil
	if d == nil && !json {
		return nil
	}
	ci := c.describe()
	c.pathFacts(&ci)
	if json {
		rep.connection(ci)
	}
	d.path(ci)
	rd := &runDiag{d: d, ci: ci}
	if s, err := diag.ReadCounters(c.host, c.dev.Name, int(c.port)); err == nil {
		rd.before, rd.counted = s, true
	}
	return rd
}

// endDiag reports the counters that moved during the connection and an MTU mismatch
// that arose during it (e.g. the netdev's MTU lowered).
func (c *verbsConn) endDiag(rd *runDiag) {
	if rd == nil || rd.d == nil {
		return
	}
	d := rd.d
	var moved []diag.CounterDelta
	if rd.counted {
		if after, err := diag.ReadCounters(c.host, c.dev.Name, int(c.port)); err == nil {
			moved = diag.DiffCounters(rd.before, after)
		}
	}
	ci := rd.ci
	c.pathFacts(&ci)
	changed := ci.MTUWarning != "" && ci.MTUWarning != rd.ci.MTUWarning
	if d.text != nil {
		if rd.counted {
			parts := make([]string, len(moved))
			for i, m := range moved {
				parts[i] = fmt.Sprintf("%s +%d", m.Name, m.Delta())
			}
			if len(parts) == 0 {
				parts = []string{"none"}
			}
			d.printf("counters moved on %s port %d: %s", c.dev.Name, c.port, strings.Join(parts, ", "))
		}
		if changed {
			d.printf("path: MTU now: path %s, port active %s, netdev %s", mtuText(ci.PathMTU), mtuText(ci.ActiveMTU), mtuText(ci.NetdevMTU))
			d.printf("warning: %s", ci.MTUWarning)
		}
	}
	if d.rep != nil {
		type counter struct {
			Name  string `json:"name"`
			Delta uint64 `json:"delta"`
		}
		cs := make([]counter, len(moved))
		for i, m := range moved {
			cs[i] = counter{m.Name, m.Delta()}
		}
		rec := struct {
			Type       string    `json:"type"`
			Device     string    `json:"device"`
			Port       uint8     `json:"port"`
			Counters   []counter `json:"counters"`
			PathMTU    int       `json:"path_mtu"`
			ActiveMTU  int       `json:"active_mtu"`
			NetdevMTU  int       `json:"netdev_mtu"`
			MTUWarning string    `json:"mtu_warning,omitempty"`
		}{"diagnostics", c.dev.Name, c.port, cs, ci.PathMTU, ci.ActiveMTU, ci.NetdevMTU, ci.MTUWarning}
		d.rep.writeJSON(rec)
	}
}
