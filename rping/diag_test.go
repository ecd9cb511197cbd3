package rping

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestDiagnosticsOnlyWhenAsked(t *testing.T) {
	var out, errb bytes.Buffer
	cfg := Config{Stdout: &out, Stderr: &errb}
	if newDiagnostics(&cfg) != nil {
		t.Fatal("diagnostics without --trace, -d or --json")
	}
	var d *diagnostics
	d.completionError(12) // nil: nothing, no panic
	d.path(connInfo{})
	if out.Len()+errb.Len() != 0 {
		t.Errorf("nil diagnostics wrote %q %q", out.String(), errb.String())
	}
}

func TestDiagnosticsText(t *testing.T) {
	for _, cfg := range []Config{{Trace: true}, {Debug: true}} {
		var out, errb bytes.Buffer
		cfg.Stdout, cfg.Stderr = &out, &errb
		d := newDiagnostics(&cfg)
		d.completionError(12)
		d.path(connInfo{Role: "client", Device: "rxe0", Driver: "rxe", Port: 1, LinkLayer: "Ethernet", Netdev: "d0",
			GID: "::ffff:192.0.2.1", GIDIndex: 1, GIDType: "RoCE v2", Local: "192.0.2.1:1", Remote: "192.0.2.1:7174",
			PathMTU: 4096, ActiveMTU: 1024, NetdevMTU: 1400, MTUWarning: "path MTU 4096 exceeds the port's active MTU 1024"})
		if out.Len() != 0 {
			t.Errorf("diagnostics on stdout (rping's): %q", out.String())
		}
		want := []string{
			"gorping: completion error: RETRY_EXC_ERR (12): no acknowledgement arrived",
			"gorping: path: client rxe0 port 1 (Ethernet, driver rxe, netdev d0), GID index 1 ::ffff:192.0.2.1 (RoCE v2), 192.0.2.1:1 -> 192.0.2.1:7174\n",
			"gorping: path: MTU: path 4096, port active 1024, netdev 1400\n",
			"gorping: warning: path MTU 4096 exceeds the port's active MTU 1024\n",
		}
		for _, w := range want {
			if !strings.Contains(errb.String(), w) {
				t.Errorf("stderr lacks %q:\n%s", w, errb.String())
			}
		}
	}
}

func TestDiagnosticsJSON(t *testing.T) {
	var out, errb bytes.Buffer
	cfg := Config{JSON: true, Stdout: &out, Stderr: &errb}
	cfg.rep = newReporter(&cfg)
	d := newDiagnostics(&cfg)
	d.completionError(10)
	if errb.Len() != 0 {
		t.Errorf("--json alone wrote text: %q", errb.String())
	}
	var m map[string]any
	if err := json.Unmarshal(out.Bytes(), &m); err != nil {
		t.Fatalf("%v: %q", err, out.String())
	}
	if m["type"] != "completion_error" || m["status"] != 10.0 || m["name"] != "REM_ACCESS_ERR" || !strings.Contains(m["cause"].(string), "rkey") {
		t.Errorf("record = %v", m)
	}
}

func TestTracerFollowsJSON(t *testing.T) {
	var out, errb bytes.Buffer
	cfg := Config{JSON: true, Trace: true, Stdout: &out, Stderr: &errb}
	cfg.rep = newReporter(&cfg)
	tr := newTracer(&cfg)
	tr.Emit("qp", "INIT->RTR", nil, nil, nil)
	if errb.Len() != 0 || !strings.HasPrefix(out.String(), `{"type":"trace"`) {
		t.Errorf("--json --trace: stdout %q stderr %q", out.String(), errb.String())
	}
	out.Reset()
	cfg = Config{Trace: true, Stdout: &out, Stderr: &errb}
	newTracer(&cfg).Emit("qp", "INIT->RTR", nil, nil, nil)
	if out.Len() != 0 || !strings.HasPrefix(errb.String(), "trace ") {
		t.Errorf("--trace: stdout %q stderr %q", out.String(), errb.String())
	}
	if newTracer(&Config{}) != nil {
		t.Error("a tracer without --trace")
	}
}
