package providerkit

import (
	"errors"
	"sync"
	"syscall"
	"testing"
	"unsafe"
)

func TestTable(t *testing.T) {
	var tb Table[uint64, int]
	if h1, h2 := tb.Reserve(), tb.Reserve(); h1 != 1 || h2 != 2 {
		t.Errorf("Reserve: %d, %d, want 1, 2", h1, h2)
	}
	v := 7
	if tb.Get(1) != nil {
		t.Error("Get on an empty table found a QP")
	}
	tb.Set(1, &v)
	if got := tb.Get(1); got != &v {
		t.Errorf("Get(1) = %p, want %p", got, &v)
	}
	if n := testing.AllocsPerRun(100, func() { tb.Get(1) }); n != 0 {
		t.Errorf("Get allocates %v times", n)
	}
	tb.Set(1, nil)
	if tb.Get(1) != nil {
		t.Error("Set(1, nil) left the QP")
	}
}

func TestSizing(t *testing.T) {
	for n, want := range map[uint32]uint32{0: 1, 1: 1, 2: 2, 3: 4, 64: 64, 65: 128} {
		if got := RoundupPow2(n); got != want {
			t.Errorf("RoundupPow2(%d) = %d, want %d", n, got, want)
		}
	}
	for n, want := range map[uint32]uint32{0: 0, 1: 0, 2: 1, 64: 6, 65: 7} {
		if got := Log2(n); got != want {
			t.Errorf("Log2(%d) = %d, want %d", n, got, want)
		}
	}
	if got := Align(4097, 4096); got != 8192 {
		t.Errorf("Align(4097, 4096) = %d", got)
	}
}

func TestWordsAndBytes(t *testing.T) {
	b := make([]byte, 16)
	Store32(b, 4, 0x01020304)
	Store64(b, 8, 0x1122334455667788)
	if Load32(b, 4) != 0x01020304 || Load64(b, 8) != 0x1122334455667788 {
		t.Errorf("words: % x", b)
	}
	if UserBytes(0, 0) != nil {
		t.Error("UserBytes of 0 bytes is not nil")
	}
	u := UserBytes(uint64(uintptr(unsafe.Pointer(&b[8]))), 8)
	if len(u) != 8 || &u[0] != &b[8] {
		t.Error("UserBytes does not view the memory at addr")
	}
}

func TestErrors(t *testing.T) {
	for _, c := range []struct {
		err   error
		text  string
		errno syscall.Errno
	}{
		{ErrBadOpcode("hns"), "hns: work request opcode not supported by gorping (SEND, RDMA WRITE, RDMA READ and their IMM forms only): invalid argument", syscall.EINVAL},
		{ErrTooManySGE("bnxt_re", syscall.ENOMEM), "bnxt_re: more SGEs than the QP allows: cannot allocate memory", syscall.ENOMEM},
		{ErrInlineLen("irdma", syscall.EINVAL), "irdma: inline data longer than the QP's max_inline_data: invalid argument", syscall.EINVAL},
		{ErrFull("hns"), "hns: the work queue is full: cannot allocate memory", syscall.ENOMEM},
		{ErrNoRQ("rxe"), "rxe: QP has no receive queue: invalid argument", syscall.EINVAL},
	} {
		if c.err.Error() != c.text || !errors.Is(c.err, c.errno) {
			t.Errorf("%q (errno %v), want %q wrapping %v", c.err, errors.Unwrap(c.err), c.text, c.errno)
		}
	}
}

func TestShortRespAndCloseOnce(t *testing.T) {
	if err := ShortResp("hns", "CREATE_CQ", 8, 8); err != nil {
		t.Errorf("enough bytes: %v", err)
	}
	if err := ShortResp("hns", "CREATE_CQ", 4, 8); err == nil || err.Error() != "hns: CREATE_CQ driver response is 4 bytes, want 8" {
		t.Errorf("short: %v", err)
	}
	var closed bool
	var sq, rq sync.Mutex
	if !CloseOnce(&closed, &sq, &rq) || !closed {
		t.Error("first CloseOnce did not close")
	}
	if CloseOnce(&closed, &sq, &rq) {
		t.Error("second CloseOnce closed again")
	}
	if !sq.TryLock() || !rq.TryLock() {
		t.Error("CloseOnce left a lock held")
	}
}

// FlowLabelSport against values worked by hand from the kernel's formulas (docs/mesh.md,
// "Paths"), and the kernel version test the providers' UDPSourcePort uses.
func TestFlowLabelSport(t *testing.T) {
	for _, c := range []struct {
		lqpn, rqpn uint32
		fl         uint32
		sport      uint16
	}{
		// rdma_cm's label of ports 40000 -> 7174 (rdmacm.FlowLabel): 0x07C6 ^ 0xC = 0x07CA.
		{17, 18, 0x307C6, 0xC7CA},
		// 0x3FE0 ^ 0x3F = 0x3FDF.
		{17, 18, 0xFFFE0, 0xFFDF},
		// A zero label: the QPNs' (0x11*0x22 = 0x242).
		{0x11, 0x22, 0, 0xC242},
	} {
		if s := FlowLabelSport(c.fl, c.lqpn, c.rqpn); s != c.sport {
			t.Errorf("FlowLabelSport(%#x, %d, %d) = %#x, want %#x", c.fl, c.lqpn, c.rqpn, s, c.sport)
		}
	}
	for _, c := range []struct {
		kernel [2]int
		major  int
		minor  int
		want   bool
	}{{[2]int{6, 1}, 5, 17, true}, {[2]int{5, 17}, 5, 17, true}, {[2]int{5, 16}, 5, 17, false}, {[2]int{}, 5, 8, false}} {
		if got := KernelAtLeast(c.kernel, c.major, c.minor); got != c.want {
			t.Errorf("KernelAtLeast(%v, %d, %d) = %v, want %v", c.kernel, c.major, c.minor, got, c.want)
		}
	}
}
