package vm

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode"
)

// Timeouts bound every step of a guest run.
type Timeouts struct {
	Fetch, Build time.Duration
	Deadlines
}

// DefaultTimeouts are generous for a 2-core TCG host that other jobs share:
// measured boots take 5-20 s (arm64 the slowest).
func DefaultTimeouts(arch string) Timeouts {
	t := Timeouts{
		Fetch: 15 * time.Minute,
		Build: 5 * time.Minute,
		Deadlines: Deadlines{
			Boot: 2 * time.Minute, Setup: 2 * time.Minute, Run: 10 * time.Minute, Shutdown: 30 * time.Second,
		},
	}
	if arch == "arm64" {
		t.Boot *= 2
		t.Setup *= 2
	}
	return t
}

// Options describe one guest run.
type Options struct {
	Target
	ModuleRoot string   // the gorping module's directory
	Pkgs       []string // Go packages whose guest-tagged tests run, in order
	TestRun    string   // -test.run regexp
	TestSkip   string   // -test.skip regexp
	TestCount  int      // -test.count (repeat each test), when over 1
	Cmd        string   // run this shell command instead of the tests
	// After is a shell script run in the same boot after the tests; its exit status
	// counts as a test binary's (guestrun -after-script: make test's release checks
	// in the matrix's bookworm/amd64 guest, saving a boot).
	After       string
	Timeouts    Timeouts
	Refresh     bool // re-resolve packages even if the cache is complete
	Interactive bool // our stdin goes to the guest console (with Cmd, e.g. "sh")
	Keep        bool // keep the work directory (initramfs, binaries)
	CacheRoot   string
	Siw         SiwVariant // experiments only: which siw.ko to build
	// KernelFlavour boots another kernel of the architecture ("16k": arm64's 16 KiB
	// pages; see Fetcher.KernelFlavour).
	KernelFlavour string
	Out           io.Writer // progress and the guest console, prefixed "[suite/arch] "

	// Files are host files added to the initramfs (guestrun -add).
	Files []GuestFile
}

// Report is the outcome of a run.
type Report struct {
	Target
	Result
	Step         Step   // where an infrastructure failure happened ("" if none)
	Payload      string // "tests" or "cmd": what the run step ran
	Fetch, Build time.Duration
	SiwWhy       string // why the guest had no siw device ("" if it had one)
	// Failures are the console's failure lines (go test's "--- FAIL" with
	// the log lines under it, panics, failed test binaries), repeated in the
	// matrix summary so a CI log's tail says what failed, not only where.
	Failures []string
}

// Passed reports whether the guest ran the payload and it exited 0.
func (r Report) Passed() bool { return r.Err == nil && r.Status == 0 }

// ExitCode is guestrun's exit status for this run: the payload's own status when
// the guest reported one, ExitInfra when the test bed failed first.
func (r Report) ExitCode() int {
	switch {
	case r.Err != nil:
		return ExitInfra
	case r.Status > 0 && r.Status < 256:
		return r.Status
	case r.Status != 0:
		return 1
	}
	return 0
}

// Verdict is the one-line summary of the run.
func (r Report) Verdict() string {
	kernel := ""
	if r.Kernel != "" {
		kernel = " kernel " + r.Kernel
	}
	times := fmt.Sprintf("boot %.1fs, setup %.1fs, %s %.1fs", r.Boot.Seconds(), r.Setup.Seconds(), r.Payload, r.Run.Seconds())
	if r.SiwWhy != "" {
		times += "; siw NOT AVAILABLE: " + r.SiwWhy
	}
	switch {
	case r.Err != nil:
		return fmt.Sprintf("guest %s%s: ERROR in step %s: %v", r.Target, kernel, r.Step, r.Err)
	case r.Status == 0:
		return fmt.Sprintf("guest %s%s: PASS (%s)", r.Target, kernel, times)
	default:
		return fmt.Sprintf("guest %s%s: FAIL, exit status %d (%s)", r.Target, kernel, r.Status, times)
	}
}

