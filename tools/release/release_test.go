package main

// Host tests of the release artifacts, read with the tools users and distributions read
// them with: dpkg-deb and lintian, rpm and rpm2cpio, skopeo, make. `make test-release`
// builds the artifacts and runs these with RELEASE_DIR set; a bare `go test` here runs
// `make release` first.

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
)

const repoRoot = "../.."

var (
	artifactsOnce sync.Once
	artifactsDir  string
	artifactsErr  error
)

// artifacts is the directory of the release artifacts, built once if RELEASE_DIR is not set.
func artifacts(t *testing.T) string {
	t.Helper()
	artifactsOnce.Do(func() {
		if d := os.Getenv("RELEASE_DIR"); d != "" {
			artifactsDir = d
			return
		}
		cmd := exec.Command("make", "-C", repoRoot, "release")
		if out, err := cmd.CombinedOutput(); err != nil {
			artifactsErr = fmt.Errorf("make release: %v\n%s", err, out)
			return
		}
		artifactsDir, artifactsErr = filepath.Abs(filepath.Join(repoRoot, "bin", "release"))
	})
	if artifactsErr != nil {
		t.Fatal(artifactsErr)
	}
	return artifactsDir
}

// need finds a host program or skips loudly (fails under CI=true: make host-deps
// installs it).
func need(t *testing.T, prog, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(prog)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s missing (apt-get install %s; make host-deps)", prog, pkg)
		}
		t.Skipf("*** %s missing (apt-get install %s; make host-deps as root) ***", prog, pkg)
	}
	return p
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %q: %v\n%s%s", name, args, err, out, stderr.Bytes())
	}
	return string(out)
}

func one(t *testing.T, pattern string) string {
	t.Helper()
	m, err := filepath.Glob(pattern)
	if err != nil || len(m) != 1 {
		t.Fatalf("%s: want one file, found %q (%v)", pattern, m, err)
	}
	return m[0]
}

// stamp is what a gorping binary says about itself.
type stamp struct{ version, commit string }

// binaryStamp runs a gorping binary of arch (arm64 under qemu-aarch64) with --version.
func binaryStamp(t *testing.T, bin, arch string) stamp {
	t.Helper()
	name, args := bin, []string{"--version"}
	if arch == "arm64" {
		name = need(t, "qemu-aarch64", "qemu-user")
		args = append([]string{bin}, args...)
	}
	out := run(t, name, args...)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	var s stamp
	if len(lines) == 2 {
		f := strings.Fields(lines[0])
		if len(f) > 1 && f[0] == "gorping" {
			s.version = f[1]
		}
		s.commit, _ = strings.CutPrefix(lines[1], "commit ")
	}
	if s.version == "" || len(s.commit) != 40 {
		t.Fatalf("%s --version: %q: want the version and a second line with the full commit", bin, out)
	}
	return s
}

var (
	wantOnce sync.Once
	wantSt   stamp
)

// want is the version and commit every artifact must carry: what make stamped into the
// binaries (RELEASE_VERSION/RELEASE_COMMIT from make test-release), which the host's own
// binary in bin/ must say too.
func want(t *testing.T) stamp {
	t.Helper()
	dir := artifacts(t)
	wantOnce.Do(func() {
		bin := filepath.Join(dir, "..", "gorping-linux-amd64")
		if out, err := exec.Command(bin, "--version").Output(); err == nil {
			f := strings.Fields(string(out))
			if len(f) >= 2 {
				wantSt.version = f[1]
			}
			if i := slices.Index(f, "commit"); i >= 0 && i+1 < len(f) {
				wantSt.commit = f[i+1]
			}
		}
	})
	if wantSt.version == "" || wantSt.commit == "" {
		t.Fatalf("cannot read the version of %s/../gorping-linux-amd64", dir)
	}
	if v := os.Getenv("RELEASE_VERSION"); v != "" && v != wantSt.version {
		t.Fatalf("make's VERSION %q, the binary's %q", v, wantSt.version)
	}
	if c := os.Getenv("RELEASE_COMMIT"); c != "" && c != wantSt.commit {
		t.Fatalf("make's COMMIT %q, the binary's %q", c, wantSt.commit)
	}
	return wantSt
}

