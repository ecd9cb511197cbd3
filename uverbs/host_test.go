//go:build !guest

package uverbs

import "testing"

// The build host has no RDMA: discovery must report no devices and no error.
func TestDevicesOnHostWithoutRDMA(t *testing.T) {
	devs, err := Devices()
	if err != nil {
		t.Fatalf("Devices: %v", err)
	}
	if devs == nil || len(devs) != 0 {
		t.Fatalf("Devices = %#v, want an empty list", devs)
	}
}
