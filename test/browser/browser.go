// Package browser renders a page served on 127.0.0.1 in Debian's headless Chromium
// (package chromium, installed by `make host-deps`) for tests: a PNG screenshot and the
// DOM after the page's scripts ran, as a person's browser would show it.
//
//	page := browser.Render(t, "http://"+addr+"/", browser.Options{Width: 1024, Height: 768})
//	os.WriteFile("landing.png", page.PNG, 0o644)
//	if !strings.Contains(page.Text, "10.0.3.2:7174") { ... }
//
// Each call starts Chromium twice (--screenshot, then --dump-dom) with a fresh
// --user-data-dir and the flags this machine needs (no sandbox as root, no GPU, no
// background connections: the network is closed), each run bounded by Options.Timeout.
// Only loopback URLs are accepted: tests never browse elsewhere. A missing chromium is a
// loud skip, a failure under CI=true.
package browser

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Options are how the page is rendered.
type Options struct {
	Width, Height int // the window, default 1280 × 800
	// Timeout bounds each Chromium run (default 60 s; a run under heavy load is slow,
	// never silent: the error says which run and prints its output).
	Timeout time.Duration
	// Settle is the virtual time the page's scripts get before the capture (default 2 s).
	Settle time.Duration
}

// Page is what Chromium rendered.
type Page struct {
	PNG  []byte // the screenshot
	DOM  string // the document after its scripts ran (--dump-dom)
	Text string // DOM's text: tags, scripts and styles removed, entities decoded, spaces collapsed
}

// Binary returns Chromium's path. Missing: a loud skip, or a failure under CI=true.
func Binary(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "*** chromium not found (Debian package chromium; `make host-deps` as root installs it): the browser checks cannot run ***"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// Render loads rawURL (http on a loopback address) and returns the screenshot and the
// DOM. Any failure ends the test with what Chromium printed.
func Render(t testing.TB, rawURL string, o Options) Page {
	t.Helper()
	bin := Binary(t)
	if err := CheckURL(rawURL); err != nil {
		t.Fatal(err)
	}
	if o.Width == 0 {
		o.Width, o.Height = 1280, 800
	}
	if o.Timeout == 0 {
		o.Timeout = 60 * time.Second
	}
	if o.Settle == 0 {
		o.Settle = 2 * time.Second
	}
	dir := t.TempDir()
	shot := filepath.Join(dir, "screenshot.png")
	if _, err := run(bin, dir, "screenshot", o, "--screenshot="+shot, "--hide-scrollbars", rawURL); err != nil {
		t.Fatal(err)
	}
	png, err := os.ReadFile(shot)
	if err != nil {
		t.Fatalf("chromium --screenshot wrote no %s: %v", shot, err)
	}
	dom, err := run(bin, dir, "dump-dom", o, "--dump-dom", rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return Page{PNG: png, DOM: dom, Text: Text(dom)}
}

// flags are the ones Chromium needs here (/work/.library/env/machines/go.md): as root,
// without a GPU, on a machine whose outside network is closed.
var flags = []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
	"--disable-background-networking", "--disable-component-update", "--disable-sync",
	"--disable-default-apps", "--disable-extensions", "--mute-audio", "--no-default-browser-check"}

func run(bin, dir, what string, o Options, args ...string) (string, error) {
	profile, err := os.MkdirTemp(dir, "profile-")
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
	defer cancel()
	all := append(append([]string{}, flags...), "--user-data-dir="+profile,
		fmt.Sprintf("--window-size=%d,%d", o.Width, o.Height),
		"--virtual-time-budget="+strconv.FormatInt(o.Settle.Milliseconds(), 10))
	all = append(all, args...)
	cmd := exec.CommandContext(ctx, bin, all...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	err = cmd.Run()
	if ctx.Err() != nil {
		return "", fmt.Errorf("chromium --%s %s: no result within %v (an overloaded machine, or a page that never finishes loading)\n%s",
			what, args[len(args)-1], o.Timeout, tail(stderr.String()))
	}
	if err != nil {
		return "", fmt.Errorf("chromium --%s %s: %v\n%s", what, args[len(args)-1], err, tail(stderr.String()))
	}
	return stdout.String(), nil
}

func tail(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return strings.Join(lines, "\n")
}

// CheckURL refuses URLs that are not http(s) to a loopback address.
func CheckURL(rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("browser: %q: %w", rawURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("browser: %q: only http(s) URLs", rawURL)
	}
	host := u.Hostname()
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return errors.New("browser: " + rawURL + ": tests browse loopback addresses only (127.0.0.1, [::1], localhost)")
}

var (
	dropped = regexp.MustCompile(`(?is)<(script|style|head)\b.*?</(script|style|head)\s*>`)
	tag     = regexp.MustCompile(`(?s)<[^>]*>`)
	spaces  = regexp.MustCompile(`\s+`)
)

// Text is the text of an HTML document as a reader sees it, roughly: what is between
// tags outside scripts, styles and the head, entities decoded, whitespace collapsed to
// single spaces.
func Text(doc string) string {
	s := dropped.ReplaceAllString(doc, " ")
	s = tag.ReplaceAllString(s, " ")
	return strings.TrimSpace(spaces.ReplaceAllString(html.UnescapeString(s), " "))
}
