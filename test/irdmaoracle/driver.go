// Package irdmaoracle is the irdma part of the oracle (test/oracle): how Debian's libirdma
// (rdma-core 44, ibverbs-providers) finds an Intel E810 in the fake sysfs, what the fake
// kernel answers as the irdma kernel driver does for GEN_2 hardware in RoCEv2 mode (the
// device's limits and features, the doorbell page's mmap key; PD, CQ and QP ids, the
// queue memory the library registers with REG_MR before each CQ and QP), where each queue
// lies in the library's memory, how a scenario's CQE (32 bytes, valid bit, the QP's
// completion context) is placed, and the doorbell discipline gorping's provider is checked
// against. uverbs/irdma's oracle tests run every scenario through the library and through
// gorping's provider over the same fake kernel and compare them.
//
// The regions: "cq<i>" (the CQE ring's pages) and "cq<i>.shadow" (its shadow area: the
// consumer index and the arm word), "qp<i>.sq", "qp<i>.rq" and "qp<i>.shadow" (the QP's
// one buffer), "mr<i>"; the device page is "db" (a QP's doorbell is a 32-bit store of its
// id to offset 0, a CQ's arm one of its id to offset 64).
package irdmaoracle

import (
	"encoding/binary"
	"fmt"
	"strings"
	"syscall"

	"github.com/gorping/gorping/test/internal/kcmd"
	"github.com/gorping/gorping/test/oracle"
)

// Params are the knobs of the fake kernel.
type Params struct {
	Features  uint64 // feature_flags: RTS_AE (1), CQ_RESIZE (2, the CQ's shadow area apart)
	PageSize  int    // the kernel's page size (0: 4096)
	FirstQPN  uint32 // qp_id of the first QP; later QPs count up
	FirstCQN  uint32 // cq_id of the first CQ
	FirstLKey uint32 // lkey (= rkey) of the first application MR; later ones add 0x100
}

// The E810's limits, as the irdma driver reports GEN_2 hardware.
const (
	MaxFrags    = 13
	MaxReadSGE  = 13
	MaxInline   = 101
	MaxQuanta   = 32768
	MinCQSize   = 8
	MaxCQSize   = 1048575
	SQChunk     = 8
	HwRev       = 2
	QPCaps      = 2 | 1 | 4 | 8 // SEND_WITH_IMM, WRITE_WITH_IMM, ROCE, PUSH_MODE
	deviceID    = 0x1593        // E810-C for SFP
	kernelABI   = 5
	reqLen      = 8  // GET_CONTEXT request up to rsvd8 (libirdma 44's)
	respLenOld  = 16 // the i40iw-era response, which GEN_2 refuses
	hwPage      = 4096
	shadowBytes = 64
)

// DefaultParams: an E810 whose firmware has the CQ resize and RTS AE features.
func DefaultParams() Params {
	return Params{Features: 3, FirstQPN: 0x3, FirstCQN: 0x5, FirstLKey: 0x11aa0}
}

func (p Params) page() int {
	if p.PageSize == 0 {
		return 4096
	}
	return p.PageSize
}

// DbKey is the doorbell page's mmap key (a page multiple, as the kernel's mmap entries).
func (p Params) DbKey() uint64 { return 3 * uint64(p.page()) }

// Driver is the oracle's irdma part with parameters P.
type Driver struct{ P Params }

func (d Driver) Library() string     { return "irdma" }
func (d Driver) BuildArgs() []string { return nil }
func (d Driver) PageSize() int       { return d.P.PageSize }

// UncachedDoorbells: irdma maps its doorbell page uncached; the library's spinlocks are
// no write-combining fences (oracle.UncachedDoorbells).
func (d Driver) UncachedDoorbells() bool { return true }

