package source

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gorping/gorping/mesh/target"
)

func keys(ts []target.Target) string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Key())
	}
	return strings.Join(out, " ")
}

// TestFileKeepsLastList: a file that cannot be read keeps the list it last gave, and
// says so once per change of the error (and again when forced); an unchanged file is no
// change unless forced.
func TestFileKeepsLastList(t *testing.T) {
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "errors"}, []string{"source", "reason"})
	bad := prometheus.NewGauge(prometheus.GaugeOpts{Name: "bad"})
	path := filepath.Join(t.TempDir(), "targets")
	f := &File{Path: path, DefaultPort: 7174, Kind: Targets, Log: slog.New(slog.DiscardHandler), Errors: errs, Source: target.SourceFile, BadLines: bad}
	reads := func() float64 { return testutil.ToFloat64(errs.WithLabelValues(target.SourceFile, "read")) }

	if f.Load(false) || len(f.List()) != 0 || reads() != 1 {
		t.Fatalf("a missing file: list %q, %g read errors, want none and 1", keys(f.List()), reads())
	}
	if f.Load(false); reads() != 1 {
		t.Errorf("the same error counted again: %g", reads())
	}
	if err := os.WriteFile(path, []byte("192.0.2.1\nnot a target\n192.0.2.2:7000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !f.Load(false) || keys(f.List()) != "192.0.2.1:7174 192.0.2.2:7000" || testutil.ToFloat64(bad) != 1 {
		t.Fatalf("list %q, %g bad lines", keys(f.List()), testutil.ToFloat64(bad))
	}
	if f.Load(false) {
		t.Error("an unchanged file reported a change")
	}
	if !f.Load(true) {
		t.Error("a forced load of an unchanged file reported no change")
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if f.Load(false) || keys(f.List()) != "192.0.2.1:7174 192.0.2.2:7000" || reads() != 2 {
		t.Errorf("a file gone: list %q, %g read errors, want the last list and 2", keys(f.List()), reads())
	}
	if f.Load(true); reads() != 3 {
		t.Errorf("a forced load did not count the error again: %g", reads())
	}
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadRegularFile(path, MaxFileBytes); err == nil || !strings.Contains(err.Error(), "named pipe") {
		t.Errorf("a FIFO: %v, want it refused as a named pipe", err)
	}
}

type resolver map[string][]netip.Addr

func (r resolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if as, ok := r[host]; ok {
		return as, nil
	}
	return nil, errors.New("no such host")
}

// TestDNSKeepsLastList: a lookup that fails keeps the last answer, counted.
func TestDNSKeepsLastList(t *testing.T) {
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "errors"}, []string{"source", "reason"})
	r := resolver{"peers.example": {netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("192.0.2.1")}}
	d := &DNS{Name: "peers.example", Port: 7174, Option: "--targets-dns", Kind: Targets, Resolver: r,
		Log: slog.New(slog.DiscardHandler), Errors: errs, Source: target.SourceDNS}
	d.Refresh(context.Background())
	if got := keys(d.List()); got != "192.0.2.1:7174 192.0.2.2:7174" {
		t.Fatalf("list %q, want both addresses in order", got)
	}
	delete(r, "peers.example")
	d.Refresh(context.Background())
	if got, n := keys(d.List()), testutil.ToFloat64(errs.WithLabelValues(target.SourceDNS, "resolve")); got != "192.0.2.1:7174 192.0.2.2:7174" || n != 1 {
		t.Errorf("after a failed lookup: list %q, %g errors, want the last list and 1", got, n)
	}
}
