package providers_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gorping/gorping/internal/hostenv"
	"github.com/gorping/gorping/uverbs"
	_ "github.com/gorping/gorping/uverbs/providers"
)

func TestShippedProviders(t *testing.T) {
	t.Parallel()
	want := []string{"bnxt_re", "hns", "irdma", "mlx5", "rxe", "siw"}
	if got := uverbs.SupportedDrivers(); !slices.Equal(got, want) {
		t.Errorf("registered providers %q, want %q", got, want)
	}
}

// Without RDMA netlink, discovery names drivers by the providers' SysfsMatch: rxe by its
// parent attribute, siw as a software RNIC, mlx5, bnxt_re, irdma and hns by their bus drivers; a bus
// driver no provider claims keeps its own name and no id.
func TestSysfsDriverNames(t *testing.T) {
	t.Parallel()
	env := hostenv.NoRDMA(t.TempDir())
	write := func(rel, content string) {
		p := filepath.Join(env.Sysfs, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := func(rel, target string) {
		p := filepath.Join(env.Sysfs, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(env.Sysfs, target), p); err != nil {
			t.Fatal(err)
		}
	}
	for i, dev := range []string{"rxe0", "siw0", "mlx5_0", "bnxt_re0", "irdma0", "hns_0", "qedr0"} {
		uv := "class/infiniband_verbs/uverbs" + string(rune('0'+i))
		write(uv+"/ibdev", dev+"\n")
		write(uv+"/abi_version", "1\n")
	}
	write("class/infiniband/rxe0/parent", "eth0\n")
	write("class/infiniband/rxe0/node_type", "1: CA\n")
	write("class/infiniband/siw0/node_type", "4: RNIC\n")
	write("class/infiniband/mlx5_0/node_type", "1: CA\n")
	write("bus/pci/drivers/mlx5_core/.keep", "")
	link("class/infiniband/mlx5_0/device/driver", "bus/pci/drivers/mlx5_core")
	write("bus/pci/drivers/bnxt_en/.keep", "")
	link("class/infiniband/bnxt_re0/device/driver", "bus/pci/drivers/bnxt_en")
	write("bus/pci/drivers/ice/.keep", "")
	link("class/infiniband/irdma0/device/driver", "bus/pci/drivers/ice")
	write("bus/pci/drivers/hns3/.keep", "")
	link("class/infiniband/hns_0/device/driver", "bus/pci/drivers/hns3")
	write("bus/pci/drivers/qede/.keep", "")
	link("class/infiniband/qedr0/device/driver", "bus/pci/drivers/qede")

	devs, err := uverbs.NewHost(env).Devices()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][2]any{}
	for _, d := range devs {
		got[d.Name] = [2]any{d.Driver, d.DriverID}
		if want := d.HasProvider(); want != (d.Name != "qedr0") {
			t.Errorf("%s: HasProvider %v", d.Name, want)
		}
	}
	for name, want := range map[string][2]any{
		"rxe0": {"rxe", uint32(14)}, "siw0": {"siw", uint32(18)}, "mlx5_0": {"mlx5", uint32(1)}, "bnxt_re0": {"bnxt_re", uint32(6)},
		"irdma0": {"irdma", uint32(9)}, "hns_0": {"hns", uint32(12)}, "qedr0": {"qede", uint32(0)},
	} {
		if got[name] != want {
			t.Errorf("%s: driver %v, want %v", name, got[name], want)
		}
	}
}
