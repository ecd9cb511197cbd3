// Package kcmd reads uverbs write() commands as the kernel does, for the fake kernel of
// test/providertest and the device models built on it: the command header, the extended
// header, the split into core request and driver data, and the response written where
// the request says. The core structs (abi_gen.go) are generated from the kernel's uapi
// (rdma/ib_user_verbs.h, make generate), independently of the uverbs package's mirrors,
// so a mistake there is not mirrored here.
package kcmd

import (
	"encoding/binary"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ExFlag marks an extended command (IB_USER_VERBS_CMD_FLAG_EXTENDED).
const ExFlag = 0x80000000

// Command is one uverbs write() split as the kernel splits it.
type Command struct {
	Num    uint32 // command number, the extended flag cleared
	Ex     bool   // an extended command (ib_uverbs_ex_cmd_hdr after the header)
	Core   []byte // the core request: a legacy one begins with its response field
	Driver []byte // the driver's data after the core request
	Resp   uint64 // the user address the response goes to (0: none)
	// CoreOut is the room for the core response, DriverOut the room after it for the
	// driver's (the kernel hands the driver what is left of out_words).
	CoreOut, DriverOut int
	// The header words as sent: legacy in/out in 4-byte units including the header;
	// extended: core in/out in 8-byte units, and the provider's.
	InWords, OutWords, ProvIn, ProvOut int
}

// sizes are the core request and response of each legacy command the fakes answer
// (their structs in abi_gen.go); responses begin the request.
var sizes = map[uint32][2]int{
	CmdGetContext:        {sizeofGetContext, sizeofGetContextResp},
	CmdQueryDevice:       {sizeofQueryDevice, sizeofQueryDeviceResp},
	CmdQueryPort:         {sizeofQueryPort, sizeofQueryPortResp},
	CmdAllocPD:           {sizeofAllocPD, sizeofAllocPDResp},
	CmdDeallocPD:         {sizeofDeallocPD, 0},
	CmdRegMR:             {sizeofRegMR, sizeofRegMRResp},
	CmdDeregMR:           {sizeofDeregMR, 0},
	CmdCreateCompChannel: {sizeofCreateCompChannel, sizeofCreateCompChannelResp},
	CmdCreateCQ:          {sizeofCreateCQ, sizeofCreateCQResp},
	CmdDestroyCQ:         {sizeofDestroyCQ, sizeofDestroyCQResp},
	CmdReqNotifyCQ:       {sizeofReqNotifyCQ, 0},
	CmdCreateQP:          {sizeofCreateQP, sizeofCreateQPResp},
	CmdModifyQP:          {sizeofModifyQP, 0},
	CmdDestroyQP:         {sizeofDestroyQP, sizeofDestroyQPResp},
	CmdPostSend:          {sizeofPostSend, sizeofPostSendResp},
}

// exSizes are the extended commands': core request, smallest core response.
var exSizes = map[uint32][2]int{
	CmdQueryDevice: {sizeofExQueryDevice, 184}, // the kernel's minimum: up to odp_caps
	CmdCreateCQ:    {sizeofExCreateCQ, sizeofExCreateCQResp},
	CmdModifyQP:    {sizeofExModifyQP, sizeofExModifyQPResp}, // libirdma's, for its driver data
	CmdCreateQP:    {sizeofExCreateQP, sizeofExCreateQPResp}, // libhns's
}

// Known reports whether Decode can split command num (extended if ex).
func Known(num uint32, ex bool) bool {
	if ex {
		_, ok := exSizes[num]
		return ok
	}
	_, ok := sizes[num]
	return ok
}

// Decode splits one command write (header | core | driver data) with the kernel's checks
// of the header (verify_hdr): EINVAL for inconsistent lengths, ENOSPC for a request or
// response shorter than the core struct, EOPNOTSUPP for a command it does not know.
func Decode(p []byte) (Command, error) {
	if len(p) < sizeofCmdHdr {
		return Command{}, unix.EINVAL
	}
	h := *(*CmdHdr)(unsafe.Pointer(&p[0]))
	c := Command{Num: h.Command &^ ExFlag, Ex: h.Command&ExFlag != 0, InWords: int(h.InWords), OutWords: int(h.OutWords)}
	if h.Command&^ExFlag > 0xff {
		return c, unix.EINVAL
	}
	if c.Ex {
		sz, ok := exSizes[c.Num]
		if !ok {
			return c, unix.EOPNOTSUPP
		}
		if len(p) < sizeofCmdHdr+sizeofExCmdHdr {
			return c, unix.EINVAL
		}
		x := *(*ExCmdHdr)(unsafe.Pointer(&p[sizeofCmdHdr]))
		c.ProvIn, c.ProvOut = int(x.ProviderInWords), int(x.ProviderOutWords)
		body := p[sizeofCmdHdr+sizeofExCmdHdr:]
		if (c.InWords+c.ProvIn)*8 != len(body) || x.CmdHdrReserved != 0 {
			return c, unix.EINVAL
		}
		if c.InWords*8 < sz[0] {
			return c, unix.ENOSPC
		}
		c.Resp = x.Response
		if c.Resp == 0 && (c.OutWords != 0 || c.ProvOut != 0) {
			return c, unix.EINVAL
		}
		if c.Resp != 0 && c.OutWords*8 < sz[1] {
			return c, unix.ENOSPC
		}
		c.Core, c.Driver = body[:c.InWords*8], body[c.InWords*8:]
		c.CoreOut, c.DriverOut = c.OutWords*8, c.ProvOut*8
		return c, nil
	}
	sz, ok := sizes[c.Num]
	if !ok {
		return c, unix.EOPNOTSUPP
	}
	if c.InWords*4 != len(p) {
		return c, unix.EINVAL
	}
	body := p[sizeofCmdHdr:]
	if len(body) < sz[0] {
		return c, unix.ENOSPC
	}
	if c.OutWords*4 < sz[1] {
		return c, unix.ENOSPC
	}
	c.Core, c.Driver = body[:sz[0]], body[sz[0]:]
	if sz[1] > 0 {
		c.Resp = LE64(body)
		c.CoreOut, c.DriverOut = sz[1], c.OutWords*4-sz[1]
	}
	return c, nil
}

// Req is the core request as T (one of the request structs of abi_gen.go). A shorter
// request reads as zero-extended, as the kernel does.
func Req[T any](c Command) T {
	var v T
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&v)), unsafe.Sizeof(v)), c.Core)
	return v
}

// Bytes is v's memory (a struct of abi_gen.go, or any plain value) as bytes.
func Bytes[T any](v *T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(v)), unsafe.Sizeof(*v))
}

// Reply writes core to the core response and drv behind it, as the kernel copies its
// answer out: each zero-filled to the room the command gave and cut at it. It does
// nothing for a command without a response.
func Reply(c Command, core, drv []byte) {
	if c.Resp == 0 {
		return
	}
	out := Mem(c.Resp, c.CoreOut+c.DriverOut)
	clear(out)
	copy(out[:c.CoreOut], core)
	copy(out[c.CoreOut:], drv)
}

// Mem views n bytes at a process address a provider passed in a command (its buffers
// are real memory of this process: the fakes run in it).
func Mem(addr uint64, n int) []byte {
	if n <= 0 || addr == 0 {
		return nil
	}
	p := *(*unsafe.Pointer)(unsafe.Pointer(&addr))
	return unsafe.Slice((*byte)(p), n)
}

// Ptr is the pointer at a process address a provider passed in a command.
func Ptr(addr uint64) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&addr)) }

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
