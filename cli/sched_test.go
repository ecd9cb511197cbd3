package cli

import (
	"os"
	"runtime"
	"testing"

	"github.com/gorping/gorping/rping"
)

// Event mode runs on one P unless the user set GOMAXPROCS; --poll keeps them all.
func TestOneProcForEvents(t *testing.T) {
	prev := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
	env, had := os.LookupEnv("GOMAXPROCS")
	os.Unsetenv("GOMAXPROCS")
	t.Cleanup(func() {
		if had {
			os.Setenv("GOMAXPROCS", env)
		}
	})

	runtime.GOMAXPROCS(4)
	oneProcForEvents(rping.Config{Poll: true})
	if n := runtime.GOMAXPROCS(0); n != 4 {
		t.Errorf("--poll: GOMAXPROCS %d, want 4 (every busy loop needs a CPU)", n)
	}
	oneProcForEvents(rping.Config{})
	if n := runtime.GOMAXPROCS(0); n != 1 {
		t.Errorf("event mode: GOMAXPROCS %d, want 1", n)
	}

	runtime.GOMAXPROCS(4)
	os.Setenv("GOMAXPROCS", "4")
	oneProcForEvents(rping.Config{})
	if n := runtime.GOMAXPROCS(0); n != 4 {
		t.Errorf("event mode with GOMAXPROCS=4 in the environment: GOMAXPROCS %d, want 4", n)
	}
	os.Unsetenv("GOMAXPROCS")
}
