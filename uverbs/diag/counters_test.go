package diag

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/gorping/gorping/internal/hostenv/hostenvtest"
)

func TestCountersSnapshotAndDiff(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	d := "class/infiniband/rxe0/"
	hostenvtest.WriteTree(t, root, map[string]string{
		d + "ports/1/hw_counters/sent_pkts":        "10\n",
		d + "ports/1/hw_counters/rcvd_pkts":        "7\n",
		d + "ports/1/hw_counters/rcvd_seq_err":     "0\n",
		d + "ports/1/hw_counters/lifespan":         "10\n",
		d + "ports/1/counters/port_xmit_data":      "0x100\n",
		d + "ports/1/counters/unsupported":         "N/A\n",
		d + "ports/1/counters/sub/deep_counter":    "1\n",
		d + "hw_counters/device_wide":              "5\n",
		d + "ports/2/hw_counters/other_port_count": "1\n",
	})
	before, err := readCounters(root, "rxe0", 1)
	if err != nil {
		t.Fatal(err)
	}
	wantVals := map[string]uint64{
		"ports/1/hw_counters/sent_pkts":     10,
		"ports/1/hw_counters/rcvd_pkts":     7,
		"ports/1/hw_counters/rcvd_seq_err":  0,
		"ports/1/hw_counters/lifespan":      10,
		"ports/1/counters/port_xmit_data":   0x100,
		"ports/1/counters/sub/deep_counter": 1,
		"hw_counters/device_wide":           5,
	}
	if !reflect.DeepEqual(before.Values, wantVals) {
		t.Errorf("values %v\nwant %v", before.Values, wantVals)
	}
	if !reflect.DeepEqual(before.Unreadable, []string{"ports/1/counters/unsupported"}) {
		t.Errorf("unreadable %v", before.Unreadable)
	}
	hostenvtest.WriteTree(t, root, map[string]string{
		d + "ports/1/hw_counters/sent_pkts":    "25\n",
		d + "ports/1/hw_counters/rcvd_seq_err": "2\n",
		d + "hw_counters/device_wide":          "1\n", // went down: reset
		d + "ports/1/hw_counters/new_counter":  "3\n", // only in after: not compared
	})
	if err := os.Remove(filepath.Join(root, d, "ports/1/hw_counters/rcvd_pkts")); err != nil {
		t.Fatal(err)
	}
	after, err := readCounters(root, "rxe0", 1)
	if err != nil {
		t.Fatal(err)
	}
	got := DiffCounters(before, after)
	want := []CounterDelta{
		{Name: "hw_counters/device_wide", Before: 5, After: 1},
		{Name: "ports/1/hw_counters/rcvd_seq_err", Before: 0, After: 2},
		{Name: "ports/1/hw_counters/sent_pkts", Before: 10, After: 25},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("diff %+v\nwant %+v", got, want)
	}
	if got[0].Delta() != 1 || got[1].Delta() != 2 || got[2].Delta() != 15 {
		t.Errorf("deltas %d %d %d", got[0].Delta(), got[1].Delta(), got[2].Delta())
	}
	if len(DiffCounters(after, after)) != 0 {
		t.Error("a snapshot differs from itself")
	}
}

func TestCountersMissing(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if _, err := readCounters(root, "rxe0", 1); err == nil {
		t.Error("missing device: no error")
	}
	hostenvtest.WriteTree(t, root, map[string]string{"class/infiniband/rxe0/ports/1/state": "4: ACTIVE\n"})
	if _, err := readCounters(root, "rxe0", 2); err == nil {
		t.Error("missing port: no error")
	}
	// A port without any counter group is empty, not an error.
	s, err := readCounters(root, "rxe0", 1)
	if err != nil || len(s.Values) != 0 || len(s.Unreadable) != 0 {
		t.Errorf("no groups: %+v, %v", s, err)
	}
}
