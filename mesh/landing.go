package mesh

import (
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/gorping/gorping/mesh/target"
)

// The landing page, "/": exporter-toolkit's page (the agent's name, version and links,
// as operators know them from every exporter), and under it the agent's state at a
// glance, rendered on the server with html/template (no script, no external resource:
// it renders offline): the agent, its peers, and a table of its targets and their paths.
//
// Every state it shows is read back from the collectors /metrics serves, as a scrape
// reads them (Collect and Write, without the registry's checks and sort), so the page
// and a scrape cannot disagree: gorping_agent_info, _responder_up, _targets_ignored,
// _peer_up, _peer_info, _target_up, _target_paths_up, _target_path_info, _path_up and
// _path_info. Two things are not series, and come from the agent's per-target state
// for the rows shown only: why a path is down (the reason its last slot failed with,
// which the logs say and gorping_probe_failures_total counts), and the median RTT, read
// from the target's gorping_probe_rtt_seconds native histogram (since the agent
// started: ±5 %, the histogram's resolution). Nothing is recorded per probe for the
// page: the reason is one string stored under a lock the path takes anyway.
//
// Cost: a request reads those series (one per target and per path), sorts the targets
// (down first) and renders at most landingMaxTargets targets and landingMaxPeers
// peers, saying how many more there are; ?target= and ?state=down narrow the table.
// BenchmarkLandingPage: 10,000 targets × 3 paths cost about a fifth of a scrape of the
// same agent. No agent lock is held across I/O: the page is rendered into a buffer,
// then written. At most landingMaxInFlight requests render at once (503 beyond). It is
// on the same listener as every path, so behind the same TLS and basic auth
// (--web.config.file).
const (
	landingMaxTargets  = 100
	landingMaxPeers    = 100
	landingMaxFilter   = 256 // bytes of ?target=
	landingMaxInFlight = 2
)

// landingMarker is where the agent's state goes in exporter-toolkit's page.
const landingMarker = "<!-- gorping mesh: the agent's state -->"

// The page's colours, also looked for in the screenshot by the browser test.
const (
	colourUp       = "#1a7f37"
	colourDown     = "#cf222e"
	colourDegraded = "#9a6700"
)

const landingCSS = `
table.gorping { border-collapse: collapse; font-size: 0.875rem; margin: 0.5rem 0 1rem; }
table.gorping th, table.gorping td { border: 1px solid #d0d7de; padding: 0.15rem 0.5rem; text-align: left; vertical-align: top; }
table.gorping th { background: #f6f8fa; }
table.gorping tbody.target { border-top: 2px solid #57606a; }
table.gorping td.num { text-align: right; font-variant-numeric: tabular-nums; }
.up { background: ` + colourUp + `; color: #fff; }
.down { background: ` + colourDown + `; color: #fff; }
.degraded { background: ` + colourDegraded + `; color: #fff; }
.note { color: #57606a; }
form.filter { margin: 0.5rem 0; }
form.filter label { width: auto; }
div.gorping-top { display: flex; flex-wrap: wrap; gap: 0 3rem; }
h3 { margin: 1rem 0 0.25rem; }
`

// landing serves "/".
type landing struct {
	a          *Agent
	head, tail []byte // exporter-toolkit's page before and after landingMarker
	slots      chan struct{}
}

func (a *Agent) newLanding(c web.LandingConfig) (*landing, error) {
	c.ExtraHTML, c.ExtraCSS = landingMarker, landingCSS
	page, err := web.NewLandingPage(c)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequest(http.MethodGet, "/", nil)
	if err != nil {
		return nil, err
	}
	var rec pageWriter
	page.ServeHTTP(&rec, req)
	if rec.code != 0 && rec.code != http.StatusOK {
		return nil, fmt.Errorf("exporter-toolkit's page answered %d", rec.code)
	}
	head, tail, ok := bytes.Cut(rec.body.Bytes(), []byte(landingMarker))
	if !ok || bytes.Contains(tail, []byte(landingMarker)) {
		return nil, errors.New("exporter-toolkit's page does not have the agent's state's place once")
	}
	return &landing{a: a, head: head, tail: tail, slots: make(chan struct{}, landingMaxInFlight)}, nil
}

