package trace

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
)

type inner struct {
	SgidIndex uint8
	Dgid      [16]byte
}

type sample struct {
	Response  uint64
	PdHandle  uint32
	MaxSendWr uint32
	QpType    uint8
	Reserved  [3]uint8
	Zero      uint32
	GUID      [8]byte `abi:"node_guid"`
	Dest      inner
}

func TestStruct(t *testing.T) {
	s := sample{Response: 0xdead, PdHandle: 0, MaxSendWr: 16, QpType: 2, GUID: [8]byte{1, 2, 3, 4, 5, 6, 7, 8},
		Dest: inner{SgidIndex: 1, Dgid: [16]byte{10: 0xff, 11: 0xff, 12: 192, 13: 0, 14: 2, 15: 1}}}
	got := Struct(&s, nil)
	want := []Field{{"pd_handle", uint32(0)}, {"max_send_wr", uint32(16)}, {"qp_type", uint8(2)},
		{"node_guid", "0102030405060708"}, {"dest.sgid_index", uint8(1)}, {"dest.dgid", "::ffff:192.0.2.1"}}
	if len(got) != len(want) {
		t.Fatalf("Struct = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("field %d = %#v, want %#v", i, got[i], want[i])
		}
	}
}

func TestSnake(t *testing.T) {
	for in, want := range map[string]string{"PdHandle": "pd_handle", "MaxQPWR": "max_qpwr", "QPNum": "qp_num",
		"TimeoutMs": "timeout_ms", "ID": "id", "SrcAddr": "src_addr"} {
		if got := snake(in); got != want {
			t.Errorf("snake(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestTextRecord(t *testing.T) {
	var b bytes.Buffer
	tr := New(&b, false)
	tr.Emit("uverbs", "CREATE_QP", []Field{F("pd_handle", 0), F("note", "two words")}, []Field{F("qpn", 17)}, nil)
	tr.Emit("uverbs", "REG_MR", []Field{F("length", 64)}, nil, errors.New("boom"))
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines: %q", len(lines), b.String())
	}
	if !strings.HasPrefix(lines[0], "trace ") || !strings.HasSuffix(lines[0], `uverbs   CREATE_QP pd_handle=0 note="two words" => qpn=17`) {
		t.Errorf("line 1 = %q", lines[0])
	}
	if !strings.HasSuffix(lines[1], "REG_MR length=64 => error: boom") {
		t.Errorf("line 2 = %q", lines[1])
	}
}

func TestJSONRecords(t *testing.T) {
	var b bytes.Buffer
	tr := New(&b, true)
	tr.Emit("qp", "INIT->RTR", []Field{F("qpn", uint32(17)), F("path_mtu", 1024), F("dgid", "::1"), F("ok", true)}, nil, nil)
	tr.Emit("uverbs", "QUERY_PORT", []Field{F("port_num", 1)}, []Field{F("state", 4)}, errors.New(`bad "x"`))
	tr.Count(PostSend)
	tr.Count(PostSend)
	tr.CountN(Completion, 3)
	tr.Count(Syscall)
	tr.Ping("client", 0)
	tr.Ping("client", 1)
	dec := json.NewDecoder(&b)
	var recs []map[string]any
	for dec.More() {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("record %d: %v in %q", len(recs), err, b.String())
		}
		recs = append(recs, m)
	}
	if len(recs) != 4 {
		t.Fatalf("got %d records", len(recs))
	}
	for _, r := range recs {
		if r["type"] != "trace" {
			t.Errorf("type = %v", r["type"])
		}
		if _, ok := r["t_us"].(float64); !ok {
			t.Errorf("t_us missing in %v", r)
		}
	}
	if req := recs[0]["req"].(map[string]any); req["qpn"] != 17.0 || req["path_mtu"] != 1024.0 || req["ok"] != true {
		t.Errorf("req = %v", req)
	}
	if recs[1]["error"] != `bad "x"` || recs[1]["resp"].(map[string]any)["state"] != 4.0 {
		t.Errorf("record 2 = %v", recs[1])
	}
	p0, p1 := recs[2]["req"].(map[string]any), recs[3]["req"].(map[string]any)
	if p0["wrs_send"] != 2.0 || p0["completions"] != 3.0 || p0["syscalls"] != 1.0 || p0["seq"] != 0.0 {
		t.Errorf("ping 0 = %v", p0)
	}
	if p1["wrs_send"] != 0.0 || p1["completions"] != 0.0 {
		t.Errorf("ping 1 counts not reset: %v", p1)
	}
}

// Records from several goroutines stay whole lines.
func TestConcurrentLines(t *testing.T) {
	var b bytes.Buffer
	tr := New(&b, true)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Go(func() {
			for i := 0; i < 100; i++ {
				tr.Emit("cm_event", "RDMA_CM_EVENT_ESTABLISHED", []Field{F("g", g), F("i", i)}, nil, nil)
			}
		})
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 800 {
		t.Fatalf("got %d lines", len(lines))
	}
	for _, l := range lines {
		if !json.Valid([]byte(l)) {
			t.Fatalf("invalid line %q", l)
		}
	}
}

func TestNilTracer(t *testing.T) {
	var tr *Tracer
	tr.Emit("x", "y", nil, nil, nil)
	tr.Count(Syscall)
	tr.CountN(Completion, 2)
	tr.Ping("client", 0)
	tr.ResetCounts()
	if n := testing.AllocsPerRun(100, func() { tr.Count(PostSend); tr.Ping("client", 1) }); n != 0 {
		t.Errorf("nil tracer allocates %v per call", n)
	}
}
