package vm

import (
	"compress/gzip"
	"debug/elf"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// The guest's file system is the merged-/usr layout Debian uses: /bin, /sbin,
// /lib and /lib64 are symlinks into /usr. Bookworm packages still ship some files
// under /bin or /lib, so every path is mapped into /usr when the image is packed.
var usrMergeDirs = []string{"bin", "sbin", "lib", "lib64", "lib32", "libx32"}

// MergedUsr maps an absolute guest path to its place in the merged-/usr layout.
func MergedUsr(p string) string {
	p = path.Clean("/" + p)
	for _, d := range usrMergeDirs {
		if p == "/"+d || strings.HasPrefix(p, "/"+d+"/") {
			return "/usr" + p
		}
	}
	return p
}

// Triplet is Debian's multiarch directory name for arch.
func Triplet(arch string) string {
	switch arch {
	case "arm64":
		return "aarch64-linux-gnu"
	default:
		return "x86_64-linux-gnu"
	}
}

// fsNode is one file of the guest view: a regular file copied from host, or a
// symlink.
type fsNode struct {
	host string // regular file: the extracted file on the host
	link string // symlink target, as written
	pkg  string
	mode fs.FileMode
}

// guestView is the union of the extracted packages as the guest would see them.
type guestView map[string]fsNode

// addPackage adds a package's files (documentation excluded) to the view.
func (v guestView) addPackage(pkg, dir string) error {
	return filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "usr/share" && d.IsDir() {
			return filepath.SkipDir // docs, man pages, lintian data: not needed
		}
		if d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		g := MergedUsr(rel)
		if d.Type()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			v[g] = fsNode{link: target, pkg: pkg}
		} else if info.Mode().IsRegular() {
			v[g] = fsNode{host: p, pkg: pkg, mode: info.Mode().Perm()}
		}
		return nil
	})
}

// resolve follows symlinks from guest path p; it returns every path visited (the
// links and the final file), so packing them all reproduces the lookup.
func (v guestView) resolve(p string) ([]string, error) {
	p = MergedUsr(p)
	var chain []string
	for range 16 {
		n, ok := v[p]
		if !ok {
			return chain, fmt.Errorf("%s: %w", p, fs.ErrNotExist)
		}
		chain = append(chain, p)
		if n.link == "" {
			return chain, nil
		}
		t := n.link
		if !path.IsAbs(t) {
			t = path.Join(path.Dir(p), t)
		}
		p = MergedUsr(t)
	}
	return chain, fmt.Errorf("%s: too many symlinks", p)
}

// closure returns roots plus every file the dynamic loader will open for them:
// each ELF file's interpreter (PT_INTERP) and, transitively, its DT_NEEDED
// libraries, looked up in the default library directories. A library no fetched
// package provides is an error, naming who needs it.
func (v guestView) closure(roots []string, arch string) (map[string]bool, error) {
	libDirs := []string{"/usr/lib/" + Triplet(arch), "/usr/lib", "/usr/lib64"}
	keep := map[string]bool{}
	queue := append([]string(nil), roots...)
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if keep[p] {
			continue
		}
		chain, err := v.resolve(p)
		if err != nil {
			return nil, err
		}
		for _, c := range chain {
			keep[c] = true
		}
		file := v[chain[len(chain)-1]]
		needed, interp, err := elfDeps(file.host)
		if err != nil {
			return nil, err
		}
		if interp != "" {
			queue = append(queue, interp)
		}
	next:
		for _, lib := range needed {
			for _, d := range libDirs {
				if _, ok := v[d+"/"+lib]; ok {
					queue = append(queue, d+"/"+lib)
					continue next
				}
			}
			return nil, fmt.Errorf("%s (package %s) needs %s, which no fetched package provides", chain[len(chain)-1], file.pkg, lib)
		}
	}
	return keep, nil
}

// elfDeps returns an ELF file's DT_NEEDED entries and interpreter; non-ELF files
// (scripts, data) have none.
func elfDeps(file string) (needed []string, interp string, err error) {
	magic := make([]byte, 4)
	if fh, err := os.Open(file); err != nil {
		return nil, "", fmt.Errorf("read %s: %w", file, err)
	} else {
		n, _ := io.ReadFull(fh, magic)
		fh.Close()
		if n < 4 || string(magic) != elf.ELFMAG {
			return nil, "", nil
		}
	}
	f, err := elf.Open(file)
	if err != nil {
		return nil, "", fmt.Errorf("read %s: %w", file, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err != nil {
				return nil, "", fmt.Errorf("read interpreter of %s: %w", file, err)
			}
			interp = strings.TrimRight(string(b), "\x00")
		}
	}
	needed, err = f.ImportedLibraries()
	if err != nil && f.Section(".dynamic") != nil {
		return nil, "", fmt.Errorf("read DT_NEEDED of %s: %w", file, err)
	}
	return needed, interp, nil
}

// dlopenedLibs are libraries loaded by name at run time rather than through
// DT_NEEDED.
var dlopenedLibs = []string{"libgcc_s.so.1"}

// GuestFile is a file the caller adds to the image (gorping, test binaries).
type GuestFile struct {
	Path string // absolute guest path
	Host string // file on the host; or
	Data []byte // content
	Mode fs.FileMode
}

// Image describes an initramfs.
type Image struct {
	Target
	Rootfs  *Rootfs
	Modules []LoadStep // from PlanModules, loaded by the init script in this order
	Init    []byte     // the /init script
	Extra   []GuestFile
}

