package vm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"
)

// Target is one guest flavour: a Debian suite and a Debian architecture.
type Target struct {
	Suite string // "bookworm", "trixie"
	Arch  string // "amd64", "arm64"
}

func (t Target) String() string { return t.Suite + "/" + t.Arch }

// Matrix is the set of guests the project tests on.
var Matrix = []Target{{"bookworm", "amd64"}, {"trixie", "amd64"}, {"bookworm", "arm64"}}

// ToolPackages are fetched whole; their shared libraries follow through apt's
// dependency graph (see libraryClosure), so suite-specific names such as
// librdmacm1t64 need no special casing.
var ToolPackages = []string{
	"busybox-static",    // /init and the guest's shell utilities
	"iproute2",          // ip, rdma
	"rdmacm-utils",      // rping, ucmatose
	"ibverbs-utils",     // ibv_devinfo, ibv_rc_pingpong
	"ibverbs-providers", // librxe, loaded by libibverbs at run time
	"perftest",          // ib_send_lat and friends
	"dpkg",              // dpkg -i / -r of gorping's own .deb (make guest-release)
	"libc-bin",          // ldconfig, which dpkg requires on PATH
	"tar",               // GNU tar, which dpkg-deb runs (busybox's lacks its options)
}

// CacheRoot is where fetched packages live: $GORPING_CACHE, else
// $XDG_CACHE_HOME/gorping, else ~/.cache/gorping.
func CacheRoot() (string, error) {
	if d := os.Getenv("GORPING_CACHE"); d != "" {
		return d, nil
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "gorping"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("cache directory: %w", err)
	}
	return filepath.Join(home, ".cache", "gorping"), nil
}

// Manifest records a complete fetch. Its presence (with every listed .deb and
// extracted directory in place) is what lets a later run skip apt entirely.
type Manifest struct {
	Suite         string
	Arch          string
	Kernel        string            // uname -r of the guest kernel, e.g. "6.1.0-57-amd64"
	KernelPackage string            // e.g. "linux-image-6.1.0-57-amd64"
	Debs          map[string]string // package name -> .deb file name in debs/
	Fetched       time.Time
}

// Rootfs is a fetched and extracted package set: every package is unpacked by
// `dpkg -x` into its own directory, so the initramfs builder knows which files came
// from which package.
type Rootfs struct {
	Dir      string // the cache directory of this target
	Manifest Manifest
	unlock   func()
}

// PkgDir is where package name was extracted.
func (r *Rootfs) PkgDir(name string) string { return filepath.Join(r.Dir, "pkgs", name) }

// Release drops the shared lock that keeps another run's -refresh from replacing
// the files while they are being packed.
func (r *Rootfs) Release() {
	if r.unlock != nil {
		r.unlock()
		r.unlock = nil
	}
}

// Fetcher downloads a target's packages with apt-get under a private apt
// configuration: its own sources.list, lists, cache and an empty dpkg status (so the
// host's installed packages don't satisfy, and thereby hide, dependencies). The
// system's apt configuration is never written.
type Fetcher struct {
	Target
	// KernelFlavour picks another kernel of the architecture: "" is the default
	// (linux-image-<arch>), "16k" arm64's 16 KiB-page kernel (linux-image-arm64-16k,
	// trixie). It has its own cache directory, <suite>-<arch>-<flavour>.
	KernelFlavour string
	Root          string  // CacheRoot()
	Mirrors       Mirrors // where to fetch from; zero: HostMirrors(), looked up only if needed
	Refresh       bool    // re-resolve and fetch what changed even when the cache is complete
	Log           io.Writer
}

const manifestName = "manifest.json"

// Fetch makes the target's packages available in the cache and returns them, with
// a shared lock held until Rootfs.Release.
func (f *Fetcher) Fetch(ctx context.Context) (*Rootfs, error) {
	dir := filepath.Join(f.Root, f.Suite+"-"+f.Arch+f.flavourSuffix())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create cache: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cache lock: %w", err)
	}
	// Exclusive while checking and updating, shared while the caller reads: several
	// guests (e.g. other developers' runs) may use one cache at a time.
	if err := flock(ctx, lock, syscall.LOCK_EX); err != nil {
		lock.Close()
		return nil, fmt.Errorf("cache lock: %w", err)
	}
	r := &Rootfs{Dir: dir, unlock: func() { lock.Close() }}
	if m, ok := f.complete(dir); ok && !f.Refresh {
		fmt.Fprintf(f.Log, "cache %s complete (kernel %s, fetched %s): nothing to download\n",
			dir, m.Kernel, m.Fetched.Format(time.RFC3339))
		r.Manifest = m
	} else if r.Manifest, err = f.fetch(ctx, dir); err != nil {
		r.Release()
		return nil, err
	}
	if err := flock(ctx, lock, syscall.LOCK_SH); err != nil {
		r.Release()
		return nil, fmt.Errorf("cache lock: %w", err)
	}
	return r, nil
}

