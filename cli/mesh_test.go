package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorping/gorping/mesh"
)

// meshCheck is what `gorping mesh` makes of its words: the parse, then mesh's checks.
func meshCheck(args ...string) (mesh.Config, error) {
	cfg, err := parseMesh(args)
	if err != nil {
		return cfg, err
	}
	_, err = mesh.New(cfg)
	return cfg, err
}

// TestMeshPathsOption: --paths takes an integer; anything else is one usage line
// (moved from package mesh, whose checks hold 1..16).
func TestMeshPathsOption(t *testing.T) {
	for v, want := range map[string]string{
		"0": "--paths 0: want 1..16", "x": `--paths "x": not an integer`, "1.5": `--paths "1.5": not an integer`,
		"": "--paths: empty value",
	} {
		_, err := meshCheck("--paths", v)
		if err == nil || err.Error() != want {
			t.Errorf("--paths %q: %v, want %q", v, err, want)
		}
	}
	if _, err := meshCheck("--paths", "2", "--paths", "3"); err == nil || !strings.Contains(err.Error(), "given twice") {
		t.Errorf("--paths twice: %v", err)
	}
	// --path-lifetime: a duration of at least 1m, or 0 for never.
	for v, ok := range map[string]bool{"2m": true, "0": true, "0s": true, "30s": false, "x": false} {
		c, err := meshCheck("--path-lifetime", v)
		if ok != (err == nil) || err != nil && !strings.HasPrefix(err.Error(), "--path-lifetime") {
			t.Errorf("--path-lifetime %q: %v (ok %v)", v, err, ok)
		}
		if ok && v == "2m" && c.PathLifetime != 2*time.Minute {
			t.Errorf("--path-lifetime 2m: %v", c.PathLifetime)
		}
	}
	sc := command("mesh")
	if ours, _, errLine := sc.match([]string{"mesh", "--paths", "4"}); !strings.Contains(sc.usage(), "--paths K") || !ours || errLine != "" {
		t.Error("--paths is not in mesh --help or not a mesh option")
	}
}

// TestMeshOptionRules (finding 10): repeated and empty options follow one rule: the
// lists add up, any other option is taken once, an empty value is refused; --help says so.
func TestMeshOptionRules(t *testing.T) {
	c, err := meshCheck("--peers", "192.0.2.1", "--peers", "192.0.2.2,192.0.2.3", "--probe-allow", "10.0.0.0/8",
		"--probe.allow", "::ffff:127.0.0.0/104", "--listen", "127.0.0.1:0", "--web.listen-address", "[::1]:0", "--agent-name", "a")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Peers) != 3 || len(c.ProbeAllow) != 2 || len(c.Listen) != 2 {
		t.Errorf("repeated lists: peers %q, probe.allow %q, listen %q; want all of each", c.Peers, c.ProbeAllow, c.Listen)
	}
	if c, err := parseMesh([]string{"--group", ""}); err != nil || c.Group != "" {
		t.Errorf("--group '': %q %v, want no group", c.Group, err)
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--interval", "1s", "--interval", "2s"}, "--interval"},
		{[]string{"--listen", ""}, "--listen"},
		{[]string{"--web.listen-address", ""}, "--web.listen-address"},
		{[]string{"--peers", ""}, "--peers"},
		{[]string{"--peers", " , "}, "--peers"},
		{[]string{"--targets", ""}, "--targets"},
		{[]string{"--agents.kubernetes", ""}, "--agents.kubernetes"},
		{[]string{"--agents-kubernetes", "a b"}, "--agents.kubernetes"},
		{[]string{"--group", "a", "--group", "b"}, "--group"},
		{[]string{"--no-responder", "--no-responder"}, "--no-responder"},
		{[]string{"--targets", "a", "--targets.file", "b"}, "--targets.file"},
	} {
		_, err := meshCheck(bad.args...)
		if err == nil || !strings.HasPrefix(err.Error(), bad.want+" ") && !strings.HasPrefix(err.Error(), bad.want+":") {
			t.Errorf("%q: %v, want an error naming %s", bad.args, err, bad.want)
		}
	}
	usage := command("mesh").usage()
	if !strings.Contains(usage, "may be repeated") || !strings.Contains(usage, "empty value") {
		t.Error("--help does not say how repeated and empty options are taken")
	}
}

// Every old name of a renamed option still sets it (manifests and units have them).
func TestMeshAliases(t *testing.T) {
	c, err := parseMesh([]string{"--targets", "t", "--targets-reload", "0", "--targets-dns", "d", "--dns-refresh", "5s",
		"--agents-file", "f", "--agents-dns", "a", "--agents-refresh", "1s", "--agents-keep", "2s", "--probe-allow", "10.0.0.0/8",
		"--probe-any", "--listen", ":1"})
	if err != nil || c.TargetsFile != "t" || c.TargetsReload != 0 || c.TargetsDNS != "d" || c.DNSRefresh.String() != "5s" ||
		c.AgentsFile != "f" || c.AgentsDNS != "a" || c.AgentsRefresh.String() != "1s" || c.AgentsKeep.String() != "2s" ||
		len(c.ProbeAllow) != 1 || !c.ProbeAny || len(c.Listen) != 1 || c.Listen[0] != ":1" {
		t.Errorf("old names: %+v %v", c, err)
	}
}

