//go:build !guest

package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestProductLinksNoTestCode builds the product binary as `make build` does (static,
// CGO_ENABLED=0, no build tags), but keeping its symbol table, and requires that no
// symbol comes from a test-only package: the module's packages under test/, every
// package named *test (hostenvtest, ...) and the standard library's testing and
// net/http/httptest (the mesh's landing page renders exporter-toolkit's page without it). The device
// models, the ABI checker and the guest, mesh and Prometheus helpers live under test/
// for that reason (docs/architecture.md).
func TestProductLinksNoTestCode(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary (-short)")
	}
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	list := exec.Command(gobin, "list", "./...")
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	mod := "github.com/gorping/gorping/"
	testPkgs := []string{"testing", "net/http/httptest"}
	for _, p := range strings.Fields(string(out)) {
		rel := strings.TrimPrefix(p, mod)
		if strings.HasPrefix(rel, "test/") || strings.HasSuffix(p, "test") {
			testPkgs = append(testPkgs, p)
		}
	}
	for _, want := range []string{mod + "test/mlx5model", mod + "test/rxemodel", mod + "test/abicheck",
		mod + "test/guesttest", mod + "test/meshtest", mod + "test/promtest", mod + "internal/hostenv/hostenvtest"} {
		if !slices.Contains(testPkgs, want) {
			t.Errorf("go list does not show the test-only package %s: was it moved?", want)
		}
	}

	bin := filepath.Join(t.TempDir(), "gorping")
	build := exec.Command(gobin, "build", "-trimpath", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if fi, err := os.Stat(bin); err == nil {
		t.Logf("product binary with symbols: %d bytes", fi.Size())
	}
	nm := exec.Command(gobin, "tool", "nm", bin)
	syms, err := nm.Output()
	if err != nil {
		t.Fatalf("go tool nm: %v", err)
	}
	product, found := map[string]int{}, map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(syms))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 3 {
			continue
		}
		name := f[len(f)-1]
		for _, p := range []string{"rping", "rdmacm", "uverbs", "uverbs/mlx5", "uverbs/rxe", "uverbs/siw"} {
			if strings.HasPrefix(name, mod+p+".") {
				product[p]++
			}
		}
		for _, p := range testPkgs {
			if strings.HasPrefix(name, p+".") {
				found[p]++
			}
		}
	}
	// The check has teeth only if nm listed the product's own symbols.
	for _, p := range []string{"rping", "rdmacm", "uverbs", "uverbs/mlx5", "uverbs/rxe", "uverbs/siw"} {
		if product[p] < 10 {
			t.Fatalf("go tool nm listed %d symbols of the product package %s: cannot judge", product[p], p)
		}
	}
	for p, n := range found {
		t.Errorf("the product binary links %d symbols of the test-only package %s", n, p)
	}
}
