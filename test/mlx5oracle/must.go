package mlx5oracle

import (
	"context"
	"errors"
	"os"
	"testing"
)

// MustRun runs sc and fails t on any error. If the oracle cannot run on this machine
// (ErrUnavailable: no gcc, no libibverbs-dev/ibverbs-providers) it fails under CI=true
// and skips loudly otherwise; `make host-deps` installs what it needs.
func MustRun(t testing.TB, sc Scenario) *Record {
	t.Helper()
	rec, err := Run(context.Background(), sc)
	if errors.Is(err, ErrUnavailable) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v (CI=true: the oracle must run; see make host-deps)", err)
		}
		t.Skipf("*** SKIPPING mlx5 oracle: %v (run `make host-deps` as root) ***", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return rec
}