// flavourSuffix is "-<flavour>", or "" for the default kernel.
func (f *Fetcher) flavourSuffix() string {
	if f.KernelFlavour == "" {
		return ""
	}
	return "-" + f.KernelFlavour
}

func flock(ctx context.Context, f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for another run to finish with the cache: %w", context.Cause(ctx))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// complete reports whether dir holds a finished fetch: a manifest whose every
// package has its .deb and an extraction stamp naming that .deb.
func (f *Fetcher) complete(dir string) (Manifest, bool) {
	var m Manifest
	b, err := os.ReadFile(filepath.Join(dir, manifestName))
	if err != nil || json.Unmarshal(b, &m) != nil || m.Kernel == "" || len(m.Debs) == 0 {
		return m, false
	}
	for _, p := range ToolPackages { // one added to the list since the fetch
		if _, ok := m.Debs[p]; !ok {
			return m, false
		}
	}
	for name, deb := range m.Debs {
		if _, err := os.Stat(filepath.Join(dir, "debs", deb)); err != nil {
			return m, false
		}
		if stamp, err := os.ReadFile(extractStamp(dir, name)); err != nil || string(stamp) != deb {
			return m, false
		}
	}
	return m, true
}

// cachedKernel returns the previous manifest if its kernel is still cached and
// extracted.
func (f *Fetcher) cachedKernel(dir string) (Manifest, bool) {
	var m Manifest
	b, err := os.ReadFile(filepath.Join(dir, manifestName))
	if err != nil || json.Unmarshal(b, &m) != nil || m.KernelPackage == "" {
		return m, false
	}
	deb := m.Debs[m.KernelPackage]
	if _, err := os.Stat(filepath.Join(dir, "debs", deb)); deb == "" || err != nil {
		return m, false
	}
	stamp, err := os.ReadFile(extractStamp(dir, m.KernelPackage))
	return m, err == nil && string(stamp) == deb
}

func extractStamp(dir, name string) string {
	return filepath.Join(dir, "pkgs", "."+name+".extracted")
}

// apt runs apt-get or apt-cache with the private configuration.
type apt struct {
	dir  string
	arch string
	log  io.Writer
}

func (a apt) opts() []string {
	o := []string{
		"-o", "Dir::Etc::SourceList=" + filepath.Join(a.dir, "sources.list"),
		"-o", "Dir::Etc::SourceParts=/dev/null",
		"-o", "Dir::State::Lists=" + filepath.Join(a.dir, "lists"),
		"-o", "Dir::State::status=" + filepath.Join(a.dir, "status"),
		"-o", "Dir::Cache=" + filepath.Join(a.dir, "cache"),
		"-o", "APT::Architecture=" + a.arch,
		"-o", "APT::Architectures=" + a.arch,
		// Only Packages indices are needed; skip translations and AppStream data.
		"-o", "Acquire::Languages=none",
		"-o", "Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false",
		"-o", "Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false",
		"-o", "Acquire::IndexTargets::deb::DEP-11-icons-hidpi::DefaultEnabled=false",
	}
	if os.Geteuid() == 0 {
		// apt drops to the _apt user for downloads, which cannot enter a cache under
		// root's home; the downloads are ours alone, so stay root and stay quiet.
		o = append(o, "-o", "APT::Sandbox::User=root")
	}
	return o
}

// run executes tool (apt-get / apt-cache) in workdir; stdout is returned, stderr
// is copied to the log.
func (a apt) run(ctx context.Context, workdir, tool string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, tool, append(a.opts(), args...)...)
	cmd.Dir = workdir
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = a.log
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("%s %s: %w", tool, strings.Join(args, " "), err)
	}
	return out.Bytes(), nil
}