// checkStatic requires a static ELF executable for arch: no interpreter, no libraries.
func checkStatic(t *testing.T, bin, arch string) {
	t.Helper()
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	machine := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[arch]
	if f.Machine != machine {
		t.Errorf("%s: machine %v, want %v", bin, f.Machine, machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s has an interpreter: not static", bin)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("%s needs %q: not static", bin, libs)
	}
}

func TestVersionMapping(t *testing.T) {
	for _, c := range []struct{ v, deb, rpm string }{
		{"v1.2.3", "1.2.3-1", "1.2.3"},
		{"v1.2.3-rc.1", "1.2.3~rc.1-1", "1.2.3~rc.1"},
		{"v0.0.0-20261201133700-6b967d5abcde", "0.0.0~20261201133700-6b967d5abcde-1", "0.0.0~20261201133700_6b967d5abcde"},
		{"v0.0.0-20261201133700-6b967d5abcde+dirty", "0.0.0~20261201133700-6b967d5abcde+dirty-1", "0.0.0~20261201133700_6b967d5abcde+dirty"},
	} {
		if got := DebVersion(c.v); got != c.deb {
			t.Errorf("DebVersion(%s) = %s, want %s", c.v, got, c.deb)
		}
		if got, rel := RPMVersion(c.v); got != c.rpm || rel != "1" {
			t.Errorf("RPMVersion(%s) = %s-%s, want %s-1", c.v, got, rel, c.rpm)
		}
	}
}

// The files both kinds of package hold besides their license files.
var packaged = []string{
	MeshDefaults,
	MeshTargets,
	"/usr/bin/gorping",
	"/usr/share/bash-completion/completions/gorping",
	"/usr/share/fish/vendor_completions.d/gorping.fish",
	"/usr/share/man/man1/gorping.1.gz",
}

// checkService checks the agent's unit in an unpacked package: systemd-analyze verify
// accepts it, it runs the packaged binary's mesh with the options of the packaged
// defaults file, and that file's options are ones gorping mesh takes, with the packaged
// targets file (which must parse: comments only).
func checkService(t *testing.T, root, unitDir string) {
	t.Helper()
	unit, err := os.ReadFile(filepath.Join(root, unitDir, MeshUnit))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{"ExecStart=/usr/bin/gorping mesh $GORPING_MESH_OPTIONS\n", "EnvironmentFile=-" + MeshDefaults + "\n",
		"DynamicUser=yes\n", "CapabilityBoundingSet=CAP_IPC_LOCK\n", "WantedBy=multi-user.target\n"} {
		if !bytes.Contains(unit, []byte("\n"+l)) {
			t.Errorf("%s lacks %q", MeshUnit, l)
		}
	}
	if sa, err := exec.LookPath("systemd-analyze"); err == nil {
		// The unit names /bin/kill and the standard targets, which the package does not
		// carry: give the tree the host's (a copy: the tree is the test's own).
		vroot := t.TempDir()
		if out, err := exec.Command("cp", "-a", root+"/.", vroot).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v\n%s", err, out)
		}
		os.MkdirAll(filepath.Join(vroot, "bin"), 0o755)
		os.WriteFile(filepath.Join(vroot, "bin/kill"), []byte("#!/bin/sh\n"), 0o755)
		targets, _ := filepath.Glob("/lib/systemd/system/*.target")
		os.MkdirAll(filepath.Join(vroot, "usr/lib/systemd/system"), 0o755)
		for _, tg := range targets {
			if data, err := os.ReadFile(tg); err == nil {
				os.WriteFile(filepath.Join(vroot, "usr/lib/systemd/system", filepath.Base(tg)), data, 0o644)
			}
		}
		cmd := exec.Command(sa, "verify", "--man=no", "--root="+vroot, filepath.Join(unitDir, MeshUnit))
		if out, err := cmd.CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
			t.Errorf("systemd-analyze verify %s: %v\n%s", MeshUnit, err, out)
		}
	} else if os.Getenv("CI") == "true" {
		t.Errorf("systemd-analyze not installed: %v", err)
	}
	defaults, err := os.ReadFile(filepath.Join(root, MeshDefaults))
	if err != nil {
		t.Fatal(err)
	}
	var opts string
	for _, l := range strings.Split(string(defaults), "\n") {
		if v, ok := strings.CutPrefix(l, "GORPING_MESH_OPTIONS="); ok {
			opts = strings.Trim(v, `"`)
		}
	}
	if !strings.Contains(opts, "--targets "+MeshTargets) {
		t.Errorf("%s: GORPING_MESH_OPTIONS=%q does not read %s", MeshDefaults, opts, MeshTargets)
	}
	targets, err := os.ReadFile(filepath.Join(root, MeshTargets))
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range strings.Split(string(targets), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			t.Errorf("%s line %d: %q: the packaged file has only comments", MeshTargets, i+1, l)
		}
	}
}

