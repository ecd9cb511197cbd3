//go:build !guest

package mesh

// Exporter conventions (issue 24, item 3): the names and endpoints node_exporter's and
// blackbox_exporter's users expect.

import (
	"context"
	"encoding/json"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorping/gorping/rping"
	"github.com/gorping/gorping/test/meshtest"
)

func TestExporterConventions(t *testing.T) {
	c, err := checkArgs([]string{"--web.listen-address", "127.0.0.1:0", "--listen", "[::1]:0", "--log.format", "logfmt"})
	if err != nil || len(c.Listen) != 2 {
		t.Errorf("--web.listen-address and its alias --listen: %v %v", c, err)
	}
	for _, f := range []string{"logfmt", "json", "text"} {
		if _, err := checkArgs([]string{"--log.format", f}); err != nil {
			t.Errorf("--log.format %s: %v", f, err)
		}
	}
	if _, err := checkArgs([]string{"--log.format", "xml"}); err == nil || !strings.Contains(err.Error(), "logfmt") {
		t.Errorf("--log.format xml: %v, want an error naming logfmt and json", err)
	}

	// /-/ready is 503 until the responder listens; durations log as "1s"; an agent
	// without targets says so, once.
	release := make(chan struct{})
	respond := func(ctx context.Context, c rping.ResponderConfig) error {
		select {
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		c.Listening()
		<-ctx.Done()
		return nil
	}
	ta := startAgent(t, deps{dial: newFakeNet().dial, resolver: &fakeResolver{m: map[string][]netip.Addr{}}, respond: respond},
		"--log.format", "json", "--interval", "1s")
	if code, body, _ := ta.Get("/-/ready"); code != 503 || !strings.Contains(body, "responder") {
		t.Errorf("/-/ready before the responder listens: %d %q, want 503 naming the responder", code, body)
	}
	if code, _, _ := ta.Get("/-/healthy"); code != 200 {
		t.Errorf("/-/healthy before the responder listens: %d, want 200 (the process is alive)", code)
	}
	close(release)
	meshtest.WaitFor(t, 10*time.Second, "/-/ready once the responder listens", func() (bool, string) {
		code, body, err := ta.Get("/-/ready")
		return err == nil && code == 200, body
	})
	var start map[string]any
	for _, l := range strings.Split(ta.logs.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(l), &rec) == nil && rec["msg"] == "gorping mesh started" {
			start = rec
		}
	}
	if start == nil || start["interval"] != "1s" {
		t.Errorf("the start line's interval: %v, want \"1s\"", start["interval"])
	}
	ta.hup <- syscall.SIGHUP
	ta.hup <- syscall.SIGHUP
	meshtest.WaitFor(t, 10*time.Second, "the SIGHUPs handled", func() (bool, string) {
		return strings.Count(ta.logs.String(), "SIGHUP") == 2, ""
	})
	if n := strings.Count(ta.logs.String(), "no targets"); n != 1 {
		t.Errorf("an agent without targets warned %d times, want once", n)
	}
	tb := startAgent(t, deps{dial: newFakeNet().dial, resolver: &fakeResolver{m: map[string][]netip.Addr{}}}, "--no-responder")
	if code, _, _ := tb.Get("/-/ready"); code != 200 {
		t.Errorf("/-/ready with --no-responder: %d", code)
	}

	// /probe answers blackbox_exporter's probe_success and probe_duration_seconds.
	fn := newFakeNet()
	fn.set("192.0.2.1:7174", behavior{rtt: 5 * time.Microsecond})
	tc := startAgent(t, deps{dial: fn.dial, resolver: &fakeResolver{m: map[string][]netip.Addr{}}}, "--no-responder",
		"--peers", "192.0.2.1", "--interval", "1h")
	m, err := tc.ScrapePath("/probe?target=192.0.2.1&count=2")
	if err != nil {
		t.Fatal(err)
	}
	if v, err := m.Value("probe_success"); err != nil || v != 1 {
		t.Errorf("probe_success %v %v", v, err)
	}
	if v, err := m.Value("probe_duration_seconds"); err != nil || v <= 0 {
		t.Errorf("probe_duration_seconds %v %v", v, err)
	}
	if _, err := m.Value("gorping_probe_success"); err == nil {
		t.Error("gorping_probe_success beside probe_success: it adds nothing")
	}
}