// Sysfs: irdma0 on uverbs0, an E810-C's PCI modalias (libirdma matches Intel 0x8086 and
// the device id), driver ABI 5.
func (d Driver) Sysfs() map[string]string {
	modalias := fmt.Sprintf("pci:v00008086d0000%04Xsv00008086sd00000001bc02sc00i00\n", deviceID)
	return map[string]string{
		"class/infiniband_verbs/abi_version":             "6\n",
		"class/infiniband_verbs/uverbs0/ibdev":           "irdma0\n",
		"class/infiniband_verbs/uverbs0/dev":             "1:3\n",
		"class/infiniband_verbs/uverbs0/abi_version":     "5\n",
		"class/infiniband_verbs/uverbs0/device/modalias": modalias,
		"class/infiniband/irdma0/device/modalias":        modalias,
		"class/infiniband/irdma0/node_type":              "1: CA\n",
		"class/infiniband/irdma0/node_guid":              "b696:91ff:fe00:0001\n",
		"class/infiniband/irdma0/fw_ver":                 "1.62\n",
	}
}

// Mmap: the doorbell page, one hardware page at the key GET_CONTEXT gave.
func (d Driver) Mmap(f *oracle.Fake, off uint64, length, prot int) (string, []byte, syscall.Errno) {
	if off == d.P.DbKey() && length == hwPage {
		return "db", nil, 0
	}
	return "", nil, syscall.EINVAL
}

var le = binary.LittleEndian

// peek is the number of objects of kind created so far, without counting one (a queue's
// memory is registered before the queue is created).
func peek(f *oracle.Fake, kind string) int {
	n, _ := f.Get("n" + kind)
	return int(n)
}

func created(f *oracle.Fake, kind string) int {
	n := peek(f, kind)
	f.Set("n"+kind, uint64(n+1))
	return n
}

