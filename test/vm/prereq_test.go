package vm

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDecidePrereqs(t *testing.T) {
	qemu := []Tool{{"qemu-system-x86_64", "qemu-system-x86"}}
	goTool := []Tool{{"go", ""}}
	cases := []struct {
		name                         string
		missing                      []Tool
		root, debian, ci, allowInstl bool
		want                         PrereqAction
	}{
		{"nothing missing", nil, false, false, true, true, PrereqOK},
		{"root on Debian installs", qemu, true, true, false, true, PrereqInstall},
		{"root on Debian in CI installs", qemu, true, true, true, true, PrereqInstall},
		{"not root skips", qemu, false, true, false, true, PrereqSkip},
		{"not root in CI fails", qemu, false, true, true, true, PrereqFail},
		{"not Debian skips", qemu, true, false, false, true, PrereqSkip},
		{"install disabled skips", qemu, true, true, false, false, PrereqSkip},
		{"install disabled in CI fails", qemu, true, true, true, false, PrereqFail},
		{"no package for go skips", goTool, true, true, false, true, PrereqSkip},
	}
	for _, tc := range cases {
		if got := DecidePrereqs(tc.missing, tc.root, tc.debian, tc.ci, tc.allowInstl); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestEnsurePrereqsMissingQEMU hides qemu behind a PATH that has everything else.
func TestEnsurePrereqsMissingQEMU(t *testing.T) {
	dir := t.TempDir()
	for _, tool := range HostTools(nil) { // the non-qemu tools
		p := filepath.Join(dir, tool.Program)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", dir)
	for _, ci := range []string{"", "true"} {
		t.Setenv("CI", ci)
		action, err := EnsurePrereqs(context.Background(), []string{"arm64"}, false, io.Discard)
		want := PrereqSkip
		if ci == "true" {
			want = PrereqFail
		}
		if action != want || err == nil {
			t.Fatalf("CI=%q: action %v, err %v; want %v", ci, action, err, want)
		}
		if !strings.Contains(err.Error(), "qemu-system-aarch64") || !strings.Contains(err.Error(), "qemu-system-arm") {
			t.Fatalf("message does not name the program and package: %v", err)
		}
	}
	t.Setenv("CI", "")
	if action, err := EnsurePrereqs(context.Background(), nil, false, io.Discard); action != PrereqOK || err != nil {
		t.Fatalf("all present: %v, %v", action, err)
	}
}

func TestHasVirtFlag(t *testing.T) {
	if HasVirtFlag("processor: 0\nflags\t\t: fpu vme sse2 hypervisor\n") {
		t.Error("no vmx/svm, but reported")
	}
	if !HasVirtFlag("flags\t\t: fpu vmx sse2\n") || !HasVirtFlag("flags : svm\n") {
		t.Error("vmx/svm not found")
	}
	if HasVirtFlag("vmx flags: none\nbugs : svm\n") {
		t.Error("matched outside the flags line")
	}
}
