package abicheck

import (
	"os/exec"
	"strings"
	"testing"
)

// ib_uverbs_cmd_hdr (rdma/ib_user_verbs.h): command u32, in_words u16, out_words u16.
type cmdHdr struct {
	Command  uint32
	InWords  uint16
	OutWords uint16
}

// The same struct with in_words moved after out_words.
type cmdHdrMoved struct {
	Command  uint32
	OutWords uint16
	InWords  uint16
}

// The same struct with out_words resized to 32 bits.
type cmdHdrResized struct {
	Command  uint32
	InWords  uint16
	OutWords uint32
}

// ib_uverbs_sge with tags for the members snake_case would not find.
type sge struct {
	Addr   uint64
	Length uint32
	LKey   uint32 `abi:"lkey"`
}

func needCC(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Fatal("gcc is required for the ABI layout check")
	}
}

func TestSnakeCase(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"CqHandle": "cq_handle", "MaxSendWR": "max_send_wr", "QPNum": "qp_num",
		"Response": "response", "Pad1": "pad1", "SrcAddr": "src_addr", "DGID": "dgid",
	} {
		if got := SnakeCase(in); got != want {
			t.Errorf("SnakeCase(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMatchingLayoutPasses(t *testing.T) {
	t.Parallel()
	needCC(t)
	ms, err := Compare([]string{"rdma/ib_user_verbs.h"}, []Struct{
		{C: "struct ib_uverbs_cmd_hdr", Go: cmdHdr{}},
		{C: "struct ib_uverbs_sge", Go: sge{}},
	}, []Const{{C: "IB_USER_VERBS_CMD_CREATE_CQ", Go: 18}})
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 0 {
		t.Fatalf("unexpected mismatches: %v", ms)
	}
}

// The check exists to catch these two mistakes; prove that it does.
func TestMovedAndResizedFieldsFail(t *testing.T) {
	t.Parallel()
	needCC(t)
	ms, err := Compare([]string{"rdma/ib_user_verbs.h"}, []Struct{
		{C: "struct ib_uverbs_cmd_hdr", Go: cmdHdrMoved{}},
		{C: "struct ib_uverbs_cmd_hdr", Go: cmdHdrResized{}},
	}, []Const{{C: "IB_USER_VERBS_CMD_CREATE_CQ", Go: 19}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range ms {
		got = append(got, m.String())
	}
	all := strings.Join(got, "\n")
	for _, want := range []string{
		"struct ib_uverbs_cmd_hdr.OutWords (out_words): offset is 4 in Go, 6 in C",
		"struct ib_uverbs_cmd_hdr.InWords (in_words): offset is 6 in Go, 4 in C",
		"struct ib_uverbs_cmd_hdr: size is 12 in Go, 8 in C",
		"struct ib_uverbs_cmd_hdr.OutWords (out_words): size is 4 in Go, 2 in C",
		"IB_USER_VERBS_CMD_CREATE_CQ: value is 19 in Go, 18 in C",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("missing mismatch %q in:\n%s", want, all)
		}
	}
}

func TestUnknownMemberIsAnError(t *testing.T) {
	t.Parallel()
	needCC(t)
	type bogus struct{ NoSuchMember uint32 }
	_, err := Compare([]string{"rdma/ib_user_verbs.h"}, []Struct{{C: "struct ib_uverbs_cmd_hdr", Go: bogus{}}}, nil)
	if err == nil || !strings.Contains(err.Error(), "no_such_member") {
		t.Fatalf("want a compile error naming no_such_member, got %v", err)
	}
}
