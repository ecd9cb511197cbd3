package mlx5oracle

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"strings"
	"syscall"
)

var le = binary.LittleEndian

// uverbs command numbers (uapi rdma/ib_user_verbs.h, enum ib_uverbs_write_cmds).
const (
	CmdGetContext        = 0
	CmdQueryDevice       = 1
	CmdQueryPort         = 2
	CmdAllocPD           = 3
	CmdDeallocPD         = 4
	CmdCreateCompChannel = 17
	CmdRegMR             = 9
	CmdDeregMR           = 13
	CmdCreateCQ          = 18
	CmdDestroyCQ         = 20
	CmdCreateQP          = 24
	CmdModifyQP          = 26
	CmdDestroyQP         = 27

	exFlag = 0x80000000 // extended command (ib_uverbs_ex_cmd_hdr follows the header)
)

// coreSize is the size in bytes of the core request and core response of each legacy
// command (uapi rdma/ib_user_verbs.h structs); the rest of a request or response is
// the driver (mlx5) part.
var coreSize = map[uint32][2]int{
	CmdGetContext:           {8, 8},   // ib_uverbs_get_context / _resp
	CmdQueryDevice:          {8, 176}, // ib_uverbs_query_device / _resp
	CmdQueryPort:            {16, 40}, // ib_uverbs_query_port / _resp
	CmdAllocPD:              {8, 4},   // ib_uverbs_alloc_pd / _resp
	CmdDeallocPD:            {4, 0},   // ib_uverbs_dealloc_pd
	CmdCreateCompChannel:    {8, 4},   // ib_uverbs_create_comp_channel / _resp
	CmdRegMR:                {40, 12}, // ib_uverbs_reg_mr / _resp
	CmdDeregMR:              {4, 0},   // ib_uverbs_dereg_mr
	CmdCreateCQ:             {32, 8},  // ib_uverbs_create_cq / _resp
	CmdDestroyCQ:            {16, 8},  // ib_uverbs_destroy_cq / _resp
	CmdCreateQP:             {56, 32}, // ib_uverbs_create_qp / _resp
	CmdModifyQP:             {112, 0}, // ib_uverbs_modify_qp
	CmdDestroyQP:            {16, 4},  // ib_uverbs_destroy_qp / _resp
	CmdQueryDevice | exFlag: {8, 304}, // ib_uverbs_ex_query_device / _resp
}

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

// A Region is memory the fake learned of from a request: a CQ or QP buffer ("cq0",
// "qp0") or a doorbell record ("cq0.db", "qp0.db", 8 bytes).
type Region struct {
	Name string
	Addr uint64
	Len  int
	Dead bool // its object was destroyed (DESTROY_CQ/QP, DEREG_MR): no longer watched
}

// Sym names a pointer-like field of a request that differs between runs and was
// zeroed in Cmd.Core/Cmd.Driver: Part "core" or "driver", byte offset, and a
// symbolic value ("response", "user_handle", "fd", "cq0+0x0", "dbrec0+0x40").
type Sym struct {
	Part string `json:"part"`
	Off  int    `json:"off"`
	Name string `json:"name"`
}

// Cmd is one uverbs write() command as the fake saw it, normalised.
type Cmd struct {
	Num      uint32 `json:"num"` // command number without the extended flag
	Ex       bool   `json:"ex"`
	InWords  int    `json:"in_words"`  // header in_words as sent (legacy: 4-byte units incl. header; ex: 8-byte units of the core)
	OutWords int    `json:"out_words"` // header out_words
	ProvIn   int    `json:"prov_in"`   // ex only: provider_in_words
	ProvOut  int    `json:"prov_out"`  // ex only: provider_out_words
	Core     []byte `json:"core"`      // core request, Syms zeroed
	Driver   []byte `json:"driver"`    // driver (mlx5) request, Syms zeroed
	Syms     []Sym  `json:"syms"`
	Errno    int    `json:"errno"`    // 0 or the errno the fake answered
	Out      []byte `json:"out"`      // full response written (core then driver), fds as the Go fake gave them (0)
	CoreOut  int    `json:"core_out"` // bytes of Out that are the core response
}

