package vm

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// Debian's kernels are built without Soft-iWARP (CONFIG_RDMA_SIW unset), so the
// test bed builds siw.ko out of tree from the same Debian release's kernel
// source, against the guest kernel's own headers, with the compiler that kernel
// was built with. The result is cached per kernel next to the fetched packages.

// SiwModule is the outcome of BuildSiw: the module, or why there is none.
type SiwModule struct {
	Ko  []byte // the built siw.ko; nil when unavailable
	Why string // when Ko is nil: why this target has no siw, in one line
}

// siwDeps are loaded before siw.ko: its modinfo names libcrc32c, which asks the
// crypto API for "crc32c" at load time; without crc32c_generic that fails.
var siwDeps = []KernelModule{{"crc32c_generic", true}, {"libcrc32c", true}}

// SiwVariant selects an experimental build of siw.ko (guestrun's -siw-* flags),
// used to show the accept race and its fix; the zero value is the test bed's.
type SiwVariant struct {
	Unpatched   bool          // leave out the accept fix (patchSiwAccept)
	AcceptDelay time.Duration // busy-wait this long after siw_accept's MPA reply
}

// dir names the variant in the cache: the patch level is part of the path, so
// a module cached before a source patch changed is never mistaken for it.
func (v SiwVariant) dir() string {
	d := siwPatchLevel
	if v.Unpatched {
		d = "unpatched"
	}
	if v.AcceptDelay > 0 {
		d += fmt.Sprintf("-accept-delay-%dms", v.AcceptDelay.Milliseconds())
	}
	return d
}

