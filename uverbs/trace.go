package uverbs

import (
	"fmt"
	"reflect"

	"github.com/gorping/gorping/internal/trace"
	"github.com/gorping/gorping/internal/wire"
)

// Tracing: the core's commands are traced in call and Write (cmd.go), which every command
// passes; the data path in QP.PostSend/PostRecv, CQ.Poll and CompChannel.Wait; mappings in
// cmdPath.Mmap, which every provider mapping passes.

func (c *cmdPath) traceMmap(what string, off uint64, length int, err error) {
	c.tr.Count(trace.Syscall)
	c.tr.Emit("mmap", what, []trace.Field{trace.F("offset", fmt.Sprintf("%#x", off)), trace.F("length", length)}, nil, err)
}

// traceCmd records one core command with its request and response decoded from the ABI
// structs.
func (c *cmdPath) traceCmd(cmd uint32, req, resp any, err error) {
	c.tr.Count(trace.Syscall)
	var rf []trace.Field
	if m, ok := req.(*modifyQPReq); ok {
		rf = modifyFields(m)
	} else {
		rf = trace.Struct(req, fieldNames)
	}
	var out []trace.Field
	if err == nil {
		out = trace.Struct(resp, fieldNames)
	}
	c.tr.Emit("uverbs", cmdName(cmd), rf, out, err)
}

// fieldNames renders enumerations and masks of the core's ABI structs by name
// (QUERY_PORT's state and MTUs, QUERY_QP's states, MTU, access flags and mask).
func fieldNames(name string, v reflect.Value) (any, bool) {
	if !v.CanUint() {
		return nil, false
	}
	u := v.Uint()
	switch name {
	case "state":
		return PortState(u).String(), true
	case "phys_state":
		return PhysState(u).String(), true
	case "link_layer":
		return LinkLayer(u).String(), true
	case "max_mtu", "active_mtu", "path_mtu":
		return MTU(u).Bytes(), true
	case "qp_state", "cur_qp_state":
		return QPState(u).String(), true
	case "qp_access_flags", "access_flags":
		return AccessFlags(u).Names(), true
	case "attr_mask":
		return QPAttrMask(u).Names(), true
	}
	return nil, false
}

// traceWrite records a provider's command: the two the data path sends are decoded.
func (c *cmdPath) traceWrite(cmd uint32, req []byte, err error) {
	c.tr.Count(trace.Syscall)
	name := cmdName(cmd)
	var rf []trace.Field
	switch cmd {
	case cmdPostSend:
		c.tr.Count(trace.Doorbell)
		name += " (send doorbell)"
		var r postSendReq
		wire.Decode(&r, req)
		rf = []trace.Field{trace.F("qp_handle", r.QPHandle), trace.F("wr_count", r.WRCount), trace.F("wqe_size", r.WQESize)}
	case cmdReqNotifyCQ:
		c.tr.Count(trace.Arm)
		name += " (arm CQ)"
		var r reqNotifyCQ
		wire.Decode(&r, req)
		rf = []trace.Field{trace.F("cq_handle", r.CQHandle), trace.F("solicited_only", r.SolicitedOnly)}
	default:
		rf = []trace.Field{trace.F("bytes", len(req))}
	}
	c.tr.Emit("uverbs", name, rf, nil, err)
}

// modifyFields are the attributes a MODIFY_QP sets: those its mask selects.
func modifyFields(m *modifyQPReq) []trace.Field {
	mask := QPAttrMask(m.AttrMask)
	fs := []trace.Field{trace.F("qp_handle", m.QPHandle), trace.F("attr_mask", mask.Names())}
	return append(fs, qpAttrFromModify(m).MaskedTraceFields(mask)...)
}

func qpAttrFromModify(m *modifyQPReq) *QPAttr {
	a := attrFromModify(m)
	return &a
}

var wrOpNames = [...]string{WRRDMAWrite: "RDMA_WRITE", WRRDMAWriteWithImm: "RDMA_WRITE_WITH_IMM", WRSend: "SEND",
	WRSendWithImm: "SEND_WITH_IMM", WRRDMARead: "RDMA_READ"}

func wrOpName(o WROpcode) string {
	if int(o) < len(wrOpNames) && wrOpNames[o] != "" {
		return wrOpNames[o]
	}
	return fmt.Sprintf("opcode %d", uint32(o))
}

