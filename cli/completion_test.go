//go:build !guest

package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gorping/gorping/internal/hostenv"
	"github.com/gorping/gorping/internal/hostenv/hostenvtest"
)

// needShell finds a shell the test runs, or skips loudly (fails under CI=true: make
// host-deps installs bash, zsh and fish).
func needShell(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s not installed (make host-deps): %v", name, err)
		}
		t.Skipf("*** %s not installed (make host-deps as root): %v ***", name, err)
	}
	return p
}

// completionEnv builds gorping (as "gorping", with the gorping_hostenv tag) into a
// directory for PATH, with a host whose one RDMA device, rxe0, sits on the loopback
// device: `gorping completion addresses` then prints lo's addresses.
func completionEnv(t *testing.T) []string {
	t.Helper()
	dir := t.TempDir()
	bin := buildBinary(t)
	if err := os.Rename(bin, filepath.Join(dir, "gorping")); err != nil {
		t.Fatal(err)
	}
	e := hostenv.NoRDMA(t.TempDir())
	hostenvtest.AddRxe(t, e, "rxe0", "uverbs0")
	if err := os.WriteFile(filepath.Join(e.Sysfs, "class/infiniband/rxe0/parent"), []byte("lo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(withoutPosixlyCorrect(os.Environ()), hostenvtest.BinaryEnv(e)...)
	return append(env, "PATH="+dir+":"+os.Getenv("PATH"))
}

func shellRun(t *testing.T, env []string, shell string, args ...string) string {
	t.Helper()
	cmd := exec.Command(shell, args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %q: %v\n%s", shell, args, err, out)
	}
	return string(out)
}

// The bash script, sourced in bash, completes what the tables say after each prefix.
func TestCompletionBash(t *testing.T) {
	bash := needShell(t, "bash")
	env := completionEnv(t)
	all := func(opts []option) []string {
		var s []string
		for _, o := range opts {
			if !o.hidden {
				s = append(s, o.spellings()...)
			}
		}
		return s
	}
	mainOpts := all(rpingOptions())
	devOpts := all(command("devices").options)
	cases := []struct {
		line string // the words; the last one is being completed
		want []string
	}{
		{"gorping ''", []string{"devices", "completion", "mesh"}},
		{"gorping de", []string{"devices"}},
		{"gorping -", mainOpts},
		{"gorping --st", []string{"--stats"}},
		{"gorping -c --int", []string{"--interval"}},
		{"gorping -c -a ''", []string{"127.0.0.1", "::1"}},
		{"gorping -c -a 127.0.0.1 -I 12", []string{"127.0.0.1"}},
		{"gorping -c -C ''", nil},
		{"gorping -s -S ''", nil},
		{"gorping -s --deadline ''", nil},
		{"gorping devices -", devOpts},
		{"gorping devices --json --v", []string{"--verbose"}},
		{"gorping devices -s -", mainOpts}, // rping's command line now: the rule
		{"gorping -v devices -", mainOpts},
		{"gorping completion ''", append(all(command("completion").options), command("completion").args...)},
		{"gorping completion f", []string{"fish"}},
		{"gorping mesh --targets.file ''", []string{"targets.txt", "web.yml"}}, // file names
		{"gorping mesh --interval 1s --web.config.file w", []string{"web.yml"}},
		{"gorping mesh --log.level ''", []string{"debug", "info", "warn", "error"}},
		{"gorping mesh --log.format j", []string{"json"}},
		{"gorping mesh --log.", []string{"--log.format", "--log.level"}},
		{"gorping mesh --source ''", []string{"127.0.0.1", "::1"}},
		{"gorping mesh --interval ''", nil},
		{"gorping mesh p", []string{"plan"}},
		{"gorping mesh plan --m", []string{"--members", "--max-peers"}},
		{"gorping mesh plan --all --members t", []string{"targets.txt"}},
		{"gorping mesh plan --epoch ''", nil},
		{"gorping mesh plan -s -", mainOpts}, // rping's command line now
	}
	files := t.TempDir()
	for _, f := range []string{"targets.txt", "web.yml"} {
		if err := os.WriteFile(filepath.Join(files, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var script strings.Builder
	script.WriteString("cd " + files + " || exit 1\nsource <(gorping completion bash) || exit 1\n" +
		"c() { COMP_WORDS=(\"$@\"); COMP_CWORD=$((${#COMP_WORDS[@]}-1)); COMPREPLY=(); _gorping; printf '%s\\n' \"${COMPREPLY[*]}\"; }\n" +
		"complete -p gorping\n")
	for _, c := range cases {
		script.WriteString("c " + c.line + "\n")
	}
	lines := strings.Split(shellRun(t, env, bash, "-c", script.String()), "\n")
	if lines[0] != "complete -F _gorping gorping" {
		t.Fatalf("the script does not register _gorping for gorping: %q", lines[0])
	}
	for i, c := range cases {
		got := strings.Fields(lines[i+1])
		if !slices.Equal(got, c.want) {
			t.Errorf("%s<TAB>: %q, want %q", c.line, got, c.want)
		}
	}
}

// writeScript writes `gorping completion shell` into a new directory as name and checks
// its syntax with the shell (-n).
func writeScript(t *testing.T, env []string, shellPath, shell, name string) string {
	t.Helper()
	script := filepath.Join(t.TempDir(), name)
	shellRun(t, env, "sh", "-c", "gorping completion "+shell+" > "+script)
	shellRun(t, env, shellPath, "-n", script)
	return script
}

func TestCompletionZsh(t *testing.T) {
	zsh := needShell(t, "zsh")
	env := completionEnv(t)
	script := writeScript(t, env, zsh, "zsh", "_gorping")
	dir := filepath.Dir(script)
	// Loaded as compinit loads a completion function from $fpath, and as sourced.
	out := shellRun(t, env, zsh, "-f", "-c", "fpath=("+dir+" $fpath); autoload -Uz compinit; compinit -u -d "+dir+"/zcd; print -r -- $_comps[gorping]; source "+script+"; print -r -- $_comps[gorping]; whence -w _gorping_addresses")
	if out != "_gorping\n_gorping\n_gorping_addresses: function\n" {
		t.Errorf("zsh: %q", out)
	}
}

func TestCompletionFish(t *testing.T) {
	fish := needShell(t, "fish")
	env := completionEnv(t)
	script := writeScript(t, env, fish, "fish", "gorping.fish")
	files := t.TempDir()
	for _, f := range []string{"targets.txt", "web.yml"} {
		if err := os.WriteFile(filepath.Join(files, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for line, want := range map[string][]string{
		"gorping --st":                        {"--stats"},
		"gorping de":                          {"devices"},
		"gorping -c -a ":                      {"127.0.0.1", "::1"},
		"gorping devices --":                  {"--help", "--json", "--verbose"},
		"gorping completion z":                {"zsh"},
		"gorping devices -s --":               {"--deadline", "--help", "--interval", "--json", "--poll", "--stats", "--timeout", "--trace", "--version"},
		"gorping mesh --log.level ":           {"debug", "error", "info", "warn"},
		"gorping mesh --port 1 --log.format ": {"json", "logfmt", "text"},
		"gorping mesh --targets.file t":       {"targets.txt"},
		"gorping mesh --web.config.file ":     {"targets.txt", "web.yml"},
	} {
		out := shellRun(t, env, fish, "--no-config", "-c", "cd "+files+"; source "+script+"; complete -C '"+line+"'")
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if w, _, _ := strings.Cut(l, "\t"); w != "" {
				got = append(got, w)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("fish %q<TAB>: %q, want %q", line, got, want)
		}
	}
}

// `completion` follows the subcommand rule and says what it wants.
func TestCompletionCommand(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	for _, tc := range []struct {
		args   []string
		status int
		stdout string
		stderr string
	}{
		{[]string{"completion", "--help"}, 0, command("completion").usage(), ""},
		{[]string{"completion"}, 2, "", "gorping completion: name one of bash, zsh, fish, addresses (gorping completion --help)\n"},
		{[]string{"completion", "bash", "zsh"}, 2, "", "gorping completion: name one of bash, zsh, fish, addresses (gorping completion --help)\n"},
		{[]string{"completion", "addresses"}, 0, "", ""}, // no RDMA devices: no addresses
		{[]string{"completion", "tcsh"}, 2, "", "gorping completion: \"tcsh\" is not one of bash, zsh, fish, addresses (gorping completion --help)\n"},
		{[]string{"completion", "bash", "-s"}, 19, "", "No RDMA devices were detected\n" + noDevicesHint + "\n"},
	} {
		st, out, errOut := runNoRDMA(t, bin, tc.args...)
		if st != tc.status || out != tc.stdout || errOut != tc.stderr {
			t.Errorf("%q: exit %d stdout %q stderr %q, want %d %q %q", tc.args, st, out, errOut, tc.status, tc.stdout, tc.stderr)
		}
	}
	for _, sh := range []string{"bash", "zsh", "fish"} {
		if st, out, errOut := runCLI(false, "completion", sh); st != 0 || !strings.Contains(out, "completion for gorping(1)") || errOut != "" {
			t.Errorf("completion %s: exit %d stderr %q stdout %.80q", sh, st, errOut, out)
		}
	}
}
