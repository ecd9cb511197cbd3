package vm

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// writeCache lays out a finished fetch of debs (package -> .deb file) in dir.
func writeCache(t *testing.T, dir, kernelPkg string, debs map[string]string) {
	t.Helper()
	for _, d := range []string{"debs", "pkgs"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, deb := range debs {
		if err := os.WriteFile(filepath.Join(dir, "debs", deb), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(extractStamp(dir, name), []byte(deb), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m := Manifest{Suite: "bookworm", Arch: "amd64", Kernel: kernelPkg[len("linux-image-"):], KernelPackage: kernelPkg, Debs: debs}
	b, _ := json.Marshal(m)
	if err := os.WriteFile(filepath.Join(dir, manifestName), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A cache fetched before a package joined ToolPackages is not complete (the next run
// fetches it), but it keeps its kernel.
func TestCacheCompleteNeedsEveryToolPackage(t *testing.T) {
	const kernel = "linux-image-6.1.0-57-amd64"
	debs := map[string]string{kernel: "linux-image_1_amd64.deb"}
	for _, p := range ToolPackages {
		debs[p] = p + "_1_amd64.deb"
	}
	f := &Fetcher{Target: Target{"bookworm", "amd64"}}
	dir := t.TempDir()
	writeCache(t, dir, kernel, debs)
	if _, ok := f.complete(dir); !ok {
		t.Fatal("a cache with every package is not complete")
	}
	dir = t.TempDir()
	delete(debs, ToolPackages[len(ToolPackages)-1])
	writeCache(t, dir, kernel, debs)
	if _, ok := f.complete(dir); ok {
		t.Errorf("a cache without %s is complete", ToolPackages[len(ToolPackages)-1])
	}
	if m, ok := f.cachedKernel(dir); !ok || m.KernelPackage != kernel {
		t.Errorf("cachedKernel: %v %q", ok, m.KernelPackage)
	}
	os.Remove(filepath.Join(dir, "debs", "linux-image_1_amd64.deb"))
	if _, ok := f.cachedKernel(dir); ok {
		t.Error("cachedKernel without the kernel's .deb")
	}
}
