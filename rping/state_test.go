package rping

import "testing"

func TestStateNumbersAndNames(t *testing.T) {
	want := []string{1: "IDLE", 2: "CONNECT_REQUEST", 3: "ADDR_RESOLVED", 4: "ROUTE_RESOLVED",
		5: "CONNECTED", 6: "RDMA_READ_ADV", 7: "RDMA_READ_COMPLETE", 8: "RDMA_WRITE_ADV",
		9: "RDMA_WRITE_COMPLETE", 10: "DISCONNECTED", 11: "ERROR"}
	for n := 1; n < len(want); n++ {
		if got := testState(n).String(); got != want[n] {
			t.Errorf("testState(%d) = %q, want %q", n, got, want[n])
		}
	}
	if stateRDMAReadAdv != 6 || stateDisconnected != 10 || stateError != 11 {
		t.Errorf("state numbers drifted")
	}
	if got := testState(12).String(); got != "testState(12)" {
		t.Errorf("testState(12) = %q", got)
	}
}
