package mlx5oracle

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"syscall"

	"github.com/gorping/gorping/test/internal/kcmd"
	"github.com/gorping/gorping/test/oracle"
)

var le = binary.LittleEndian

// uverbs command numbers (uapi rdma/ib_user_verbs.h, enum ib_uverbs_write_cmds).
const (
	CmdGetContext        = kcmd.CmdGetContext
	CmdQueryDevice       = kcmd.CmdQueryDevice
	CmdQueryPort         = kcmd.CmdQueryPort
	CmdAllocPD           = kcmd.CmdAllocPD
	CmdDeallocPD         = kcmd.CmdDeallocPD
	CmdCreateCompChannel = kcmd.CmdCreateCompChannel
	CmdRegMR             = kcmd.CmdRegMR
	CmdDeregMR           = kcmd.CmdDeregMR
	CmdCreateCQ          = kcmd.CmdCreateCQ
	CmdDestroyCQ         = kcmd.CmdDestroyCQ
	CmdCreateQP          = kcmd.CmdCreateQP
	CmdModifyQP          = kcmd.CmdModifyQP
	CmdDestroyQP         = kcmd.CmdDestroyQP

	exFlag = kcmd.ExFlag
)

// Params are the knobs of the fake kernel. DefaultParams gives the answers that
// mlx5-oracle measurements used (ConnectX-6, static 4K UARs, cqe_version 1).
type Params struct {
	BFRegSize    uint32   // mlx5 bf_reg_size: 512 = BlueFlame, 0 = never BlueFlame
	TotBFRegs    uint32   // static bfregs in the GET_CONTEXT answer (16 = 8 UAR pages)
	CQEVersion   uint8    // cqe_version answered (library asks for 1)
	RefuseDEVX   bool     // answer EPERM to GET_CONTEXT while the DEVX flag is set
	FirstQPN     uint32   // qpn of the first QP; later QPs count up
	FirstCQN     uint32   // cqn of the first CQ; later CQs count up
	FirstLKey    uint32   // lkey (= rkey) of the first MR; later MRs add 0x100
	PDN          uint32   // mlx5 pdn in the ALLOC_PD answer
	LowLatBFRegs []uint32 // gross bfreg indexes handed to QPs in order, then 0 (shared)
	LinkLayer    uint8    // QUERY_PORT link_layer (1 = InfiniBand)
	// PageSize is the kernel's page size (0: 4096). With 16 or 64 KiB the harness's
	// sysconf answers it, mmap offsets count in it, and GET_CONTEXT is answered as
	// mlx5_ib does on such a kernel: num_uars_per_page PageSize/4096 and, with
	// TotBFRegs 0, the bfregs asked for rounded up to whole pages.
	PageSize int
	// ClockInfo, if set, is the clock_info page: GET_CONTEXT then reports version 1
	// and the page (mmap command 7) reads these values.
	ClockInfo *ClockInfo
	// TimestampMask and HCACoreClockKHz are QUERY_DEVICE_EX's completion_timestamp_mask
	// and hca_core_clock.
	TimestampMask, HCACoreClockKHz uint64
}

// ClockInfo is the content of struct mlx5_ib_clock_info (sign 0: stable).
type ClockInfo struct {
	Nsec, Cycles, Frac uint64
	Mult, Shift        uint32
	Mask               uint64
}

// Bytes lays ci out as the kernel's page holds it.
func (ci *ClockInfo) Bytes() []byte {
	b := make([]byte, 56)
	le.PutUint64(b[8:], ci.Nsec)
	le.PutUint64(b[16:], ci.Cycles)
	le.PutUint64(b[24:], ci.Frac)
	le.PutUint32(b[32:], ci.Mult)
	le.PutUint32(b[36:], ci.Shift)
	le.PutUint64(b[40:], ci.Mask)
	return b
}

// Page is p's page size (PageSize, or 4096).
func (p Params) Page() int {
	if p.PageSize == 0 {
		return 4096
	}
	return p.PageSize
}

// DefaultParams is the fake kernel of the first oracle measurements: qpn 0x1a2, cqn 0x40e,
// lkey 0x110007, bf_reg_size 512, 16 static bfregs, cqe_version 1. The first QP gets
// gross bfreg 24 (UAR page 6, offset 0x800), as a kernel allocating low-latency bfregs
// 12..15 first would hand out.
func DefaultParams() Params {
	return Params{
		BFRegSize:    512,
		TotBFRegs:    16,
		CQEVersion:   1,
		RefuseDEVX:   true,
		FirstQPN:     0x1a2,
		FirstCQN:     0x40e,
		FirstLKey:    0x110007,
		PDN:          1,
		LowLatBFRegs: []uint32{24, 25, 28, 29},
		LinkLayer:    1,
	}
}