// Answer answers as the irdma kernel driver does, in Params' terms.
func (d Driver) Answer(f *oracle.Fake, c *oracle.Cmd, k kcmd.Command) ([]byte, syscall.Errno) {
	p := d.P
	out := make([]byte, k.CoreOut+k.DriverOut)
	core, drv := k.Core, k.Driver
	drvOut := out[k.CoreOut:]
	if k.Ex {
		switch k.Num {
		case kcmd.CmdCreateCQ:
			return d.createCQ(f, c, k, out, true)
		case kcmd.CmdModifyQP:
			// libirdma's push-mode modify: flush flags in, push page keys out; the
			// driver has push mode off, so push_valid stays 0.
			if len(drv) < 2 || len(drvOut) < 19 {
				return nil, syscall.EINVAL
			}
			r := kcmd.ExModifyQPResp{ResponseLength: uint32(min(k.CoreOut, 8))}
			copy(out, kcmd.Bytes(&r))
			return out, 0
		}
		return nil, syscall.EOPNOTSUPP
	}
	switch k.Num {
	case kcmd.CmdGetContext:
		if len(drv) < reqLen || len(drvOut) < respLenOld {
			return nil, syscall.EINVAL
		}
		if v := drv[4]; v < 4 || v > kernelABI {
			return nil, syscall.EINVAL
		}
		if len(drvOut) == respLenOld {
			return nil, syscall.EOPNOTSUPP // the i40iw layout: GEN_1 only
		}
		le.PutUint32(out, 0)                  // async_fd: the harness's
		le.PutUint32(out[4:], 1)              // num_comp_vectors
		le.PutUint32(drvOut[0:], 0x40000)     // max_pds
		le.PutUint32(drvOut[4:], 0x40000)     // max_qps
		le.PutUint32(drvOut[8:], 2*0x1000)    // wq_size
		drvOut[12] = kernelABI                // kernel_ver
		le.PutUint64(drvOut[16:], p.Features) // feature_flags
		le.PutUint64(drvOut[24:], p.DbKey())  // db_mmap_key
		le.PutUint32(drvOut[32:], MaxFrags)
		le.PutUint32(drvOut[36:], MaxReadSGE)
		le.PutUint32(drvOut[40:], MaxInline)
		le.PutUint32(drvOut[44:], MaxQuanta) // rq quanta
		le.PutUint32(drvOut[48:], MaxQuanta) // wq quanta
		le.PutUint32(drvOut[52:], MinCQSize)
		le.PutUint32(drvOut[56:], MaxCQSize)
		le.PutUint16(drvOut[60:], SQChunk)
		drvOut[62] = HwRev
	case kcmd.CmdQueryDevice:
		var r kcmd.QueryDeviceResp
		queryDevice(&r)
		copy(out, kcmd.Bytes(&r))
	case kcmd.CmdQueryPort:
		r := kcmd.QueryPortResp{MaxMsgSz: 0x7fffffff, GIDTblLen: 32, PkeyTblLen: 1, State: 4, MaxMTU: 5, ActiveMTU: 3,
			LID: 1, MaxVlNum: 4, ActiveWidth: 2, ActiveSpeed: 64, PhysState: 5, LinkLayer: 2}
		copy(out, kcmd.Bytes(&r))
	case kcmd.CmdAllocPD:
		n := uint32(f.Count("pd"))
		le.PutUint32(out, f.Handle())
		if len(drvOut) >= 8 {
			le.PutUint32(drvOut, 0x1+n) // pd_id
		}
	case kcmd.CmdRegMR:
		return d.regMR(f, c, core, drv, out)
	case kcmd.CmdCreateCompChannel:
		// the fd is the harness's
	case kcmd.CmdCreateCQ:
		return d.createCQ(f, c, k, out, false)
	case kcmd.CmdCreateQP:
		if len(drv) < 16 || len(drvOut) < 16 {
			return nil, syscall.EINVAL
		}
		f.Sym(c, "core", 8, "user_handle")
		id := created(f, "qp")
		name := fmt.Sprintf("qp%d", id)
		sq := f.Region(name + ".sq")
		buf := le.Uint64(drv[0:])
		if sq == nil || sq.Addr != buf {
			return nil, syscall.ENODATA // no REG_MR of type QP at this address
		}
		f.Sym(c, "driver", 0, f.Addr(buf))
		f.Set(name+".handle", le.Uint64(drv[8:]))
		f.Sym(c, "driver", 8, "qp_handle")
		qpn := p.FirstQPN + uint32(id)
		le.PutUint32(out, f.Handle())
		le.PutUint32(out[4:], qpn)
		copy(out[8:28], core[32:52]) // caps granted = caps asked
		le.PutUint32(drvOut[0:], qpn)
		le.PutUint32(drvOut[4:], le.Uint32(core[32:])) // actual_sq_size: max_send_wr as asked
		le.PutUint32(drvOut[8:], le.Uint32(core[36:])) // actual_rq_size
		if len(drvOut) >= 24 {
			le.PutUint32(drvOut[20:], QPCaps) // lsmm 0: RoCE
		}
	case kcmd.CmdModifyQP, kcmd.CmdDeallocPD:
	case kcmd.CmdDeregMR:
		f.Kill(le.Uint32(core))
	case kcmd.CmdDestroyCQ, kcmd.CmdDestroyQP:
		f.Kill(le.Uint32(core[8:]))
	default:
		return nil, syscall.EOPNOTSUPP
	}
	return out, 0
}

