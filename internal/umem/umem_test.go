package umem

import (
	"errors"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func TestAnon(t *testing.T) {
	m, err := Anon(100)
	if err != nil {
		t.Fatal(err)
	}
	b := m.Bytes()
	if len(b) != 100 || m.Len() != 100 {
		t.Fatalf("len %d/%d, want 100", len(b), m.Len())
	}
	if m.Addr()%uint64(unix.Getpagesize()) != 0 {
		t.Errorf("address %#x is not page aligned", m.Addr())
	}
	if m.Addr() != uint64(uintptr(unsafe.Pointer(&b[0]))) || m.AddrAt(10) != m.Addr()+10 {
		t.Errorf("Addr %#x AddrAt(10) %#x do not match the bytes", m.Addr(), m.AddrAt(10))
	}
	for i, v := range b {
		if v != 0 {
			t.Fatalf("byte %d is %d, want zeroed memory", i, v)
		}
	}
	b[99] = 7 // writable
	if err := m.Free(); err != nil {
		t.Fatal(err)
	}
	if err := m.Free(); err != nil {
		t.Errorf("second Free: %v", err)
	}
	if m.Addr() != 0 || m.Len() != 0 {
		t.Errorf("after Free: Addr %#x Len %d, want 0", m.Addr(), m.Len())
	}
}

func TestBadSizes(t *testing.T) {
	if _, err := Anon(0); err == nil {
		t.Error("Anon(0) succeeded")
	}
	if _, err := MapShared(-1, 0, 0); err == nil {
		t.Error("MapShared of 0 bytes succeeded")
	}
	if _, err := MapShared(-1, 0, 4096); !errors.Is(err, unix.EBADF) {
		t.Errorf("MapShared on fd -1: %v, want EBADF", err)
	}
}

func TestAnonAt(t *testing.T) {
	m, err := Anon(3 * 4096)
	if err != nil {
		t.Fatal(err)
	}
	addr := m.AddrAt(4096)
	if _, err := AnonAt(addr, 4096); err == nil {
		t.Fatal("AnonAt over an existing mapping succeeded")
	}
	m.Free()
	f, err := AnonAt(addr, 8192)
	if err != nil {
		t.Fatal(err)
	}
	if f.Addr() != addr || f.Len() != 8192 {
		t.Fatalf("AnonAt gave %#x+%d, want %#x+8192", f.Addr(), f.Len(), addr)
	}
	f.Bytes()[8191] = 1
	if err := f.Free(); err != nil || f.Len() != 0 {
		t.Fatalf("Free: %v, len %d", err, f.Len())
	}
	if _, err := AnonAt(addr+1, 4096); err == nil {
		t.Error("unaligned AnonAt succeeded")
	}
}

func TestNilMem(t *testing.T) {
	var m *Mem
	if m.Len() != 0 || m.Addr() != 0 || m.Bytes() != nil || m.Free() != nil {
		t.Error("a nil Mem must read as empty and free as a no-op")
	}
}
