package oracle

import (
	"encoding/hex"
	"fmt"
	"strings"
)

// Step kinds. Each Step is one line of the harness script; a Go provider under test
// runs the same Step values (see doc.go for what each does). The timestamp steps
// (query_device_ex aside) need a driver whose harness has them (mlx5).
const (
	KOpen      = "open"       // ibv_get_device_list + ibv_open_device (GET_CONTEXT retries, QUERY_PORT…)
	KQueryPort = "query_port" // ibv_query_port(Port)
	KPD        = "pd"         // ibv_alloc_pd
	KMR        = "mr"         // mmap MAP_FIXED at Addr, fill byte i with i*7+ID, ibv_reg_mr
	KChannel   = "channel"    // ibv_create_comp_channel
	KCQ        = "cq"         // ibv_create_cq(CQE, channel if WithChannel)
	KQP        = "qp"         // ibv_create_qp RC with Caps and SigAll
	KRTS       = "rts"        // MODIFY_QP RESET→INIT→RTR→RTS with fixed attributes
	KRecv      = "recv"       // ibv_post_recv of Recvs (one chain)
	KSend      = "send"       // ibv_post_send of Sends (one chain)
	KCQE       = "cqe"        // write what the device writes: the driver's Poke places Bytes (slot Slot of CQ ID)
	KPoll      = "poll"       // ibv_poll_cq(N)
	KArm       = "arm"        // ibv_req_notify_cq(Solicited)
	KEvent     = "event"      // comp event for CQ written to the channel; ibv_get_cq_event + ack 1
	KDestroyQP = "destroy_qp" // ibv_destroy_qp
	KDestroyCQ = "destroy_cq" // ibv_destroy_cq
	KDereg     = "dereg"      // ibv_dereg_mr
	KDeallocPD = "dealloc_pd" // ibv_dealloc_pd
	// Completion timestamps.
	KQueryDeviceEx = "query_device_ex" // ibv_query_device_ex: completion_timestamp_mask, hca_core_clock
	KCQEx          = "cq_ex"           // ibv_create_cq_ex(CQE, channel if WithChannel, timestamps if TS)
	KPollTS        = "poll_ts"         // extended poll of up to N: each completion's timestamp, and mlx5dv_ts_to_ns of it
)

// Verbs constants the scenarios use (values of libibverbs' enums, which equal the
// kernel's).
const (
	OpRDMAWrite    = 0 // IBV_WR_RDMA_WRITE
	OpRDMAWriteImm = 1
	OpSend         = 2
	OpSendImm      = 3
	OpRDMARead     = 4

	FlagFence     = 1 // IBV_SEND_FENCE
	FlagSignaled  = 2
	FlagSolicited = 4
	FlagInline    = 8

	AccessLocalWrite  = 1
	AccessRemoteWrite = 2
	AccessRemoteRead  = 4
)

// SGE points into the MR with id MR.
type SGE struct {
	MR  int
	Off uint64
	Len uint32
}

// SendWR is one ibv_send_wr. Imm is the host-order immediate (the harness stores
// htobe32(Imm) in imm_data, as an application does).
type SendWR struct {
	WRID   uint64
	Opcode int
	Flags  int
	Imm    uint32
	RAddr  uint64
	RKey   uint32
	SGEs   []SGE
}

// RecvWR is one ibv_recv_wr.
type RecvWR struct {
	WRID uint64
	SGEs []SGE
}

// Caps are the ibv_qp_cap asked for at CREATE_QP.
type Caps struct {
	MaxSendWR, MaxRecvWR, MaxSendSGE, MaxRecvSGE, MaxInline uint32
}

// Step is one scripted verbs call. Only the fields of its Kind are used.
type Step struct {
	Kind        string
	ID          int    // object id (mr, cq, qp) for creating and using steps; ids count from 0 in creation order
	Port        int    // query_port
	Addr        uint64 // mr
	Len         uint64 // mr
	Access      int    // mr
	CQE         int    // cq, cq_ex: depth asked
	WithChannel bool   // cq, cq_ex
	TS          bool   // cq_ex: with completion timestamps
	SendCQ      int    // qp
	RecvCQ      int    // qp
	Caps        Caps   // qp
	SigAll      bool   // qp
	Sends       []SendWR
	Recvs       []RecvWR
	Slot        int    // cqe: the CQE's slot in CQ ID
	Bytes       []byte // cqe: the CQE, as the driver's Poke completes it
	Ref         int    // cqe: an object the driver's Poke refers to (bnxt_re: the QP whose handle the CQE carries)
	N           int    // poll: max entries
	Solicited   bool   // arm
	// WantErr marks a step the library is expected to refuse (ret −1, Result.Errno
	// set); the harness does not use it, tests do.
	WantErr bool
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func sges(b *strings.Builder, s []SGE) {
	fmt.Fprintf(b, " %d", len(s))
	for _, g := range s {
		fmt.Fprintf(b, " %d %d %d", g.MR, g.Off, g.Len)
	}
}

// Line is the harness script line of s.
func (s Step) Line() string {
	var b strings.Builder
	b.WriteString(s.Kind)
	switch s.Kind {
	case KQueryPort:
		fmt.Fprintf(&b, " %d", s.Port)
	case KMR:
		fmt.Fprintf(&b, " %d %#x %d %d", s.ID, s.Addr, s.Len, s.Access)
	case KCQ:
		fmt.Fprintf(&b, " %d %d %d", s.ID, s.CQE, b2i(s.WithChannel))
	case KCQEx:
		fmt.Fprintf(&b, " %d %d %d %d", s.ID, s.CQE, b2i(s.WithChannel), b2i(s.TS))
	case KQP:
		fmt.Fprintf(&b, " %d %d %d %d %d %d %d %d %d", s.ID, s.SendCQ, s.RecvCQ, s.Caps.MaxSendWR,
			s.Caps.MaxRecvWR, s.Caps.MaxSendSGE, s.Caps.MaxRecvSGE, s.Caps.MaxInline, b2i(s.SigAll))
	case KRTS, KDestroyQP, KDestroyCQ, KDereg, KEvent:
		fmt.Fprintf(&b, " %d", s.ID)
	case KRecv:
		fmt.Fprintf(&b, " %d %d", s.ID, len(s.Recvs))
		for _, w := range s.Recvs {
			fmt.Fprintf(&b, " %d", w.WRID)
			sges(&b, w.SGEs)
		}
	case KSend:
		fmt.Fprintf(&b, " %d %d", s.ID, len(s.Sends))
		for _, w := range s.Sends {
			fmt.Fprintf(&b, " %d %d %d %d %d %d", w.WRID, w.Opcode, w.Flags, w.Imm, w.RAddr, w.RKey)
			sges(&b, w.SGEs)
		}
	case KCQE:
		fmt.Fprintf(&b, " %d %d %d %s", s.ID, s.Slot, s.Ref, hex.EncodeToString(s.Bytes))
	case KPoll, KPollTS:
		fmt.Fprintf(&b, " %d %d", s.ID, s.N)
	case KArm:
		fmt.Fprintf(&b, " %d %d", s.ID, b2i(s.Solicited))
	}
	return b.String()
}

// Scenario is a named sequence of steps run against a fake kernel with Driver's answers.
type Scenario struct {
	Name   string
	Driver Driver
	Steps  []Step
}

// Script is the harness input for sc (without the trailing "end").
func (sc Scenario) Script() string {
	var b strings.Builder
	for _, s := range sc.Steps {
		b.WriteString(s.Line())
		b.WriteByte('\n')
	}
	return b.String()
}
