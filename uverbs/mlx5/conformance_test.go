package mlx5_test

import (
	"testing"

	"github.com/gorping/gorping/test/mlx5model" // the ConnectX model
	"github.com/gorping/gorping/test/providertest"
	"github.com/gorping/gorping/uverbs"
)

// The conformance suite over the ConnectX model: the provider's doorbells, BlueFlame
// copies and CQ arms are what drives it (the model rings only on recorded UAR stores, so
// this needs -tags mmiorecord, as make unit has).
func TestConformance(t *testing.T) {
	providertest.Run(t, func(t *testing.T) providertest.Device {
		return modelDevice{mlx5model.NewForTest(t, mlx5model.Config{BfRegSize: 512})}
	})
}

// modelDevice is the model as a conformance device: its violations are its Errors.
type modelDevice struct{ nic *mlx5model.NIC }

func (d modelDevice) Open(t *testing.T) *uverbs.Context {
	t.Helper()
	c, err := d.nic.Open("mlx5_0")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (d modelDevice) Errors() []string { return d.nic.Errors() }

// Live counts the model's objects (the suite's ContextCloseReleases).
func (d modelDevice) Live() (qps, cqs, mrs int) { return d.nic.Live() }