// Run fetches, builds, boots and reports one guest. Every step has a deadline,
// and qemu is killed on every way out (including ctx being cancelled by a signal).
func Run(ctx context.Context, o Options) (rep Report) {
	rep = Report{Target: o.Target, Result: Result{Status: -1}, Payload: "tests"}
	if o.Cmd != "" {
		rep.Payload = "cmd"
	}
	pfx := "[" + o.Target.String() + "] "
	log := &prefixWriter{w: o.Out, prefix: pfx}
	defer log.Flush()
	fail := func(step Step, err error) Report {
		rep.Step, rep.Err = step, err
		return rep
	}

	// 1. Packages.
	start := time.Now()
	fctx, cancel := stepContext(ctx, StepFetch, o.Timeouts.Fetch)
	f := &Fetcher{Target: o.Target, KernelFlavour: o.KernelFlavour, Root: o.CacheRoot, Refresh: o.Refresh, Log: log}
	rootfs, err := f.Fetch(fctx)
	cancel()
	rep.Fetch = time.Since(start)
	if err != nil {
		return fail(StepFetch, stepErr(fctx, err))
	}
	defer rootfs.Release()
	rep.Kernel = rootfs.Manifest.Kernel

	// 2. Binaries and initramfs.
	start = time.Now()
	bctx, cancel := stepContext(ctx, StepBuild, o.Timeouts.Build)
	work, img, err := build(bctx, o, rootfs, log)
	rep.SiwWhy = img.siwWhy
	cancel()
	if work != "" && !o.Keep {
		defer os.RemoveAll(work)
	}
	rep.Build = time.Since(start)
	if err != nil {
		return fail(StepBuild, stepErr(bctx, err))
	}
	rootfs.Release() // the image holds copies now
	if o.Keep {
		fmt.Fprintf(log, "work directory kept: %s\n", work)
	}

	// 3. Boot and follow the console.
	kvm, why := KVMUsable(o.Arch)
	accel := "KVM"
	if !kvm {
		accel = "TCG (no KVM: " + why + ")"
	}
	q := QEMU{Arch: o.Arch, Kernel: img.kernel, Initrd: img.initrd, MemoryMB: 1024, CPUs: 2, KVM: kvm, Interactive: o.Interactive}
	fmt.Fprintf(log, "booting kernel %s with %s, initramfs %d files, %.1f MiB\n", rep.Kernel, accel, img.files, float64(img.size)/(1<<20))
	log.Flush()
	guest, err := q.Start(ctx, &prefixWriter{w: o.Out, prefix: pfx + "qemu: "})
	if err != nil {
		return fail(StepBoot, err)
	}
	defer guest.Kill()
	var failures failureLog
	failures.marker = MarkerPrefix(img.nonce)
	res := Supervise(ctx, guest.Lines, NewClassifier(img.nonce), o.Timeouts.Deadlines, func(line string) {
		failures.add(line)
		if !o.Interactive { // interactive: qemu.Start passes the console through raw
			log.Line(line)
		}
	})
	rep.Failures = failures.lines
	guest.Kill()
	if res.Kernel == "" {
		res.Kernel = rep.Kernel
	}
	rep.Result = res
	if res.Err != nil {
		rep.Step = failedStep(res)
		if s := guest.Stderr(); s != "" && strings.Contains(res.Err.Error(), "qemu exited") {
			rep.Err = fmt.Errorf("%w; qemu said: %s", res.Err, s)
		}
	}
	return rep
}

// failedStep names the guest step a failure belongs to.
func failedStep(r Result) Step {
	var te *TimeoutError
	switch {
	case errors.As(r.Err, &te):
		return te.Step
	case r.Setup > 0 || r.Run > 0:
		return StepRun
	case r.Boot > 0:
		return StepSetup
	}
	return StepBoot
}

// stepContext bounds a host-side step; its cause names the step.
func stepContext(ctx context.Context, step Step, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, d, &TimeoutError{Step: step, Limit: d})
}

// stepErr prefers the step's timeout over the error the timeout provoked.
func stepErr(ctx context.Context, err error) error {
	var te *TimeoutError
	if c := context.Cause(ctx); errors.As(c, &te) {
		return fmt.Errorf("%w (%v)", te, err)
	}
	return err
}