// Driver is the mlx5 part of the oracle (oracle.Driver) with parameters p: how libmlx5
// finds a ConnectX-6, and mlx5_ib's answers.
type Driver struct{ P Params }

func (d Driver) Library() string                                 { return "mlx5" }
func (d Driver) BuildArgs() []string                             { return []string{"-DORACLE_MLX5", "-lmlx5"} }
func (d Driver) PageSize() int                                   { return d.P.PageSize }
func (d Driver) CheckOrder(line string, ops []SeqEvent) []string { return CheckOrder(line, ops) }

// Sysfs is the device as libibverbs finds it without netlink: mlx5_0 on uverbs0, the
// ConnectX-6 modalias libmlx5 matches, ABI 1.
func (d Driver) Sysfs() map[string]string {
	const modalias = "pci:v000015B3d0000101Bsv000015B3sd00000006bc02sc00i00\n"
	return map[string]string{
		"class/infiniband_verbs/abi_version":             "6\n",
		"class/infiniband_verbs/uverbs0/ibdev":           "mlx5_0\n",
		"class/infiniband_verbs/uverbs0/dev":             "1:3\n",
		"class/infiniband_verbs/uverbs0/abi_version":     "1\n",
		"class/infiniband_verbs/uverbs0/device/modalias": modalias,
		"class/infiniband/mlx5_0/device/modalias":        modalias,
		"class/infiniband/mlx5_0/node_type":              "1: CA\n",
		"class/infiniband/mlx5_0/node_guid":              "0002:c903:00a1:b2c3\n",
		"class/infiniband/mlx5_0/fw_ver":                 "20.0.0\n",
	}
}

// Mmap: UAR pages (mmap commands 0, 2, 3) are the device pages, "uar<index>"; the
// clock_info page (command 7) holds Params.ClockInfo.
func (d Driver) Mmap(f *oracle.Fake, off uint64, length, prot int) (string, []byte, syscall.Errno) {
	pg := off / uint64(d.P.Page())
	switch (pg >> 8) & 0xff {
	case 0, 2, 3:
		return fmt.Sprintf("uar%d", pg&0xff), nil, 0
	case 7:
		if d.P.ClockInfo != nil {
			return "", d.P.ClockInfo.Bytes(), 0
		}
	}
	return "", nil, 0
}

// Poke places a 64-byte CQE in slot Slot of CQ ID.
func (d Driver) Poke(f *oracle.Fake, s Step) (string, int, []byte, error) {
	if len(s.Bytes) != 64 {
		return "", 0, nil, fmt.Errorf("mlx5oracle: a CQE has 64 bytes, not %d", len(s.Bytes))
	}
	return fmt.Sprintf("cq%d", s.ID), s.Slot * 64, s.Bytes, nil
}

// Answer answers every command as mlx5_ib would, in Params' terms.
func (d Driver) Answer(f *oracle.Fake, c *Cmd, k kcmd.Command) ([]byte, syscall.Errno) {
	return answer(d.P, f, c, k.Core, k.Driver, k.CoreOut+k.DriverOut, k.CoreOut)
}

