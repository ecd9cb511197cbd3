package vm

import (
	"bufio"
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// KernelModule is a module the guest loads, in the order of RDMAModules.
type KernelModule struct {
	Name     string
	Required bool // a missing file is a build error and a failed insmod a guest error
}

// RDMAModules is what the guest needs for Soft-RoCE on a dummy interface, in a
// working insmod order (there is no depmod in the guest). Their dependencies, read
// from each module's .modinfo "depends=", are added before them, so a kernel that
// grows a new dependency still boots. crc32_generic is no modinfo dependency but
// rdma_rxe asks the crypto API for "crc32" at link time: without it `rdma link add`
// fails with "rdma_rxe: failed to add".
var RDMAModules = []KernelModule{
	{"crc32_generic", true},
	{"configfs", false}, // rdma_cm's configfs interface; modinfo adds it where needed
	{"udp_tunnel", true},
	{"ip6_udp_tunnel", true},
	{"ib_core", true},
	{"ib_uverbs", true},
	{"iw_cm", true},
	{"ib_cm", true},
	{"rdma_cm", true},
	{"rdma_ucm", true},
	{"rdma_rxe", true},
	{"dummy", true},
}

// LoadStep is one insmod the guest performs.
type LoadStep struct {
	Name     string
	Required bool
	Data     []byte // the uncompressed .ko
}

// moduleTree indexes a kernel's modules directory.
type moduleTree struct {
	files   map[string]string // module name -> file
	builtin map[string]bool
}

// modName turns a module file name into the module's name ("ip6_udp_tunnel.ko.xz"
// -> "ip6_udp_tunnel"); the kernel treats '-' and '_' alike, so use '_'.
func modName(file string) (string, bool) {
	for _, ext := range []string{".ko", ".ko.xz", ".ko.zst", ".ko.gz"} {
		if strings.HasSuffix(file, ext) {
			return strings.ReplaceAll(strings.TrimSuffix(file, ext), "-", "_"), true
		}
	}
	return "", false
}

func loadModuleTree(dir string) (*moduleTree, error) {
	t := &moduleTree{files: map[string]string{}, builtin: map[string]bool{}}
	err := filepath.WalkDir(filepath.Join(dir, "kernel"), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if name, ok := modName(d.Name()); ok && !d.IsDir() {
			t.files[name] = p
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("index kernel modules: %w", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "modules.builtin"))
	if err != nil {
		return nil, fmt.Errorf("read modules.builtin: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if name, ok := modName(filepath.Base(sc.Text())); ok {
			t.builtin[name] = true
		}
	}
	return t, nil
}

// readModule returns the uncompressed module. Debian's trixie kernels ship .ko.xz;
// the guest's busybox insmod may not decompress, so do it on the host.
func readModule(path string) ([]byte, error) {
	var tool string
	switch {
	case strings.HasSuffix(path, ".ko"):
		return os.ReadFile(path)
	case strings.HasSuffix(path, ".xz"):
		tool = "xz"
	case strings.HasSuffix(path, ".zst"):
		tool = "zstd"
	case strings.HasSuffix(path, ".gz"):
		tool = "gzip"
	}
	out, err := exec.Command(tool, "-dc", path).Output()
	if err != nil {
		return nil, fmt.Errorf("decompress %s with %s: %w", path, tool, err)
	}
	return out, nil
}

// ModinfoDepends returns the "depends=" list of a module's .modinfo section.
func ModinfoDepends(ko []byte) ([]string, error) {
	f, err := elf.NewFile(bytes.NewReader(ko))
	if err != nil {
		return nil, fmt.Errorf("parse module: %w", err)
	}
	sec := f.Section(".modinfo")
	if sec == nil {
		return nil, fmt.Errorf("module has no .modinfo section")
	}
	data, err := sec.Data()
	if err != nil {
		return nil, fmt.Errorf("read .modinfo: %w", err)
	}
	for _, kv := range bytes.Split(data, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("depends=")); ok {
			if len(v) == 0 {
				return nil, nil
			}
			return strings.Split(string(v), ","), nil
		}
	}
	return nil, nil
}

// PlanModules orders the modules the guest must insmod: each of want, preceded by
// its modinfo dependencies (depth first, so the list's own order is kept where
// the dependencies allow). Built-in modules are skipped; notes says what was
// skipped and why.
func PlanModules(modDir string, want []KernelModule) (steps []LoadStep, notes []string, err error) {
	tree, err := loadModuleTree(modDir)
	if err != nil {
		return nil, nil, err
	}
	done := map[string]bool{}
	var visit func(name string, required bool, via string) error
	visit = func(name string, required bool, via string) error {
		if done[name] {
			return nil
		}
		done[name] = true
		path, ok := tree.files[name]
		switch {
		case !ok && tree.builtin[name]:
			notes = append(notes, name+" is built in")
			return nil
		case !ok && required:
			return fmt.Errorf("kernel module %s%s not found in %s", name, via, modDir)
		case !ok:
			notes = append(notes, name+" not available, skipped (optional)")
			return nil
		}
		ko, err := readModule(path)
		if err != nil {
			return err
		}
		deps, err := ModinfoDepends(ko)
		if err != nil {
			return fmt.Errorf("module %s: %w", name, err)
		}
		for _, d := range deps {
			if err := visit(d, required, " (needed by "+name+")"); err != nil {
				return err
			}
		}
		steps = append(steps, LoadStep{Name: name, Required: required, Data: ko})
		return nil
	}
	for _, m := range want {
		if err := visit(m.Name, m.Required, ""); err != nil {
			return nil, nil, err
		}
	}
	return steps, notes, nil
}
