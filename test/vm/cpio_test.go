package vm

import (
	"bytes"
	"strconv"
	"testing"
)

// readNewc is an independent newc parser used to check the writer byte by byte.
type newcEntry struct {
	name                 string
	mode, rmajor, rminor uint64
	data                 string
}

func readNewc(t *testing.T, b []byte) []newcEntry {
	t.Helper()
	var out []newcEntry
	off := 0
	for {
		if off%4 != 0 {
			t.Fatalf("entry at unaligned offset %d", off)
		}
		if len(b) < off+110 {
			t.Fatalf("truncated header at %d", off)
		}
		h := string(b[off : off+110])
		if h[:6] != "070701" {
			t.Fatalf("bad magic %q at %d", h[:6], off)
		}
		field := func(i int) uint64 {
			v, err := strconv.ParseUint(h[6+8*i:14+8*i], 16, 32)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		mode, size, rmaj, rmin, nsize := field(1), field(6), field(9), field(10), field(11)
		name := string(b[off+110 : off+110+int(nsize)-1])
		if b[off+110+int(nsize)-1] != 0 {
			t.Fatalf("name %q not NUL-terminated", name)
		}
		off += 110 + int(nsize)
		off = (off + 3) &^ 3
		data := string(b[off : off+int(size)])
		off += int(size)
		off = (off + 3) &^ 3
		if name == "TRAILER!!!" {
			if off != len(b) {
				t.Fatalf("%d bytes after trailer", len(b)-off)
			}
			return out
		}
		out = append(out, newcEntry{name, mode, rmaj, rmin, data})
	}
}

func TestCPIOWriter(t *testing.T) {
	var buf bytes.Buffer
	w := NewCPIOWriter(&buf)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.File("/usr/bin/hello", 0o755, []byte("#!/bin/sh\necho hi\n")))
	must(w.Symlink("bin", "usr/bin"))
	must(w.CharDev("dev/console", 0o600, 5, 1))
	must(w.File("usr/bin/x", 0o644, []byte("abc"))) // parent already present
	must(w.Dir("usr", 0o700))                       // duplicate: ignored
	must(w.File("empty", 0o644, nil))
	must(w.Close())

	got := readNewc(t, buf.Bytes())
	want := []newcEntry{
		{name: "usr", mode: 0o40755},
		{name: "usr/bin", mode: 0o40755},
		{name: "usr/bin/hello", mode: 0o100755, data: "#!/bin/sh\necho hi\n"},
		{name: "bin", mode: 0o120777, data: "usr/bin"},
		{name: "dev", mode: 0o40755},
		{name: "dev/console", mode: 0o20600, rmajor: 5, rminor: 1},
		{name: "usr/bin/x", mode: 0o100644, data: "abc"},
		{name: "empty", mode: 0o100644},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d entries %+v, want %d", len(got), got, len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("entry %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}
