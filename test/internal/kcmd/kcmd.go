// Package kcmd reads uverbs write() commands as the kernel does, for the device models of
// test/ (mlx5model, rxemodel): the command header, the extended header, and the response
// written where the request's first word points. Layouts are written out here from the
// kernel's uapi (rdma/ib_user_verbs.h), independently of the uverbs package.
package kcmd

import (
	"encoding/binary"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ExFlag marks an extended command (IB_USER_VERBS_CMD_FLAG_EXTENDED).
const ExFlag = 0x80000000

// Decode splits one command write (header | core | driver data): the command number,
// the request, and the response length. An extended command's header carries the
// response address, then the driver's in and out sizes, all sizes in 8-byte words;
// req is then given with the extended header stripped and the response address first,
// like a legacy command's.
func Decode(p []byte) (cmd uint32, req []byte, outLen int, err error) {
	if len(p) < 8 {
		return 0, nil, 0, unix.EINVAL
	}
	cmd = LE32(p)
	inW, outW := int(binary.LittleEndian.Uint16(p[4:])), int(binary.LittleEndian.Uint16(p[6:]))
	if cmd&ExFlag != 0 {
		if len(p) < 24 {
			return 0, nil, 0, unix.EINVAL
		}
		provIn, provOut := int(binary.LittleEndian.Uint16(p[16:])), int(binary.LittleEndian.Uint16(p[18:]))
		if 24+(inW+provIn)*8 != len(p) || LE32(p[20:]) != 0 {
			return 0, nil, 0, unix.EINVAL
		}
		req = append(append([]byte(nil), p[8:16]...), p[24:]...) // response, core, driver
		return cmd, req, (outW + provOut) * 8, nil
	}
	if inW*4 != len(p) {
		return 0, nil, 0, unix.EINVAL
	}
	return cmd, p[8:], outW * 4, nil
}

// Reply writes resp to the outLen bytes at the response address (the request's first
// word), zero-filled beyond resp, as the kernel copies its answer out.
func Reply(req, resp []byte, outLen int) {
	if outLen == 0 {
		return
	}
	out := Mem(LE64(req), outLen)
	clear(out)
	copy(out, resp)
}

// Mem views n bytes at a process address a provider passed in a command (its buffers
// are real memory here).
func Mem(addr uint64, n int) []byte {
	if n == 0 {
		return nil
	}
	p := *(*unsafe.Pointer)(unsafe.Pointer(&addr))
	return unsafe.Slice((*byte)(p), n)
}

func LE32(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }
func LE64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }

// PutLE is vals as consecutive little-endian 32-bit words.
func PutLE(vals ...uint32) []byte {
	var b []byte
	for _, v := range vals {
		b = binary.LittleEndian.AppendUint32(b, v)
	}
	return b
}