func answer(p Params, f *oracle.Fake, c *Cmd, core, drv []byte, outLen, coreOut int) ([]byte, syscall.Errno) {
	out := make([]byte, max(outLen, 0))
	if c.Ex && c.Num == kcmd.CmdQueryDevice {
		queryDevice(out)
		if len(out) >= 184 {
			le.PutUint32(out[180:], uint32(min(coreOut, 304))) // response_length
		}
		if len(out) >= 224 {
			le.PutUint64(out[208:], p.TimestampMask)
			le.PutUint64(out[216:], p.HCACoreClockKHz)
		}
		return out, 0
	}
	if c.Ex && c.Num == kcmd.CmdCreateCQ {
		// ib_uverbs_ex_create_cq: user_handle @0, cqe @8, comp_vector @12,
		// comp_channel @16, comp_mask @20, flags @24; the answer is the legacy one plus
		// comp_mask and response_length.
		if len(core) < 32 || len(drv) < 20 {
			return nil, syscall.EINVAL
		}
		f.Sym(c, "core", 0, "user_handle")
		if int32(le.Uint32(core[16:])) >= 0 {
			le.PutUint32(c.Core[16:], 0)
			c.Syms = append(c.Syms, Sym{Part: "core", Off: 16, Name: "fd"})
		}
		drvOut := out[min(coreOut, len(out)):]
		createCQ(p, f, c, le.Uint32(core[8:]), drv, out, drvOut)
		if len(out) >= 16 {
			le.PutUint32(out[12:], 16)
		}
		return out, 0
	}
	if c.Ex {
		return nil, syscall.EOPNOTSUPP
	}
	drvOut := out[min(coreOut, len(out)):]
	switch c.Num {
	case CmdGetContext:
		if p.RefuseDEVX && len(drv) >= 12 && le.Uint32(drv[8:])&1 != 0 {
			return nil, syscall.EPERM
		}
		le.PutUint32(out[4:], 1) // num_comp_vectors; async_fd is patched by the harness
		contextResp(p, drvOut, drv)
	case CmdQueryDevice:
		queryDevice(out)
	case CmdQueryPort:
		le.PutUint32(out[0:], 0)     // port_cap_flags
		le.PutUint32(out[4:], 1<<30) // max_msg_sz
		le.PutUint32(out[16:], 1)    // gid_tbl_len
		le.PutUint16(out[20:], 1)    // pkey_tbl_len
		le.PutUint16(out[22:], 1)    // lid
		le.PutUint16(out[24:], 1)    // sm_lid
		out[26] = 4                  // state ACTIVE
		out[27] = 5                  // max_mtu 4096
		out[28] = 5                  // active_mtu 4096
		out[30] = 4                  // max_vl_num
		out[34] = 2                  // active_width 4x
		out[35] = 32                 // active_speed
		out[36] = 5                  // phys_state LinkUp
		out[37] = p.LinkLayer        // link_layer
	case CmdAllocPD:
		le.PutUint32(out[0:], uint32(f.Count("pd")))
		if len(drvOut) >= 4 {
			le.PutUint32(drvOut, p.PDN)
		}
	case CmdCreateCompChannel:
		// fd patched by the harness
	case CmdRegMR:
		if len(core) < 40 {
			return nil, syscall.EINVAL
		}
		n := f.Count("mr")
		lkey := p.FirstLKey + uint32(n)*0x100
		name := fmt.Sprintf("mr%d", n)
		f.AddRegion(name, le.Uint64(core[8:]), int(le.Uint64(core[16:])))
		le.PutUint32(out[0:], f.Handle(name))
		le.PutUint32(out[4:], lkey)
		le.PutUint32(out[8:], lkey)
	case CmdCreateCQ:
		if len(core) < 32 || len(drv) < 20 {
			return nil, syscall.EINVAL
		}
		f.Sym(c, "core", 8, "user_handle")
		if int32(le.Uint32(core[24:])) >= 0 {
			le.PutUint32(c.Core[24:], 0)
			c.Syms = append(c.Syms, Sym{Part: "core", Off: 24, Name: "fd"})
		}
		createCQ(p, f, c, le.Uint32(core[16:]), drv, out, drvOut)
	case CmdCreateQP:
		if len(core) < 56 || len(drv) < 28 {
			return nil, syscall.EINVAL
		}
		f.Sym(c, "core", 8, "user_handle")
		id := f.Count("qp")
		name := fmt.Sprintf("qp%d", id)
		buf, db := le.Uint64(drv[0:]), le.Uint64(drv[8:])
		sqCnt, rqCnt, rqShift := le.Uint32(drv[16:]), le.Uint32(drv[20:]), le.Uint32(drv[24:])
		size := int(rqCnt<<rqShift) + int(sqCnt)*64
		f.AddRegion(name, buf, size)
		f.Sym(c, "driver", 0, f.Addr(buf))
		f.Sym(c, "driver", 8, f.Addr(db))
		f.AddRegion(name+".db", db, 8)
		le.PutUint32(out[0:], f.Handle(name, name+".db"))
		le.PutUint32(out[4:], p.FirstQPN+uint32(id))
		copy(out[8:28], core[32:52]) // caps granted = caps asked
		bfreg := uint32(0)
		if id < len(p.LowLatBFRegs) {
			bfreg = p.LowLatBFRegs[id]
		}
		if len(drvOut) >= 4 {
			le.PutUint32(drvOut, bfreg)
		}
	case CmdModifyQP, CmdDeallocPD:
	case CmdDeregMR:
		if len(core) >= 4 {
			f.Kill(le.Uint32(core))
		}
	case CmdDestroyCQ, CmdDestroyQP:
		if len(core) >= 12 {
			f.Kill(le.Uint32(core[8:]))
		}
	default:
		return nil, syscall.EOPNOTSUPP
	}
	return out, 0
}

