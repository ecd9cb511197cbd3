// Package bnxtreoracle is the bnxt_re part of the oracle (test/oracle): how Debian's
// libbnxt_re (rdma-core 44, ibverbs-providers) finds a Broadcom NetXtreme-E/Thor adapter
// in the fake sysfs, what the fake kernel answers as the bnxt_re kernel driver does (the
// context's page and CQE sizes, chip and WQE mode; PD, CQ and QP ids; the shared and the
// doorbell page), where each queue lies in the library's memory, how a scenario's CQE
// (32 bytes, phase bit, the QP's handle) is placed, and the doorbell discipline gorping's
// provider is checked against. uverbs/bnxtre's oracle tests run every scenario through
// the library and through gorping's provider over the same fake kernel and compare them.
//
// The regions: "cq<i>" (the CQE ring), "qp<i>.sq" (the send queue's slots, then its PSN
// search entries), "qp<i>.rq" and "mr<i>"; the device page is "db" (every doorbell is a
// 64-bit store to its offset 0).
package bnxtreoracle

import (
	"fmt"
	"strings"
	"syscall"

	"github.com/gorping/gorping/test/internal/kcmd"
	"github.com/gorping/gorping/test/oracle"
)

// Params are the knobs of the fake kernel.
type Params struct {
	Chip      uint16 // chip_id0's chip number: 0x1750 (BCM57508, gen P5) or a gen P4 one
	Variable  bool   // the WQE mode the kernel answers (else static 128-byte WQEs)
	PageSize  int    // the kernel's page size (0: 4096), answered as pg_size
	FirstQPN  uint32 // qpid of the first QP; later QPs count up
	FirstCQN  uint32 // cqid of the first CQ
	FirstLKey uint32 // lkey (= rkey) of the first MR; later MRs add 0x100
	MaxCQD    uint32 // max_cqd: the deepest CQ
	MaxSGE    uint32 // QUERY_DEVICE's max_sge
	MaxQPWR   uint32 // QUERY_DEVICE's max_qp_wr
}

// DefaultParams: a BCM57508 (Thor) in static WQE mode, 4 KiB pages.
func DefaultParams() Params {
	return Params{Chip: 0x1750, FirstQPN: 0x51, FirstCQN: 0x21, FirstLKey: 0x20c01, MaxCQD: 0xffff, MaxSGE: 6, MaxQPWR: 0xffff}
}

// DBR is where the doorbell page maps (ALLOC_PD's dbr): one page from the offsets 0 (the
// shared page).
func (p Params) DBR() uint64 { return 0x40 * uint64(p.page()) }

func (p Params) page() int {
	if p.PageSize == 0 {
		return 4096
	}
	return p.PageSize
}

func (p Params) genP5() bool { return p.Chip == 0x1750 || p.Chip == 0x1751 || p.Chip == 0x1752 }

// Driver is the oracle's bnxt_re part with parameters P.
type Driver struct{ P Params }

func (d Driver) Library() string     { return "bnxt_re" }
func (d Driver) BuildArgs() []string { return nil }
func (d Driver) PageSize() int       { return d.P.PageSize }

// Sysfs: bnxt_re0 on uverbs0, a BCM57508's PCI modalias (libbnxt_re matches Broadcom
// 0x14e4 and the device id), ABI 1.
func (d Driver) Sysfs() map[string]string {
	modalias := fmt.Sprintf("pci:v000014E4d0000%04Xsv000014E4sd00000000bc02sc00i00\n", d.P.Chip)
	return map[string]string{
		"class/infiniband_verbs/abi_version":             "6\n",
		"class/infiniband_verbs/uverbs0/ibdev":           "bnxt_re0\n",
		"class/infiniband_verbs/uverbs0/dev":             "1:3\n",
		"class/infiniband_verbs/uverbs0/abi_version":     "1\n",
		"class/infiniband_verbs/uverbs0/device/modalias": modalias,
		"class/infiniband/bnxt_re0/device/modalias":      modalias,
		"class/infiniband/bnxt_re0/node_type":            "1: CA\n",
		"class/infiniband/bnxt_re0/node_guid":            "0a14:e4ff:fe00:0001\n",
		"class/infiniband/bnxt_re0/fw_ver":               "224.0.158.0\n",
	}
}

