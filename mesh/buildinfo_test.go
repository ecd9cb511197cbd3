package mesh

import (
	"runtime"
	"testing"

	"github.com/prometheus/common/version"
)

// gorping_build_info carries the labels node_exporter's and blackbox_exporter's do: the
// binary's version, the revision and branch the build linked in (the Makefile's LDFLAGS),
// the Go version, GOOS and GOARCH.
func TestBuildInfoLabels(t *testing.T) {
	rev, branch := version.Revision, version.Branch
	version.Revision, version.Branch = "0123abcd", "main"
	defer func() { version.Revision, version.Branch = rev, branch }()
	mfs, err := newMetrics("v1.2.3").reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"version": "v1.2.3", "revision": "0123abcd", "branch": "main",
		"goversion": runtime.Version(), "goos": runtime.GOOS, "goarch": runtime.GOARCH}
	for _, mf := range mfs {
		if mf.GetName() != "gorping_build_info" {
			continue
		}
		if len(mf.GetMetric()) != 1 || mf.GetMetric()[0].GetGauge().GetValue() != 1 {
			t.Fatalf("gorping_build_info: %v, want one series of 1", mf.GetMetric())
		}
		got := map[string]string{}
		for _, l := range mf.GetMetric()[0].GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("gorping_build_info{%s=%q}, want %q (labels %v)", k, got[k], v, got)
			}
		}
		return
	}
	t.Fatal("no gorping_build_info")
}