type image struct {
	kernel, initrd, nonce string
	siwWhy                string
	files                 int
	size                  int64
}

// build compiles gorping and the guest tests for the target and packs the
// initramfs. It returns the work directory (to remove) even on failure.
func build(ctx context.Context, o Options, r *Rootfs, log io.Writer) (string, image, error) {
	var img image
	work, err := os.MkdirTemp("", "gorping-guest-"+o.Suite+"-"+o.Arch+"-")
	if err != nil {
		return "", img, fmt.Errorf("work directory: %w", err)
	}
	gorun := goRunner(ctx, o.ModuleRoot, o.Arch)

	extra := []GuestFile{}
	gorping := filepath.Join(work, "gorping")
	if _, err := gorun("build", "-o", gorping, "."); err != nil {
		return work, img, err
	}
	extra = append(extra, GuestFile{Path: GuestGorping, Host: gorping, Mode: 0o755})
	extra = append(extra, o.Files...)

	spec := InitSpec{
		Nonce:        nonce(),
		SetupTimeout: o.Timeouts.Setup * 3 / 4, // report rxe trouble before the host gives up
		TestRun:      o.TestRun,
		TestSkip:     o.TestSkip,
		TestCount:    o.TestCount,
		TestTimeout:  o.Timeouts.Run - 15*time.Second,
		Cmd:          o.Cmd,
	}
	if spec.TestTimeout < time.Second {
		spec.TestTimeout = o.Timeouts.Run
	}
	if o.Cmd != "" {
		extra = append(extra, GuestFile{Path: "/guest/cmd.sh", Data: []byte(o.Cmd + "\n"), Mode: 0o755})
	} else {
		if o.After != "" {
			extra = append(extra, GuestFile{Path: GuestAfterScript, Data: []byte(o.After + "\n"), Mode: 0o755})
			spec.After = GuestAfterScript
		}
		modPath, err := gorun("list", "-m")
		if err != nil {
			return work, img, err
		}
		var pkgs []string
		if len(o.Pkgs) == 1 && o.Pkgs[0] == "all" {
			pkgs, err = guestPackages(gorun, strings.TrimSpace(string(modPath)))
		} else {
			// Only packages with test files; go list keeps the order given.
			var out []byte
			out, err = gorun(append([]string{"list", "-tags", "guest", "-f",
				"{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}"}, o.Pkgs...)...)
			pkgs = strings.Fields(string(out))
		}
		if err != nil {
			return work, img, err
		}
		fmt.Fprintf(log, "guest test packages: %s\n", strings.Join(pkgs, " "))
		hostTests, err := hostOnlyTests(gorun, pkgs)
		if err != nil {
			return work, img, err
		}
		for _, pkg := range pkgs {
			name := TestName(strings.TrimSpace(string(modPath)), pkg)
			bin := filepath.Join(work, name+".test")
			if _, err := gorun("test", "-c", "-tags", "guest", "-o", bin, pkg); err != nil {
				return work, img, err
			}
			extra = append(extra, GuestFile{Path: "/guest/tests/" + name + ".test", Host: bin, Mode: 0o755})
			gt := GuestTest{Name: name, Path: "/guest/tests/" + name + ".test"}
			if h := hostTests[pkg]; len(h) > 0 {
				gt.Skip = hostTestsSkip(o.TestSkip, h)
				fmt.Fprintf(log, "%s: %d host tests left out (no guest tag; make unit runs them): %s\n", name, len(h), strings.Join(h, " "))
			}
			spec.Tests = append(spec.Tests, gt)
		}
		if len(spec.Tests) == 0 {
			return work, img, fmt.Errorf("no guest tests in %s (nothing to run is not a pass)", strings.Join(o.Pkgs, " "))
		}
	}

	var modDir string
	img.kernel, modDir = kernelPaths(r)
	steps, notes, err := PlanModules(modDir, RDMAModules)
	if err != nil {
		return work, img, err
	}
	siw, err := BuildSiw(ctx, r, o.Siw, log)
	if err != nil {
		return work, img, err
	}
	if siw.Ko != nil {
		if steps, err = planSiw(modDir, steps, siw.Ko); err != nil {
			return work, img, err
		}
		spec.Siw = true
	} else {
		spec.SiwWhy, img.siwWhy = siw.Why, siw.Why
		fmt.Fprintf(log, "*** siw: NOT AVAILABLE for %s: %s; the siw tests will say so ***\n", o.Target, siw.Why)
	}
	spec.Modules = steps
	names := make([]string, len(steps))
	for i, s := range steps {
		names[i] = s.Name
	}
	fmt.Fprintf(log, "modules: %s\n", strings.Join(names, " "))
	for _, n := range notes {
		fmt.Fprintf(log, "modules: %s\n", n)
	}
	initScript, err := InitScript(spec)
	if err != nil {
		return work, img, err
	}
	im := &Image{Target: o.Target, Rootfs: r, Modules: steps, Init: initScript, Extra: extra}
	img.initrd = filepath.Join(work, "initramfs.cpio.gz")
	if img.files, err = im.Write(img.initrd); err != nil {
		return work, img, err
	}
	if st, err := os.Stat(img.initrd); err == nil {
		img.size = st.Size()
	}
	img.nonce = spec.Nonce
	return work, img, nil
}