// checkTree checks an unpacked package's files: the binary's stamp, a static binary, the
// man page and completions that binary prints.
func checkTree(t *testing.T, root, arch, zshDir string, w stamp) {
	t.Helper()
	bin := filepath.Join(root, "usr/bin/gorping")
	checkStatic(t, bin, arch)
	if got := binaryStamp(t, bin, arch); got != w {
		t.Errorf("%s binary says %+v, want %+v", arch, got, w)
	}
	gz, err := os.ReadFile(filepath.Join(root, "usr/share/man/man1/gorping.1.gz"))
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	man, _ := io.ReadAll(zr)
	if !bytes.HasPrefix(man, []byte(".nh\n.TH gorping 1 \"\" \"gorping "+w.version+"\"")) {
		t.Errorf("man page header: %.80q", man)
	}
	if arch != "amd64" {
		return // the scripts are the same files in every package; amd64 can print them
	}
	for file, shell := range map[string]string{
		"usr/share/bash-completion/completions/gorping":    "bash",
		strings.TrimPrefix(zshDir, "/") + "/_gorping":      "zsh",
		"usr/share/fish/vendor_completions.d/gorping.fish": "fish",
	} {
		got, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Error(err)
			continue
		}
		if w := run(t, bin, "completion", shell); string(got) != w {
			t.Errorf("%s is not what `gorping completion %s` prints", file, shell)
		}
	}
}

