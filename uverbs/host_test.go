//go:build !guest

package uverbs

import (
	"errors"
	"path/filepath"
	"reflect"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gorping/gorping/internal/hostenv"
	"github.com/gorping/gorping/internal/hostenv/hostenvtest"
	"github.com/gorping/gorping/internal/netlink"
)

// A host without RDMA (passed in, not assumed: the machine may have devices): discovery
// reports no devices and no error.
func TestDevicesOnHostWithoutRDMA(t *testing.T) {
	t.Parallel()
	devs, err := NewHost(hostenv.NoRDMA(t.TempDir())).Devices()
	if err != nil {
		t.Fatalf("Devices: %v", err)
	}
	if devs == nil || len(devs) != 0 {
		t.Fatalf("Devices = %#v, want an empty list", devs)
	}
}

// The environment is what discovery reads: a fake sysfs with one rxe device is seen (by
// the sysfs fallback, RDMA netlink being refused), with its node under the fake /dev.
func TestDevicesFromInjectedSysfs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := hostenv.NoRDMA(dir)
	hostenvtest.WriteTree(t, env.Sysfs, map[string]string{
		"class/infiniband_verbs/abi_version":         "6\n",
		"class/infiniband_verbs/uverbs3/ibdev":       "rxe7\n",
		"class/infiniband_verbs/uverbs3/abi_version": "2\n",
		"class/infiniband/rxe7/node_guid":            "5054:00ff:fe96:b707\n",
		"class/infiniband/rxe7/parent":               "d0\n",
	})
	devs, err := testHost(t, env).Devices()
	if err != nil {
		t.Fatalf("Devices: %v", err)
	}
	want := []Device{{Name: "rxe7", Index: -1, Uverbs: "uverbs3", Path: filepath.Join(dir, "dev", "uverbs3"),
		NodeGUID: 0x505400fffe96b707, Driver: "rxe", DriverID: 14, ABI: 2, sysfs: env.Sysfs}}
	if !reflect.DeepEqual(devs, want) {
		t.Fatalf("Devices =\n%+v\nwant\n%+v", devs, want)
	}
}

// fakeNL answers RDMA netlink like a kernel with one rxe device.
type fakeNL struct {
	pending []netlink.Message
	closed  bool
}

func (f *fakeNL) Send(msg []byte) error {
	ms, err := netlink.ParseMessages(msg)
	if err != nil || len(ms) != 1 {
		return errors.New("fakeNL: bad request")
	}
	m := ms[0]
	switch m.Type {
	case nldevType(nldevCmdGet):
		dev := append(netlink.AppendAttr(nil, nldevAttrDevIndex, u32b(5)), netlink.AppendAttr(nil, nldevAttrDevName, []byte("rxe9\x00"))...)
		f.pending = []netlink.Message{
			{Type: nldevType(nldevCmdGet), Seq: m.Seq, Payload: dev},
			{Type: unix.NLMSG_DONE, Seq: m.Seq},
		}
	case nldevType(nldevCmdGetChardev):
		cd := append(netlink.AppendAttr(nil, nldevAttrChardevName, []byte("uverbs4\x00")), netlink.AppendAttr(nil, nldevAttrChardevABI, u64b(2))...)
		cd = netlink.AppendAttr(cd, nldevAttrDriverID, u32b(14))
		f.pending = []netlink.Message{{Type: nldevType(nldevCmdGetChardev), Seq: m.Seq, Payload: cd}}
	default:
		return unix.EINVAL
	}
	return nil
}

func (f *fakeNL) Recv(seq uint32) ([]netlink.Message, error) {
	ms := f.pending
	f.pending = nil
	return ms, nil
}

func (f *fakeNL) Close() error { f.closed = true; return nil }

// Discovery asks RDMA netlink through the environment's dialer first, and the node path
// comes from the environment's device directory.
func TestDevicesUseInjectedNetlink(t *testing.T) {
	t.Parallel()
	var protos []int
	nl := &fakeNL{}
	env := hostenv.NoRDMA(t.TempDir())
	env.Netlink = func(p int) (netlink.Conn, error) {
		protos = append(protos, p)
		return nl, nil
	}
	devs, err := NewHost(env).Devices()
	if err != nil {
		t.Fatal(err)
	}
	want := []Device{{Name: "rxe9", Index: 5, Uverbs: "uverbs4", Path: filepath.Join(env.Dev, "uverbs4"), Driver: "rxe", DriverID: 14, ABI: 2, sysfs: env.Sysfs}}
	if !reflect.DeepEqual(devs, want) {
		t.Errorf("Devices =\n%+v\nwant\n%+v", devs, want)
	}
	if len(protos) != 1 || protos[0] != unix.NETLINK_RDMA || !nl.closed {
		t.Errorf("dialed %v (closed %v), want one NETLINK_RDMA socket, closed", protos, nl.closed)
	}
}