// Mmap: offset 0 is the context's shared page (memory the kernel writes AH ids to), the
// dbr offset the doorbell page.
func (d Driver) Mmap(f *oracle.Fake, off uint64, length, prot int) (string, []byte, syscall.Errno) {
	switch {
	case length != d.P.page():
		return "", nil, syscall.EINVAL
	case off == 0:
		return "", nil, 0
	case off == d.P.DBR():
		return "db", nil, 0
	}
	return "", nil, syscall.EINVAL
}

var le = oracleLE{}

// Geometry of the library's queues, written out here from libbnxt_re's sizing (and the
// kernel's, which has to agree) to watch exactly the memory the library allocated.

func roundupPow2(n uint32) uint32 {
	if n == 1 {
		return 2
	}
	r := uint32(1)
	for r < n {
		r <<= 1
	}
	return r
}

func alignUp(n, a uint32) uint32 { return (n + a - 1) / a * a }

// SQ is a send queue's size: its slots and PSN search entries (after the slots), and the
// slots one WQE takes.
type SQ struct {
	NWR, Slots, PSNSlots, WQESlots, Inline uint32
}

// SQSize sizes the send queue of a QP created with caps (as the library sent them to
// the kernel: max_inline_data already what the WQE allows).
func (p Params) SQSize(maxSendWR, maxSendSGE, maxInline uint32) SQ {
	diff := uint32(128)
	if p.Variable {
		diff = 0
	}
	nwr := roundupPow2(maxSendWR + 1 + diff)
	nsge := maxSendSGE + maxSendSGE%2
	wqe := 16*nsge + 32
	if il := alignUp(maxInline, 32); il != 0 {
		wqe = alignUp(max(32+il, wqe), 32)
	}
	if !p.Variable {
		wqe = 16*6 + 32
	}
	psn := uint32(8)
	if p.genP5() {
		psn = 16
	}
	s := SQ{NWR: nwr, Slots: nwr * wqe / 16, PSNSlots: (nwr*psn + 15) / 16, WQESlots: wqe / 16}
	if maxInline != 0 {
		s.Inline = wqe - 32
	}
	return s
}

// SendsUntilFull is how many sends of nsge SGEs (not inline) a fresh send queue with caps
// takes before the library refuses the next as full (bnxt_re_is_que_full).
func (p Params) SendsUntilFull(c oracle.Caps, nsge uint32) int {
	sq := p.SQSize(c.MaxSendWR, c.MaxSendSGE, c.MaxInline)
	slots, diff := (16*nsge+32)/16, uint32(0)
	if !p.Variable {
		slots, diff = sq.WQESlots, 128*sq.WQESlots
	}
	n := 0
	for tail := uint32(0); ; n++ {
		avail := sq.Slots - tail // head stays 0
		if avail <= slots+diff {
			return n
		}
		tail += slots
	}
}

// RQSize is the receive queue's slots and the slots one WQE takes.
func (p Params) RQSize(maxRecvWR, maxRecvSGE uint32) (nwr, slots, wqeSlots uint32) {
	nwr = roundupPow2(maxRecvWR + 1)
	nsge := maxRecvSGE + maxRecvSGE%2
	wqe := 16*nsge + 32
	if !p.Variable {
		wqe = 16*6 + 32
	}
	return nwr, nwr * wqe / 16, wqe / 16
}

// CQEntries is the CQ's ring size for a depth asked.
func (p Params) CQEntries(cqe uint32) uint32 { return min(roundupPow2(cqe+1), p.MaxCQD+1) }