// createCQ answers CREATE_CQ (legacy or extended) for a CQ of want entries: the next
// cqn, its buffer and doorbell record watched as regions.
func createCQ(p Params, f *oracle.Fake, c *Cmd, want uint32, drv, out, drvOut []byte) {
	entries := uint32(1) << bits.Len32(want) // roundup_pow2(cqe+1)
	cqeSize := le.Uint32(drv[16:])
	id := f.Count("cq")
	name := fmt.Sprintf("cq%d", id)
	buf, db := le.Uint64(drv[0:]), le.Uint64(drv[8:])
	f.AddRegion(name, buf, int(entries*cqeSize))
	f.Sym(c, "driver", 0, f.Addr(buf))
	f.Sym(c, "driver", 8, f.Addr(db))
	f.AddRegion(name+".db", db, 8)
	le.PutUint32(out[0:], f.Handle(name, name+".db"))
	le.PutUint32(out[4:], entries-1)
	if len(drvOut) >= 4 {
		le.PutUint32(drvOut, p.FirstCQN+uint32(id))
	}
}

// contextResp fills mlx5_ib_alloc_ucontext_resp (uapi rdma/mlx5-abi.h) for the driver
// request req.
func contextResp(p Params, b, req []byte) {
	nupp := uint32(p.Page() / 4096)
	tot := p.TotBFRegs
	if tot == 0 && len(req) >= 32 {
		// mlx5_ib: a system page holds 2 bfregs per UAR, and num_uars_per_page UARs if
		// the library handles 4 KiB UARs (lib_caps bit 0); the request is rounded up.
		per := uint32(2)
		if le.Uint64(req[24:])&1 != 0 {
			per *= nupp
		}
		tot = (le.Uint32(req) + per - 1) / per * per
	}
	if len(b) < 72 {
		nb := make([]byte, 72)
		defer copy(b, nb)
		b = nb
	}
	le.PutUint32(b[0:], 1<<17)       // qp_tab_size
	le.PutUint32(b[4:], p.BFRegSize) // bf_reg_size
	le.PutUint32(b[8:], tot)         // tot_bfregs
	le.PutUint32(b[12:], 64)         // cache_line_size
	le.PutUint16(b[16:], 1024)       // max_sq_desc_sz
	le.PutUint16(b[18:], 512)        // max_rq_desc_sz
	le.PutUint32(b[20:], 1<<15)      // max_send_wqebb
	le.PutUint32(b[24:], 1<<15)      // max_recv_wr
	le.PutUint32(b[28:], 1<<15)      // max_srq_recv_wr
	le.PutUint16(b[32:], 1)          // num_ports
	le.PutUint32(b[40:], 72)         // response_length
	b[44] = p.CQEVersion             // cqe_version
	b[45] = 3                        // cmds_supp_uhw: QUERY_DEVICE | CREATE_AH
	if p.ClockInfo != nil {
		b[47] = 1 // clock_info_versions: MLX5_IB_CLOCK_INFO_V1
	}
	le.PutUint32(b[56:], 12)   // log_uar_size
	le.PutUint32(b[60:], nupp) // num_uars_per_page
}

// queryDevice fills the base ib_uverbs_query_device_resp (also the head of the EX one).
func queryDevice(b []byte) {
	if len(b) < 176 {
		return
	}
	le.PutUint64(b[8:], 0x0002c90300a1b2c3) // node_guid (as the kernel sends it)
	le.PutUint64(b[24:], ^uint64(0))        // max_mr_size
	le.PutUint64(b[32:], 0xfffffffffffff000)
	le.PutUint32(b[40:], 0x2c9)   // vendor_id
	le.PutUint32(b[44:], 4123)    // vendor_part_id (ConnectX-6)
	le.PutUint32(b[52:], 1<<17)   // max_qp
	le.PutUint32(b[56:], 1<<15)   // max_qp_wr
	le.PutUint32(b[64:], 30)      // max_sge
	le.PutUint32(b[68:], 30)      // max_sge_rd
	le.PutUint32(b[72:], 1<<24)   // max_cq
	le.PutUint32(b[76:], 1<<22-1) // max_cqe
	le.PutUint32(b[80:], 1<<24)   // max_mr
	le.PutUint32(b[84:], 1<<24)   // max_pd
	le.PutUint32(b[88:], 16)      // max_qp_rd_atom
	le.PutUint16(b[168:], 128)    // max_pkeys
	b[171] = 1                    // phys_port_cnt
}
