package browser_test

import (
	"bytes"
	"image/png"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gorping/gorping/test/browser"
)

// page: a red block at the top left on white, and a line its script writes, so that the
// screenshot and the DOM both show what only a browser that ran the page can show.
const page = `<!doctype html>
<html><head><title>browser check</title><style>
  body { margin: 0; background: #fff; font: 16px sans-serif; }
  #block { position: absolute; left: 0; top: 0; width: 200px; height: 100px; background: rgb(255, 0, 0); }
  #text { position: absolute; left: 0; top: 120px; }
</style></head>
<body><div id="block"></div><p id="text">not yet rendered</p>
<script>document.getElementById("text").textContent = "targets up: " + (6 * 7) + " &amp; paths";</script>
</body></html>`

func TestRenderLocalPage(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte(page))
	}))
	defer srv.Close()
	p := browser.Render(t, srv.URL+"/", browser.Options{Width: 640, Height: 480})

	if !strings.Contains(p.Text, "targets up: 42 &amp; paths") || strings.Contains(p.Text, "not yet rendered") {
		t.Errorf("DOM text %q: the page's script did not run", p.Text)
	}
	img, err := png.Decode(bytes.NewReader(p.PNG))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 640 || b.Dy() != 480 {
		t.Errorf("screenshot is %v, want 640×480", b)
	}
	// Inside the block: red; right of it: white.
	for _, c := range []struct {
		x, y    int
		r, g, b uint32
	}{{100, 50, 0xffff, 0, 0}, {400, 50, 0xffff, 0xffff, 0xffff}} {
		r, g, b, _ := img.At(c.x, c.y).RGBA()
		if r != c.r || g != c.g || b != c.b {
			t.Errorf("pixel (%d, %d) = %04x %04x %04x, want %04x %04x %04x", c.x, c.y, r, g, b, c.r, c.g, c.b)
		}
	}
}

func TestText(t *testing.T) {
	got := browser.Text(`<html><head><title>x</title></head><body><script>var a = "<b>";</script><h1>gorping&nbsp;mesh</h1>
	<table><tr><td>10.0.3.2:7174</td><td>up</td></tr></table><style>p{}</style></body></html>`)
	if want := "gorping\u00a0mesh 10.0.3.2:7174 up"; got != want {
		t.Errorf("Text = %q, want %q", got, want)
	}
}

func TestCheckURL(t *testing.T) {
	for u, ok := range map[string]bool{
		"http://127.0.0.1:10174/": true, "http://[::1]:8080/x": true, "http://localhost/": true,
		"http://10.0.3.2/": false, "https://example.com/": false, "file:///etc/passwd": false, "http://127.0.0.1.example.com/": false,
	} {
		if err := browser.CheckURL(u); (err == nil) != ok {
			t.Errorf("CheckURL(%q) = %v", u, err)
		}
	}
}
