package uverbs

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/gorping/gorping/internal/trace"
)

// records parses the tracer's JSON lines.
func records(t *testing.T, b *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		out = append(out, m)
	}
	return out
}

func find(recs []map[string]any, kind, name string) map[string]any {
	for _, r := range recs {
		if r["kind"] == kind && r["name"] == name {
			return r
		}
	}
	return nil
}

// Every command of the core is a record with its request and response decoded from the
// ABI structs; MODIFY_QP shows the attributes its mask selects and the state walk.
func TestTraceCommands(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	var b bytes.Buffer
	tr := trace.New(&b, true)
	e.ctx.cmd.tr = tr
	pd, err := e.ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	buf, err := NewBuffer(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	if _, err := pd.RegMR(buf, AccessLocalWrite|AccessRemoteRead); err != nil {
		t.Fatal(err)
	}
	cq, err := e.ctx.CreateCQ(32, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := cq.Arm(false); err != nil {
		t.Fatal(err)
	}
	qp, err := pd.CreateQP(QPInitAttr{SendCQ: cq, RecvCQ: cq, Cap: QPCap{MaxSendWR: 16, MaxRecvWR: 2, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	init := QPAttr{State: QPSInit, PortNum: 1, AccessFlags: AccessRemoteWrite | AccessRemoteRead}
	if err := qp.Modify(&init, QPAttrState|QPAttrPort|QPAttrPKeyIndex|QPAttrAccessFlags); err != nil {
		t.Fatal(err)
	}
	rtr := QPAttr{State: QPSRTR, PathMTU: MTU1024, DestQPNum: 0x22, RQPSN: 0x1234, Timeout: 99,
		AH: AHAttr{IsGlobal: 1, PortNum: 1, GRH: GlobalRoute{SGIDIndex: 1, DGID: [16]byte{10: 0xff, 11: 0xff, 12: 192, 14: 2, 15: 1}}}}
	if err := qp.Modify(&rtr, QPAttrState|QPAttrAV|QPAttrPathMTU|QPAttrDestQPN|QPAttrRQPSN); err != nil {
		t.Fatal(err)
	}
	sge := []SGE{{Addr: buf.Addr(), Length: 16, LKey: 0x1111}}
	if err := qp.PostSend(&SendWR{Opcode: WRRDMARead, SGE: sge, RemoteAddr: 0x1000, RKey: 0xabc}); err != nil {
		t.Fatal(err)
	}
	if err := qp.PostRecv(&RecvWR{SGE: sge}); err != nil {
		t.Fatal(err)
	}
	recs := records(t, &b)

	reg := find(recs, "uverbs", "REG_MR")
	if reg == nil {
		t.Fatalf("no REG_MR record in %v", recs)
	}
	req, resp := reg["req"].(map[string]any), reg["resp"].(map[string]any)
	if req["length"] != 4096.0 || req["access_flags"] != "LOCAL_WRITE|REMOTE_READ" || !strings.HasPrefix(req["start"].(string), "0x") || req["response"] != nil {
		t.Errorf("REG_MR req = %v", req)
	}
	if resp["lkey"] != float64(0x1111) || resp["rkey"] != float64(0x2222) {
		t.Errorf("REG_MR resp = %v", resp)
	}
	cqp := find(recs, "uverbs", "CREATE_QP")
	if cqp == nil || cqp["req"].(map[string]any)["max_send_wr"] != 16.0 || cqp["resp"].(map[string]any)["qpn"] != 17.0 ||
		cqp["resp"].(map[string]any)["max_send_wr"] != 31.0 {
		t.Errorf("CREATE_QP = %v", cqp)
	}
	if find(recs, "uverbs", "REQ_NOTIFY_CQ (arm CQ)") == nil {
		t.Error("no arm record")
	}
	if r := find(recs, "qp", "RESET->INIT"); r == nil || r["req"].(map[string]any)["access"] != "REMOTE_WRITE|REMOTE_READ" {
		t.Errorf("RESET->INIT = %v", r)
	}
	r := find(recs, "qp", "INIT->RTR")
	if r == nil {
		t.Fatalf("no INIT->RTR in %v", recs)
	}
	a := r["req"].(map[string]any)
	if a["path_mtu"] != 1024.0 || a["dest_qpn"] != float64(0x22) || a["rq_psn"] != float64(0x1234) ||
		a["ah.sgid_index"] != 1.0 || a["ah.dgid"] != "::ffff:192.0.2.1" {
		t.Errorf("INIT->RTR attrs = %v", a)
	}
	if _, ok := a["timeout"]; ok {
		t.Errorf("INIT->RTR shows timeout, which its mask does not select: %v", a)
	}
	mq := find(recs, "uverbs", "MODIFY_QP")
	if mq == nil || !strings.Contains(mq["req"].(map[string]any)["attr_mask"].(string), "STATE") {
		t.Errorf("MODIFY_QP = %v", mq)
	}
	ps := find(recs, "post", "send WR")
	if ps == nil || ps["req"].(map[string]any)["opcode"] != "RDMA_READ" || ps["req"].(map[string]any)["rkey"] != "0xabc" {
		t.Errorf("post send = %v", ps)
	}
	if find(recs, "post", "recv WR") == nil {
		t.Error("no post recv record")
	}
}

// A context without a tracer traces nothing and its data path allocates nothing.
func TestNoTracerNoRecords(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	if e.ctx.cmd.tr != nil {
		t.Fatal("a context opened without WithTracer has a tracer")
	}
	if o := applyOptions([]Option{WithTracer(nil), nil}); o.tracer != nil {
		t.Fatal("WithTracer(nil) set a tracer")
	}
}
