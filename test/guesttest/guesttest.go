//go:build guest

// Package guesttest holds what the guest-tagged tests of several packages need
// to know about the Soft-RoCE guest that test/vm boots: its rxe device and the
// kernel's resource counts. It is only built with the guest tag.
package guesttest

import (
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gorping/gorping/uverbs"
)

// DeviceName is the rxe device the guest creates on dummy interface d0
// (192.0.2.1, 2001:db8::1).
const DeviceName = "rxe0"

// RxeDevice returns the guest's rxe device as uverbs discovers it.
func RxeDevice(t testing.TB) uverbs.Device {
	t.Helper()
	devs, err := uverbs.Host{}.Devices()
	if err != nil {
		t.Fatalf("uverbs.Devices: %v", err)
	}
	for _, d := range devs {
		if d.Name == DeviceName {
			return d
		}
	}
	t.Fatalf("%s not among %+v", DeviceName, devs)
	panic("unreachable")
}

// RDMATool is the full path of iproute2's rdma (busybox has its own applets).
func RDMATool(t testing.TB) string {
	t.Helper()
	return Env(t, "GORPING_RDMA_TOOL")
}

var countRE = regexp.MustCompile(`([a-z_]+) (\d+)`)

// Summary is `rdma resource show` (per-device totals).
func Summary(t testing.TB) string {
	t.Helper()
	tool := RDMATool(t)
	out, err := exec.Command(tool, "resource", "show").CombinedOutput()
	if err != nil {
		t.Fatalf("%s resource show: %v\n%s", tool, err, out)
	}
	return string(out)
}

// ResourceCounts parses `rdma resource show` for the rxe device, e.g.
// "0: rxe0: pd 1 cq 2 qp 1 cm_id 0 mr 0 ctx 0", into {"pd": 1, "cq": 2, ...}.
func ResourceCounts(t testing.TB) map[string]int {
	t.Helper()
	out := Summary(t)
	for _, line := range strings.Split(out, "\n") {
		if !strings.Contains(line, DeviceName+":") {
			continue
		}
		m := map[string]int{}
		for _, f := range countRE.FindAllStringSubmatch(line, -1) {
			m[f[1]], _ = strconv.Atoi(f[2])
		}
		for _, k := range []string{"pd", "cq", "qp", "mr"} {
			if _, ok := m[k]; !ok {
				t.Fatalf("no %q count in %q", k, line)
			}
		}
		return m
	}
	t.Fatalf("no %s line in:\n%s", DeviceName, out)
	return nil
}
