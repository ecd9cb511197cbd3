//go:build !guest

package mesh

// The landing page ("/"): the agent's state at a glance, checked against /metrics, in
// the HTML the agent serves and as headless Chromium renders it.

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/exporter-toolkit/web"
	"golang.org/x/net/html"

	"github.com/gorping/gorping/mesh/target"
	"github.com/gorping/gorping/rping"
	"github.com/gorping/gorping/test/browser"
	"github.com/gorping/gorping/test/meshtest"
)

// pageTarget is one target's rows of the page's table.
type pageTarget struct {
	state, pathsUp string     // the cells' text
	paths          [][]string // per path: index, state, local QPN, remote QPN, UDP sport
}

// pageTargets reads the targets' table of a landing page, by target ID.
func pageTargets(t *testing.T, doc string) map[string]pageTarget {
	t.Helper()
	root, err := html.Parse(strings.NewReader(doc))
	if err != nil {
		t.Fatalf("the landing page does not parse: %v", err)
	}
	out := map[string]pageTarget{}
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "tbody" && hasClass(n, "target") {
			id := labelID(attr(n, "data-target"), attr(n, "data-device"), attr(n, "data-port"), attr(n, "data-peer"))
			var pt pageTarget
			for tr := n.FirstChild; tr != nil; tr = tr.NextSibling {
				if tr.Type != html.ElementNode || tr.Data != "tr" {
					continue
				}
				var path []string
				inPath := false
				for td := tr.FirstChild; td != nil; td = td.NextSibling {
					if td.Type != html.ElementNode || td.Data != "td" {
						continue
					}
					switch {
					case hasClass(td, "state"):
						pt.state = nodeText(td)
					case hasClass(td, "paths-up"):
						pt.pathsUp = nodeText(td)
					case hasClass(td, "path"):
						inPath = true
					}
					if inPath {
						path = append(path, nodeText(td))
					}
				}
				if path != nil {
					pt.paths = append(pt.paths, path)
				}
			}
			if _, dup := out[id]; dup {
				t.Errorf("target %s twice on the page", id)
			}
			out[id] = pt
			return
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(root)
	return out
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func hasClass(n *html.Node, class string) bool {
	return strings.Contains(" "+attr(n, "class")+" ", " "+class+" ")
}

func nodeText(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return strings.Join(strings.Fields(b.String()), " ")
}

// checkPage checks that the page shows every target of m with the state m says: up or
// down (with a reason the target has failed with), its paths up of k, and per path
// (k > 1) its state and its connection's QPNs and UDP source port.
func checkPage(t *testing.T, doc string, m meshtest.Metrics, k int) {
	t.Helper()
	page := pageTargets(t, doc)
	ups, err := m.Select("gorping_target_up")
	if err != nil || len(ups) == 0 {
		t.Fatalf("no gorping_target_up in /metrics: %v", err)
	}
	if len(page) != len(ups) {
		t.Errorf("the page shows %d targets, /metrics has %d", len(page), len(ups))
	}
	for _, s := range ups {
		l := s.Labels
		id := labelID(l["target"], l["device"], l["port"], l["peer"])
		sel := fmt.Sprintf(`{target=%q,device=%q,port=%q,peer=%q}`, l["target"], l["device"], l["port"], l["peer"])
		pt, ok := page[id]
		if !ok {
			t.Errorf("%s: not on the page", id)
			continue
		}
		if s.Value == 1 {
			if pt.state != "up" {
				t.Errorf("%s: the page says %q, /metrics says up", id, pt.state)
			}
		} else {
			reason, ok := strings.CutPrefix(pt.state, "down: ")
			if !ok {
				t.Errorf("%s: the page says %q, /metrics says down (with a reason)", id, pt.state)
			}
			for _, r := range strings.Split(reason, ", ") {
				if v, err := m.Value(`gorping_probe_failures_total` + sel[:len(sel)-1] + `,reason="` + r + `"}`); err != nil || v == 0 {
					t.Errorf("%s: the page's reason %q is not one /metrics counts (%v %v)", id, r, v, err)
				}
			}
		}
		if k < 2 {
			if pt.pathsUp != "" || len(pt.paths) != 0 {
				t.Errorf("%s: path columns with one path: %+v", id, pt)
			}
			continue
		}
		if up, err := m.Value("gorping_target_paths_up" + sel); err != nil || pt.pathsUp != fmt.Sprintf("%g of %d", up, k) {
			t.Errorf("%s: paths up %q on the page, %g (%v) of %d in /metrics", id, pt.pathsUp, up, err, k)
		}
		if len(pt.paths) != k {
			t.Errorf("%s: %d path rows, want %d", id, len(pt.paths), k)
			continue
		}
		for i, row := range pt.paths {
			p := strconv.Itoa(i)
			psel := sel[:len(sel)-1] + `,path="` + p + `"}`
			up, err := m.Value("gorping_path_up" + psel)
			if err != nil || len(row) != 5 || row[0] != p {
				t.Errorf("%s path %s: row %q, path_up %v %v", id, p, row, up, err)
				continue
			}
			if (up == 1) != (row[1] == "up") || up == 0 && !strings.HasPrefix(row[1], "down") {
				t.Errorf("%s path %s: the page says %q, /metrics says path_up %g", id, p, row[1], up)
			}
			infos, _ := m.Select("gorping_path_info" + psel)
			var want []string
			if len(infos) == 1 {
				il := infos[0].Labels
				want = []string{il["local_qpn"], il["remote_qpn"], il["udp_sport"]}
			} else {
				want = []string{"", "", ""} // no connection yet
			}
			if got := row[2:]; strings.Join(got, "|") != strings.Join(want, "|") {
				t.Errorf("%s path %s: QPNs and UDP port %q on the page, %q in /metrics", id, p, got, want)
			}
		}
	}
}

// TestLandingPage: "/" shows the agent and every target with the state /metrics says,
// paths included; it filters, escapes what it echoes, and keeps exporter-toolkit's 404
// for every other path.
func TestLandingPage(t *testing.T) {
	fn := newFakeNet()
	const good, flaky, dead = "192.0.2.1:7174", "192.0.2.2:7174", "192.0.2.3:7174"
	fn.set(good, behavior{rtt: 3 * time.Microsecond})
	fn.set(flaky, behavior{rtt: 5 * time.Microsecond})
	fn.setPath(flaky, 1, behavior{dialErr: rping.ReasonUnreachable})
	fn.set(dead, behavior{dialErr: rping.ReasonConnectRefused})
	ta := startAgent(t, deps{dial: fn.dial, resolver: &fakeResolver{m: map[string][]netip.Addr{}}},
		"--interval", "20ms", "--backoff-max", "50ms", "--paths", "3", "--agent-name", "node-1", "--group", "tor-a",
		"--peers", "192.0.2.1,192.0.2.2,192.0.2.3")
	ta.wait(t, `gorping_target_paths_up{target="`+good+`"}`, eq(3))
	ta.wait(t, `gorping_target_paths_up{target="`+flaky+`"}`, eq(2))
	ta.wait(t, `gorping_path_failures_total{target="`+flaky+`",path="1"}`, ge(1))
	ta.wait(t, `gorping_probe_failures_total{target="`+dead+`",reason="connect_refused"}`, ge(1))
	ta.wait(t, `gorping_probe_rtt_seconds_count{target="`+good+`"}`, ge(3))

	code, body, err := ta.Get("/")
	if err != nil || code != 200 {
		t.Fatalf("GET /: %d %v", code, err)
	}
	m, err := ta.Scrape()
	if err != nil {
		t.Fatal(err)
	}
	checkPage(t, body, m, 3)
	text := browser.Text(body)
	for _, want := range []string{"gorping mesh", "Version: v0.0.0-test", "node-1", "tor-a", "20ms", "Targets 3: 2 up (1 with a path down), 1 down",
		"down: connect_refused", "down: unreachable", "µs"} {
		if !strings.Contains(text, want) {
			t.Errorf("the page does not say %q:\n%s", want, text)
		}
	}
	// Down first, then by target.
	if i, j, k := strings.Index(body, dead), strings.Index(body, flaky), strings.Index(body, good); i < 0 || i > j || j > k {
		t.Errorf("rows not in order down, degraded, up: %d %d %d", i, j, k)
	}

	for _, c := range []struct {
		query string
		shown []string
	}{{"?state=down", []string{dead, flaky}}, {"?target=192.0.2.1", []string{good}}, {"?target=nothing", nil},
		{"?target=192.0.2&state=down", []string{dead, flaky}}} {
		code, body, err := ta.Get("/" + c.query)
		if err != nil || code != 200 {
			t.Fatalf("GET /%s: %d %v", c.query, code, err)
		}
		page := pageTargets(t, body)
		if len(page) != len(c.shown) {
			t.Errorf("/%s shows %v, want %v", c.query, page, c.shown)
		}
		for _, s := range c.shown {
			if _, ok := page[s]; !ok {
				t.Errorf("/%s does not show %s", c.query, s)
			}
		}
	}
	// What the page echoes is escaped.
	code, body, err = ta.Get("/?target=%3Cscript%3Ex%3C%2Fscript%3E%22")
	if err != nil || code != 200 || strings.Contains(body, "<script>x") || !strings.Contains(body, "&lt;script&gt;x&lt;/script&gt;&#34;") {
		t.Errorf("GET /?target=<script>: %d %v, the filter not escaped:\n%s", code, err, body)
	}
	for path, want := range map[string]int{"/?state=up": 400, "/?target=" + strings.Repeat("x", landingMaxFilter+1): 400,
		"/nothing": 404, "/index.html": 404, "/metrics/": 404} {
		if code, _, err := ta.Get(path); err != nil || code != want {
			t.Errorf("GET %.40s: %d %v, want %d", path, code, err, want)
		}
	}
}

// TestLandingPageBounded: an agent with more targets than the page shows says how many
// are left out, and the filter still finds them.
func TestLandingPageBounded(t *testing.T) {
	fn := newFakeNet() // nothing answers: every target is down, connect_refused
	n := landingMaxTargets + 23
	var lines []string
	for i := range n {
		lines = append(lines, fmt.Sprintf("10.9.%d.%d", i/200, 1+i%200))
	}
	file := filepath.Join(t.TempDir(), "targets")
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ta := startAgent(t, deps{dial: fn.dial, resolver: &fakeResolver{m: map[string][]netip.Addr{}}},
		"--targets", file, "--interval", "1s", "--no-responder")
	ta.wait(t, `gorping_targets{source="file"}`, eq(float64(n)))
	code, body, err := ta.Get("/")
	if err != nil || code != 200 {
		t.Fatalf("GET /: %d %v", code, err)
	}
	if got := len(pageTargets(t, body)); got != landingMaxTargets {
		t.Errorf("the page shows %d targets, want %d", got, landingMaxTargets)
	}
	if want := fmt.Sprintf("%d more targets match but are not shown", n-landingMaxTargets); !strings.Contains(body, want) {
		t.Errorf("the page does not say %q", want)
	}
	// Sorted by target as strings, 10.9.0.99 is beyond the first 100 shown.
	if strings.Contains(body, `data-target="10.9.0.99:7174"`) {
		t.Error("10.9.0.99:7174 among the first targets shown")
	}
	_, body, _ = ta.Get("/?target=10.9.0.99:")
	if page := pageTargets(t, body); len(page) != 1 || !strings.Contains(body, "off (--no-responder)") {
		t.Errorf("?target=10.9.0.99: shows %d targets", len(page))
	}
}

// TestLandingPageBrowser: headless Chromium renders the page of an agent with rail
// targets found from its peers' descriptions, one peer that does not answer, a target
// down and a path down: its text says for every target what /metrics says, and the
// screenshot has the up and the down colours. GORPING_WRITE_SCREENSHOT=1 writes the
// screenshot to docs/img/mesh-landing.png (docs/mesh.md shows it).
func TestLandingPageBrowser(t *testing.T) {
	browser.Binary(t)
	fn := railNet(3)
	fn.setPath("10.0.1.2:7174", 1, behavior{dialErr: "retry_exc_err"})
	fn.set("10.0.2.3:7174", behavior{dialErr: rping.ReasonUnreachable})
	ports := []int{meshtest.FreePort(t), meshtest.FreePort(t), meshtest.FreePort(t), meshtest.FreePort(t)}
	all := agentAddr(ports[0]) + "," + agentAddr(ports[1]) + "," + agentAddr(ports[2]) + "," + agentAddr(ports[3]) // the last: nobody
	a1 := railAgent(t, "node1", twoRails(t, 1), fn, ports[0], "--agents", all, "--group", "tor-a", "--paths", "2",
		"--peers", "192.0.2.7")
	railAgent(t, "node2", twoRails(t, 2), fn, ports[1], "--agents", all, "--group", "tor-a")
	railAgent(t, "node3", twoRails(t, 3), fn, ports[2], "--agents", all, "--group", "tor-b")
	a1.wait(t, `gorping_targets{source="rails"}`, eq(4))
	a1.wait(t, railSeries("10.0.2.2:7174", "rxe1", "node2"), eq(1))
	a1.wait(t, `gorping_target_paths_up{target="10.0.1.2:7174"}`, eq(1))
	a1.wait(t, `gorping_target_paths_up{target="10.0.1.3:7174"}`, eq(2))
	a1.wait(t, `gorping_probe_failures_total{target="10.0.2.3:7174",reason="unreachable"}`, ge(1))
	a1.wait(t, `gorping_probe_failures_total{target="192.0.2.7:7174",reason="connect_refused"}`, ge(1))
	a1.wait(t, `gorping_peer_up{peer="`+agentAddr(ports[3])+`"}`, eq(0))

	const width, height = 1280, 1000
	page := browser.Render(t, a1.URL("/"), browser.Options{Width: width, Height: height})
	m, err := a1.Scrape()
	if err != nil {
		t.Fatal(err)
	}
	checkPage(t, page.DOM, m, 2)
	for _, s := range m.Samples() {
		if s.Name == "gorping_target_up" && !strings.Contains(page.Text, s.Labels["target"]) {
			t.Errorf("the rendered page does not name %s", s.Labels["target"])
		}
	}
	for _, want := range []string{"node1", "node2", "node3", agentAddr(ports[3]), "tor-b", "rxe0/1", "rxe1/1",
		"down: unreachable", "down: connect_refused", "down: retry_exc_err"} {
		if !strings.Contains(page.Text, want) {
			t.Errorf("the rendered page does not say %q:\n%s", want, page.Text)
		}
	}
	img, err := png.Decode(bytes.NewReader(page.PNG))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if b := img.Bounds(); b.Dx() != width || b.Dy() != height {
		t.Errorf("screenshot is %v, want %d×%d", b, width, height)
	}
	for name, c := range map[string]string{"up": colourUp, "down": colourDown, "degraded": colourDegraded} {
		if n := countColour(img, c); n < 100 {
			t.Errorf("the screenshot has %d pixels of the %s colour %s", n, name, c)
		}
	}
	if os.Getenv("GORPING_WRITE_SCREENSHOT") == "1" {
		out := filepath.Join("..", "docs", "img", "mesh-landing.png")
		if err := os.WriteFile(out, page.PNG, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", out)
	}
}

// countColour counts img's pixels of the colour "#rrggbb".
func countColour(img image.Image, hex string) int {
	v, _ := strconv.ParseUint(strings.TrimPrefix(hex, "#"), 16, 32)
	want := color.RGBA{uint8(v >> 16), uint8(v >> 8), uint8(v), 0xff}
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			if color.RGBAModel.Convert(img.At(x, y)) == want {
				n++
			}
		}
	}
	return n
}

// BenchmarkLandingPage: one request's work (read the series, sort, render) for 10,000
// targets × 3 paths, each connected, beside a scrape of the same agent's /metrics
// (docs/mesh.md, "The landing page").
func BenchmarkLandingPage(b *testing.B) {
	cfg, err := parseArgs([]string{"--paths", "3", "--no-responder"})
	if err != nil {
		b.Fatal(err)
	}
	a, err := newAgent(cfg, deps{})
	if err != nil {
		b.Fatal(err)
	}
	l, err := a.newLanding(web.LandingConfig{Name: "gorping mesh"})
	if err != nil {
		b.Fatal(err)
	}
	for i := range 10_000 {
		tm := a.m.forTarget(target.Target{Host: fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255), Port: 7174}, 3)
		for p, pm := range tm.paths {
			pm.Connected("mlx5_0", "1", rping.Flow{LocalQPN: uint32(2*i*3 + p + 1), RemoteQPN: uint32(2*i*3 + p + 2), UDPSourcePort: 49152}, "sw")
			if p == 1 && i%10 == 0 {
				pm.Failed("timeout", 1)
			} else {
				pm.Success(3*time.Microsecond, 0, 0, false)
			}
		}
	}
	for name, h := range map[string]http.Handler{"landing": l, "metrics": promhttp.HandlerFor(a.m.reg, promhttp.HandlerOpts{})} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				rec := httptest.NewRecorder()
				path := "/"
				if name == "metrics" {
					path = "/metrics"
				}
				h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
				if rec.Code != 200 {
					b.Fatal(rec.Code, rec.Body.String())
				}
			}
		})
	}
}
