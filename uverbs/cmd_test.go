package uverbs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/gorping/gorping/internal/wire"
	"golang.org/x/sys/unix"
)

// respAddr is where every response must land: the arena's response half.
func respAddr(ctx *Context) uint64 { return ctx.cmd.arena.resp }

func hdr(cmd uint32, inWords, outWords uint16) []byte { return le(cmd, inWords, outWords) }

func checkBytes(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Errorf("%s:\n got % x\nwant % x", what, got, want)
	}
}

func TestGoldenControlCommands(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	ctx := e.ctx
	ra := respAddr(ctx)

	// GET_CONTEXT: header + response + the provider's 4 bytes of udata; 8 core + 8 driver out.
	checkBytes(t, "GET_CONTEXT", e.k.find(cmdGetContext), le(hdr(0, 5, 4), ra, []byte{1, 2, 3, 4}))
	if got := ctx.prov.(*fakeProvCtx).ctxResp; string(got) != "drvresp!" {
		t.Errorf("provider got context driver response %q", got)
	}
	if ctx.NumCompVectors() != 4 {
		t.Errorf("NumCompVectors = %d, want 4", ctx.NumCompVectors())
	}

	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	checkBytes(t, "ALLOC_PD", e.k.last(), le(hdr(3, 4, 1), ra))

	buf, err := NewBuffer(8192)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	mr, err := pd.RegMR(buf, AccessLocalWrite|AccessRemoteRead|AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	checkBytes(t, "REG_MR", e.k.last(), le(hdr(9, 12, 3), ra, buf.Addr(), uint64(8192), buf.Addr(), pd.handle, uint32(7)))
	if mr.LKey != 0x1111 || mr.RKey != 0x2222 || mr.Addr != buf.Addr() || mr.Len != 8192 {
		t.Errorf("MR = %+v", mr)
	}

	ch, err := ctx.CreateCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	checkBytes(t, "CREATE_COMP_CHANNEL", e.k.last(), le(hdr(17, 4, 1), ra))

	cq, err := ctx.CreateCQ(32, ch, 0)
	if err != nil {
		t.Fatal(err)
	}
	// rxe CREATE_CQ: 40-byte write, in 10 words, out 6 words (8 core + 16 mminfo).
	w := e.k.last()
	if len(w) != 40 {
		t.Fatalf("CREATE_CQ write is %d bytes, want 40", len(w))
	}
	chFd := int32(binary.LittleEndian.Uint32(w[32:36]))
	if chFd < 0 {
		t.Fatalf("CREATE_CQ comp_channel = %d, want the channel fd", chFd)
	}
	checkBytes(t, "CREATE_CQ", w, le(hdr(18, 10, 6), ra, cq.cookie, uint32(32), uint32(0), chFd, uint32(0)))
	if cq.CQE() != 33 {
		t.Errorf("CQE = %d, want the kernel's 33", cq.CQE())
	}
	pcq := cq.prov.(*fakeProvCQ)
	if string(pcq.resp) != "cq-mminfo-16byte" || pcq.core.Handle != cq.handle || pcq.core.CQE != 33 {
		t.Errorf("provider CQ got core %+v resp %q", pcq.core, pcq.resp)
	}

	if err := cq.Arm(false); err != nil {
		t.Fatal(err)
	}
	checkBytes(t, "REQ_NOTIFY_CQ", e.k.last(), le(hdr(23, 4, 0), cq.handle, uint32(0)))
	if err := cq.Arm(true); err != nil {
		t.Fatal(err)
	}
	checkBytes(t, "REQ_NOTIFY_CQ solicited", e.k.last(), le(hdr(23, 4, 0), cq.handle, uint32(1)))

	qp, err := pd.CreateQP(QPInitAttr{SendCQ: cq, RecvCQ: cq, Type: QPTypeRC,
		Cap: QPCap{MaxSendWR: 16, MaxRecvWR: 2, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	checkBytes(t, "CREATE_QP", e.k.last(), le(hdr(24, 16, 16), ra, qp.cookie, pd.handle, cq.handle, cq.handle, uint32(0),
		uint32(16), uint32(2), uint32(1), uint32(1), uint32(0), uint8(0), uint8(2), uint8(0), uint8(0)))
	if qp.Num() != 0x11 || qp.Cap() != (QPCap{MaxSendWR: 31, MaxRecvWR: 3, MaxSendSGE: 2, MaxRecvSGE: 1, MaxInlineData: 64}) {
		t.Errorf("QP num %#x cap %+v", qp.Num(), qp.Cap())
	}
	pqp := ctx.prov.(*fakeProvCtx).qps[0]
	if pqp.core.SendCQ != cq.prov || pqp.core.QPN != 0x11 || pqp.core.Cap.MaxSendWR != 31 {
		t.Errorf("provider QP core %+v", pqp.core)
	}

	// MODIFY_QP to RTR with an address vector: every field lands at its ib_uverbs_modify_qp offset.
	attr := QPAttr{
		State: QPSRTR, PathMTU: MTU1024, RQPSN: 0x123456, DestQPNum: 0x22, MaxDestRdAtomic: 1,
		MinRNRTimer: 12, AccessFlags: AccessRemoteWrite, PKeyIndex: 5, QKey: 0x11111111, SQPSN: 0xabcdef,
		MaxRdAtomic: 2, PortNum: 1, Timeout: 14, RetryCnt: 7, RNRRetry: 6,
		AH: AHAttr{IsGlobal: 1, PortNum: 1, DLID: 0x77, SL: 3, SrcPathBits: 4, StaticRate: 2,
			GRH: GlobalRoute{DGID: [16]byte{0: 0xfe, 15: 0x01}, FlowLabel: 0x5678, SGIDIndex: 1, HopLimit: 64, TrafficClass: 9}},
	}
	mask := QPAttrState | QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN | QPAttrMaxDestRdAtomic | QPAttrMinRNRTimer
	if mask != 0x129181 {
		t.Fatalf("RTR mask %#x, want rdma_cm's 0x129181", mask)
	}
	if err := qp.Modify(&attr, mask); err != nil {
		t.Fatal(err)
	}
	dgid := [16]byte{0: 0xfe, 15: 0x01}
	dest := le(dgid[:], uint32(0x5678), uint16(0x77), uint16(0),
		uint8(1), uint8(64), uint8(9), uint8(3), uint8(4), uint8(2), uint8(1), uint8(1))
	checkBytes(t, "MODIFY_QP", e.k.last(), le(hdr(26, 30, 0), dest, zeros(32), qp.handle, uint32(mask),
		uint32(0x11111111), uint32(0x123456), uint32(0xabcdef), uint32(0x22), uint32(2), uint16(5), uint16(0),
		uint8(2), uint8(0), uint8(3), uint8(0), uint8(0), uint8(2), uint8(1), uint8(12), uint8(1), uint8(14),
		uint8(7), uint8(6), uint8(0), uint8(0), uint8(0), uint8(0)))
	if len(pqp.states) != 1 || pqp.states[0] != QPSRTR {
		t.Errorf("provider saw states %v, want [RTR]", pqp.states)
	}
	if err := qp.Modify(&attr, 1<<25); err == nil || !strings.Contains(err.Error(), "mask") {
		t.Errorf("Modify with RATE_LIMIT mask: err = %v, want a mask error", err)
	}

	e.k.on(cmdQueryQP, func(req []byte) ([]byte, error) {
		return le(dest, zeros(32), uint32(31), uint32(3), uint32(2), uint32(1), uint32(64), uint32(0x1111), uint32(0x123456),
			uint32(0xabcdef), uint32(0x22), uint32(2), uint16(5), uint16(0), uint8(3), uint8(2), uint8(3), uint8(0),
			uint8(0), uint8(2), uint8(1), uint8(12), uint8(1), uint8(14), uint8(7), uint8(6), uint8(0), uint8(0), uint8(0), zeros(5)), nil
	})
	qa, err := qp.Query(QPAttrState | QPAttrAV)
	if err != nil {
		t.Fatal(err)
	}
	checkBytes(t, "QUERY_QP", e.k.last(), le(hdr(25, 6, 32), ra, qp.handle, uint32(0x81)))
	if qa.State != QPSRTS || qa.CurState != QPSRTR || qa.PathMTU != MTU1024 || qa.AH != attr.AH || qa.DestQPNum != 0x22 ||
		qa.MaxSendWR != 31 || qa.QKey != 0x1111 || qa.RNRRetry != 6 || qa.Timeout != 14 {
		t.Errorf("Query = %+v", qa)
	}

	if err := qp.Destroy(); err != nil {
		t.Fatal(err)
	}
	checkBytes(t, "DESTROY_QP", e.k.last(), le(hdr(27, 6, 1), ra, qp.handle, uint32(0)))
	if !pqp.closed {
		t.Error("provider QP not closed after DESTROY_QP")
	}
	if err := cq.Destroy(); err != nil {
		t.Fatal(err)
	}
	checkBytes(t, "DESTROY_CQ", e.k.last(), le(hdr(20, 6, 2), ra, cq.handle, uint32(0)))
	if !pcq.closed {
		t.Error("provider CQ not closed after DESTROY_CQ")
	}
	if err := mr.Dereg(); err != nil {
		t.Fatal(err)
	}
	checkBytes(t, "DEREG_MR", e.k.last(), le(hdr(13, 3, 0), mr.handle))
	if err := pd.Dealloc(); err != nil {
		t.Fatal(err)
	}
	checkBytes(t, "DEALLOC_PD", e.k.last(), le(hdr(4, 3, 0), pd.handle))
}

func TestQueryDeviceAndPort(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	resp := make([]byte, 176)
	binary.LittleEndian.PutUint64(resp[0:], 0x0102)
	binary.BigEndian.PutUint64(resp[8:], 0x505400fffe96b707) // node_guid is __be64
	binary.BigEndian.PutUint64(resp[16:], 0x1122334455667788)
	binary.LittleEndian.PutUint32(resp[40:], 0xffffff) // vendor_id
	binary.LittleEndian.PutUint32(resp[56:], 1<<20)    // max_qp_wr
	binary.LittleEndian.PutUint32(resp[88:], 128)      // max_qp_rd_atom
	binary.LittleEndian.PutUint32(resp[100:], 127)     // max_qp_init_rd_atom
	binary.LittleEndian.PutUint16(resp[168:], 64)      // max_pkeys
	resp[171] = 1                                      // phys_port_cnt
	e.k.on(cmdQueryDevice, func(req []byte) ([]byte, error) { return resp, nil })
	da, err := e.ctx.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	checkBytes(t, "QUERY_DEVICE", e.k.last(), le(hdr(1, 4, 44), respAddr(e.ctx)))
	want := DeviceAttr{FWVer: 0x0102, NodeGUID: 0x505400fffe96b707, SysImageGUID: 0x1122334455667788, VendorID: 0xffffff,
		MaxQPWR: 1 << 20, MaxQPRdAtom: 128, MaxQPInitRdAtom: 127, MaxPKeys: 64, PhysPortCnt: 1}
	if da != want {
		t.Errorf("QueryDevice =\n%+v\nwant\n%+v", da, want)
	}

	e.k.on(cmdQueryPort, func(req []byte) ([]byte, error) {
		if req[8] != 1 {
			return nil, unix.EINVAL
		}
		return le(uint32(0x10000), uint32(1<<23), uint32(0), uint32(0), uint32(1024), uint16(1), uint16(0), uint16(0),
			uint8(4), uint8(3), uint8(3), uint8(0), uint8(1), uint8(0), uint8(0), uint8(0), uint8(1), uint8(1), uint8(5), uint8(2), uint8(1), uint8(0)), nil
	})
	pa, err := e.ctx.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	checkBytes(t, "QUERY_PORT", e.k.last(), le(hdr(2, 6, 10), respAddr(e.ctx), uint8(1), zeros(7)))
	wantPort := PortAttr{State: PortActive, PhysState: 5, MaxMTU: MTU1024, ActiveMTU: MTU1024, LinkLayer: LinkLayerEthernet,
		GIDTableLen: 1024, PKeyTableLen: 1, CapFlags: 0x10000, MaxMsgSize: 1 << 23, ActiveWidth: 1, ActiveSpeed: 1, GRHRequired: true}
	if pa != wantPort {
		t.Errorf("QueryPort =\n%+v\nwant\n%+v", pa, wantPort)
	}
	if _, err := e.ctx.QueryPort(2); !errors.Is(err, unix.EINVAL) {
		t.Errorf("QueryPort(2) err = %v, want EINVAL", err)
	}
	if pa.ActiveMTU.Bytes() != 1024 {
		t.Errorf("MTU1024.Bytes() = %d", pa.ActiveMTU.Bytes())
	}
}

func TestCmdErrors(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	e.k.on(cmdAllocPD, func(req []byte) ([]byte, error) { return nil, unix.EMFILE })
	_, err := e.ctx.AllocPD()
	var ce *cmdError
	if !errors.As(err, &ce) || ce.Cmd != "ALLOC_PD" || !errors.Is(err, unix.EMFILE) {
		t.Fatalf("AllocPD err = %#v, want cmdError{ALLOC_PD, EMFILE}", err)
	}
	if !strings.Contains(err.Error(), "fake0") || !strings.Contains(err.Error(), "ALLOC_PD") {
		t.Errorf("error %q lacks device or command", err)
	}
	// Oversized requests are refused before reaching the kernel.
	if err := e.ctx.cmd.Write(99, make([]byte, maxReqLen), nil); err == nil {
		t.Error("oversized command accepted")
	}
	if err := e.ctx.cmd.Write(99, make([]byte, 6), nil); err == nil {
		t.Error("unaligned command accepted")
	}
}

func TestRegMRMemlockError(t *testing.T) {
	t.Parallel()
	limit := unix.Rlimit{Cur: 65536, Max: 65536}
	e := newTestEnv(t, withMemlock(func() (unix.Rlimit, error) { return limit, nil }))
	pd, err := e.ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	e.k.on(cmdRegMR, func(req []byte) ([]byte, error) { return nil, unix.ENOMEM })
	buf, err := NewBuffer(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	_, err = pd.RegMR(buf, AccessLocalWrite)
	if !errors.Is(err, unix.ENOMEM) {
		t.Fatalf("err = %v, want ENOMEM", err)
	}
	var me *MemlockError
	if !errors.As(err, &me) || me.Limit != 65536 || me.Size != 1<<20 {
		t.Fatalf("err = %#v, want a *MemlockError for 1 MiB under a 64 KiB limit", err)
	}
	for _, s := range []string{"RLIMIT_MEMLOCK", "65536 bytes", "ulimit -l", "LimitMEMLOCK="} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
	limit = unix.Rlimit{Cur: unix.RLIM_INFINITY, Max: unix.RLIM_INFINITY}
	_, err = pd.RegMR(buf, AccessLocalWrite)
	if !strings.Contains(err.Error(), "unlimited") {
		t.Errorf("error %q should say the limit is unlimited", err)
	}
	e.k.on(cmdRegMR, func(req []byte) ([]byte, error) { return nil, unix.EFAULT })
	_, err = pd.RegMR(buf, AccessLocalWrite)
	if strings.Contains(err.Error(), "RLIMIT_MEMLOCK") || !errors.Is(err, unix.EFAULT) {
		t.Errorf("EFAULT error %q should not blame RLIMIT_MEMLOCK", err)
	}
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	err := openError("/dev/infiniband/uverbs0", unix.EACCES)
	if !errors.Is(err, unix.EACCES) {
		t.Errorf("errno lost: %v", err)
	}
	for _, s := range []string{"/dev/infiniband/uverbs0", "permission denied", "root", "udev", "MODE"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("EACCES error %q does not mention %q", err, s)
		}
	}
	if err := openError("/dev/infiniband/uverbs0", unix.ENOENT); !strings.Contains(err.Error(), "ib_uverbs") {
		t.Errorf("ENOENT error %q should hint at ib_uverbs", err)
	}

	reg := shippedLike(t)
	_, err = reg.lookup(Device{Name: "mlx4_0", Driver: "mlx4", DriverID: 2, Path: "/nonexistent"}, nil)
	var ue *UnsupportedDriverError
	if !errors.As(err, &ue) {
		t.Fatalf("Open(mlx4) err = %v, want *UnsupportedDriverError", err)
	}
	for _, s := range []string{"mlx4_0", "mlx4", "supported: fake, mlx5, rxe, siw"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
	_, err = reg.lookup(Device{Name: "fake9", DriverID: fakeDriverID, ABI: 7, Path: "/nonexistent"}, nil)
	if err == nil || !strings.Contains(err.Error(), "ABI") {
		t.Errorf("ABI mismatch err = %v", err)
	}
	_, err = Open(Device{Name: "fake9", Driver: "fake", ABI: 1, Path: "/nonexistent/uverbs9"}, WithProvider(fakeProvider{}))
	if !errors.Is(err, unix.ENOENT) {
		t.Errorf("Open of missing node err = %v, want ENOENT", err)
	}
}

func TestBuffer(t *testing.T) {
	t.Parallel()
	b, err := NewBuffer(100)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Bytes()) != 100 || b.Len() != 100 {
		t.Fatalf("len %d", len(b.Bytes()))
	}
	if b.Addr() != uint64(uintptr(unsafe.Pointer(&b.Bytes()[0]))) || b.Addr()%uint64(unix.Getpagesize()) != 0 {
		t.Errorf("Addr %#x not the page-aligned start of Bytes", b.Addr())
	}
	b.Bytes()[99] = 7
	if err := b.Free(); err != nil {
		t.Fatal(err)
	}
	if err := b.Free(); err != nil {
		t.Fatalf("second Free: %v", err)
	}
	if _, err := NewBuffer(0); err == nil {
		t.Error("NewBuffer(0) succeeded")
	}
}

func TestCloseReleasesEverything(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	pd, _ := e.ctx.AllocPD()
	cq, err := e.ctx.CreateCQ(4, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkBytes(t, "CREATE_CQ without channel", e.k.last()[32:36], le(int32(-1)))
	qp, err := pd.CreateQP(QPInitAttr{SendCQ: cq, RecvCQ: cq})
	if err != nil {
		t.Fatal(err)
	}
	pctx := e.ctx.prov.(*fakeProvCtx)
	if err := e.ctx.Close(); err != nil {
		t.Fatal(err)
	}
	if !cq.prov.(*fakeProvCQ).closed || !pctx.qps[0].closed || !pctx.closed {
		t.Error("Close did not release provider objects")
	}
	// Objects are gone with their context: destroying them is a no-op.
	for name, f := range map[string]func() error{"qp": qp.Destroy, "cq": cq.Destroy, "pd": pd.Dealloc} {
		if err := f(); err != nil {
			t.Errorf("%s after Close: %v", name, err)
		}
	}
	if _, err := e.ctx.AllocPD(); !errors.Is(err, ErrClosed) {
		t.Errorf("AllocPD after Close: %v, want ErrClosed", err)
	}
	if err := e.ctx.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestStrings(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		WCWRFlushErr.String():      "WR_FLUSH_ERR",
		WCSuccess.String():         "SUCCESS",
		WCGeneralErr.String():      "GENERAL_ERR",
		WCStatus(99).String():      "WCStatus(99)",
		WCRecv.String():            "RECV",
		QPSRTS.String():            "RTS",
		PortActive.String():        "ACTIVE",
		EventCommEst.String():      "COMM_EST",
		LinkLayerEthernet.String(): "Ethernet",
	}
	for got, want := range cases {
		if got != want {
			t.Errorf("got %q want %q", got, want)
		}
	}
	if int(WCLocProtErr) != 4 {
		t.Error("WCStatus numeric value")
	}
}

func TestRegMRZeroBuffer(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	pd, err := e.ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pd.RegMR(&Buffer{}, AccessLocalWrite); err == nil {
		t.Error("RegMR of a zero Buffer succeeded")
	}
	b, err := NewBuffer(64)
	if err != nil {
		t.Fatal(err)
	}
	b.Free()
	if _, err := pd.RegMR(b, AccessLocalWrite); err == nil || b.Addr() != 0 || b.Len() != 0 {
		t.Errorf("RegMR of a freed Buffer: %v (Addr %#x Len %d)", err, b.Addr(), b.Len())
	}
}

// Commands are named as the uapi header names them, the extended ones too (--trace
// showed QUERY_DEVICE_EX as "command 2147483649").
func TestCmdName(t *testing.T) {
	for cmd, want := range map[uint32]string{
		cmdQueryDevice:             "QUERY_DEVICE",
		cmdQueryDevice | exCmdFlag: "EX_QUERY_DEVICE",
		cmdCreateCQ | exCmdFlag:    "EX_CREATE_CQ",
		9999:                       "command 9999",
		9999 | exCmdFlag:           "extended command 9999",
	} {
		if got := cmdName(cmd); got != want {
			t.Errorf("cmdName(%#x) = %q, want %q", cmd, got, want)
		}
	}
}

// Two goroutines ringing doorbells on one context do not queue behind each other (each
// takes a lane; a contended mutex's wait record would be an allocation per ping), and
// Close waits for a doorbell in the kernel, after which Write fails cleanly.
func TestWritesRunSideBySide(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	inside := make(chan struct{})
	release := make(chan struct{})
	var calls atomic.Int32
	e.k.on(cmdPostSend, func(req []byte) ([]byte, error) {
		if calls.Add(1) == 1 {
			close(inside)
			<-release // the first doorbell stays in the kernel until the test lets it go
		}
		return le(uint32(0)), nil
	})
	ring := func() error {
		var req postSendReq
		var resp postSendResp
		return e.ctx.cmd.Write(cmdPostSend, wire.Bytes(&req), wire.Bytes(&resp))
	}
	first := make(chan error, 1)
	go func() { first <- ring() }()
	select {
	case <-inside:
	case <-time.After(10 * time.Second):
		t.Fatal("the first doorbell did not reach the fake kernel within 10 s")
	}
	second := make(chan error, 1)
	go func() { second <- ring() }()
	select {
	case err := <-second:
		if err != nil {
			t.Errorf("second doorbell: %v", err)
		}
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("a second doorbell waited 10 s for the first one, still in the kernel: the data path's writes queue on one lock")
	}
	closed := make(chan error, 1)
	go func() { closed <- e.ctx.Close() }()
	// Close must not finish while the first doorbell is in the kernel: give it the
	// chance to, then let the doorbell go.
	for range 100 {
		select {
		case err := <-closed:
			t.Fatalf("Close returned (%v) while a doorbell was in the kernel", err)
		default:
			runtime.Gosched()
		}
	}
	close(release)
	if err := <-first; err != nil {
		t.Errorf("first doorbell: %v", err)
	}
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return within 10 s of the doorbell's end")
	}
	if err := ring(); !errors.Is(err, ErrClosed) {
		t.Errorf("doorbell after Close: %v, want ErrClosed", err)
	}
}