func TestDeb(t *testing.T) {
	dpkgDeb := need(t, "dpkg-deb", "dpkg")
	dir, w := artifacts(t), want(t)
	wantFiles := append(slices.Clone(packaged),
		UnitDir+"/"+MeshUnit,
		"/usr/share/doc/gorping/changelog.Debian.gz",
		"/usr/share/doc/gorping/copyright",
		"/usr/share/lintian/overrides/gorping",
		"/usr/share/zsh/vendor-completions/_gorping")
	sort.Strings(wantFiles)
	var debs []string
	for _, arch := range Arches {
		deb := one(t, filepath.Join(dir, "gorping_*_"+arch+".deb"))
		debs = append(debs, deb)
		t.Run(arch, func(t *testing.T) {
			fields := map[string]string{}
			for _, f := range []string{"Package", "Version", "Architecture", "Depends", "Pre-Depends", "Recommends"} {
				fields[f] = strings.TrimSpace(run(t, dpkgDeb, "-f", deb, f))
			}
			if fields["Package"] != "gorping" || fields["Version"] != DebVersion(w.version) || fields["Architecture"] != arch {
				t.Errorf("control: %q, want gorping %s %s", fields, DebVersion(w.version), arch)
			}
			// No dependency at all: rdma-core is not needed, the binary is static.
			if fields["Depends"]+fields["Pre-Depends"]+fields["Recommends"] != "" {
				t.Errorf("dependencies: %q", fields)
			}
			var files []string
			for _, l := range strings.Split(run(t, dpkgDeb, "-c", deb), "\n") {
				f := strings.Fields(l)
				if len(f) == 6 && !strings.HasPrefix(f[0], "d") {
					files = append(files, strings.TrimPrefix(f[5], "."))
					if f[1] != "root/root" {
						t.Errorf("%s owned by %s", f[5], f[1])
					}
					if (f[5] == "./usr/bin/gorping") != (f[0] == "-rwxr-xr-x") || f[0] != "-rwxr-xr-x" && f[0] != "-rw-r--r--" {
						t.Errorf("%s mode %s", f[5], f[0])
					}
				}
			}
			sort.Strings(files)
			if !slices.Equal(files, wantFiles) {
				t.Errorf("dpkg-deb -c: %q, want %q", files, wantFiles)
			}
			root := t.TempDir()
			run(t, dpkgDeb, "-x", deb, root)
			checkTree(t, root, arch, "/usr/share/zsh/vendor-completions", w)
			checkService(t, root, UnitDir)
			// The configuration is the admin's: conffiles, kept on upgrade.
			ctl := t.TempDir()
			run(t, dpkgDeb, "-e", deb, ctl)
			conffiles, _ := os.ReadFile(filepath.Join(ctl, "conffiles"))
			if got := strings.Fields(string(conffiles)); !slices.Equal(got, []string{MeshDefaults, MeshTargets}) {
				t.Errorf("conffiles %q, want %s and %s", got, MeshDefaults, MeshTargets)
			}
			// A Debian service package: the maintainer scripts of files/deb (scripts_test.go
			// runs them), executable.
			for name, want := range scripts {
				got, err := os.ReadFile(filepath.Join(ctl, name))
				fi, _ := os.Stat(filepath.Join(ctl, name))
				if err != nil || !bytes.Equal(got, want) || fi.Mode().Perm() != 0o755 {
					t.Errorf("control %s: %v, mode %v, the same as files/deb/%s: %v", name, err, fi.Mode(), name, bytes.Equal(got, want))
				}
			}
			// Who to ask and where to look: no placeholder.
			maint := strings.TrimSpace(run(t, dpkgDeb, "-f", deb, "Maintainer"))
			home := strings.TrimSpace(run(t, dpkgDeb, "-f", deb, "Homepage"))
			if m := os.Getenv("MAINTAINER"); m != "" && maint != m || m == "" && maint != Maintainer || strings.Contains(maint, ".invalid") {
				t.Errorf("Maintainer %q, want %q", maint, Maintainer)
			}
			if home != homepage {
				t.Errorf("Homepage %q, want %q", home, homepage)
			}
			cr, _ := os.ReadFile(filepath.Join(root, "usr/share/doc/gorping/copyright"))
			if !bytes.Contains(cr, []byte("\nLicense: Expat\n")) || !bytes.Contains(cr, []byte("Permission is hereby granted")) {
				t.Errorf("copyright: %q", cr)
			}
		})
	}
	t.Run("lintian", func(t *testing.T) {
		lintian := need(t, "lintian", "lintian")
		out, err := exec.Command(lintian, append([]string{"--fail-on", "error,warning"}, debs...)...).CombinedOutput()
		var tags []string
		for _, l := range strings.Split(string(out), "\n") {
			if l != "" && !strings.Contains(l, "running with root privileges") {
				tags = append(tags, l)
			}
		}
		if err != nil || len(tags) > 0 {
			t.Errorf("lintian: %v\n%s", err, strings.Join(tags, "\n"))
		}
	})
}