// Fake is the fake kernel. The harness forwards libmlx5's commands to it; a Go
// provider under test can be answered by the same Fake through Answer.
type Fake struct {
	P       Params
	Cmds    []Cmd
	Regions []Region
	dbPages []uint64
	nCQ     int
	nQP     int
	nMR     int
	nPD     int
	handles uint32
	owned   map[uint32][]string // handle → names of the regions of that object
}

// NewFake returns a fake kernel with the given parameters.
func NewFake(p Params) *Fake { return &Fake{P: p} }

// Answer handles one write() command: cmd is the header's command word (with the
// extended flag if set), in the bytes after the 8-byte header, outLen the response
// size in bytes (out_words·4 for legacy; for extended (out_words+provider_out_words)·8).
// It returns the response bytes (len ≤ outLen), or an errno. New watched regions are
// appended to f.Regions; the normalised command to f.Cmds.
func (f *Fake) Answer(cmd uint32, inWords, outWords int, in []byte) (out []byte, errno syscall.Errno, newRegions []Region) {
	c := Cmd{Num: cmd &^ exFlag, Ex: cmd&exFlag != 0, InWords: inWords, OutWords: outWords}
	var core, drv []byte
	outLen := outWords * 4
	coreOut := 0
	if c.Ex {
		if len(in) < 16 {
			return nil, syscall.EINVAL, nil
		}
		c.ProvIn = int(le.Uint16(in[8:]))
		c.ProvOut = int(le.Uint16(in[10:]))
		rest := in[16:]
		n := min(inWords*8, len(rest))
		core, drv = rest[:n], rest[n:]
		coreOut = outWords * 8
		outLen = (outWords + c.ProvOut) * 8
	} else {
		sz, ok := coreSize[c.Num]
		n := len(in)
		if ok {
			n = min(sz[0], len(in))
			coreOut = min(sz[1], outLen)
		}
		core, drv = in[:n], in[n:]
	}
	c.Core = append([]byte(nil), core...)
	c.Driver = append([]byte(nil), drv...)
	before := len(f.Regions)
	out, errno = f.answer(&c, core, drv, outLen, coreOut)
	if len(out) > outLen {
		out = out[:outLen]
	}
	c.Errno = int(errno)
	c.Out = append([]byte(nil), out...)
	c.CoreOut = min(coreOut, len(out))
	f.Cmds = append(f.Cmds, c)
	return out, errno, f.Regions[before:]
}

func (f *Fake) sym(c *Cmd, part string, off int, name string) {
	b := c.Core
	if part == "driver" {
		b = c.Driver
	}
	if off+8 <= len(b) {
		clear(b[off : off+8])
	}
	c.Syms = append(c.Syms, Sym{Part: part, Off: off, Name: name})
}

// addr names an address inside a watched buffer or a doorbell page ("dbrec<i>+0x40").
func (f *Fake) addr(a uint64) string {
	for _, r := range f.Regions {
		// A destroyed object's memory may be reused by the library's allocator: name an
		// address after the live region holding it.
		if !r.Dead && !strings.HasSuffix(r.Name, ".db") && a >= r.Addr && a < r.Addr+uint64(r.Len) {
			return fmt.Sprintf("%s+%#x", r.Name, a-r.Addr)
		}
	}
	page := a &^ 4095
	for i, p := range f.dbPages {
		if p == page {
			return fmt.Sprintf("dbrec%d+%#x", i, a-page)
		}
	}
	f.dbPages = append(f.dbPages, page)
	return fmt.Sprintf("dbrec%d+%#x", len(f.dbPages)-1, a-page)
}

// handle hands out the next object handle; the regions named own it.
func (f *Fake) handle(regions ...string) uint32 {
	f.handles++
	if f.owned == nil {
		f.owned = map[uint32][]string{}
	}
	f.owned[f.handles] = regions
	return f.handles
}