// regMR registers an application buffer (reg_type MEM: "mr<i>") or a queue's memory
// (QP: its send queue, receive queue and shadow area; CQ: the ring, then its shadow area
// apart when the device resizes CQs), named after the queue the next create makes.
func (d Driver) regMR(f *oracle.Fake, c *oracle.Cmd, core, drv, out []byte) ([]byte, syscall.Errno) {
	start, length := le.Uint64(core[8:]), int(le.Uint64(core[16:]))
	var typ, cqPages, rqPages, sqPages uint16
	if len(drv) >= 8 {
		typ, cqPages, rqPages, sqPages = le.Uint16(drv[0:]), le.Uint16(drv[2:]), le.Uint16(drv[4:]), le.Uint16(drv[6:])
	}
	var names []string
	key := uint32(0)
	switch typ {
	case 0:
		n := f.Count("mr")
		name := fmt.Sprintf("mr%d", n)
		f.AddRegion(name, start, length)
		names = []string{name}
		key = d.P.FirstLKey + uint32(n)*0x100
	case 1:
		q := fmt.Sprintf("qp%d", peek(f, "qp"))
		sq, rq := int(sqPages)*hwPage, int(rqPages)*hwPage
		if length < sq+rq+shadowBytes {
			return nil, syscall.EINVAL
		}
		f.AddRegion(q+".sq", start, sq)
		f.AddRegion(q+".rq", start+uint64(sq), rq)
		f.AddRegion(q+".shadow", start+uint64(sq+rq), shadowBytes)
		names = []string{q + ".sq", q + ".rq", q + ".shadow"}
		key = 0x900000 + uint32(f.Count("qmr"))*0x100
	case 2:
		q := fmt.Sprintf("cq%d", peek(f, "cq"))
		key = 0x900000 + uint32(f.Count("qmr"))*0x100
		if f.Region(q) == nil {
			ring := int(cqPages) * hwPage
			split := d.P.Features&2 != 0
			if length < ring || !split && length < ring+shadowBytes {
				return nil, syscall.EINVAL
			}
			f.AddRegion(q, start, ring)
			names = []string{q}
			if !split {
				f.AddRegion(q+".shadow", start+uint64(ring), shadowBytes)
				names = append(names, q+".shadow")
			}
		} else {
			f.AddRegion(q+".shadow", start, shadowBytes)
			names = []string{q + ".shadow"}
		}
		f.Sym(c, "core", 8, f.Addr(start))
		f.Sym(c, "core", 24, f.Addr(start))
	default:
		return nil, syscall.EINVAL
	}
	if typ == 1 {
		f.Sym(c, "core", 8, f.Addr(start))
		f.Sym(c, "core", 24, f.Addr(start))
	}
	le.PutUint32(out, f.Handle(names...))
	le.PutUint32(out[4:], key)
	le.PutUint32(out[8:], key)
	return out, 0
}

// createCQ answers CREATE_CQ, legacy (gorping) or extended (libirdma): the ring and the
// shadow area must be the memory registered for the CQ.
func (d Driver) createCQ(f *oracle.Fake, c *oracle.Cmd, k kcmd.Command, out []byte, ex bool) ([]byte, syscall.Errno) {
	core, drv := k.Core, k.Driver
	if len(drv) < 16 || k.DriverOut < 8 {
		return nil, syscall.EINVAL
	}
	uh, cqeOff, chOff := 8, 16, 24
	if ex {
		uh, cqeOff, chOff = 0, 8, 16
	}
	f.Sym(c, "core", uh, "user_handle")
	if int32(le.Uint32(core[chOff:])) >= 0 {
		clear(c.Core[chOff : chOff+4])
		c.Syms = append(c.Syms, oracle.Sym{Part: "core", Off: chOff, Name: "fd"})
	}
	id := peek(f, "cq")
	name := fmt.Sprintf("cq%d", id)
	ring, shadow := f.Region(name), f.Region(name+".shadow")
	buf, sh := le.Uint64(drv[0:]), le.Uint64(drv[8:])
	if ring == nil || ring.Addr != buf || shadow == nil || shadow.Addr != sh {
		return nil, syscall.EPROTO // no REG_MR of type CQ for this ring or shadow area
	}
	created(f, "cq")
	f.Sym(c, "driver", 0, f.Addr(buf))
	f.Sym(c, "driver", 8, f.Addr(sh))
	entries := le.Uint32(core[cqeOff:])
	le.PutUint32(out, f.Handle())
	le.PutUint32(out[4:], entries)
	if ex {
		le.PutUint32(out[12:], 16) // response_length
	}
	drvOut := out[k.CoreOut:]
	le.PutUint32(drvOut[0:], d.P.FirstCQN+uint32(id))
	le.PutUint32(drvOut[4:], entries)
	return out, 0
}

// queryDevice fills an E810's attributes as the irdma driver reports them.
func queryDevice(r *kcmd.QueryDeviceResp) {
	*r = kcmd.QueryDeviceResp{FwVer: 1<<32 | 62, MaxMRSize: 1 << 45, PageSizeCap: 0x40201000,
		VendorID: 0x8086, VendorPartID: deviceID, MaxQP: 0x40000, MaxQPWR: 0x3fff,
		MaxSGE: MaxFrags, MaxSGERd: MaxReadSGE, MaxCQ: 0x40000, MaxCQE: MaxCQSize - 1, MaxMR: 0x40000, MaxPD: 0x40000,
		MaxQPRdAtom: 127, MaxQPInitRdAtom: 255, MaxPkeys: 1, PhysPortCnt: 1}
}

