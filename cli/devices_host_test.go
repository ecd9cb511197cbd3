//go:build !guest

package cli

import (
	"encoding/json"
	"testing"
)

// On this RDMA-less host `gorping devices` says so, as rping would, in both forms.
func TestDevicesWithoutRDMA(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	st, out, errOut := runNoRDMA(t, bin, "devices", "-v")
	if st != 19 || out != "" || errOut != noDevices19 {
		t.Errorf("devices -v: exit %d stdout %q stderr %q", st, out, errOut)
	}
	st, out, errOut = runNoRDMA(t, bin, "devices", "--json")
	var doc devicesDoc
	if err := json.Unmarshal([]byte(out), &doc); err != nil || doc.Devices == nil || len(doc.Devices) != 0 {
		t.Errorf("devices --json: %q does not parse to an empty device list: %v", out, err)
	}
	if st != 19 || errOut != noDevices19 {
		t.Errorf("devices --json: exit %d stderr %q", st, errOut)
	}
}
