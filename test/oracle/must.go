package oracle

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// MustRun runs sc and fails t on any error. If the oracle cannot run on this machine
// (ErrUnavailable: no gcc, no libibverbs-dev/ibverbs-providers) it fails under CI=true
// and skips loudly otherwise; `make host-deps` installs what it needs.
func MustRun(t testing.TB, sc Scenario) *Record {
	t.Helper()
	return MustRunWith(t, sc, Options{})
}

// MustRunWith is MustRun with options.
func MustRunWith(t testing.TB, sc Scenario, o Options) *Record {
	t.Helper()
	rec, err := RunWith(context.Background(), sc, o)
	if errors.Is(err, ErrUnavailable) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v (CI=true: the oracle must run; see make host-deps)", err)
		}
		t.Skipf("*** SKIPPING the %s oracle: %v (run `make host-deps` as root) ***", sc.Driver.Library(), err)
	}
	if err != nil {
		t.Fatal(err)
	}
	// ORACLE_DUMP=<dir> keeps each record as <dir>/<library>-<scenario>.json for reading.
	if dir := os.Getenv("ORACLE_DUMP"); dir != "" {
		b, err := json.MarshalIndent(rec, "", " ")
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, sc.Driver.Library()+"-"+sc.Name+".json"), b, 0o644)
		}
		if err != nil {
			t.Logf("ORACLE_DUMP: %v", err)
		}
	}
	return rec
}