func TestRPM(t *testing.T) {
	rpm := need(t, "rpm", "rpm")
	rpm2cpio := need(t, "rpm2cpio", "rpm2cpio")
	cpio := need(t, "cpio", "cpio")
	dir, w := artifacts(t), want(t)
	wantFiles := append(slices.Clone(packaged), UnitDir+"/"+MeshUnit,
		"/usr/share/licenses/gorping/LICENSE", "/usr/share/zsh/site-functions/_gorping")
	sort.Strings(wantFiles)
	for _, arch := range Arches {
		rpmArch := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[arch]
		pkg := one(t, filepath.Join(dir, "gorping-*."+rpmArch+".rpm"))
		t.Run(arch, func(t *testing.T) {
			v, rel := RPMVersion(w.version)
			if got, want := run(t, rpm, "-qp", "--qf", "%{NAME} %{VERSION} %{RELEASE} %{ARCH} %{LICENSE}", pkg), fmt.Sprintf("gorping %s %s %s MIT", v, rel, rpmArch); got != want {
				t.Errorf("rpm -qp: %q, want %q", got, want)
			}
			if req := strings.TrimSpace(run(t, rpm, "-qpR", pkg)); req != "" {
				t.Errorf("requires %q, want nothing", req)
			}
			files := strings.Fields(run(t, rpm, "-qlp", pkg))
			sort.Strings(files)
			if !slices.Equal(files, wantFiles) {
				t.Errorf("rpm -qlp: %q, want %q", files, wantFiles)
			}
			// rpmpack writes absolute names into the payload: never extract them as such.
			root := t.TempDir()
			cmd := exec.Command("sh", "-c", `"$1" "$2" | (cd "$3" && "$4" -idm --quiet --no-absolute-filenames)`, "sh", rpm2cpio, pkg, root, cpio)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("rpm2cpio | cpio: %v\n%s", err, out)
			}
			checkTree(t, root, arch, "/usr/share/zsh/site-functions", w)
			checkService(t, root, UnitDir)
			if cfg := strings.Fields(run(t, rpm, "-qpc", pkg)); !slices.Equal(cfg, []string{MeshDefaults, MeshTargets}) {
				t.Errorf("rpm -qpc: %q, want %s and %s", cfg, MeshDefaults, MeshTargets)
			}
		})
	}
}

func TestImage(t *testing.T) {
	dir, w := artifacts(t), want(t)
	layoutDir := filepath.Join(dir, "oci")
	archive := one(t, filepath.Join(dir, "gorping-*-oci.tar"))
	for _, arch := range Arches {
		t.Run(arch, func(t *testing.T) {
			out := t.TempDir()
			cfg, err := Unpack(layoutDir, arch, out)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(cfg.Entrypoint, []string{"/usr/bin/gorping"}) || cfg.User != "65532:65532" {
				t.Errorf("entrypoint %q user %q", cfg.Entrypoint, cfg.User)
			}
			for k, v := range map[string]string{
				"org.opencontainers.image.version":  w.version,
				"org.opencontainers.image.revision": w.commit,
				"org.opencontainers.image.source":   "https://github.com/gorping/gorping",
			} {
				if cfg.Labels[k] != v {
					t.Errorf("label %s = %q, want %q", k, cfg.Labels[k], v)
				}
			}
			// The flattened file system: the binary and the license, nothing else.
			root := filepath.Join(out, "root")
			files := untar(t, filepath.Join(out, "image-rootfs-"+arch+".tar"), root)
			if want := []string{"usr/bin/gorping", "usr/share/doc/gorping/LICENSE"}; !slices.Equal(files, want) {
				t.Errorf("image files %q, want %q", files, want)
			}
			bin := filepath.Join(root, "usr/bin/gorping")
			checkStatic(t, bin, arch)
			if got := binaryStamp(t, bin, arch); got != w {
				t.Errorf("image's binary says %+v, want %+v (the labels')", got, w)
			}
		})
	}
	// skopeo, the tool that copies it to a registry, reads the archive the same way.
	t.Run("skopeo", func(t *testing.T) {
		skopeo := need(t, "skopeo", "skopeo")
		var idx struct {
			MediaType string
			Manifests []struct {
				Platform struct{ OS, Architecture string }
			}
		}
		if err := json.Unmarshal([]byte(run(t, skopeo, "inspect", "--raw", "oci-archive:"+archive)), &idx); err != nil {
			t.Fatal(err)
		}
		var plats []string
		for _, m := range idx.Manifests {
			plats = append(plats, m.Platform.OS+"/"+m.Platform.Architecture)
		}
		if idx.MediaType != "application/vnd.oci.image.index.v1+json" || !slices.Equal(plats, []string{"linux/amd64", "linux/arm64"}) {
			t.Errorf("index %s with %q", idx.MediaType, plats)
		}
		for _, arch := range Arches {
			var cfg struct {
				Architecture string
				Config       struct {
					User   string
					Labels map[string]string
				}
			}
			raw := run(t, skopeo, "inspect", "--override-os", "linux", "--override-arch", arch, "--config", "oci-archive:"+archive)
			if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
				t.Fatal(err)
			}
			if cfg.Architecture != arch || cfg.Config.User != "65532:65532" || cfg.Config.Labels["org.opencontainers.image.version"] != w.version {
				t.Errorf("skopeo %s config: %s", arch, raw)
			}
		}
	})
}