// kill marks the regions of the object with handle h dead.
func (f *Fake) kill(h uint32) {
	for _, n := range f.owned[h] {
		for i := range f.Regions {
			if f.Regions[i].Name == n {
				f.Regions[i].Dead = true
			}
		}
	}
}

func (f *Fake) answer(c *Cmd, core, drv []byte, outLen, coreOut int) ([]byte, syscall.Errno) {
	out := make([]byte, max(outLen, 0))
	if !c.Ex && coreOut > 0 {
		f.sym(c, "core", 0, "response")
	}
	if c.Ex && c.Num == CmdQueryDevice {
		f.queryDevice(out)
		if len(out) >= 184 {
			le.PutUint32(out[180:], uint32(min(coreOut, 304))) // response_length
		}
		if len(out) >= 224 {
			le.PutUint64(out[208:], f.P.TimestampMask)
			le.PutUint64(out[216:], f.P.HCACoreClockKHz)
		}
		return out, 0
	}
	if c.Ex && c.Num == CmdCreateCQ {
		// ib_uverbs_ex_create_cq: user_handle @0, cqe @8, comp_vector @12,
		// comp_channel @16, comp_mask @20, flags @24; the answer is the legacy one plus
		// comp_mask and response_length.
		if len(core) < 32 || len(drv) < 20 {
			return nil, syscall.EINVAL
		}
		f.sym(c, "core", 0, "user_handle")
		if int32(le.Uint32(core[16:])) >= 0 {
			le.PutUint32(c.Core[16:], 0)
			c.Syms = append(c.Syms, Sym{Part: "core", Off: 16, Name: "fd"})
		}
		drvOut := out[min(coreOut, len(out)):]
		f.createCQ(c, le.Uint32(core[8:]), drv, out, drvOut)
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
		if f.P.RefuseDEVX && len(drv) >= 12 && le.Uint32(drv[8:])&1 != 0 {
			return nil, syscall.EPERM
		}
		le.PutUint32(out[4:], 1) // num_comp_vectors; async_fd is patched by the harness
		f.contextResp(drvOut, drv)
	case CmdQueryDevice:
		f.queryDevice(out)
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
		out[37] = f.P.LinkLayer      // link_layer
	case CmdAllocPD:
		le.PutUint32(out[0:], uint32(f.nPD))
		f.nPD++
		if len(drvOut) >= 4 {
			le.PutUint32(drvOut, f.P.PDN)
		}
	case CmdCreateCompChannel:
		// fd patched by the harness
	case CmdRegMR:
		if len(core) < 40 {
			return nil, syscall.EINVAL
		}
		lkey := f.P.FirstLKey + uint32(f.nMR)*0x100
		name := fmt.Sprintf("mr%d", f.nMR)
		f.Regions = append(f.Regions, Region{Name: name, Addr: le.Uint64(core[8:]), Len: int(le.Uint64(core[16:]))})
		f.nMR++
		le.PutUint32(out[0:], f.handle(name))
		le.PutUint32(out[4:], lkey)
		le.PutUint32(out[8:], lkey)
	case CmdCreateCQ:
		if len(core) < 32 || len(drv) < 20 {
			return nil, syscall.EINVAL
		}
		f.sym(c, "core", 8, "user_handle")
		if int32(le.Uint32(core[24:])) >= 0 {
			le.PutUint32(c.Core[24:], 0)
			c.Syms = append(c.Syms, Sym{Part: "core", Off: 24, Name: "fd"})
		}
		f.createCQ(c, le.Uint32(core[16:]), drv, out, drvOut)
	case CmdCreateQP:
		if len(core) < 56 || len(drv) < 28 {
			return nil, syscall.EINVAL
		}
		f.sym(c, "core", 8, "user_handle")
		id := f.nQP
		f.nQP++
		name := fmt.Sprintf("qp%d", id)
		buf, db := le.Uint64(drv[0:]), le.Uint64(drv[8:])
		sqCnt, rqCnt, rqShift := le.Uint32(drv[16:]), le.Uint32(drv[20:]), le.Uint32(drv[24:])
		size := int(rqCnt<<rqShift) + int(sqCnt)*64
		f.Regions = append(f.Regions, Region{Name: name, Addr: buf, Len: size})
		f.sym(c, "driver", 0, f.addr(buf))
		f.sym(c, "driver", 8, f.addr(db))
		f.Regions = append(f.Regions, Region{Name: name + ".db", Addr: db, Len: 8})
		le.PutUint32(out[0:], f.handle(name, name+".db"))
		le.PutUint32(out[4:], f.P.FirstQPN+uint32(id))
		copy(out[8:28], core[32:52]) // caps granted = caps asked
		bfreg := uint32(0)
		if id < len(f.P.LowLatBFRegs) {
			bfreg = f.P.LowLatBFRegs[id]
		}
		if len(drvOut) >= 4 {
			le.PutUint32(drvOut, bfreg)
		}
	case CmdModifyQP, CmdDeallocPD:
	case CmdDeregMR:
		if len(core) >= 4 {
			f.kill(le.Uint32(core))
		}
	case CmdDestroyCQ, CmdDestroyQP:
		if len(core) >= 12 {
			f.kill(le.Uint32(core[8:]))
		}
	default:
		return nil, syscall.EOPNOTSUPP
	}
	return out, 0
}

