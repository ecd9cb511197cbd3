package driver

import "testing"

func TestMaskAndAccessNames(t *testing.T) {
	t.Parallel()
	if got := (QPAttrState | QPAttrDestQPN | 1<<25).Names(); got != "STATE|DEST_QPN|0x2000000" {
		t.Errorf("Names = %q", got)
	}
	if got := AccessFlags(0).Names(); got != "none" {
		t.Errorf("AccessFlags(0).Names() = %q", got)
	}
	if got := (AccessLocalWrite | AccessRemoteAtomic).Names(); got != "LOCAL_WRITE|REMOTE_ATOMIC" {
		t.Errorf("accessNames = %q", got)
	}
}