// traceErr records err, if any, as its own record and returns it.
func (c *cmdPath) traceErr(kind, name string, err error) error {
	if err != nil {
		c.tr.Emit(kind, name, nil, nil, err)
	}
	return err
}

func (qp *QP) tracePostSend(wr *SendWR) {
	t := qp.ctx.cmd.tr
	t.Count(trace.PostSend)
	fs := []trace.Field{trace.F("qpn", qp.qpn), trace.F("opcode", wrOpName(wr.Opcode)), trace.F("wr_id", wr.ID),
		trace.F("signaled", wr.Flags&SendSignaled != 0)}
	fs = appendSGEs(fs, wr.SGE)
	if wr.Opcode == WRRDMARead || wr.Opcode == WRRDMAWrite || wr.Opcode == WRRDMAWriteWithImm {
		fs = append(fs, trace.F("remote_addr", fmt.Sprintf("%#x", wr.RemoteAddr)), trace.F("rkey", fmt.Sprintf("%#x", wr.RKey)))
	}
	t.Emit("post", "send WR", fs, nil, nil)
}

func (qp *QP) tracePostRecv(wr *RecvWR) {
	t := qp.ctx.cmd.tr
	t.Count(trace.PostRecv)
	fs := appendSGEs([]trace.Field{trace.F("qpn", qp.qpn), trace.F("wr_id", wr.ID)}, wr.SGE)
	t.Emit("post", "recv WR", fs, nil, nil)
}

func appendSGEs(fs []trace.Field, sges []SGE) []trace.Field {
	for i := range sges {
		p := ""
		if len(sges) > 1 {
			p = fmt.Sprintf("sge%d.", i)
		}
		fs = append(fs, trace.F(p+"addr", fmt.Sprintf("%#x", sges[i].Addr)), trace.F(p+"length", sges[i].Length),
			trace.F(p+"lkey", fmt.Sprintf("%#x", sges[i].LKey)))
	}
	return fs
}

func (cq *CQ) tracePoll(wc []WC, n int, err error) {
	t := cq.ctx.cmd.tr
	if n <= 0 && err == nil {
		return // empty polls are the loop's normal idle step; not worth a line each
	}
	t.CountN(trace.Completion, n)
	for i := 0; i < n; i++ {
		w := &wc[i]
		fs := []trace.Field{trace.F("cq_handle", cq.handle), trace.F("wr_id", w.WRID), trace.F("status", w.Status.String()), trace.F("qpn", w.QPNum)}
		if w.Status == WCSuccess {
			fs = append(fs, trace.F("opcode", w.Opcode.String()), trace.F("byte_len", w.ByteLen))
		} else {
			// The opcode and length of a failed completion are undefined (rxe says SEND).
			fs = append(fs, trace.F("vendor_err", fmt.Sprintf("%#x", w.VendorErr)), trace.F("cause", w.Status.Cause()))
		}
		t.Emit("poll", "completion", fs, nil, nil)
	}
	if err != nil {
		t.Emit("poll", "completion", []trace.Field{trace.F("cq_handle", cq.handle)}, nil, err)
	}
}

func (ch *CompChannel) traceWait(cq *CQ, err error) {
	t := ch.ctx.cmd.tr
	t.Count(trace.Syscall)
	if err != nil {
		return // a cancelled wait (CM event, end of run) is no wake-up
	}
	t.Count(trace.Wakeup)
	t.Emit("wakeup", "completion event", []trace.Field{trace.F("cq_handle", cq.handle)}, nil, nil)
}

func (qp *QP) traceModify(from QPState, attr *QPAttr, mask QPAttrMask, err error) {
	name := "modify"
	if mask&QPAttrState != 0 {
		name = from.String() + "->" + attr.State.String()
	}
	fs := append([]trace.Field{trace.F("qpn", qp.qpn)}, attr.MaskedTraceFields(mask)...)
	qp.ctx.cmd.tr.Emit("qp", name, fs, nil, err)
}

func (c *Context) traceGIDIoctl(n int, got uint64, err error) {
	var resp []trace.Field
	if err == nil {
		resp = []trace.Field{trace.F("num_entries", got)}
	}
	c.cmd.tr.Count(trace.Syscall)
	c.cmd.tr.Emit("uverbs", "QUERY_GID_TABLE (ioctl)", []trace.Field{trace.F("max_entries", n)}, resp, err)
}