func (f *Fetcher) fetch(ctx context.Context, dir string) (Manifest, error) {
	m := Manifest{Suite: f.Suite, Arch: f.Arch, Debs: map[string]string{}}
	if f.Mirrors.Main == "" {
		var err error
		if f.Mirrors, err = HostMirrors(); err != nil {
			return m, err
		}
	}
	a := apt{dir: filepath.Join(dir, "apt"), arch: f.Arch, log: f.Log}
	for _, d := range []string{"lists/partial", "cache/archives/partial"} {
		if err := os.MkdirAll(filepath.Join(a.dir, d), 0o755); err != nil {
			return m, fmt.Errorf("create apt dirs: %w", err)
		}
	}
	const keyring = "/usr/share/keyrings/debian-archive-keyring.gpg"
	src := fmt.Sprintf("deb [signed-by=%[4]s] %[1]s %[3]s main\ndeb [signed-by=%[4]s] %[1]s %[3]s-updates main\ndeb [signed-by=%[4]s] %[2]s %[3]s-security main\n",
		f.Mirrors.Main, f.Mirrors.Security, f.Suite, keyring)
	if err := os.WriteFile(filepath.Join(a.dir, "sources.list"), []byte(src), 0o644); err != nil {
		return m, fmt.Errorf("write private sources.list: %w", err)
	}
	if err := os.WriteFile(filepath.Join(a.dir, "status"), nil, 0o644); err != nil {
		return m, fmt.Errorf("write empty dpkg status: %w", err)
	}

	fmt.Fprintf(f.Log, "apt-get update (private configuration in %s)\n", a.dir)
	if _, err := a.run(ctx, a.dir, "apt-get", "update", "-q"); err != nil {
		return m, err
	}

	// The kernel: the metapackage points at the current ABI (it moves with
	// security updates), e.g. linux-image-amd64 -> linux-image-6.1.0-57-amd64,
	// linux-image-arm64-16k -> linux-image-6.12.…-arm64-16k.
	// Without -refresh a cache that only lacks a package added to ToolPackages keeps
	// its kernel: adding a tool must not change the kernel under other runs' feet.
	var keptKernel string
	if old, ok := f.cachedKernel(dir); ok && !f.Refresh {
		m.KernelPackage, m.Kernel, keptKernel = old.KernelPackage, old.Kernel, old.Debs[old.KernelPackage]
		fmt.Fprintf(f.Log, "keeping the cached kernel %s (-refresh updates it)\n", m.KernelPackage)
	} else {
		meta := "linux-image-" + f.Arch + f.flavourSuffix()
		out, err := a.run(ctx, a.dir, "apt-cache", "depends", meta)
		if err != nil {
			return m, err
		}
		for _, g := range ParseDepends(out)[meta] {
			if strings.HasPrefix(g[0], "linux-image-") {
				m.KernelPackage = g[0]
				break
			}
		}
		if m.KernelPackage == "" {
			return m, fmt.Errorf("%s: no linux-image dependency in %q", meta, out)
		}
		m.Kernel = strings.TrimPrefix(m.KernelPackage, "linux-image-")
	}

	pkgs, err := libraryClosure(ctx, a, ToolPackages)
	if err != nil {
		return m, err
	}
	if keptKernel != "" {
		m.Debs[m.KernelPackage] = keptKernel // cached and extracted: apt need not know it any more
	} else {
		pkgs = append(pkgs, m.KernelPackage)
	}

	// Ask apt which files it would download; fetch only those not yet cached.
	debs := filepath.Join(dir, "debs")
	if err := os.MkdirAll(debs, 0o755); err != nil {
		return m, fmt.Errorf("create debs dir: %w", err)
	}
	// In an empty directory: apt leaves out files already present in the
	// current one, and we need every package's file name.
	empty := filepath.Join(a.dir, "print-uris")
	if err := os.RemoveAll(empty); err != nil {
		return m, fmt.Errorf("clear %s: %w", empty, err)
	}
	if err := os.MkdirAll(empty, 0o755); err != nil {
		return m, fmt.Errorf("create %s: %w", empty, err)
	}
	out, err := a.run(ctx, empty, "apt-get", append([]string{"download", "--print-uris"}, pkgs...)...)
	if err != nil {
		return m, err
	}
	files := ParsePrintURIs(out)
	var missing []string
	for _, p := range pkgs {
		deb, ok := files[p]
		if !ok {
			return m, fmt.Errorf("apt-get download --print-uris did not list %s", p)
		}
		m.Debs[p] = deb
		if _, err := os.Stat(filepath.Join(debs, deb)); err != nil {
			missing = append(missing, p)
		}
	}
	fmt.Fprintf(f.Log, "%d packages, %d to download\n", len(pkgs), len(missing))
	if len(missing) > 0 {
		if _, err := a.run(ctx, debs, "apt-get", append([]string{"download", "-q"}, missing...)...); err != nil {
			return m, err
		}
	}

	// Unpack each package into its own directory; a stamp names the .deb it holds.
	for _, p := range pkgs {
		deb := m.Debs[p]
		if stamp, err := os.ReadFile(extractStamp(dir, p)); err == nil && string(stamp) == deb {
			continue
		}
		pd := filepath.Join(dir, "pkgs", p)
		if err := os.RemoveAll(pd); err != nil {
			return m, fmt.Errorf("clear %s: %w", pd, err)
		}
		if err := os.MkdirAll(pd, 0o755); err != nil {
			return m, fmt.Errorf("create %s: %w", pd, err)
		}
		cmd := exec.CommandContext(ctx, "dpkg", "-x", filepath.Join(debs, deb), pd)
		if out, err := cmd.CombinedOutput(); err != nil {
			return m, fmt.Errorf("dpkg -x %s: %w: %s", deb, err, out)
		}
		if err := os.WriteFile(extractStamp(dir, p), []byte(deb), 0o644); err != nil {
			return m, fmt.Errorf("write stamp: %w", err)
		}
	}
	pruneStale(dir, m)

	m.Fetched = time.Now().UTC()
	b, _ := json.MarshalIndent(m, "", "  ")
	tmp := filepath.Join(dir, manifestName+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return m, fmt.Errorf("write manifest: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, manifestName)); err != nil {
		return m, fmt.Errorf("write manifest: %w", err)
	}
	return m, nil
}

// pruneStale removes .debs and extracted packages a refresh replaced (an old
// kernel is ~400 MB unpacked). Failures only waste disk space.
func pruneStale(dir string, m Manifest) {
	keepDeb := map[string]bool{}
	for _, d := range m.Debs {
		keepDeb[d] = true
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "debs"))
	for _, e := range entries {
		if !keepDeb[e.Name()] {
			os.Remove(filepath.Join(dir, "debs", e.Name()))
		}
	}
	entries, _ = os.ReadDir(filepath.Join(dir, "pkgs"))
	for _, e := range entries {
		name := strings.TrimSuffix(strings.TrimPrefix(e.Name(), "."), ".extracted")
		if _, ok := m.Debs[name]; !ok {
			os.RemoveAll(filepath.Join(dir, "pkgs", e.Name()))
		}
	}
}