// Guest paths the init script and the tests rely on.
const (
	GuestIP      = "/usr/bin/ip"   // iproute2's ip: busybox's applet lacks what we need
	GuestRDMA    = "/usr/bin/rdma" // iproute2's rdma
	GuestGorping = "/usr/local/bin/gorping"
	GuestBusybox = "/usr/bin/busybox"
)

// ModulePath is where the image stores module number i.
func ModulePath(i int, name string) string { return fmt.Sprintf("/modules/%02d-%s.ko", i, name) }

// Write packs the image as a gzip-compressed newc cpio at out and returns the
// number of files packed.
func (im *Image) Write(out string) (int, error) {
	view := guestView{}
	var roots []string
	for _, name := range sortedKeys(im.Rootfs.Manifest.Debs) {
		if name == im.Rootfs.Manifest.KernelPackage {
			continue
		}
		if err := view.addPackage(name, im.Rootfs.PkgDir(name)); err != nil {
			return 0, fmt.Errorf("index package %s: %w", name, err)
		}
	}
	// Roots: the tool packages' programs and configuration, and every ibverbs
	// provider (libibverbs tries each driver it has a .driver file for, and
	// warns about missing ones). Libraries come in through DT_NEEDED; plugins
	// nothing here loads (tc's) stay out.
	tool := map[string]bool{}
	for _, p := range ToolPackages {
		tool[p] = true
	}
	rootDirs := []string{"/usr/bin/", "/usr/sbin/", "/etc/", "/usr/lib/" + Triplet(im.Arch) + "/libibverbs/"}
	// netem's delay distributions (the multi-host fault tests); not tc's
	// plugins, whose libraries nothing fetches.
	tcDist := "/usr/lib/" + Triplet(im.Arch) + "/tc/"
	for g, n := range view {
		// A link whose target no package has is completed by a maintainer script,
		// which never runs here (tar's /etc/rmt, an alternative): nothing to pack.
		if _, err := view.resolve(g); n.link != "" && err != nil {
			continue
		}
		for _, d := range rootDirs {
			if tool[n.pkg] && strings.HasPrefix(g, d) {
				roots = append(roots, g)
			}
		}
		if tool[n.pkg] && strings.HasPrefix(g, tcDist) && strings.HasSuffix(g, ".dist") {
			roots = append(roots, g)
		}
	}
	for _, need := range []string{GuestIP, GuestRDMA, GuestBusybox, "/usr/bin/rping"} {
		if _, ok := view[need]; !ok {
			return 0, fmt.Errorf("fetched packages lack %s", need)
		}
	}
	// glibc dlopen()s libgcc_s for pthread_exit and thread cancellation, so no
	// DT_NEEDED names it; without it rping aborts at exit.
	for _, lib := range dlopenedLibs {
		p := "/usr/lib/" + Triplet(im.Arch) + "/" + lib
		if _, ok := view[p]; !ok {
			return 0, fmt.Errorf("fetched packages lack %s", p)
		}
		roots = append(roots, p)
	}
	sort.Strings(roots)
	keep, err := view.closure(roots, im.Arch)
	if err != nil {
		return 0, err
	}

	f, err := os.Create(out)
	if err != nil {
		return 0, fmt.Errorf("create initramfs: %w", err)
	}
	defer f.Close()
	// BestSpeed: the image is rebuilt every run, and the guest kernel's
	// decompression time hardly differs.
	zw, _ := gzip.NewWriterLevel(f, gzip.BestSpeed)
	w := NewCPIOWriter(zw)
	for _, d := range []string{"dev", "proc", "sys", "tmp", "run", "root", "usr/bin", "usr/sbin", "usr/lib", "usr/lib64"} {
		w.Dir(d, 0o755) // errors are sticky: Close reports them
	}
	for _, d := range usrMergeDirs {
		w.Symlink(d, "usr/"+d)
	}
	w.CharDev("dev/console", 0o600, 5, 1)
	w.CharDev("dev/null", 0o666, 1, 3)
	w.Symlink("usr/bin/sh", "busybox") // for #!/bin/sh scripts and exec("sh")
	w.File("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\n"))
	w.File("etc/group", 0o644, []byte("root:x:0:\n"))
	w.File("etc/hosts", 0o644, []byte("127.0.0.1 localhost\n::1 localhost\n"))

	files := 0
	for _, g := range sortedKeys(keep) {
		n := view[g]
		if n.link != "" {
			err = w.Symlink(g, n.link)
		} else {
			var b []byte
			if b, err = os.ReadFile(n.host); err == nil {
				err = w.File(g, n.mode, b)
			}
		}
		if err != nil {
			return 0, fmt.Errorf("pack %s: %w", g, err)
		}
		files++
	}
	for i, m := range im.Modules {
		if err := w.File(ModulePath(i, m.Name), 0o644, m.Data); err != nil {
			return 0, err
		}
		files++
	}
	for _, e := range im.Extra {
		b := e.Data
		if e.Host != "" {
			if b, err = os.ReadFile(e.Host); err != nil {
				return 0, fmt.Errorf("pack %s: %w", e.Path, err)
			}
		}
		if err := w.File(e.Path, e.Mode, b); err != nil {
			return 0, err
		}
		files++
	}
	if err := w.File("init", 0o755, im.Init); err != nil {
		return 0, err
	}
	if err := w.Close(); err != nil {
		return 0, err
	}
	if err := zw.Close(); err != nil {
		return 0, fmt.Errorf("compress initramfs: %w", err)
	}
	if err := f.Close(); err != nil {
		return 0, fmt.Errorf("write initramfs: %w", err)
	}
	return files + 1, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