// createCQ answers CREATE_CQ (legacy or extended) for a CQ of want entries: the next
// cqn, its buffer and doorbell record watched as regions.
func (f *Fake) createCQ(c *Cmd, want uint32, drv, out, drvOut []byte) {
	entries := uint32(1) << bits.Len32(want) // roundup_pow2(cqe+1)
	cqeSize := le.Uint32(drv[16:])
	id := f.nCQ
	f.nCQ++
	name := fmt.Sprintf("cq%d", id)
	buf, db := le.Uint64(drv[0:]), le.Uint64(drv[8:])
	f.Regions = append(f.Regions, Region{Name: name, Addr: buf, Len: int(entries * cqeSize)})
	f.sym(c, "driver", 0, f.addr(buf))
	f.sym(c, "driver", 8, f.addr(db))
	f.Regions = append(f.Regions, Region{Name: name + ".db", Addr: db, Len: 8})
	le.PutUint32(out[0:], f.handle(name, name+".db"))
	le.PutUint32(out[4:], entries-1)
	if len(drvOut) >= 4 {
		le.PutUint32(drvOut, f.P.FirstCQN+uint32(id))
	}
}

// contextResp fills mlx5_ib_alloc_ucontext_resp (uapi rdma/mlx5-abi.h) for the driver
// request req.
func (f *Fake) contextResp(b, req []byte) {
	nupp := uint32(f.P.Page() / 4096)
	tot := f.P.TotBFRegs
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
	le.PutUint32(b[0:], 1<<17)         // qp_tab_size
	le.PutUint32(b[4:], f.P.BFRegSize) // bf_reg_size
	le.PutUint32(b[8:], tot)           // tot_bfregs
	le.PutUint32(b[12:], 64)           // cache_line_size
	le.PutUint16(b[16:], 1024)         // max_sq_desc_sz
	le.PutUint16(b[18:], 512)          // max_rq_desc_sz
	le.PutUint32(b[20:], 1<<15)        // max_send_wqebb
	le.PutUint32(b[24:], 1<<15)        // max_recv_wr
	le.PutUint32(b[28:], 1<<15)        // max_srq_recv_wr
	le.PutUint16(b[32:], 1)            // num_ports
	le.PutUint32(b[40:], 72)           // response_length
	b[44] = f.P.CQEVersion             // cqe_version
	b[45] = 3                          // cmds_supp_uhw: QUERY_DEVICE | CREATE_AH
	if f.P.ClockInfo != nil {
		b[47] = 1 // clock_info_versions: MLX5_IB_CLOCK_INFO_V1
	}
	le.PutUint32(b[56:], 12)   // log_uar_size
	le.PutUint32(b[60:], nupp) // num_uars_per_page
}

// queryDevice fills the base ib_uverbs_query_device_resp (also the head of the EX one).
func (f *Fake) queryDevice(b []byte) {
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
