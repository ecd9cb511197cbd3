package providertest

import (
	"errors"
	"os"
	"testing"

	"github.com/gorping/gorping/internal/mmio"
	"github.com/gorping/gorping/uverbs"
)

// Model is what every hardware device model on the fake kernel shares: the kernel, the
// mmio subscription through which the model hears the provider's stores to device
// memory, and the device it presents. The models (test/bnxtremodel, test/irdmamodel,
// test/hnsmodel) embed it.
type Model struct {
	k      *Kernel
	dev    func(name string) uverbs.Device
	cancel func()
}

// ErrNoRecorder says why a device model cannot run in a test binary.
var ErrNoRecorder = errors.New("this test binary has no mmio recorder, so a device model cannot see doorbells (build with -tags mmiorecord, as make unit does)")

// RecorderAvailable reports whether a device model can run in this binary.
func RecorderAvailable() error {
	if !mmio.Recording {
		return ErrNoRecorder
	}
	return nil
}

// SkipWithoutRecorder skips t loudly when a device model cannot run in this binary, or
// fails it under CI=true.
func SkipWithoutRecorder(t testing.TB) {
	t.Helper()
	if err := RecorderAvailable(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skipf("*** SKIPPING: %v ***", err)
	}
}

// StartModel starts drv (an Engine) on a fake kernel for dev(name), with ring hearing
// every recorded store; fail is Options.Fail.
func StartModel(dev func(name string) uverbs.Device, name string, drv Driver, ring func(mmio.Event), fail func(cmd uint32) error) (*Model, error) {
	if err := RecorderAvailable(); err != nil {
		return nil, err
	}
	cancel := mmio.Subscribe(ring)
	k, err := StartKernel(dev(name), nil, drv, Options{Fail: fail})
	if err != nil {
		cancel()
		return nil, err
	}
	return &Model{k: k, dev: dev, cancel: cancel}, nil
}

// Device is the uverbs device the model presents as name.
func (m *Model) Device(name string) uverbs.Device { return m.dev(name) }

// Open opens a context on the model through the registered provider of its driver.
func (m *Model) Open(name string, opts ...uverbs.Option) (*uverbs.Context, error) {
	return m.k.OpenAs(m.dev(name), opts...)
}

// Kernel is the fake kernel the model runs on (the conformance suite's Device).
func (m *Model) Kernel() *Kernel { return m.k }

func (m *Model) Errors() []string          { return m.k.Errors() }
func (m *Model) Stats() Stats              { return m.k.Stats() }
func (m *Model) Live() (qps, cqs, mrs int) { return m.k.Live() }

// Close stops hearing the stores and stops the kernel.
func (m *Model) Close() { m.cancel(); m.k.Close() }