// untar extracts regular files of a tar into dir and returns their names, sorted.
func untar(t *testing.T, file, dir string) []string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	var names []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		names = append(names, h.Name)
		p := filepath.Join(dir, h.Name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		b, _ := io.ReadAll(tr)
		if err := os.WriteFile(p, b, fs.FileMode(h.Mode)); err != nil {
			t.Fatal(err)
		}
	}
	sort.Strings(names)
	return names
}

// make install puts the files where PREFIX says, under DESTDIR; make uninstall removes
// every one of them.
func TestMakeInstall(t *testing.T) {
	w := want(t)
	dest := t.TempDir()
	// The version of the release under test: the tree may have changed since make began.
	vars := []string{"DESTDIR=" + dest, "PREFIX=/opt/gp", "VERSION=" + w.version, "COMMIT=" + w.commit}
	if out, err := exec.Command("make", append([]string{"-C", repoRoot, "-s", "install"}, vars...)...).CombinedOutput(); err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	got := map[string]fs.FileMode{}
	filepath.WalkDir(dest, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			info, _ := d.Info()
			rel, _ := filepath.Rel(dest, p)
			got["/"+rel] = info.Mode()
		}
		return nil
	})
	wantTree := map[string]fs.FileMode{
		"/opt/gp/bin/gorping":                                  0o755,
		"/opt/gp/share/man/man1/gorping.1":                     0o644,
		"/opt/gp/share/bash-completion/completions/gorping":    0o644,
		"/opt/gp/share/zsh/site-functions/_gorping":            0o644,
		"/opt/gp/share/fish/vendor_completions.d/gorping.fish": 0o644,
	}
	if fmt.Sprint(got) != fmt.Sprint(wantTree) {
		t.Errorf("installed %v, want %v", got, wantTree)
	}
	if s := binaryStamp(t, filepath.Join(dest, "opt/gp/bin/gorping"), runtimeArch()); s != w {
		t.Errorf("installed binary says %+v, want %+v", s, w)
	}
	// man finds the page by its path and renders it.
	if man, err := exec.LookPath("man"); err == nil {
		out, err := exec.Command(man, "-l", filepath.Join(dest, "opt/gp/share/man/man1/gorping.1")).Output()
		if err != nil || !bytes.Contains(out, []byte("drop-in replacement for rping")) {
			t.Errorf("man -l: %v %.200q", err, out)
		}
	}
	if out, err := exec.Command("make", append([]string{"-C", repoRoot, "-s", "uninstall"}, vars...)...).CombinedOutput(); err != nil {
		t.Fatalf("make uninstall: %v\n%s", err, out)
	}
	var left []string
	filepath.WalkDir(dest, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			left = append(left, p)
		}
		return nil
	})
	if len(left) > 0 {
		t.Errorf("make uninstall left %q", left)
	}
}

func runtimeArch() string { return runtime.GOARCH }
