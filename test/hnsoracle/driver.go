// Package hnsoracle is the hns part of the oracle (test/oracle): how Debian's libhns
// (rdma-core 44, ibverbs-providers) finds a HiSilicon HIP08/HIP09 RoCE engine in the fake
// sysfs, what the fake kernel answers as the hns_roce_hw_v2 kernel driver does (the CQE
// size, the hardware version and limits; PD, CQ and QP numbers, the record doorbell
// capabilities, the UAR page), where each queue and doorbell record lies in the library's
// memory, how a scenario's CQE (32 or 64 bytes, owner bit, QPN) is placed, and the
// doorbell discipline gorping's provider is checked against. uverbs/hns's oracle tests run
// every scenario through the library and through gorping's provider over the same fake
// kernel and compare them.
//
// The regions: "cq<i>" (the CQE ring) and "cq<i>.db" (its consumer index record),
// "qp<i>.sq", "qp<i>.sge" (the extended SGE area, if any), "qp<i>.rq", "qp<i>.sq.db" and
// "qp<i>.rq.db" (the queues' head records), "mr<i>"; the device page is "db" (the UAR
// page: every doorbell is a 64-bit store to offset 0x230).
package hnsoracle

import (
	"encoding/binary"
	"fmt"
	"syscall"

	"github.com/gorping/gorping/test/internal/kcmd"
	"github.com/gorping/gorping/test/oracle"
)

// Params are the knobs of the fake kernel.
type Params struct {
	HwVer     uint32 // QUERY_DEVICE's hw_ver: 0x100 (HIP08) or 0x130 (HIP09)
	CQESize   uint32 // GET_CONTEXT's cqe_size: 32 or 64
	QPCaps    uint64 // CREATE_QP's cap_flags: RQ_RECORD_DB 1, SQ_RECORD_DB 2, OWNER_DB 4
	CQCaps    uint64 // CREATE_CQ's cap_flags: RECORD_DB 1
	PageSize  int    // the kernel's page size (0: 4096)
	FirstQPN  uint32
	FirstCQN  uint32
	FirstLKey uint32
}

// The engine's limits, as the hns driver reports them.
const (
	MaxQPWR = 0x8000
	MaxSGE  = 64
	MaxCQE  = 0x400000
	partID  = 0xa222
	dbOff   = 0x230
)

// DefaultParams: a HIP08 with record doorbells for both queues and the CQ.
func DefaultParams() Params {
	return Params{HwVer: 0x100, CQESize: 32, QPCaps: 3, CQCaps: 1, FirstQPN: 0x8, FirstCQN: 0x2, FirstLKey: 0x300}
}

func (p Params) page() int {
	if p.PageSize == 0 {
		return 4096
	}
	return p.PageSize
}

// Driver is the oracle's hns part with parameters P.
type Driver struct{ P Params }

func (d Driver) Library() string     { return "hns" }
func (d Driver) BuildArgs() []string { return nil }
func (d Driver) PageSize() int       { return d.P.PageSize }

// UncachedDoorbells: hns maps the UAR page uncached; the library's spinlocks are no
// write-combining fences (oracle.UncachedDoorbells).
func (d Driver) UncachedDoorbells() bool { return true }

// Sysfs: hns_0 on uverbs0, a HIP08 RoCE function's PCI modalias (libhns matches
// HiSilicon 0x19e5 and the device id).
func (d Driver) Sysfs() map[string]string {
	modalias := fmt.Sprintf("pci:v000019E5d0000%04Xsv000019E5sd00000000bc02sc00i00\n", partID)
	return map[string]string{
		"class/infiniband_verbs/abi_version":             "6\n",
		"class/infiniband_verbs/uverbs0/ibdev":           "hns_0\n",
		"class/infiniband_verbs/uverbs0/dev":             "1:3\n",
		"class/infiniband_verbs/uverbs0/abi_version":     "1\n",
		"class/infiniband_verbs/uverbs0/device/modalias": modalias,
		"class/infiniband/hns_0/device/modalias":         modalias,
		"class/infiniband/hns_0/node_type":               "1: CA\n",
		"class/infiniband/hns_0/node_guid":               "5e4a:89ff:fe00:0001\n",
		"class/infiniband/hns_0/fw_ver":                  "1.12.002\n",
	}
}