// pageWriter takes exporter-toolkit's page, rendered once at start. It is the least of
// an http.ResponseWriter, so that net/http/httptest stays out of the product binary.
type pageWriter struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (w *pageWriter) Header() http.Header {
	if w.header == nil {
		w.header = http.Header{}
	}
	return w.header
}

func (w *pageWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *pageWriter) Write(p []byte) (int, error) { return w.body.Write(p) }

// landingPage is what the template renders.
type landingPage struct {
	Agent     agentView
	Discovers bool
	Peers     []*peerView
	PeersMore int
	MultiPath bool // --paths 2 or more: the path columns

	Targets                   []*targetView // the rows shown
	Total, Up, Down, Degraded int           // all targets
	Matched, More             int           // matching the filter, and those not shown
	Ignored                   int           // beyond --max-targets
	Filter, State             string
	Max                       int
}

type agentView struct {
	Name, Group, Version string
	Responder            string // its address and whether it listens
	ResponderClass       string
	Interval             time.Duration
	Paths                int
}

type peerView struct {
	Name, Group, Version string
	Up                   bool
}

type targetView struct {
	Target, Device, Port, Peer string // its labels: device, port and peer for a rail target
	Conn                       string // its latest connection's local device/port (target_path_info)
	Up                         bool
	PathsUp                    int
	Class                      string // up, degraded, down
	Reason                     string // why it is down: its paths' reasons
	RTT                        string // median RTT, "" before any
	Samples                    uint64
	Paths                      []*pathView
	id                         string
	severity                   int
}

// Rows is how many table rows the target takes: one per path.
func (t *targetView) Rows() int { return max(len(t.Paths), 1) }

// Rest are the paths after the first, each its own row.
func (t *targetView) Rest() []*pathView {
	if len(t.Paths) < 2 {
		return nil
	}
	return t.Paths[1:]
}

// First is the first path, or an empty one.
func (t *targetView) First() *pathView {
	if len(t.Paths) == 0 {
		return &pathView{}
	}
	return t.Paths[0]
}

type pathView struct {
	Index                         string
	Up                            bool
	Known                         bool // it has a gorping_path_up series
	LocalQPN, RemoteQPN, UDPSport string
	Reason                        string
}

