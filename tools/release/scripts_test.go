package main

// The .deb's maintainer scripts (files/deb), run on this host with sh the way dpkg runs
// them, in the order dpkg runs them for an install, an upgrade, a removal and a purge:
// once with Debian's own deb-systemd-helper and systemctl on a root of their own
// (DPKG_ROOT, systemctl --root), which checks what they leave in /etc and /var; once as
// under a running systemd, with recording stand-ins for the helpers, which checks what
// they ask systemd to do; once with no systemd and no helpers, where they do nothing.
// The guest (guest.sh) runs them again under the real dpkg.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// step is one maintainer script call: the script and its arguments, as dpkg passes them.
type step struct {
	script string
	args   []string
}

// The calls dpkg makes (Debian policy, 6.5 and 6.6) for a fresh install, an upgrade from
// 0.9, a removal and a purge of a package with a postinst, prerm and postrm.
var (
	install = []step{{"postinst", []string{"configure", ""}}}
	upgrade = []step{{"prerm", []string{"upgrade", "1.0"}}, {"postrm", []string{"upgrade", "1.0"}},
		{"postinst", []string{"configure", "0.9"}}}
	remove = []step{{"prerm", []string{"remove"}}, {"postrm", []string{"remove"}}}
	purge  = []step{{"postrm", []string{"purge"}}}
)

var scripts = map[string][]byte{"postinst": debPostinst, "prerm": debPrerm, "postrm": debPostrm}

// runScripts runs steps with sh in env; a script that fails or writes to stderr fails
// the test (dpkg would stop, or the admin would see noise).
func runScripts(t *testing.T, dir string, env []string, steps []step, rewrite func(string) string) {
	t.Helper()
	for _, s := range steps {
		path := filepath.Join(dir, s.script)
		text := string(scripts[s.script])
		if rewrite != nil {
			text = rewrite(text)
		}
		if err := os.WriteFile(path, []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("sh", append([]string{path}, s.args...)...)
		// What dpkg sets for its maintainer scripts (deb-systemd-helper refuses to run
		// without it).
		cmd.Env = append(env, "DPKG_MAINTSCRIPT_PACKAGE=gorping", "DPKG_MAINTSCRIPT_NAME="+s.script)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil || stderr.Len() > 0 || len(out) > 0 {
			t.Fatalf("%s %q: %v\nstdout: %s\nstderr: %s", s.script, s.args, err, out, stderr.String())
		}
	}
}

func TestDebScriptsShape(t *testing.T) {
	for name, text := range scripts {
		if !strings.HasPrefix(string(text), "#!/bin/sh\n") || !strings.Contains(string(text), "\nset -e\n") {
			t.Errorf("%s: want #!/bin/sh and set -e, as Debian policy asks", name)
		}
		if !strings.Contains(string(text), MeshUnit) {
			t.Errorf("%s names no %s", name, MeshUnit)
		}
	}
}

// With Debian's deb-systemd-helper on a root of its own: the install enables nothing,
// the admin's `systemctl enable` survives an upgrade and a removal, and the purge removes
// the enable link and the helper's state.
func TestDebScriptsEnableLinks(t *testing.T) {
	need(t, "deb-systemd-helper", "init-system-helpers")
	systemctl := need(t, "systemctl", "systemd")
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, UnitDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, UnitDir, MeshUnit), meshUnit, 0o644); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(root, "etc/systemd/system"), 0o755)
	env := append(os.Environ(), "DPKG_ROOT="+root)
	link := filepath.Join(root, "etc/systemd/system/multi-user.target.wants", MeshUnit)
	state := filepath.Join(root, "var/lib/systemd/deb-systemd-helper-enabled")
	exists := func(p string) bool { _, err := os.Lstat(p); return err == nil }
	stateFiles := func() []string {
		var fs []string
		filepath.Walk(state, func(p string, fi os.FileInfo, err error) error {
			if err == nil && !fi.IsDir() && strings.Contains(p, "gorping") {
				fs = append(fs, strings.TrimPrefix(p, root))
			}
			return nil
		})
		return fs
	}
	dir := t.TempDir()

	runScripts(t, dir, env, install, nil)
	if exists(link) {
		t.Fatalf("the install enabled %s (%s): the policy is not to", MeshUnit, link)
	}
	if len(stateFiles()) == 0 {
		t.Errorf("the install recorded no state for %s under %s: the purge could not clean the admin's links", MeshUnit, state)
	}
	// The admin configures the agent and enables it.
	if out, err := exec.Command(systemctl, "--root="+root, "enable", MeshUnit).CombinedOutput(); err != nil {
		t.Fatalf("systemctl --root enable: %v\n%s", err, out)
	}
	if !exists(link) {
		t.Fatalf("systemctl enable made no %s", link)
	}
	runScripts(t, dir, env, upgrade, nil)
	if !exists(link) {
		t.Errorf("the upgrade disabled the admin's %s", MeshUnit)
	}
	runScripts(t, dir, env, remove, nil)
	if !exists(link) {
		t.Errorf("dpkg -r removed the enable link: a reinstall would not restore the admin's choice")
	}
	runScripts(t, dir, env, purge, nil)
	if exists(link) {
		t.Errorf("the purge left %s", link)
	}
	if fs := stateFiles(); len(fs) > 0 {
		t.Errorf("the purge left deb-systemd-helper's state: %q", fs)
	}
}

