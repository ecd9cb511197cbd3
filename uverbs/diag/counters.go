package diag

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/gorping/gorping/uverbs"
)

// Counter snapshots for path diagnostics. Drivers expose different counters (rxe:
// hw_counters/sent_pkts, rcvd_seq_err, ...; mlx5: out_of_sequence, rnr_nak_retry_err,
// counters/port_rcv_errors, ...), so every numeric file found is taken, none is named here.

// CounterSnapshot holds the counters of one port at one moment. Keys are paths relative to
// the device's sysfs directory, e.g. "ports/1/hw_counters/sent_pkts" or the device-wide
// "hw_counters/...".
type CounterSnapshot struct {
	Values     map[string]uint64
	Unreadable []string // files that could not be read or are not a number (e.g. unsupported)
}

// CounterDelta is one counter that changed between two snapshots.
type CounterDelta struct {
	Name          string
	Before, After uint64
}

// Delta is After-Before; a counter that went down (reset, wrap) reports After.
func (d CounterDelta) Delta() uint64 {
	if d.After >= d.Before {
		return d.After - d.Before
	}
	return d.After
}

// ReadCounters reads every numeric file of the counters of ibdev's port in h's sysfs
// (readCounters).
func ReadCounters(h uverbs.Host, ibdev string, port int) (CounterSnapshot, error) {
	return readCounters(h.Env().Sysfs, ibdev, port)
}

// readCounters snapshots the counters of ibdev's port: ports/<port>/counters/,
// ports/<port>/hw_counters/, the connection manager's message counts of the port
// (ports/<port>/cm_tx_msgs/, cm_rx_msgs/, cm_tx_retries/, cm_rx_duplicates/) and the
// device-wide hw_counters/.
func readCounters(root, ibdev string, port int) (CounterSnapshot, error) {
	base := filepath.Join(root, "class", "infiniband", ibdev)
	if _, err := os.Stat(base); err != nil {
		return CounterSnapshot{}, fmt.Errorf("diag: %s counters: %w", ibdev, err)
	}
	pdir := filepath.Join("ports", strconv.Itoa(port))
	if _, err := os.Stat(filepath.Join(base, pdir)); err != nil {
		return CounterSnapshot{}, fmt.Errorf("diag: %s port %d counters: %w", ibdev, port, err)
	}
	s := CounterSnapshot{Values: map[string]uint64{}}
	for _, dir := range []string{
		filepath.Join(pdir, "counters"),
		filepath.Join(pdir, "hw_counters"),
		filepath.Join(pdir, "cm_tx_msgs"),
		filepath.Join(pdir, "cm_rx_msgs"),
		filepath.Join(pdir, "cm_tx_retries"),
		filepath.Join(pdir, "cm_rx_duplicates"),
		"hw_counters",
	} {
		if err := walkCounters(base, dir, &s); err != nil {
			return CounterSnapshot{}, fmt.Errorf("diag: %s counters: %w", ibdev, err)
		}
	}
	sort.Strings(s.Unreadable)
	return s, nil
}

// walkCounters adds every numeric regular file under base/dir to s. A missing directory is
// not an error: not every driver has every group.
func walkCounters(base, dir string, s *CounterSnapshot) error {
	err := filepath.WalkDir(filepath.Join(base, dir), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && path == filepath.Join(base, dir) {
				return fs.SkipDir
			}
			return err
		}
		if d.IsDir() || !d.Type().IsRegular() {
			return nil
		}
		rel, _ := filepath.Rel(base, path)
		rel = filepath.ToSlash(rel)
		v, ok := readCounter(path)
		if !ok {
			s.Unreadable = append(s.Unreadable, rel)
			return nil
		}
		s.Values[rel] = v
		return nil
	})
	if errors.Is(err, fs.SkipDir) {
		return nil
	}
	return err
}

// readCounter parses a counter file: one unsigned decimal number (some drivers print
// "0x..." hex; accept it).
func readCounter(path string) (uint64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) != 1 {
		return 0, false
	}
	v, err := strconv.ParseUint(f[0], 0, 64)
	if err != nil {
		return 0, false
	}
	return v, true
}

// DiffCounters returns the counters whose value differs between before and after, sorted
// by name. Counters present in only one snapshot are not compared.
func DiffCounters(before, after CounterSnapshot) []CounterDelta {
	var out []CounterDelta
	for name, a := range after.Values {
		b, ok := before.Values[name]
		if ok && a != b {
			out = append(out, CounterDelta{Name: name, Before: b, After: a})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Sum adds the values of every counter under dir (e.g. "ports/1/cm_rx_msgs").
func (s CounterSnapshot) Sum(dir string) uint64 {
	var n uint64
	for k, v := range s.Values {
		if strings.HasPrefix(k, dir+"/") {
			n += v
		}
	}
	return n
}