// goRunner runs the go command in the module for a CGO_ENABLED=0 linux/arch
// build; errors carry go's stderr.
func goRunner(ctx context.Context, moduleRoot, arch string) func(args ...string) ([]byte, error) {
	goEnv := append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	return func(args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir, cmd.Env = moduleRoot, goEnv
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return out, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return out, nil
	}
}

// kernelPaths are the fetched kernel image and its modules directory.
func kernelPaths(r *Rootfs) (kernel, modDir string) {
	kdir := r.PkgDir(r.Manifest.KernelPackage)
	kernel = filepath.Join(kdir, "boot", "vmlinuz-"+r.Manifest.Kernel)
	modDir = filepath.Join(kdir, "lib", "modules", r.Manifest.Kernel)
	if _, err := os.Stat(modDir); err != nil {
		modDir = filepath.Join(kdir, "usr", "lib", "modules", r.Manifest.Kernel)
	}
	return kernel, modDir
}

// guestPackages finds the module's packages with guest-tagged tests: those whose
// test files differ with and without -tags guest. The sanity test (test/guest)
// runs first: if stock rping fails, nothing after it means anything.
func guestPackages(gorun func(...string) ([]byte, error), module string) ([]string, error) {
	const f = "{{.ImportPath}} {{.TestGoFiles}} {{.XTestGoFiles}}"
	plain, err := gorun("list", "-e", "-f", f, "./...")
	if err != nil {
		return nil, err
	}
	tagged, err := gorun("list", "-e", "-tags", "guest", "-f", f, "./...")
	if err != nil {
		return nil, err
	}
	return diffGuestPackages(string(plain), string(tagged), module+"/test/guest"), nil
}

// diffGuestPackages compares two `go list` outputs (a line per package: import
// path, then its test files) and returns the packages that gain a test file with
// the tag, first first. Files the tag removes (`//go:build !guest`) don't count.
func diffGuestPackages(plain, tagged, first string) []string {
	files := func(out string) map[string]map[string]bool {
		m := map[string]map[string]bool{}
		for _, l := range strings.Split(out, "\n") {
			f := strings.Fields(strings.NewReplacer("[", " ", "]", " ").Replace(l))
			if len(f) == 0 {
				continue
			}
			m[f[0]] = map[string]bool{}
			for _, name := range f[1:] {
				m[f[0]][name] = true
			}
		}
		return m
	}
	before := files(plain)
	var pkgs []string
	for _, l := range strings.Split(tagged, "\n") {
		f := strings.Fields(strings.NewReplacer("[", " ", "]", " ").Replace(l))
		if len(f) == 0 {
			continue
		}
		gained := false
		for _, name := range f[1:] {
			gained = gained || !before[f[0]][name]
		}
		switch {
		case !gained:
		case f[0] == first:
			pkgs = append([]string{f[0]}, pkgs...)
		default:
			pkgs = append(pkgs, f[0])
		}
	}
	return pkgs
}