// Answer answers as the bnxt_re kernel driver does, in Params' terms.
func (d Driver) Answer(f *oracle.Fake, c *oracle.Cmd, k kcmd.Command) ([]byte, syscall.Errno) {
	p := d.P
	out := make([]byte, k.CoreOut+k.DriverOut)
	core, drv := k.Core, k.Driver
	drvOut := out[k.CoreOut:]
	if k.Ex {
		if k.Num == kcmd.CmdQueryDevice {
			var r kcmd.ExQueryDeviceResp
			d.queryDevice(&r.Base)
			r.ResponseLength = uint32(min(k.CoreOut, 304))
			copy(out, kcmd.Bytes(&r))
			return out, 0
		}
		return nil, syscall.EOPNOTSUPP
	}
	switch k.Num {
	case kcmd.CmdGetContext:
		if len(drv) != 0 {
			return nil, syscall.EINVAL
		}
		le.put32(out, 0, 0)                                                  // async_fd: the harness's
		le.put32(out, 4, 1)                                                  // num_comp_vectors
		le.put32(drvOut, 4, 0x10000)                                         // max_qp
		le.put32(drvOut, 8, uint32(p.page()))                                // pg_size
		le.put32(drvOut, 12, 32)                                             // cqe_sz
		le.put32(drvOut, 16, p.MaxCQD)                                       // max_cqd
		le.put64(drvOut, 24, 0x3)                                            // comp_mask: HAVE_CCTX | HAVE_MODE
		le.put32(drvOut, 32, uint32(p.Chip)|1<<16)                           // chip_id0: number, rev 1, metal 0
		le.put32(drvOut, 40, map[bool]uint32{false: 0, true: 1}[p.Variable]) // mode
	case kcmd.CmdQueryDevice:
		var r kcmd.QueryDeviceResp
		d.queryDevice(&r)
		copy(out, kcmd.Bytes(&r))
	case kcmd.CmdQueryPort:
		r := kcmd.QueryPortResp{MaxMsgSz: 0x80000000, GIDTblLen: 256, PkeyTblLen: 1, State: 4, MaxMTU: 5, ActiveMTU: 3,
			MaxVlNum: 4, ActiveWidth: 2, ActiveSpeed: 32, PhysState: 5, LinkLayer: 2}
		copy(out, kcmd.Bytes(&r))
	case kcmd.CmdAllocPD:
		n := uint32(f.Count("pd"))
		le.put32(out, 0, n)
		if len(drvOut) >= 16 {
			le.put32(drvOut, 0, 0x10+n) // pdid
			le.put32(drvOut, 4, 3)      // dpi
			le.put64(drvOut, 8, p.DBR())
		}
	case kcmd.CmdRegMR:
		n := f.Count("mr")
		lkey := p.FirstLKey + uint32(n)*0x100
		name := fmt.Sprintf("mr%d", n)
		f.AddRegion(name, le.get64(core, 8), int(le.get64(core, 16)))
		le.put32(out, 0, f.Handle(name))
		le.put32(out, 4, lkey)
		le.put32(out, 8, lkey)
	case kcmd.CmdCreateCompChannel:
		// the fd is the harness's
	case kcmd.CmdCreateCQ:
		if len(drv) < 16 {
			return nil, syscall.EINVAL
		}
		f.Sym(c, "core", 8, "user_handle")
		if int32(le.get32(core, 24)) >= 0 {
			clear(c.Core[24:28])
			c.Syms = append(c.Syms, oracle.Sym{Part: "core", Off: 24, Name: "fd"})
		}
		id := f.Count("cq")
		name := fmt.Sprintf("cq%d", id)
		entries := p.CQEntries(le.get32(core, 16))
		va := le.get64(drv, 0)
		f.AddRegion(name, va, int(entries)*32)
		f.Sym(c, "driver", 0, f.Addr(va))
		f.Sym(c, "driver", 8, "cq_handle")
		le.put32(out, 0, f.Handle(name))
		le.put32(out, 4, entries)
		le.put32(drvOut, 0, p.FirstCQN+uint32(id)) // cqid
		le.put32(drvOut, 4, 0)                     // tail
		le.put32(drvOut, 8, 1)                     // phase: the first lap's CQEs have phase 1
	case kcmd.CmdCreateQP:
		if len(drv) < 24 {
			return nil, syscall.EINVAL
		}
		f.Sym(c, "core", 8, "user_handle")
		id := f.Count("qp")
		name := fmt.Sprintf("qp%d", id)
		sq := p.SQSize(le.get32(core, 32), le.get32(core, 40), le.get32(core, 48))
		_, rslots, _ := p.RQSize(le.get32(core, 36), le.get32(core, 44))
		sqva, rqva := le.get64(drv, 0), le.get64(drv, 8)
		f.AddRegion(name+".sq", sqva, int(sq.Slots+sq.PSNSlots)*16)
		f.AddRegion(name+".rq", rqva, int(rslots)*16)
		f.Sym(c, "driver", 0, f.Addr(sqva))
		f.Sym(c, "driver", 8, f.Addr(rqva))
		f.Set(name+".handle", le.get64(drv, 16))
		f.Sym(c, "driver", 16, "qp_handle")
		qpn := p.FirstQPN + uint32(id)
		le.put32(out, 0, f.Handle(name+".sq", name+".rq"))
		le.put32(out, 4, qpn)
		copy(out[8:28], core[32:52]) // caps granted = caps asked
		le.put32(drvOut, 0, qpn)
	case kcmd.CmdModifyQP, kcmd.CmdDeallocPD:
	case kcmd.CmdDeregMR:
		f.Kill(le.get32(core, 0))
	case kcmd.CmdDestroyCQ, kcmd.CmdDestroyQP:
		f.Kill(le.get32(core, 8))
	default:
		return nil, syscall.EOPNOTSUPP
	}
	return out, 0
}

