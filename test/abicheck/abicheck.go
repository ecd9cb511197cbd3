// Package abicheck compares the memory layout of Go mirrors of kernel ABI structs
// with the C definitions in the uapi headers, by compiling a tiny C program with gcc
// that prints sizeof and offsetof for every field the Go struct declares.
//
// It is a test-only helper: the gorping binary never links it and stays cgo-free.
// Tests that use it carry the build tag "abicheck" (make abicheck).
package abicheck

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// Struct pairs a C struct with its Go mirror.
//
// Each exported or unexported Go field is matched with the C member named by its
// struct tag `abi:"name"` (a dotted path such as "wr.rdma.rkey" reaches into unions)
// or, without a tag, by the field name in snake_case (CqHandle → cq_handle,
// MaxSendWR → max_send_wr). Fields named "_" or tagged `abi:"-"` are padding the C
// side does not name and are skipped; the total size still has to agree.
type Struct struct {
	C  string // e.g. "struct ib_uverbs_create_cq"
	Go any    // a value of the Go mirror type, e.g. createCQ{}
}

// Const pairs a C constant (macro or enumerator) with the Go value.
type Const struct {
	C  string
	Go int64
}

// Mismatch is one disagreement between Go and C.
type Mismatch struct {
	Struct, Field string
	What          string // "size" or "offset" or "value"
	Go, C         int64
}

func (m Mismatch) String() string {
	if m.Field == "" {
		return fmt.Sprintf("%s: %s is %d in Go, %d in C", m.Struct, m.What, m.Go, m.C)
	}
	return fmt.Sprintf("%s.%s: %s is %d in Go, %d in C", m.Struct, m.Field, m.What, m.Go, m.C)
}

// Check fails t for every field whose offset or size differs between Go and C.
func Check(t testing.TB, headers []string, structs ...Struct) {
	t.Helper()
	ms, err := Compare(headers, structs, nil)
	report(t, ms, err)
}

// CheckConsts fails t for every constant whose value differs between Go and C.
func CheckConsts(t testing.TB, headers []string, consts ...Const) {
	t.Helper()
	ms, err := Compare(headers, nil, consts)
	report(t, ms, err)
}

func report(t testing.TB, ms []Mismatch, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		t.Error(m)
	}
}

type field struct {
	goName, cPath string
	off, size     int64
}

// Compare compiles and runs the layout probe and returns every mismatch.
func Compare(headers []string, structs []Struct, consts []Const) ([]Mismatch, error) {
	var src bytes.Buffer
	src.WriteString("#include <stddef.h>\n#include <stdio.h>\n")
	for _, h := range headers {
		fmt.Fprintf(&src, "#include <%s>\n", h)
	}
	src.WriteString("int main(void) {\n")
	fields := make([][]field, len(structs))
	for i, s := range structs {
		typ := reflect.TypeOf(s.Go)
		if typ == nil || typ.Kind() != reflect.Struct {
			return nil, fmt.Errorf("abicheck: Go value for %s is %T, want a struct", s.C, s.Go)
		}
		fmt.Fprintf(&src, "\tprintf(\"%%zu\\n\", sizeof(%s));\n", s.C)
		for j := 0; j < typ.NumField(); j++ {
			sf := typ.Field(j)
			path := cName(sf)
			if path == "" {
				continue
			}
			fields[i] = append(fields[i], field{sf.Name, path, int64(sf.Offset), int64(sf.Type.Size())})
			fmt.Fprintf(&src, "\tprintf(\"%%zu %%zu\\n\", offsetof(%s, %s), sizeof(((%s *)0)->%s));\n",
				s.C, path, s.C, path)
		}
	}
	for _, c := range consts {
		fmt.Fprintf(&src, "\tprintf(\"%%lld\\n\", (long long)(%s));\n", c.C)
	}
	src.WriteString("\treturn 0;\n}\n")

	out, err := runC(src.Bytes())
	if err != nil {
		return nil, err
	}
	nums := strings.Fields(string(out))
	next := func() int64 {
		if len(nums) == 0 {
			return -1
		}
		v, _ := strconv.ParseInt(nums[0], 10, 64)
		nums = nums[1:]
		return v
	}
	var ms []Mismatch
	for i, s := range structs {
		typ := reflect.TypeOf(s.Go)
		if cs := next(); cs != int64(typ.Size()) {
			ms = append(ms, Mismatch{Struct: s.C, What: "size", Go: int64(typ.Size()), C: cs})
		}
		for _, f := range fields[i] {
			coff, csize := next(), next()
			name := f.goName + " (" + f.cPath + ")"
			if coff != f.off {
				ms = append(ms, Mismatch{Struct: s.C, Field: name, What: "offset", Go: f.off, C: coff})
			}
			if csize != f.size {
				ms = append(ms, Mismatch{Struct: s.C, Field: name, What: "size", Go: f.size, C: csize})
			}
		}
	}
	for _, c := range consts {
		if v := next(); v != c.Go {
			ms = append(ms, Mismatch{Struct: c.C, What: "value", Go: c.Go, C: v})
		}
	}
	return ms, nil
}

// cName returns the C member path for a Go field, or "" to skip it.
func cName(sf reflect.StructField) string {
	if sf.Name == "_" {
		return ""
	}
	if tag, ok := sf.Tag.Lookup("abi"); ok {
		if tag == "-" {
			return ""
		}
		return tag
	}
	return SnakeCase(sf.Name)
}

// SnakeCase converts a Go field name to the C member name it mirrors by default:
// CqHandle → cq_handle, MaxSendWR → max_send_wr, QPNum → qp_num, Pad1 → pad1.
func SnakeCase(name string) string {
	r := []rune(name)
	var b strings.Builder
	for i, c := range r {
		if i > 0 && unicode.IsUpper(c) {
			prevLower := unicode.IsLower(r[i-1]) || unicode.IsDigit(r[i-1])
			nextLower := i+1 < len(r) && unicode.IsLower(r[i+1])
			if prevLower || (unicode.IsUpper(r[i-1]) && nextLower) {
				b.WriteByte('_')
			}
		}
		b.WriteRune(unicode.ToLower(c))
	}
	return b.String()
}

// runC compiles src with gcc against the system's uapi headers and returns its output.
func runC(src []byte) ([]byte, error) {
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		return nil, fmt.Errorf("abicheck: %s not found: the layout check needs a C compiler and the uapi headers (Debian: apt-get install gcc linux-libc-dev)", cc)
	}
	dir, err := os.MkdirTemp("", "abicheck")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	cfile, bin := filepath.Join(dir, "probe.c"), filepath.Join(dir, "probe")
	if err := os.WriteFile(cfile, src, 0o644); err != nil {
		return nil, err
	}
	if out, err := exec.Command(cc, "-std=gnu11", "-o", bin, cfile).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("abicheck: compiling the layout probe failed (a Go field names a C member that does not exist?): %v\n%s", err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		return nil, fmt.Errorf("abicheck: running the layout probe: %v", err)
	}
	return out, nil
}