func TestMeshArgs(t *testing.T) {
	sc := command("mesh")
	for _, args := range [][]string{
		{"mesh"}, {"mesh", "--peers", "a,b"}, {"mesh", "--interval=0.5", "--probe-any"}, {"mesh", "-h"},
		{"mesh", "--interval", "bogus"}, // mesh's own error, not rping's usage
	} {
		if ours, _, _ := sc.match(args); !ours {
			t.Errorf("%q is not mesh's", args)
		}
	}
	for _, args := range [][]string{{}, {"devices"}, {"mesh", "-s"}, {"mesh", "--interval", "1", "-c", "-a", "x"}, {"-s", "mesh"}} {
		if ours, _, _ := sc.match(args); ours {
			t.Errorf("%q is mesh's: rping's command line changes meaning", args)
		}
	}
	for _, args := range [][]string{{"mesh", "--peers"}, {"mesh", "extra"}, {"mesh", "--bogus"}} {
		if ours, _, errLine := sc.match(args); !ours || errLine == "" {
			t.Errorf("%q: mesh's %v, error %q; want mesh's usage error", args, ours, errLine)
		}
	}
	if st, out, _ := runCLI(false, "mesh", "--help"); st != 0 || !strings.Contains(out, "--targets.file FILE") {
		t.Errorf("--help: %d %q", st, out)
	}
	if st, _, errOut := runCLI(false, "mesh", "--size", "1"); st != exitCommandUsage ||
		strings.Count(errOut, "\n") != 1 || !strings.HasPrefix(errOut, "gorping mesh: --size 1: ") {
		t.Errorf("bad option: exit %d, stderr %q; want %d and one line", st, errOut, exitCommandUsage)
	}
	if st, _, errOut := runCLI(false, "mesh", "--interval", "bogus"); st != exitCommandUsage ||
		errOut != "gorping mesh: --interval \"bogus\": not a duration (500ms, 2s) or a number of seconds (gorping mesh --help lists the options)\n" {
		t.Errorf("bad duration: exit %d, stderr %q", st, errOut)
	}
	if st, _, errOut := runCLI(false, "mesh", "--listen", "256.0.0.1:1", "--no-responder", "--agent-name", "a"); st != 1 ||
		!strings.Contains(errOut, "--web.listen-address") {
		t.Errorf("bad listen address: exit %d, stderr %q", st, errOut)
	}
}

// A value left out does not take the next option as its value (issue 44): the error
// says which option lacks its value and which option came instead.
func TestMeshMissingValue(t *testing.T) {
	for _, tc := range []struct {
		args            []string
		name, opt, next string
	}{
		{[]string{"mesh", "--peers", "--interval", "2s"}, "mesh", "--peers", "--interval"},
		{[]string{"mesh", "--targets", "--no-responder"}, "mesh", "--targets", "--no-responder"},
		{[]string{"mesh", "plan", "--members", "--all"}, "mesh plan", "--members", "--all"},
	} {
		st, out, errOut := runCLI(false, tc.args...)
		if st != exitCommandUsage || out != "" || strings.Count(errOut, "\n") != 1 ||
			!strings.HasPrefix(errOut, "gorping "+tc.name+": option "+tc.opt+" needs a value") ||
			!strings.Contains(errOut, "got the option "+tc.next+" ") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want %d and one line saying %s got %s", tc.args, st, out, errOut,
				exitCommandUsage, tc.opt, tc.next)
		}
	}
}

// TestMeshAgentsOptions: bad discovery options, and a client configuration that cannot
// be used, are one line naming the option (moved from package mesh's TestAgentsArgs).
func TestMeshAgentsOptions(t *testing.T) {
	for _, bad := range [][]string{{"--agents", "a b"}, {"--agents.dns", "x y"}, {"--agents.dns", "n:0"}, {"--rails", "some"},
		{"--max-peers", "-1"}, {"--rotate", "10ms"}, {"--agents.refresh", "1ms"}, {"--agents.keep", "-1s"}} {
		st, _, errOut := runCLI(false, append([]string{"mesh"}, bad...)...)
		if st != exitCommandUsage || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, bad[0]) {
			t.Errorf("%q: exit %d, stderr %q; want %d and one line naming the option", bad, st, errOut, exitCommandUsage)
		}
	}
	hc := filepath.Join(t.TempDir(), "http.yml")
	if err := os.WriteFile(hc, []byte("scheme: gopher\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if st, _, errOut := runCLI(false, "mesh", "--agents", "a", "--agents.http-config", hc); st == 0 ||
		!strings.HasPrefix(errOut, "gorping mesh: --agents.http-config") || strings.Count(errOut, "\n") != 1 {
		t.Errorf("bad http config: exit %d, %q", st, errOut)
	}
	os.Remove(hc)
	if st, _, errOut := runCLI(false, "mesh", "--agents.http-config", hc); st == 0 || !strings.Contains(errOut, "--agents.http-config") {
		t.Errorf("missing http config: exit %d, %q", st, errOut)
	}
	if _, err := meshCheck("--rails", "some"); !errors.Is(err, mesh.ErrUsage) {
		t.Errorf("--rails some: %v, not a usage error", err)
	}
}