// isLibraryPackage tells which dependencies to follow: Debian names shared-library
// packages lib<name><soversion> (plus zlib1g). Helper packages of libraries
// (-bin, -common, -data, -modules) carry no libraries our binaries load.
func isLibraryPackage(name string) bool {
	if !strings.HasPrefix(name, "lib") && name != "zlib1g" {
		return false
	}
	for _, s := range []string{"-bin", "-common", "-data", "-modules", "-dev", "-doc"} {
		if strings.HasSuffix(name, s) {
			return false
		}
	}
	return true
}

// libraryClosure returns roots plus every library package reachable from them
// through Depends/Pre-Depends. The initramfs builder later takes only the files
// the binaries actually load (ELF DT_NEEDED), so a few extra packages cost disk
// space once, never boot time.
func libraryClosure(ctx context.Context, a apt, roots []string) ([]string, error) {
	seen := map[string]bool{}
	var all []string
	next := roots
	for len(next) > 0 {
		for _, p := range next {
			seen[p] = true
			all = append(all, p)
		}
		args := append([]string{"depends", "--no-recommends", "--no-suggests", "--no-conflicts",
			"--no-breaks", "--no-replaces", "--no-enhances"}, next...)
		out, err := a.run(ctx, a.dir, "apt-cache", args...)
		if err != nil {
			return nil, err
		}
		deps := ParseDepends(out)
		var level []string
		for _, p := range next {
			for _, group := range deps[p] {
				d := group[0]
				if !seen[d] && isLibraryPackage(d) && !slices.Contains(level, d) {
					level = append(level, d)
				}
			}
		}
		next = level
	}
	sort.Strings(all)
	return all, nil
}

// ParseDepends parses `apt-cache depends` output into package -> dependency
// groups. Each group lists the alternatives of one dependency ("a | b"), real
// packages only: virtual ones ("<debconf-2.0>") and their provider lines are dropped,
// and a group left empty is dropped.
func ParseDepends(out []byte) map[string][][]string {
	res := map[string][][]string{}
	var pkg string
	var group []string
	flush := func() {
		if pkg != "" && len(group) > 0 {
			res[pkg] = append(res[pkg], group)
		}
		group = nil
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		if line[0] != ' ' { // a new package
			flush()
			pkg = strings.TrimSpace(line)
			continue
		}
		if len(line) < 3 || line[2] == ' ' { // "    provider" of a virtual package
			continue
		}
		kind, name, ok := strings.Cut(strings.TrimSpace(line[2:]), ": ")
		if !ok || (kind != "Depends" && kind != "PreDepends") {
			continue
		}
		if !strings.HasPrefix(name, "<") {
			group = append(group, strings.TrimSpace(name))
		}
		if line[1] != '|' { // the group's last alternative
			flush()
		}
	}
	flush()
	return res
}

// ParsePrintURIs parses `apt-get download --print-uris` output
// ("'URI' file size hash") into package name -> file name. The package name is the
// file name up to its first '_' (name_version_arch.deb).
func ParsePrintURIs(out []byte) map[string]string {
	res := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || !strings.HasPrefix(f[0], "'") || !strings.HasSuffix(f[1], ".deb") {
			continue
		}
		name, _, _ := strings.Cut(f[1], "_")
		res[name] = f[1]
	}
	return res
}
