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

func TestNilMem(t *testing.T) {
	var m *Mem
	if m.Len() != 0 || m.Addr() != 0 || m.Bytes() != nil || m.Free() != nil {
		t.Error("a nil Mem must read as empty and free as a no-op")
	}
}
