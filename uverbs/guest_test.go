//go:build guest

package uverbs_test

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorping/gorping/test/guesttest"
	"github.com/gorping/gorping/uverbs"
	_ "github.com/gorping/gorping/uverbs/rxe"
	"golang.org/x/sys/unix"
)

// The guest (test/vm) has rxe0 on dummy interface d0 with 192.0.2.1 and 2001:db8::1.
const guestDev = guesttest.DeviceName

var guestIPv4 = netip.MustParseAddr("192.0.2.1")

func sysfs(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func TestGuestDiscovery(t *testing.T) {
	d := guesttest.RxeDevice(t)
	if d.Driver != "rxe" || d.DriverID != 14 || d.ABI != 2 || d.Index < 0 {
		t.Errorf("rxe0 = %+v, want driver rxe/14, ABI 2, a netlink index", d)
	}
	if d.Path != "/dev/infiniband/"+d.Uverbs || !strings.HasPrefix(d.Uverbs, "uverbs") {
		t.Errorf("node %q / %q", d.Uverbs, d.Path)
	}
	var st unix.Stat_t
	if err := unix.Stat(d.Path, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR {
		t.Errorf("%s is not a character device: %v", d.Path, err)
	}
	// The uverbs node's dev_t in sysfs agrees with the node netlink named.
	if got, want := sysfs(t, filepath.Join("/sys/class/infiniband_verbs", d.Uverbs, "dev")),
		strconv.Itoa(int(unix.Major(st.Rdev)))+":"+strconv.Itoa(int(unix.Minor(st.Rdev))); got != want {
		t.Errorf("sysfs dev %s, node %s", got, want)
	}
	guid := strings.ReplaceAll(sysfs(t, "/sys/class/infiniband/rxe0/node_guid"), ":", "")
	if g, _ := strconv.ParseUint(guid, 16, 64); g != d.NodeGUID || g == 0 {
		t.Errorf("NodeGUID %#x, sysfs %s", d.NodeGUID, guid)
	}

	// Netlink is what Devices used; the sysfs fallback must describe the same device.
	nl, err := uverbs.NetlinkDevicesForTest()
	if err != nil {
		t.Fatalf("netlink discovery: %v", err)
	}
	sf, err := uverbs.SysfsDevicesForTest()
	if err != nil {
		t.Fatalf("sysfs discovery: %v", err)
	}
	if len(nl) != len(sf) || len(sf) == 0 {
		t.Fatalf("netlink found %+v, sysfs %+v", nl, sf)
	}
	for _, s := range sf {
		if s.Name != guestDev {
			continue
		}
		s.Index = d.Index // sysfs has no index
		if s != d {
			t.Errorf("sysfs fallback %+v, netlink %+v", s, d)
		}
	}
}

func open(t *testing.T) *uverbs.Context {
	t.Helper()
	ctx, err := uverbs.Open(guesttest.RxeDevice(t))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := ctx.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return ctx
}

func TestGuestQueries(t *testing.T) {
	ctx := open(t)
	d := ctx.Device()
	da, err := ctx.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	if da.VendorID != 0xffffff || da.PhysPortCnt != 1 || da.NodeGUID != d.NodeGUID || da.MaxQPWR < 1024 ||
		da.MaxQPRdAtom == 0 || da.MaxQPInitRdAtom == 0 || da.MaxCQE < 1024 || da.MaxSGE == 0 {
		t.Errorf("QueryDevice = %+v", da)
	}
	pa, err := ctx.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	if pa.State != uverbs.PortActive || pa.LinkLayer != uverbs.LinkLayerEthernet || pa.GIDTableLen == 0 ||
		pa.ActiveMTU < uverbs.MTU1024 || pa.MaxMsgSize == 0 {
		t.Errorf("QueryPort(1) = %+v", pa)
	}
	if _, err := ctx.QueryPort(2); !errors.Is(err, unix.EINVAL) {
		t.Errorf("QueryPort(2): %v, want EINVAL", err)
	}
	if ctx.NumCompVectors() < 1 {
		t.Errorf("NumCompVectors %d", ctx.NumCompVectors())
	}

	gids, err := ctx.GIDTable()
	if err != nil {
		t.Fatalf("GIDTable: %v", err)
	}
	want := guestIPv4.As16() // ::ffff:192.0.2.1, the RoCE v2 GID of the IPv4 address
	ifindex, _ := strconv.Atoi(sysfs(t, "/sys/class/net/d0/ifindex"))
	var found bool
	for _, g := range gids {
		if g.GID == want {
			found = true
			if g.Type != uverbs.GIDTypeRoCEv2 || g.Port != 1 || g.IfIndex != uint32(ifindex) {
				t.Errorf("IPv4 GID entry %+v, want RoCE v2 on port 1, ifindex %d", g, ifindex)
			}
		}
	}
	if !found {
		t.Errorf("GID table %+v lacks ::ffff:192.0.2.1", gids)
	}
	// The ioctl and sysfs views agree.
	sf, err := uverbs.SysfsGIDsForTest(guestDev, 1, int(pa.GIDTableLen), pa.LinkLayer)
	if err != nil {
		t.Fatal(err)
	}
	if len(sf) != len(gids) {
		t.Fatalf("sysfs GIDs %+v, ioctl %+v", sf, gids)
	}
	for i := range sf {
		if sf[i] != gids[i] {
			t.Errorf("GID %d: sysfs %+v, ioctl %+v", i, sf[i], gids[i])
		}
	}
}

func TestGuestObjects(t *testing.T) {
	ctx := open(t)
	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	buf, err := uverbs.NewBuffer(1 << 16)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	mr, err := pd.RegMR(buf, uverbs.AccessLocalWrite|uverbs.AccessRemoteRead|uverbs.AccessRemoteWrite)
	if err != nil {
		t.Fatalf("RegMR: %v", err)
	}
	if mr.LKey == 0 || mr.RKey == 0 || mr.Addr != buf.Addr() || mr.Len != 1<<16 {
		t.Errorf("MR %+v", mr)
	}
	// The kernel refuses to free a PD that still has an MR; the errno comes through.
	if err := pd.Dealloc(); !errors.Is(err, unix.EBUSY) {
		t.Errorf("Dealloc with a live MR: %v, want EBUSY", err)
	}

	ch, err := ctx.CreateCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := ctx.CreateCQ(32, ch, 0)
	if err != nil {
		t.Fatalf("CreateCQ: %v", err)
	}
	if cq.CQE() < 32 {
		t.Errorf("CQE %d < 32", cq.CQE())
	}
	if err := cq.Arm(false); err != nil {
		t.Fatalf("Arm: %v", err)
	}
	wc := make([]uverbs.WC, 4)
	if n, err := cq.Poll(wc); n != 0 || err != nil {
		t.Errorf("Poll of an idle CQ = %d, %v", n, err)
	}
	// No completion → no event: Wait honours its deadline.
	wctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	start := time.Now()
	_, err = ch.Wait(wctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 10*time.Second {
		t.Errorf("Wait on an idle channel: %v after %v", err, time.Since(start))
	}

	qp, err := pd.CreateQP(uverbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Type: uverbs.QPTypeRC,
		Cap: uverbs.QPCap{MaxSendWR: 16, MaxRecvWR: 2, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatalf("CreateQP: %v", err)
	}
	if c := qp.Cap(); c.MaxSendWR < 16 || c.MaxRecvWR < 2 || c.MaxSendSGE < 1 || qp.Num() < 16 {
		t.Errorf("QP %d cap %+v", qp.Num(), c)
	}
	if err := cq.Destroy(); !errors.Is(err, unix.EBUSY) {
		t.Errorf("Destroy of a CQ in use: %v, want EBUSY", err)
	}
	qa, err := qp.Query(uverbs.QPAttrState)
	if err != nil || qa.State != uverbs.QPSReset {
		t.Errorf("Query of a new QP: %+v, %v", qa, err)
	}
	if err := qp.PostRecv(&uverbs.RecvWR{SGE: []uverbs.SGE{{Addr: mr.Addr, Length: 16, LKey: mr.LKey}}}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("PostRecv in RESET: %v, want EINVAL", err)
	}

	// Close interrupts a pending Wait.
	done := make(chan error, 1)
	go func() { _, err := ch.Wait(context.Background()); done <- err }()
	for _, f := range []func() error{qp.Destroy, cq.Destroy, ch.Close} {
		if err := f(); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-done:
		if !errors.Is(err, uverbs.ErrClosed) {
			t.Errorf("Wait after Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return after Close")
	}
	if err := mr.Dereg(); err != nil {
		t.Fatal(err)
	}
	if err := pd.Dealloc(); err != nil {
		t.Fatal(err)
	}

	// A subscription's Next honours cancellation while the reader waits on the real fd.
	sub := ctx.SubscribeAsync()
	defer sub.Close()
	actx, acancel := context.WithCancel(context.Background())
	adone := make(chan error, 1)
	go func() { _, err := sub.Next(actx); adone <- err }()
	acancel()
	select {
	case err := <-adone:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Next after cancel: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Next did not return after cancel")
	}
}

// TestGuestCompletionTimestamps: the extended device query works on a real kernel and says
// that rxe has no completion timestamps (mask 0), with the same base attributes as the
// legacy query; a CQ asked for timestamps through the extended CREATE_CQ is refused with
// EOPNOTSUPP (rxe refuses any creation flag) and not EINVAL, so the extended command
// itself is well formed; a plain CQ still works afterwards.
func TestGuestCompletionTimestamps(t *testing.T) {
	c, err := uverbs.Open(guesttest.RxeDevice(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	base, err := c.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	ex, err := c.QueryDeviceEx()
	if err != nil {
		t.Fatalf("QUERY_DEVICE_EX: %v", err)
	}
	if ex.DeviceAttr != base || ex.CompletionTimestampMask != 0 {
		t.Errorf("extended query %+v, legacy %+v; want the same base and no timestamp mask", ex, base)
	}
	if cq, err := c.CreateCQEx(15, nil, 0, uverbs.CQTimestamps); !errors.Is(err, unix.EOPNOTSUPP) {
		if cq != nil {
			cq.Destroy()
		}
		t.Errorf("CreateCQEx with timestamps on rxe: %v, want EOPNOTSUPP", err)
	}
	cq, err := c.CreateCQ(15, nil, 0)
	if err != nil {
		t.Fatalf("a plain CQ after the refused one: %v", err)
	}
	if cq.Timestamps() {
		t.Error("a plain CQ says it has timestamps")
	}
	if err := cq.Destroy(); err != nil {
		t.Error(err)
	}
}