// As under a running systemd (its /run/systemd/system, here a directory of the test's,
// and recording helpers): what each step asks of systemd.
func TestDebScriptsUnderSystemd(t *testing.T) {
	bin, run := t.TempDir(), t.TempDir()
	calls := filepath.Join(t.TempDir(), "calls")
	// deb-systemd-helper's answers: the package was installed before (debian-installed),
	// the unit is not enabled (was-enabled fails): a fresh or an admin-disabled agent.
	stub := `#!/bin/sh
echo "$(basename "$0") $*" >> ` + calls + `
case "$*" in *debian-installed*|*was-enabled*) exit 1;; esac
exit 0
`
	for _, name := range []string{"deb-systemd-helper", "deb-systemd-invoke", "systemctl"} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(stub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"PATH=" + bin + ":/usr/bin:/bin"}
	rewrite := func(s string) string { return strings.ReplaceAll(s, "/run/systemd/system", run) }
	dir := t.TempDir()
	for _, c := range []struct {
		what  string
		steps []step
		want  []string
	}{
		{"install: reload, neither enable nor start", install, []string{
			"deb-systemd-helper debian-installed gorping-mesh.service",
			"deb-systemd-helper update-state gorping-mesh.service",
			"systemctl --system daemon-reload"}},
		{"upgrade: reload, restart if it runs", upgrade, []string{
			"deb-systemd-helper debian-installed gorping-mesh.service",
			"deb-systemd-helper update-state gorping-mesh.service",
			"systemctl --system daemon-reload",
			"deb-systemd-invoke try-restart gorping-mesh.service"}},
		{"remove: stop, then reload", remove, []string{
			"deb-systemd-invoke stop gorping-mesh.service",
			"systemctl --system daemon-reload"}},
		{"purge: the links and their state", purge, []string{
			"deb-systemd-helper purge gorping-mesh.service"}},
	} {
		os.Remove(calls)
		runScripts(t, dir, env, c.steps, rewrite)
		data, _ := os.ReadFile(calls)
		got := strings.Split(strings.TrimSpace(string(data)), "\n")
		if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
			t.Errorf("%s: called\n\t%s\nwant\n\t%s", c.what, strings.Join(got, "\n\t"), strings.Join(c.want, "\n\t"))
		}
	}
	// Without systemd running, nothing but the state.
	os.Remove(run)
	os.Remove(calls)
	runScripts(t, dir, env, append(append(append(install, upgrade...), remove...), purge...), rewrite)
	data, _ := os.ReadFile(calls)
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if !strings.HasPrefix(l, "deb-systemd-helper ") {
			t.Errorf("without a running systemd: %q", l)
		}
	}
}

// No systemd and no init-system-helpers (a bare system, the guest of make guest-release):
// every step succeeds silently.
func TestDebScriptsWithoutHelpers(t *testing.T) {
	bin := t.TempDir()
	for _, name := range []string{"sh", "basename"} {
		if p, err := exec.LookPath(name); err == nil {
			os.Symlink(p, filepath.Join(bin, name))
		}
	}
	rewrite := func(s string) string {
		return strings.ReplaceAll(s, "/run/systemd/system", filepath.Join(bin, "no-systemd"))
	}
	runScripts(t, t.TempDir(), []string{"PATH=" + bin}, append(append(append(install, upgrade...), remove...), purge...), rewrite)
}