// hostOnlyTests names, per package, the top-level tests, fuzz tests and examples in
// the test files that the guest tag does not bring: host tests (fakes, models, the
// command line), which make unit and unit-arm64 run; in a guest they repeat the host's
// assertions under TCG in every guest. A package none of whose test files needs the
// tag is left alone: asked for by name, it runs in full.
func hostOnlyTests(gorun func(...string) ([]byte, error), pkgs []string) (map[string][]string, error) {
	const f = "{{.ImportPath}} {{.Dir}} {{.TestGoFiles}} {{.XTestGoFiles}}"
	if len(pkgs) == 0 {
		return nil, nil
	}
	plain, err := gorun(append([]string{"list", "-e", "-f", f}, pkgs...)...)
	if err != nil {
		return nil, err
	}
	tagged, err := gorun(append([]string{"list", "-e", "-tags", "guest", "-f", f}, pkgs...)...)
	if err != nil {
		return nil, err
	}
	type files struct {
		dir   string
		names map[string]bool
	}
	parse := func(out []byte) map[string]files {
		m := map[string]files{}
		for _, l := range strings.Split(string(out), "\n") {
			fs := strings.Fields(strings.NewReplacer("[", " ", "]", " ").Replace(l))
			if len(fs) < 2 {
				continue
			}
			m[fs[0]] = files{fs[1], map[string]bool{}}
			for _, name := range fs[2:] {
				m[fs[0]].names[name] = true
			}
		}
		return m
	}
	before, after := parse(plain), parse(tagged)
	res := map[string][]string{}
	for pkg, a := range after {
		var host []string
		gained := false
		for name := range a.names {
			if !before[pkg].names[name] {
				gained = true
				continue
			}
			host = append(host, filepath.Join(a.dir, name))
		}
		if !gained {
			continue
		}
		var tests []string
		for _, file := range host {
			t, err := topLevelTests(file)
			if err != nil {
				return nil, err
			}
			tests = append(tests, t...)
		}
		sort.Strings(tests)
		if len(tests) > 0 {
			res[pkg] = tests
		}
	}
	return res, nil
}

// topLevelTests lists a test file's Test*, Fuzz* and Example* functions, by
// testing's own rule (the prefix, then nothing or not a lower-case letter).
func topLevelTests(file string) ([]string, error) {
	af, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, d := range af.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Recv != nil {
			continue
		}
		for _, prefix := range []string{"Test", "Fuzz", "Example"} {
			if rest, ok := strings.CutPrefix(fd.Name.Name, prefix); ok && (rest == "" || !unicode.IsLower(rune(rest[0]))) && fd.Name.Name != "TestMain" {
				names = append(names, fd.Name.Name)
			}
		}
	}
	return names, nil
}

// hostTestsSkip is a -test.skip leaving out the named top-level tests as well as
// what skip (the run's own -skip) leaves out: go test's -skip alternatives are
// matched per level, so "A|^(B|C)$" keeps A's meaning.
func hostTestsSkip(skip string, tests []string) string {
	re := "^(" + strings.Join(tests, "|") + ")$"
	if skip != "" {
		re = skip + "|" + re
	}
	return re
}

// TestName names a package's test binary in the guest: its import path relative
// to the module, "/" replaced by "_" ("test/guest" -> "test_guest").
func TestName(module, pkg string) string {
	rel := strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/")
	if rel == "" {
		return "gorping"
	}
	return strings.ReplaceAll(rel, "/", "_")
}

func nonce() string {
	b := make([]byte, 6)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// prefixWriter prefixes every line written through it; Line writes one whole
// line. It is safe for concurrent use (qemu's stderr and the console).
type prefixWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
	buf    []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			break
		}
		fmt.Fprintf(p.w, "%s%s\n", p.prefix, bytes.TrimRight(p.buf[:i], "\r"))
		p.buf = p.buf[i+1:]
	}
	return len(b), nil
}

// Line writes one line.
func (p *prefixWriter) Line(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "%s%s\n", p.prefix, s)
}

// Flush writes a pending partial line.
func (p *prefixWriter) Flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.buf) > 0 {
		fmt.Fprintf(p.w, "%s%s\n", p.prefix, p.buf)
		p.buf = nil
	}
}
