package kcmd

import (
	"encoding/binary"
	"errors"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func header(cmd uint32, in, out uint16) []byte {
	b := binary.LittleEndian.AppendUint32(nil, cmd)
	b = binary.LittleEndian.AppendUint16(b, in)
	return binary.LittleEndian.AppendUint16(b, out)
}

// A legacy CREATE_CQ splits into its 32-byte core request and the driver's bytes, with
// the response address from the request and the room for both responses; Reply writes
// there, zero-filled.
// userMem is n bytes of memory outside the Go heap and stacks (as the providers' is).
func userMem(t *testing.T, n int) []byte {
	m, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(m) })
	return m
}

func TestDecodeLegacy(t *testing.T) {
	resp := userMem(t, 24)
	for i := range resp {
		resp[i] = 0xee
	}
	req := CreateCQ{Response: uint64(uintptr(unsafe.Pointer(&resp[0]))), UserHandle: 7, CQE: 15, CompChannel: -1}
	p := append(header(CmdCreateCQ, uint16((8+32+16)/4), 24/4), Bytes(&req)...)
	p = append(p, make([]byte, 16)...)
	p[8+32] = 0xab
	c, err := Decode(p)
	if err != nil {
		t.Fatal(err)
	}
	if c.Num != CmdCreateCQ || c.Ex || len(c.Core) != 32 || len(c.Driver) != 16 || c.Driver[0] != 0xab || c.CoreOut != 8 || c.DriverOut != 16 {
		t.Fatalf("decoded %+v", c)
	}
	if got := Req[CreateCQ](c); got.UserHandle != 7 || got.CQE != 15 || got.CompChannel != -1 {
		t.Errorf("request %+v", got)
	}
	r := CreateCQResp{CQHandle: 3, CQE: 15}
	Reply(c, Bytes(&r), []byte{1, 2})
	if binary.LittleEndian.Uint32(resp[0:]) != 3 || binary.LittleEndian.Uint32(resp[4:]) != 15 || resp[8] != 1 || resp[9] != 2 || resp[10] != 0 || resp[23] != 0 {
		t.Errorf("response % x", resp)
	}
}

// An extended command takes its response address and the driver's sizes from the
// extended header.
func TestDecodeExtended(t *testing.T) {
	resp := userMem(t, 304)
	x := ExCmdHdr{Response: uint64(uintptr(unsafe.Pointer(&resp[0])))}
	p := append(header(CmdQueryDevice|ExFlag, 1, 38), Bytes(&x)...)
	p = append(p, make([]byte, 8)...)
	c, err := Decode(p)
	if err != nil || !c.Ex || c.Num != CmdQueryDevice || len(c.Core) != 8 || c.CoreOut != 304 || c.DriverOut != 0 || c.Resp != x.Response {
		t.Fatalf("decoded %+v, %v", c, err)
	}
}

// The kernel's header checks: a length that disagrees with in_words, a core request or
// response too short, a command no fake answers.
func TestDecodeRefuses(t *testing.T) {
	for name, tc := range map[string]struct {
		p    []byte
		want error
	}{
		"short":          {[]byte{1, 2, 3}, unix.EINVAL},
		"in_words":       {append(header(CmdAllocPD, 5, 1), make([]byte, 8)...), unix.EINVAL},
		"core request":   {append(header(CmdCreateQP, 4, 8), make([]byte, 8)...), unix.ENOSPC},
		"core response":  {append(header(CmdCreateQP, 16, 1), make([]byte, 56)...), unix.ENOSPC},
		"unknown":        {append(header(CmdCreateAH, 2, 0), make([]byte, 0)...), unix.EOPNOTSUPP},
		"ex reserved":    {append(append(header(CmdQueryDevice|ExFlag, 1, 38), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0), make([]byte, 8)...), unix.EINVAL},
		"ex no response": {append(append(header(CmdQueryDevice|ExFlag, 1, 38), make([]byte, 16)...), make([]byte, 8)...), unix.EINVAL},
	} {
		if _, err := Decode(tc.p); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
}