// Mmap: offset 0 is the UAR page, one kernel page.
func (d Driver) Mmap(f *oracle.Fake, off uint64, length, prot int) (string, []byte, syscall.Errno) {
	if off == 0 && length == d.P.page() {
		return "db", nil, 0
	}
	return "", nil, syscall.EINVAL
}

var le = binary.LittleEndian

func align(n, a int) int { return (n + a - 1) / a * a }

func roundupPow2(n uint32) uint32 {
	r := uint32(1)
	for r < n {
		r <<= 1
	}
	return r
}

// Answer answers as the hns kernel driver does, in Params' terms.
func (d Driver) Answer(f *oracle.Fake, c *oracle.Cmd, k kcmd.Command) ([]byte, syscall.Errno) {
	p := d.P
	out := make([]byte, k.CoreOut+k.DriverOut)
	drvOut := out[k.CoreOut:]
	if k.Ex {
		switch k.Num {
		case kcmd.CmdQueryDevice:
			var r kcmd.ExQueryDeviceResp
			d.queryDevice(&r.Base)
			r.ResponseLength = uint32(min(k.CoreOut, 304))
			copy(out, kcmd.Bytes(&r))
			return out, 0
		case kcmd.CmdCreateCQ:
			return d.createCQ(f, c, k, out, true)
		case kcmd.CmdCreateQP:
			return d.createQP(f, c, k, out, true)
		}
		return nil, syscall.EOPNOTSUPP
	}
	core := k.Core
	switch k.Num {
	case kcmd.CmdGetContext:
		if len(drvOut) < 24 {
			return nil, syscall.EINVAL
		}
		le.PutUint32(out, 0)     // async_fd: the harness's
		le.PutUint32(out[4:], 1) // num_comp_vectors
		le.PutUint32(drvOut[0:], 0x80000)
		le.PutUint32(drvOut[4:], p.CQESize)
		le.PutUint32(drvOut[8:], 0x100000)
	case kcmd.CmdQueryDevice:
		var r kcmd.QueryDeviceResp
		d.queryDevice(&r)
		copy(out, kcmd.Bytes(&r))
	case kcmd.CmdQueryPort:
		r := kcmd.QueryPortResp{MaxMsgSz: 0x80000000, GIDTblLen: 256, PkeyTblLen: 1, State: 4, MaxMTU: 5, ActiveMTU: 3,
			MaxVlNum: 4, ActiveWidth: 2, ActiveSpeed: 64, PhysState: 5, LinkLayer: 2}
		copy(out, kcmd.Bytes(&r))
	case kcmd.CmdAllocPD:
		n := uint32(f.Count("pd"))
		le.PutUint32(out, f.Handle())
		if len(drvOut) >= 4 {
			le.PutUint32(drvOut, 0x10+n)
		}
	case kcmd.CmdRegMR:
		n := f.Count("mr")
		lkey := p.FirstLKey + uint32(n)*0x100
		name := fmt.Sprintf("mr%d", n)
		f.AddRegion(name, le.Uint64(core[8:]), int(le.Uint64(core[16:])))
		le.PutUint32(out, f.Handle(name))
		le.PutUint32(out[4:], lkey)
		le.PutUint32(out[8:], lkey)
	case kcmd.CmdCreateCompChannel:
	case kcmd.CmdCreateCQ:
		return d.createCQ(f, c, k, out, false)
	case kcmd.CmdCreateQP:
		return d.createQP(f, c, k, out, false)
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

func (d Driver) queryDevice(r *kcmd.QueryDeviceResp) {
	*r = kcmd.QueryDeviceResp{FwVer: 1<<32 | 12<<16 | 2, MaxMRSize: 1 << 40, PageSizeCap: 0xfffff000,
		VendorID: 0x19e5, VendorPartID: partID, HwVer: d.P.HwVer, MaxQP: 0x80000, MaxQPWR: MaxQPWR,
		MaxSGE: MaxSGE, MaxSGERd: MaxSGE, MaxCQ: 0x10000, MaxCQE: MaxCQE, MaxMR: 0x80000, MaxPD: 0x100000,
		MaxQPRdAtom: 128, MaxQPInitRdAtom: 128, MaxPkeys: 1, PhysPortCnt: 1}
}

// createCQ answers CREATE_CQ, legacy (gorping) or extended (libhns).
func (d Driver) createCQ(f *oracle.Fake, c *oracle.Cmd, k kcmd.Command, out []byte, ex bool) ([]byte, syscall.Errno) {
	core, drv := k.Core, k.Driver
	if len(drv) < 20 || k.DriverOut < 16 {
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
	depth := le.Uint32(core[cqeOff:])
	if le.Uint32(drv[16:]) != d.P.CQESize || depth&(depth-1) != 0 {
		return nil, syscall.EINVAL
	}
	id := f.Count("cq")
	name := fmt.Sprintf("cq%d", id)
	buf, db := le.Uint64(drv[0:]), le.Uint64(drv[8:])
	f.AddRegion(name, buf, align(int(depth*d.P.CQESize), 4096))
	f.Sym(c, "driver", 0, f.Addr(buf))
	f.Sym(c, "driver", 8, f.Addr(db))
	f.AddRegion(name+".db", db, 4)
	le.PutUint32(out, f.Handle(name, name+".db"))
	le.PutUint32(out[4:], depth-1) // the mask of the ring
	if ex {
		le.PutUint32(out[12:], 16)
	}
	drvOut := out[k.CoreOut:]
	le.PutUint64(drvOut[0:], uint64(d.P.FirstCQN)+uint64(id))
	le.PutUint64(drvOut[8:], d.P.CQCaps)
	return out, 0
}

// createQP answers CREATE_QP, legacy (gorping) or extended (libhns): the queues' places
// from the sizes the library computed (the kernel computes the same), the records.
func (d Driver) createQP(f *oracle.Fake, c *oracle.Cmd, k kcmd.Command, out []byte, ex bool) ([]byte, syscall.Errno) {
	core, drv := k.Core, k.Driver
	if len(drv) < 32 || k.DriverOut < 16 {
		return nil, syscall.EINVAL
	}
	uh, caps := 8, 32
	if ex {
		uh, caps = 0, 24
	}
	f.Sym(c, "core", uh, "user_handle")
	id := f.Count("qp")
	name := fmt.Sprintf("qp%d", id)
	sendWR, recvWR := le.Uint32(core[caps:]), le.Uint32(core[caps+4:])
	sendSGE, recvSGE := le.Uint32(core[caps+8:]), le.Uint32(core[caps+12:])
	buf, rdb, sdb := le.Uint64(drv[0:]), le.Uint64(drv[8:]), le.Uint64(drv[24:])
	sqCnt := uint32(1) << drv[16]
	if drv[17] != 6 || sqCnt < sendWR {
		return nil, syscall.EINVAL
	}
	sqBytes := align(int(sqCnt)*64, 4096)
	sgeCnt := uint32(0)
	if sendSGE > 2 {
		sgeCnt = max(roundupPow2(sqCnt*(sendSGE-2)), 256)
	}
	sgeBytes := align(int(sgeCnt)*16, 4096)
	rqBytes := align(int(recvWR*recvSGE)*16, 4096)
	f.AddRegion(name+".sq", buf, sqBytes)
	regions := []string{name + ".sq"}
	if sgeBytes > 0 {
		f.AddRegion(name+".sge", buf+uint64(sqBytes), sgeBytes)
		regions = append(regions, name+".sge")
	}
	if rqBytes > 0 {
		f.AddRegion(name+".rq", buf+uint64(sqBytes+sgeBytes), rqBytes)
		regions = append(regions, name+".rq")
	}
	f.Sym(c, "driver", 0, f.Addr(buf))
	if rdb != 0 {
		f.Sym(c, "driver", 8, f.Addr(rdb))
		f.AddRegion(name+".rq.db", rdb, 4)
		regions = append(regions, name+".rq.db")
	}
	f.Sym(c, "driver", 24, f.Addr(sdb))
	f.AddRegion(name+".sq.db", sdb, 4)
	regions = append(regions, name+".sq.db")
	qpn := d.P.FirstQPN + uint32(id)
	le.PutUint32(out, f.Handle(regions...))
	le.PutUint32(out[4:], qpn)
	copy(out[8:28], core[caps:caps+20]) // caps granted = caps asked
	if ex {
		le.PutUint32(out[36:], 40)
	}
	le.PutUint64(out[k.CoreOut:], d.P.QPCaps)
	return out, 0
}

// Poke places a CQE in slot Slot of CQ ID.
func (d Driver) Poke(f *oracle.Fake, s oracle.Step) (string, int, []byte, error) {
	if len(s.Bytes) != int(d.P.CQESize) {
		return "", 0, nil, fmt.Errorf("hnsoracle: a CQE has %d bytes, not %d", d.P.CQESize, len(s.Bytes))
	}
	return fmt.Sprintf("cq%d", s.ID), s.Slot * int(d.P.CQESize), append([]byte(nil), s.Bytes...), nil
}

// CheckOrder checks hns's doorbell discipline on the provider's own sequence (the
// barriers x86 does not show included), as libhns orders it: every doorbell is one 8-byte
// store to the UAR page's doorbell register; a send or receive queue's directly after
// udma_to_device_barrier (ToDevice: the WQEs are visible first, DMB OSHST on arm64); a
// record is one 4-byte store, a send queue's after its doorbell and a receive queue's
// after ToDevice; nothing else is stored.
func (Driver) CheckOrder(line string, ops []oracle.SeqEvent) []string {
	var d []string
	barrier, lastSQ := false, false
	for i, e := range ops {
		if e.Fence != "" {
			barrier = e.Fence == "to_device"
			continue
		}
		switch {
		case e.Target == "db":
			cmd := uint32(0xff)
			if len(e.Bytes) == 8 {
				cmd = uint32(e.Bytes[3]) & 0xf
			}
			switch {
			case e.Width != 8:
				d = append(d, fmt.Sprintf("%q: op %d: doorbell %v is %d bytes wide, the device takes 8", line, i, e, e.Width))
			case e.Off != dbOff:
				d = append(d, fmt.Sprintf("%q: op %d: doorbell %v at offset %#x, the device's is at %#x", line, i, e, e.Off, dbOff))
			case (cmd == 0 || cmd == 1) && !barrier:
				d = append(d, fmt.Sprintf("%q: op %d: queue doorbell %v without ToDevice directly before it", line, i, e))
			}
			lastSQ = cmd == 0
		case len(e.Target) > 6 && e.Target[len(e.Target)-6:] == ".sq.db":
			if e.Width != 4 || !lastSQ {
				d = append(d, fmt.Sprintf("%q: op %d: send queue record %v not one 4-byte store after the doorbell", line, i, e))
			}
			lastSQ = false
		case len(e.Target) > 6 && e.Target[len(e.Target)-6:] == ".rq.db":
			if e.Width != 4 || !barrier {
				d = append(d, fmt.Sprintf("%q: op %d: receive queue record %v not one 4-byte store directly after ToDevice", line, i, e))
			}
		case len(e.Target) > 3 && e.Target[len(e.Target)-3:] == ".db":
			if e.Width != 4 {
				d = append(d, fmt.Sprintf("%q: op %d: CQ record %v is not one 4-byte store", line, i, e))
			}
		default:
			d = append(d, fmt.Sprintf("%q: op %d: store %v outside the UAR page and the records", line, i, e))
		}
		barrier = false
	}
	return d
}

// The command numbers the provider's tests compare by.
const (
	CmdCreateCQ    = kcmd.CmdCreateCQ
	CmdCreateQP    = kcmd.CmdCreateQP
	CmdQueryDevice = kcmd.CmdQueryDevice
	CmdModifyQP    = kcmd.CmdModifyQP
)