var landingTemplate = template.Must(template.New("landing").Parse(`
<div class="gorping-top"><div>
<h3>This agent</h3>
<table class="gorping" id="agent">
<tr><th>Agent</th><td>{{.Agent.Name}}</td></tr>
<tr><th>Group</th><td>{{if .Agent.Group}}{{.Agent.Group}}{{else}}<span class="note">none</span>{{end}}</td></tr>
<tr><th>Version</th><td>{{.Agent.Version}}</td></tr>
<tr><th>Responder</th><td class="{{.Agent.ResponderClass}}">{{.Agent.Responder}}</td></tr>
<tr><th>Interval</th><td>{{.Agent.Interval}}</td></tr>
<tr><th>Paths per target</th><td>{{.Agent.Paths}}</td></tr>
<tr><th>Targets</th><td>{{.Total}}: {{.Up}} up{{if .Degraded}} ({{.Degraded}} with a path down){{end}}, {{.Down}} down{{if .Ignored}}; {{.Ignored}} more named but not probed (beyond --max-targets){{end}}</td></tr>
</table>
</div>{{if .Discovers}}<div>
<h3>Peers</h3>
{{if .Peers}}<table class="gorping" id="peers">
<thead><tr><th>Peer</th><th>/agent</th><th>Group</th><th>Version</th></tr></thead>
<tbody>{{range .Peers}}
<tr><td>{{.Name}}</td>{{if .Up}}<td class="up">up</td>{{else}}<td class="down">down</td>{{end}}<td>{{.Group}}</td><td>{{.Version}}</td></tr>{{end}}
</tbody></table>{{else}}<p class="note">No peer agent known yet.</p>{{end}}
{{if .PeersMore}}<p class="note">{{.PeersMore}} more peers not shown (gorping_peer_up in /metrics has them all).</p>{{end}}
</div>{{end}}</div>
<h3>Targets</h3>
<form class="filter" method="get" action="/">
<label for="target">Target</label> <input id="target" name="target" value="{{.Filter}}" placeholder="address, peer or device">
<select name="state"><option value=""{{if eq .State ""}} selected{{end}}>all</option><option value="down"{{if eq .State "down"}} selected{{end}}>down or with a path down</option></select>
<input type="submit" value="Filter">
</form>
{{if .Targets}}<table class="gorping" id="targets">
<thead><tr><th>Target</th><th>Peer</th><th>Rail or device</th><th>State</th>{{if .MultiPath}}<th>Paths up</th>{{end}}<th>Median RTT</th>{{if .MultiPath}}<th>Path</th><th>Path state</th><th>Local QPN</th><th>Remote QPN</th><th>UDP sport</th>{{end}}</tr></thead>
{{- range .Targets}}
<tbody class="target" data-target="{{.Target}}" data-device="{{.Device}}" data-port="{{.Port}}" data-peer="{{.Peer}}">
<tr><td rowspan="{{.Rows}}">{{.Target}}</td><td rowspan="{{.Rows}}">{{.Peer}}</td><td rowspan="{{.Rows}}">{{if .Device}}{{.Device}}/{{.Port}}{{else}}{{.Conn}}{{end}}</td>
{{- if .Up}}<td rowspan="{{.Rows}}" class="up state">up</td>{{else}}<td rowspan="{{.Rows}}" class="down state">down{{if .Reason}}: {{.Reason}}{{end}}</td>{{end}}
{{- if $.MultiPath}}<td rowspan="{{.Rows}}" class="num {{.Class}} paths-up">{{.PathsUp}} of {{$.Agent.Paths}}</td>{{end}}
<td rowspan="{{.Rows}}" class="num">{{if .RTT}}{{.RTT}} <span class="note">({{.Samples}})</span>{{else}}<span class="note">none</span>{{end}}</td>
{{- if $.MultiPath}}{{template "path" .First}}{{end}}</tr>
{{- range .Rest}}
<tr>{{template "path" .}}</tr>{{end}}
</tbody>{{end}}
</table>{{else if .Total}}<p class="note">No target matches.</p>{{else}}<p class="note">No targets yet.</p>{{end}}
{{if .More}}<p class="note" id="more">{{.More}} more targets match but are not shown (the first {{.Max}}, down first, are): narrow with ?target= or ?state=down; /metrics has them all.</p>{{end}}
<p class="note">{{if or .Filter .State}}{{.Matched}} of {{.Total}} targets match. {{end}}Down first, then by target. The states, paths and QPNs are the series /metrics serves; a reason is the failure the path's last slot had; the median RTT is since the agent started (gorping_probe_rtt_seconds; in brackets, the pings it counts). The page does not refresh by itself.</p>
{{define "path"}}<td class="num path">{{.Index}}</td>{{if not .Known}}<td></td>{{else if .Up}}<td class="up path-state">up</td>{{else}}<td class="down path-state">down{{if .Reason}}: {{.Reason}}{{end}}</td>{{end}}<td class="num">{{.LocalQPN}}</td><td class="num">{{.RemoteQPN}}</td><td class="num">{{.UDPSport}}</td>{{end}}
`))