// BuildSiw returns siw.ko for the fetched kernel, building it on first use.
// A target the host cannot build for (another architecture's kbuild tools, a
// compiler the host lacks) yields a SiwModule with Why set and no error; an
// error is a build that should have worked and did not.
func BuildSiw(ctx context.Context, r *Rootfs, v SiwVariant, log io.Writer) (SiwModule, error) {
	kernel := r.Manifest.Kernel
	dir := filepath.Join(r.Dir, "siw")
	out := filepath.Join(dir, kernel, v.dir(), "siw.ko")
	if v != (SiwVariant{}) {
		fmt.Fprintf(log, "siw: EXPERIMENT: variant %s of siw.ko, not the test bed's\n", v.dir())
	}
	if b, err := os.ReadFile(out); err == nil {
		fmt.Fprintf(log, "siw: %s cached\n", out)
		return SiwModule{Ko: b}, nil
	}
	// kbuild's helpers (fixdep, modpost) come as binaries of the target's
	// architecture: they run only on a host of that architecture.
	if runtime.GOARCH != r.Manifest.Arch {
		return SiwModule{Why: fmt.Sprintf("siw.ko for %s is built with that kernel's %s kbuild tools, which do not run on this %s host",
			kernel, r.Manifest.Arch, runtime.GOARCH)}, nil
	}
	if err := os.MkdirAll(filepath.Join(dir, "debs"), 0o755); err != nil {
		return SiwModule{}, fmt.Errorf("siw: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return SiwModule{}, fmt.Errorf("siw: lock: %w", err)
	}
	defer lock.Close()
	if err := flock(ctx, lock, syscall.LOCK_EX); err != nil {
		return SiwModule{}, fmt.Errorf("siw: lock: %w", err)
	}
	if b, err := os.ReadFile(out); err == nil { // another run built it meanwhile
		return SiwModule{Ko: b}, nil
	}

	a := apt{dir: filepath.Join(r.Dir, "apt"), arch: r.Manifest.Arch, log: log}
	headers := "linux-headers-" + kernel
	deps, err := a.run(ctx, a.dir, "apt-cache", "depends", headers)
	if err != nil {
		return SiwModule{}, fmt.Errorf("siw: %w", err)
	}
	pkgs := SiwPackages(headers, ParseDepends(deps)[headers])
	if pkgs.Kbuild == "" || pkgs.Common == "" || pkgs.Compiler == "" {
		return SiwModule{}, fmt.Errorf("siw: cannot tell %s's kbuild, common headers and compiler from %q", headers, deps)
	}
	if _, err := exec.LookPath(pkgs.Compiler); err != nil {
		return SiwModule{Why: fmt.Sprintf("kernel %s is built with %s, which this host lacks (install it to get siw)", kernel, pkgs.Compiler)}, nil
	}

	want := []string{pkgs.Headers, pkgs.Common, pkgs.Kbuild, pkgs.Source}
	debs, err := download(ctx, a, filepath.Join(dir, "debs"), want)
	if err != nil {
		return SiwModule{}, fmt.Errorf("siw: %w", err)
	}
	fmt.Fprintf(log, "siw: building siw.ko for %s with %s from %s\n", kernel, pkgs.Compiler, debs[pkgs.Source])
	ko, err := buildSiw(ctx, dir, kernel, pkgs, debs, v, log)
	if err != nil {
		return SiwModule{}, fmt.Errorf("siw: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return SiwModule{}, fmt.Errorf("siw: %w", err)
	}
	if err := os.WriteFile(out+".tmp", ko, 0o644); err != nil {
		return SiwModule{}, fmt.Errorf("siw: %w", err)
	}
	if err := os.Rename(out+".tmp", out); err != nil {
		return SiwModule{}, fmt.Errorf("siw: %w", err)
	}
	return SiwModule{Ko: ko}, nil
}

// SiwPkgs names the packages an out-of-tree build of siw needs.
type SiwPkgs struct {
	Headers, Common, Kbuild, Source string
	Compiler                        string // the compiler's command, e.g. "gcc-12"
}

// SiwPackages reads them off the headers package's dependencies, e.g.
// linux-headers-6.1.0-57-common, linux-kbuild-6.1 and linux-compiler-gcc-12-x86
// (trixie: linux-kbuild-6.12.118+deb13 and gcc-14); the source package is named
// after kbuild's major.minor version (linux-source-6.1, linux-source-6.12).
func SiwPackages(headers string, deps [][]string) SiwPkgs {
	p := SiwPkgs{Headers: headers}
	for _, g := range deps {
		switch d := g[0]; {
		case strings.HasPrefix(d, "linux-headers-") && strings.HasSuffix(d, "-common"):
			p.Common = d
		case strings.HasPrefix(d, "linux-kbuild-"):
			// linux-kbuild-6.1 (bookworm), linux-kbuild-6.12.118+deb13 (trixie):
			// the source package is named after major.minor.
			p.Kbuild = d
			ver := strings.Split(strings.TrimPrefix(d, "linux-kbuild-"), ".")
			p.Source = "linux-source-" + strings.Join(ver[:min(2, len(ver))], ".")
		case strings.HasPrefix(d, "linux-compiler-gcc-"):
			// bookworm: linux-compiler-gcc-12-x86 -> gcc-12
			ver, _, _ := strings.Cut(strings.TrimPrefix(d, "linux-compiler-gcc-"), "-")
			p.Compiler = "gcc-" + ver
		case strings.HasPrefix(d, "gcc-"): // trixie names the compiler itself
			p.Compiler = d
		}
	}
	return p
}

// download fetches the packages not yet in dir and returns package -> .deb file.
func download(ctx context.Context, a apt, dir string, pkgs []string) (map[string]string, error) {
	empty := filepath.Join(a.dir, "print-uris")
	os.RemoveAll(empty)
	if err := os.MkdirAll(empty, 0o755); err != nil {
		return nil, err
	}
	out, err := a.run(ctx, empty, "apt-get", append([]string{"download", "--print-uris"}, pkgs...)...)
	if err != nil {
		return nil, err
	}
	files := ParsePrintURIs(out)
	res := map[string]string{}
	var missing []string
	for _, p := range pkgs {
		f, ok := files[p]
		if !ok {
			return nil, fmt.Errorf("apt-get download --print-uris did not list %s", p)
		}
		res[p] = f
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		if _, err := a.run(ctx, dir, "apt-get", append([]string{"download", "-q"}, missing...)...); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// buildSiw extracts headers, kbuild and siw's sources into a scratch directory
// and runs kbuild there.
func buildSiw(ctx context.Context, dir, kernel string, p SiwPkgs, debs map[string]string, v SiwVariant, log io.Writer) ([]byte, error) {
	work, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	root := filepath.Join(work, "root")
	run := func(wd string, name string, args ...string) error {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = wd
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
		}
		return nil
	}
	for _, pkg := range []string{p.Headers, p.Common, p.Kbuild, p.Source} {
		if err := run(work, "dpkg", "-x", filepath.Join(dir, "debs", debs[pkg]), root); err != nil {
			return nil, err
		}
	}
	tarballs, _ := filepath.Glob(filepath.Join(root, "usr", "src", "linux-source-*.tar.*"))
	if len(tarballs) != 1 {
		return nil, fmt.Errorf("%s: expected one source tarball in /usr/src, found %d", p.Source, len(tarballs))
	}
	src := filepath.Join(work, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return nil, err
	}
	if err := run(src, "tar", "-xf", tarballs[0], "--wildcards", "*/drivers/infiniband/sw/siw/*"); err != nil {
		return nil, err
	}
	mods, _ := filepath.Glob(filepath.Join(src, "*", "drivers", "infiniband", "sw", "siw"))
	if len(mods) != 1 {
		return nil, fmt.Errorf("no drivers/infiniband/sw/siw in %s", tarballs[0])
	}
	mod := mods[0]
	if err := patchSiwFile(filepath.Join(mod, "siw_cm.c"), v); err != nil {
		return nil, err
	}
	// The in-tree Makefile builds siw.o when CONFIG_RDMA_SIW is set; as a
	// Kbuild file with that option forced to m it builds the module out of tree.
	mk, err := os.ReadFile(filepath.Join(mod, "Makefile"))
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(mod, "Kbuild"), []byte(strings.ReplaceAll(string(mk), "$(CONFIG_RDMA_SIW)", "m")), 0o644); err != nil {
		return nil, err
	}
	// The flavour's Makefile includes the common headers by their installed
	// path; point it at the extracted copy instead of installing packages.
	hdr := filepath.Join(root, "usr", "src", p.Headers)
	hmk, err := os.ReadFile(filepath.Join(hdr, "Makefile"))
	if err != nil {
		return nil, err
	}
	fixed := strings.ReplaceAll(string(hmk), "include /usr/src/", "include "+filepath.Join(root, "usr", "src")+"/")
	if err := os.WriteFile(filepath.Join(hdr, "Makefile"), []byte(fixed), 0o644); err != nil {
		return nil, err
	}
	jobs := fmt.Sprintf("-j%d", runtime.NumCPU())
	if err := run(work, "make", "-C", hdr, "M="+mod, jobs, "modules"); err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "siw: built siw.ko (%s) for %s\n", v.dir(), kernel)
	return os.ReadFile(filepath.Join(mod, "siw.ko"))
}

// planSiw appends siw's load steps to steps: its dependencies not already
// loaded, then siw itself.
func planSiw(modDir string, steps []LoadStep, ko []byte) ([]LoadStep, error) {
	deps, err := ModinfoDepends(ko)
	if err != nil {
		return nil, fmt.Errorf("siw.ko: %w", err)
	}
	want := append([]KernelModule(nil), siwDeps...)
	for _, d := range deps {
		want = append(want, KernelModule{d, true})
	}
	more, _, err := PlanModules(modDir, want)
	if err != nil {
		return nil, err
	}
	have := map[string]bool{}
	for _, s := range steps {
		have[s.Name] = true
	}
	for _, s := range more {
		if !have[s.Name] {
			steps = append(steps, s)
			have[s.Name] = true
		}
	}
	return append(steps, LoadStep{Name: "siw", Required: true, Data: ko}), nil
}

// siw's passive side (siw_accept in 6.1, and in the upstream source read for
// this fix) sends the MPA reply first and only then points the socket's
// data_ready callback at the QP's receive path. A client that reacts to the
// reply fast enough sends its first FPDU into that gap: the connection manager's
// callback ignores data in RDMA mode, the bytes wait in the socket, and nothing
// reads them until more arrive. rping's first SEND then goes unanswered and both
// sides wait forever, stock rping against stock rping too. It hung a connection
// in about one siw tier run in three under emulation on a loaded host, and every
// connection once the gap was widened by a delay (docs/siw-accept-race.md). The test bed's siw.ko therefore hands the
// socket to the QP before the reply is sent, as the active side already does.
// Nothing else in siw changes.
const (
	siwPatchLevel   = "p1-accept-assoc"
	siwPatchSummary = "siw_accept hands the socket to the QP before sending the MPA reply"
)

// patchSiwAccept inserts, before siw_accept's MPA reply, the same socket
// association siw_accept otherwise makes after it. Doing it twice is harmless
// (it sets the same callbacks under the socket's callback lock). Peer-to-peer
// RTR mode (wait_for_peer_rts) is left as it is: the test bed does not use it.
// A source that no longer has the expected shape is an error, so a kernel
// update cannot silently bring the race back.
func patchSiwAccept(src []byte) ([]byte, error) {
	s := string(src)
	reply, err := findAcceptReply(s)
	if err != nil {
		return nil, err
	}
	ins := "\t/* gorping test bed: " + siwPatchSummary + " (test/vm/siw.go) */\n" +
		"\tif (!wait_for_peer_rts)\n\t\tsiw_qp_socket_assoc(cep, qp);\n"
	return []byte(s[:reply] + ins + s[reply:]), nil
}

const reviewSiwPatch = "review the MPA-reply race patch (test/vm/siw.go)"

// findAcceptReply returns the offset of the statement that sends siw_accept's
// MPA reply, after checking siw_accept still has the shape the patch assumes.
func findAcceptReply(s string) (int, error) {
	fn := strings.Index(s, "\nint siw_accept(")
	if fn < 0 || strings.Count(s, "\nint siw_accept(") != 1 {
		return 0, fmt.Errorf("siw_cm.c: want one definition of siw_accept: %s", reviewSiwPatch)
	}
	body := s[fn:]
	if end := strings.Index(body, "\n}\n"); end >= 0 {
		body = body[:end]
	}
	reply := strings.Index(body, "\trv = siw_send_mpareqrep(")
	if reply < 0 {
		return 0, fmt.Errorf("siw_cm.c: siw_accept no longer sends its MPA reply with \"rv = siw_send_mpareqrep(\": %s", reviewSiwPatch)
	}
	for _, need := range []string{"wait_for_peer_rts", "siw_qp_socket_assoc(cep, qp);"} {
		if !strings.Contains(body[reply:], need) {
			return 0, fmt.Errorf("siw_cm.c: siw_accept no longer has %q after its MPA reply: %s", need, reviewSiwPatch)
		}
	}
	return fn + reply, nil
}

// delaySiwAccept (experiment only) busy-waits d after siw_accept's MPA reply
// has been sent, before the rest of siw_accept runs: it widens the window a
// descheduled vCPU opens by chance, so the race shows on every connection.
func delaySiwAccept(src []byte, d time.Duration) ([]byte, error) {
	s := string(src)
	reply, err := findAcceptReply(s)
	if err != nil {
		return nil, err
	}
	const check = "goto error;\n"
	end := strings.Index(s[reply:], check)
	if end < 0 {
		return nil, fmt.Errorf("siw_cm.c: no error check after siw_accept's MPA reply: %s", reviewSiwPatch)
	}
	at := reply + end + len(check)
	s = s[:at] + fmt.Sprintf("\tmdelay(%d); /* gorping EXPERIMENT (test/vm/siw.go) */\n", d.Milliseconds()) + s[at:]
	return []byte("#include <linux/delay.h>\n" + s), nil
}

func patchSiwFile(path string, v SiwVariant) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if !v.Unpatched {
		if b, err = patchSiwAccept(b); err != nil {
			return err
		}
	}
	if v.AcceptDelay > 0 {
		if b, err = delaySiwAccept(b, v.AcceptDelay); err != nil {
			return err
		}
	}
	return os.WriteFile(path, b, 0o644)
}