// Poke places a 32-byte CQE in slot Slot of CQ ID, with the completion context of QP Ref
// (word 1) unless Ref is negative.
func (d Driver) Poke(f *oracle.Fake, s oracle.Step) (string, int, []byte, error) {
	if len(s.Bytes) != 32 {
		return "", 0, nil, fmt.Errorf("irdmaoracle: a CQE has 32 bytes, not %d", len(s.Bytes))
	}
	b := append([]byte(nil), s.Bytes...)
	if s.Ref >= 0 {
		h, ok := f.Get(fmt.Sprintf("qp%d.handle", s.Ref))
		if !ok {
			return "", 0, nil, fmt.Errorf("irdmaoracle: no QP %d for the CQE", s.Ref)
		}
		le.PutUint64(b[8:], h)
	}
	return fmt.Sprintf("cq%d", s.ID), s.Slot * 32, b, nil
}

// NormalizeMem replaces, in a CQ's CQEs, a completion context the fake learned (the
// library's pointer, gorping's index) by 0xfeed0000_000000<qp id>: what it stands for.
func (d Driver) NormalizeMem(f *oracle.Fake, region string, b []byte) []byte {
	if !strings.HasPrefix(region, "cq") || strings.Contains(region, ".") {
		return b
	}
	handles := map[uint64]uint64{}
	for i := 0; ; i++ {
		h, ok := f.Get(fmt.Sprintf("qp%d.handle", i))
		if !ok {
			break
		}
		handles[h] = 0xfeed000000000000 | uint64(i)
	}
	for off := 0; off+32 <= len(b); off += 32 {
		if v, ok := handles[le.Uint64(b[off+8:])]; ok {
			le.PutUint64(b[off+8:], v)
		}
	}
	return b
}

// CheckOrder checks irdma's doorbell discipline on the provider's own sequence (the
// barriers x86 does not show included), as libirdma orders it: every doorbell is one
// 4-byte store to the doorbell page, at offset 0 (a QP's) or 64 (a CQ's arm), directly
// after udma_to_device_barrier (ToDevice: the WQEs' valid bits, or the shadow area's arm
// word, are visible first: DMB OSHST on arm64), and a step ends with its last doorbell
// (no WQE is made valid after it); nothing is stored outside the page.
func (Driver) CheckOrder(line string, ops []oracle.SeqEvent) []string {
	var d []string
	barrier, rung, after := false, false, false
	for i, e := range ops {
		if e.Fence != "" {
			barrier = e.Fence == "to_device"
			after = after || rung && barrier
			continue
		}
		rung, after = true, false
		switch {
		case e.Target != "db":
			d = append(d, fmt.Sprintf("%q: op %d: store %v outside the doorbell page", line, i, e))
		case e.Width != 4:
			d = append(d, fmt.Sprintf("%q: op %d: doorbell %v is %d bytes wide, the device takes 4", line, i, e, e.Width))
		case e.Off != 0 && e.Off != 64:
			d = append(d, fmt.Sprintf("%q: op %d: doorbell %v at offset %#x, the device's are at 0 (QP) and 64 (CQ)", line, i, e, e.Off))
		case !barrier:
			d = append(d, fmt.Sprintf("%q: op %d: doorbell %v without ToDevice directly before it", line, i, e))
		}
		barrier = false
	}
	if after {
		// libirdma's posts end with the doorbell: a barrier after it is a WQE's valid bit
		// published after the doorbell that was to announce it.
		d = append(d, fmt.Sprintf("%q: ToDevice after the last doorbell: a WQE made valid after its doorbell", line))
	}
	return d
}

// The command numbers the provider's tests compare by (uverbs' write commands).
const (
	CmdCreateCQ = kcmd.CmdCreateCQ
	CmdRegMR    = kcmd.CmdRegMR
	CmdModifyQP = kcmd.CmdModifyQP
)