// queryDevice fills the attributes of a BCM57508 as the bnxt_re driver reports them.
func (d Driver) queryDevice(r *kcmd.QueryDeviceResp) {
	*r = kcmd.QueryDeviceResp{FwVer: 0x00009ee0, MaxMRSize: 1 << 40, PageSizeCap: 0x201000,
		VendorID: 0x14e4, VendorPartID: uint32(d.P.Chip), MaxQP: 0xffff, MaxQPWR: d.P.MaxQPWR,
		MaxSGE: d.P.MaxSGE, MaxSGERd: d.P.MaxSGE, MaxCQ: 0xffff, MaxCQE: d.P.MaxCQD, MaxMR: 0xffff, MaxPD: 0xffff,
		MaxQPRdAtom: 126, MaxQPInitRdAtom: 126, MaxPkeys: 1, LocalCaAckDelay: 16, PhysPortCnt: 1}
}

// Poke places a 32-byte CQE in slot Slot of CQ ID, with the handle of QP Ref in its
// qp_handle (where its type keeps it) unless Ref is negative.
func (d Driver) Poke(f *oracle.Fake, s oracle.Step) (string, int, []byte, error) {
	if len(s.Bytes) != 32 {
		return "", 0, nil, fmt.Errorf("bnxtreoracle: a CQE has 32 bytes, not %d", len(s.Bytes))
	}
	b := append([]byte(nil), s.Bytes...)
	if s.Ref >= 0 {
		h, ok := f.Get(fmt.Sprintf("qp%d.handle", s.Ref))
		if !ok {
			return "", 0, nil, fmt.Errorf("bnxtreoracle: no QP %d for the CQE", s.Ref)
		}
		off := 8
		if typ := b[24] >> 1 & 0xf; typ == 0 || typ == 0xe {
			off = 0
		}
		le.put64(b, off, h)
	}
	return fmt.Sprintf("cq%d", s.ID), s.Slot * 32, b, nil
}

// NormalizeMem replaces, in a CQ's CQEs, a qp_handle the fake learned (the library's
// pointer, gorping's index) by 0xfeed0000_000000<qp id>: what it stands for.
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
		h := off + 8
		if typ := b[off+24] >> 1 & 0xf; typ == 0 || typ == 0xe {
			h = off
		}
		if v, ok := handles[le.get64(b, h)]; ok {
			le.put64(b, h, v)
		}
	}
	return b
}
