package vm

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// make demo's printing helpers (demo-lib.sh) as a log or a pipe gets them: plain step
// titles without a terminal or with NO_COLOR, bold ones on a terminal; the fact that rxe
// has no NIC timestamps said once however many clients say it.
func TestDemoOutput(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatalf("bash: %v", err)
	}
	const nicts = "gorping: rxe0: no NIC completion timestamps (rxe has none); round-trip times are software time (ts_source=sw)"
	script := `. ./demo-lib.sh
step "a partition"
client() { printf '%s\n' "$1" "64 bytes from 10.0.3.2: seq=0 time=1.0 ms"; }
client "` + nicts + `" | once
client "` + nicts + `" | once
client "` + nicts + `" | once
`
	run := func(env ...string) string {
		cmd := exec.Command(bash, "-c", script)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("demo-lib.sh: %v\n%s", err, out)
		}
		return string(out)
	}
	out := run("NO_COLOR=")
	if strings.Contains(out, "\033") {
		t.Errorf("without a terminal the demo prints escapes: %q", out)
	}
	if !strings.Contains(out, "\n== a partition\n") {
		t.Errorf("no step title: %q", out)
	}
	if n := strings.Count(out, "no NIC completion timestamps"); n != 1 {
		t.Errorf("the NIC timestamps line %d times, want once:\n%s", n, out)
	}
	if n := strings.Count(out, "seq=0"); n != 3 {
		t.Errorf("the clients' other lines %d times, want 3:\n%s", n, out)
	}
	// On a terminal (script(1) gives the helpers one): bold, unless NO_COLOR.
	scriptCmd, err := exec.LookPath("script")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("script (util-linux) missing: the terminal case is not checked")
		}
		t.Skipf("*** script (util-linux) missing: the terminal case is not checked ***")
	}
	tty := func(env ...string) string {
		cmd := exec.Command(scriptCmd, "-qec", bash+` -c '. ./demo-lib.sh; step title'`, "/dev/null")
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("script: %v\n%s", err, out)
		}
		return string(out)
	}
	if out := tty("NO_COLOR="); !strings.Contains(out, "\033[1m== title\033[0m") {
		t.Errorf("on a terminal the step title is not bold: %q", out)
	}
	if out := tty("NO_COLOR=1"); strings.Contains(out, "\033") {
		t.Errorf("with NO_COLOR on a terminal: %q", out)
	}
}
