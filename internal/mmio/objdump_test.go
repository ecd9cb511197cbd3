package mmio_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// goTool finds the go command that runs these tests.
func goTool(t *testing.T) string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("no go command to build and disassemble the arm64 binary: %v", err)
	}
	return p
}

// TestArm64BinaryCarriesBarriers builds gorping for arm64 exactly as `make` does (static,
// no cgo), disassembles it and checks that the barrier functions hold the instructions
// libmlx5 uses there, the MMIO stores are plain stores, and the mlx5 provider's doorbell,
// poll and arm paths call them.
func TestArm64BinaryCarriesBarriers(t *testing.T) {
	goCmd := goTool(t)
	bin := filepath.Join(t.TempDir(), "gorping-arm64")
	build := exec.Command(goCmd, "build", "-trimpath", "-o", bin, "github.com/gorping/gorping")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm64")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build for arm64: %v\n%s", err, out)
	}
	out, err := exec.Command(goCmd, "tool", "objdump", "-s", `internal/mmio\.|uverbs/mlx5\.\(\*(sendQueue|recvQueue|cqRing)\)\.|uverbs/bnxtre\.\(\*(context|cq)\)\.|uverbs/irdma\.\(\*(context|cq|qp)\)\.|uverbs/hns\.\(\*(context|cq|qp)\)\.`, bin).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool objdump: %v\n%s", err, out)
	}
	funcs := map[string]string{} // symbol -> its disassembly
	var cur string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "TEXT ") {
			cur = strings.Fields(line)[1]
			continue
		}
		funcs[cur] += line + "\n"
	}
	body := func(sym string) string {
		for name, b := range funcs {
			if strings.HasSuffix(name, sym) {
				return b
			}
		}
		t.Fatalf("symbol %s not in the arm64 binary (is the mlx5 provider linked?)", sym)
		return ""
	}
	// Encodings: dsb st = d5033e9f, dsb ld = d5033d9f.
	for sym, want := range map[string][]string{
		"internal/mmio.toDevice.abi0(SB)":   {"d5033e9f"},
		"internal/mmio.wcStart.abi0(SB)":    {"d5033e9f"},
		"internal/mmio.flush.abi0(SB)":      {"d5033e9f"},
		"internal/mmio.fromDevice.abi0(SB)": {"d5033d9f"},
		"internal/mmio.copy64.abi0(SB)":     {"VLD4", "VST4"},
	} {
		b := body(sym)
		for _, w := range want {
			if !strings.Contains(b, w) {
				t.Errorf("%s lacks %s:\n%s", sym, w, b)
			}
		}
	}
	// store64 and store32: one plain store of the width (STR Xt, STR Wt) and no
	// load-exclusive/store-exclusive pair.
	for sym, re := range map[string]string{"store64": `MOVD R\d+, \(R\d+\)`, "store32": `MOVW R\d+, \(R\d+\)`} {
		st := body("internal/mmio." + sym + ".abi0(SB)")
		if !regexp.MustCompile(re).MatchString(st) || strings.Contains(st, "LDAXR") || strings.Contains(st, "STLXR") {
			t.Errorf("%s is not a single plain store:\n%s", sym, st)
		}
	}
	for sym, calls := range map[string][]string{
		"(*sendQueue).ring(SB)": {"mmio.toDevice", "mmio.wcStart", "mmio.flush"},
		"(*recvQueue).post(SB)": {"mmio.toDevice"},
		"(*cqRing).poll(SB)":    {"mmio.fromDevice"},
		"(*cqRing).arm(SB)":     {"mmio.wcStart", "mmio.store64", "mmio.flush"},
		// bnxt_re: every doorbell (send, receive, CQ, arm) goes through one function.
		"bnxtre.(*context).doorbell(SB)": {"mmio.wcStart", "mmio.store64", "mmio.flush"},
		"bnxtre.(*cq).pollHW(SB)":        {"mmio.fromDevice"},
		// irdma: 32-bit doorbells after ToDevice; every WQE's valid bit after ToDevice.
		"irdma.(*context).doorbell(SB)": {"mmio.toDevice", "mmio.store32"},
		"irdma.(*qp).post(SB)":          {"mmio.toDevice"},
		"irdma.(*qp).PostRecv(SB)":      {"mmio.toDevice"},
		"irdma.(*cq).pollOne(SB)":       {"mmio.fromDevice"},
		// hns: 64-bit doorbells, the queues' after ToDevice; the records.
		"hns.(*context).doorbell(SB)": {"mmio.store64"},
		"hns.(*qp).PostSend(SB)":      {"mmio.toDevice"},
		"hns.(*qp).postRecv(SB)":      {"mmio.toDevice"},
		"hns.(*cq).Poll(SB)":          {"mmio.fromDevice"},
	} {
		b := body(sym)
		for _, c := range calls {
			if !strings.Contains(b, "CALL github.com/gorping/gorping/internal/"+c) {
				t.Errorf("%s does not call %s", sym, c)
			}
		}
	}
}