func (l *landing) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		http.NotFound(w, r) // as exporter-toolkit's page does
		return
	}
	q := r.URL.Query()
	filter, state := q.Get("target"), q.Get("state")
	if len(filter) > landingMaxFilter {
		http.Error(w, fmt.Sprintf("target: longer than %d bytes", landingMaxFilter), http.StatusBadRequest)
		return
	}
	if state != "" && state != "down" {
		http.Error(w, fmt.Sprintf("state %s: want down, or nothing", target.Quote(state)), http.StatusBadRequest)
		return
	}
	select {
	case l.slots <- struct{}{}:
		defer func() { <-l.slots }()
	default:
		http.Error(w, "too many landing page requests at once", http.StatusServiceUnavailable)
		return
	}
	var body bytes.Buffer
	if err := landingTemplate.Execute(&body, l.page(filter, state)); err != nil {
		l.a.log.Error("landing page", "err", err)
		http.Error(w, "the landing page could not be rendered: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=UTF-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(l.head)
	w.Write(body.Bytes())
	w.Write(l.tail)
}

// page reads the state and picks the rows to show.
func (l *landing) page(filter, state string) *landingPage {
	cfg := l.a.cfg
	p := &landingPage{Discovers: cfg.discovers(), MultiPath: cfg.Paths > 1, Filter: filter, State: state, Max: landingMaxTargets,
		Agent: agentView{Name: cfg.AgentName, Group: cfg.Group, Version: cfg.Version, Responder: responderDesc(cfg),
			Interval: cfg.Interval, Paths: cfg.Paths}}
	m := l.a.m
	responderUp := false
	rows := map[string]*targetView{}
	row := func(d *dto.Metric) *targetView { return rows[labelID(targetLabels(d))] }
	path := func(v *targetView, index string) *pathView {
		for _, pv := range v.Paths {
			if pv.Index == index {
				return pv
			}
		}
		pv := &pathView{Index: index}
		v.Paths = append(v.Paths, pv)
		return pv
	}
	peers := map[string]*peerView{}
	peer := func(name string) *peerView {
		if peers[name] == nil {
			peers[name] = &peerView{Name: name}
		}
		return peers[name]
	}
	collect(m.agentInfo, func(d *dto.Metric, _ float64) {
		p.Agent.Name, p.Agent.Group, p.Agent.Version = label(d, "agent"), label(d, "group"), label(d, "version")
	})
	collect(m.responderUp, func(_ *dto.Metric, v float64) { responderUp = v == 1 })
	collect(m.ignored, func(_ *dto.Metric, v float64) { p.Ignored += int(v) })
	collect(m.peerUp, func(d *dto.Metric, v float64) { peer(label(d, "peer")).Up = v == 1 })
	collect(m.peerInfo, func(d *dto.Metric, _ float64) {
		pv := peer(label(d, "peer"))
		pv.Group, pv.Version = label(d, "peer_group"), label(d, "peer_version")
	})
	// A target is a gorping_target_up series; the others add to its row (one that
	// appears meanwhile, a target being added, waits for the next request).
	collect(m.up, func(d *dto.Metric, v float64) {
		t, dev, port, pr := targetLabels(d)
		id := labelID(t, dev, port, pr)
		rows[id] = &targetView{Target: t, Device: dev, Port: port, Peer: pr, id: id, Up: v == 1}
	})
	collect(m.targetPathsUp, func(d *dto.Metric, v float64) {
		if r := row(d); r != nil {
			r.PathsUp = int(v)
		}
	})
	collect(m.pathUp, func(d *dto.Metric, v float64) {
		if r := row(d); r != nil {
			pv := path(r, label(d, "path"))
			pv.Known, pv.Up = true, v == 1
		}
	})
	collect(m.pathInfo, func(d *dto.Metric, _ float64) {
		if r := row(d); r != nil {
			pv := path(r, label(d, "path"))
			pv.LocalQPN, pv.RemoteQPN, pv.UDPSport = label(d, "local_qpn"), label(d, "remote_qpn"), label(d, "udp_sport")
		}
	})
	// target_path_info's device and port are the connection's: a direct target's row
	// has none (its labels have no device), a rail target's are its rail's.
	collect(m.path, func(d *dto.Metric, _ float64) {
		t, dev, port, pr := targetLabels(d)
		v := rows[labelID(t, dev, port, pr)]
		if v == nil {
			v = rows[labelID(t, "", "", pr)]
		}
		if v != nil {
			v.Conn = dev + "/" + port
		}
	})
	if cfg.NoResponder {
		p.Agent.Responder = "off (--no-responder)"
	} else if responderUp {
		p.Agent.Responder, p.Agent.ResponderClass = p.Agent.Responder+", listening", "up"
	} else {
		p.Agent.Responder, p.Agent.ResponderClass = p.Agent.Responder+", not listening (the logs say why)", "down"
	}
	all := make([]*targetView, 0, len(rows))
	for _, v := range rows {
		slices.SortFunc(v.Paths, func(a, b *pathView) int { return cmpIndex(a.Index, b.Index) })
		switch {
		case !v.Up:
			v.Class, v.severity = "down", 0
			p.Down++
		case p.MultiPath && v.PathsUp < cfg.Paths:
			v.Class, v.severity = "degraded", 1
			p.Up++
			p.Degraded++
		default:
			v.Class, v.severity = "up", 2
			p.Up++
		}
		all = append(all, v)
	}
	p.Total = len(all)
	slices.SortStableFunc(all, func(a, b *targetView) int {
		if a.severity != b.severity {
			return a.severity - b.severity
		}
		return cmpStrings(a.Target, b.Target, a.Device, b.Device, a.Port, b.Port, a.Peer, b.Peer)
	})
	low := strings.ToLower(filter)
	for _, v := range all {
		if state == "down" && v.severity == 2 {
			continue
		}
		if low != "" && !strings.Contains(strings.ToLower(v.Target+" "+v.Peer+" "+v.Device+" "+v.Conn), low) {
			continue
		}
		p.Matched++
		if len(p.Targets) < landingMaxTargets {
			p.Targets = append(p.Targets, v)
		}
	}
	p.More = p.Matched - len(p.Targets)
	l.addState(p.Targets)

	for _, pv := range peers {
		p.Peers = append(p.Peers, pv)
	}
	slices.SortFunc(p.Peers, func(a, b *peerView) int {
		if a.Up != b.Up {
			if a.Up {
				return 1
			}
			return -1
		}
		return strings.Compare(a.Name, b.Name)
	})
	if len(p.Peers) > landingMaxPeers {
		p.PeersMore = len(p.Peers) - landingMaxPeers
		p.Peers = p.Peers[:landingMaxPeers]
	}
	return p
}

// addState adds what the series do not say to the rows shown: why their paths are
// down, and their median RTT. The metrics' lock is held only to look each target up.
func (l *landing) addState(shown []*targetView) {
	for _, v := range shown {
		tm := l.a.m.lookup(v.id)
		if tm == nil {
			continue
		}
		reasons := tm.reasons()
		var down []string
		for j, reason := range reasons {
			if reason != "" && !slices.Contains(down, reason) {
				down = append(down, reason)
			}
			if len(reasons) > 1 {
				if pv := findPath(v, strconv.Itoa(j)); pv != nil && pv.Known && !pv.Up {
					pv.Reason = reason
				}
			}
		}
		if !v.Up {
			v.Reason = strings.Join(down, ", ")
		}
		var dm dto.Metric
		if h, ok := tm.rtt.(prometheus.Metric); ok && h.Write(&dm) == nil {
			if med, ok := histogramMedian(dm.GetHistogram()); ok {
				v.RTT, v.Samples = formatSeconds(med), dm.GetHistogram().GetSampleCount()
			}
		}
	}
}

func findPath(v *targetView, index string) *pathView {
	for _, pv := range v.Paths {
		if pv.Index == index {
			return pv
		}
	}
	return nil
}

// collect passes each series of c (a gauge or a vector of gauges) to fn with its value,
// as a scrape reads it (Collect, then Write), without the registry's checks and sort.
func collect(c prometheus.Collector, fn func(d *dto.Metric, v float64)) {
	ch := make(chan prometheus.Metric, 64)
	go func() {
		c.Collect(ch)
		close(ch)
	}()
	for pm := range ch {
		var d dto.Metric
		if pm.Write(&d) == nil {
			fn(&d, d.GetGauge().GetValue())
		}
	}
}

// label is m's label name ("" if it has none).
func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// targetLabels are the labels every per-target series has.
func targetLabels(d *dto.Metric) (target, device, port, peer string) {
	for _, l := range d.GetLabel() {
		switch l.GetName() {
		case "target":
			target = l.GetValue()
		case "device":
			device = l.GetValue()
		case "port":
			port = l.GetValue()
		case "peer":
			peer = l.GetValue()
		}
	}
	return
}

// labelID is target.ID() of the target whose series have these labels.
func labelID(target, device, port, peer string) string {
	if device == "" {
		return target
	}
	return target + " " + device + "/" + port + " " + peer
}

func cmpIndex(a, b string) int {
	x, errx := strconv.Atoi(a)
	y, erry := strconv.Atoi(b)
	if errx != nil || erry != nil {
		return strings.Compare(a, b)
	}
	return x - y
}

// cmpStrings compares pairs in turn: a1 with b1, then a2 with b2, ...
func cmpStrings(pairs ...string) int {
	for i := 0; i+1 < len(pairs); i += 2 {
		if c := strings.Compare(pairs[i], pairs[i+1]); c != 0 {
			return c
		}
	}
	return 0
}

// histogramMedian is the median of h: from its native buckets (exponential
// interpolation within the bucket, as Prometheus' histogram_quantile), else from its
// classic ones (linear).
func histogramMedian(h *dto.Histogram) (float64, bool) {
	n := h.GetSampleCount()
	if n == 0 {
		return 0, false
	}
	rank := float64(n) / 2
	if h.Schema != nil {
		cum := float64(h.GetZeroCount())
		if cum >= rank {
			return h.GetZeroThreshold(), true
		}
		base := math.Exp2(math.Exp2(-float64(h.GetSchema())))
		var idx int32
		var count int64
		d := 0
		upper := 0.0
		for _, sp := range h.GetPositiveSpan() {
			idx += sp.GetOffset()
			for range sp.GetLength() {
				if d >= len(h.GetPositiveDelta()) {
					return upper, upper > 0
				}
				count += h.GetPositiveDelta()[d]
				d++
				upper = math.Pow(base, float64(idx))
				if c := float64(count); c > 0 && cum+c >= rank {
					lower := upper / base
					return lower * math.Pow(base, (rank-cum)/c), true
				}
				cum += float64(count)
				idx++
			}
		}
		return upper, upper > 0
	}
	lower, below := 0.0, 0.0
	for _, b := range h.GetBucket() {
		c := float64(b.GetCumulativeCount())
		if c >= rank {
			if c == below {
				return b.GetUpperBound(), true
			}
			return lower + (b.GetUpperBound()-lower)*(rank-below)/(c-below), true
		}
		lower, below = b.GetUpperBound(), c
	}
	return lower, lower > 0
}

// formatSeconds writes s in the unit that suits it, with 3 significant digits.
func formatSeconds(s float64) string {
	switch {
	case s < 1e-6:
		return fmt.Sprintf("%.3g ns", s*1e9)
	case s < 1e-3:
		return fmt.Sprintf("%.3g µs", s*1e6)
	case s < 1:
		return fmt.Sprintf("%.3g ms", s*1e3)
	}
	return fmt.Sprintf("%.3g s", s)
}
