package rping

import "testing"

func TestStateNumbersAndNames(t *testing.T) {
	want := []string{1: "IDLE", 2: "CONNECT_REQUEST", 3: "ADDR_RESOLVED", 4: "ROUTE_RESOLVED",
		5: "CONNECTED", 6: "RDMA_READ_ADV", 7: "RDMA_READ_COMPLETE", 8: "RDMA_WRITE_ADV",
		9: "RDMA_WRITE_COMPLETE", 10: "DISCONNECTED", 11: "ERROR"}
	for n := 1; n < len(want); n++ {
		if got := State(n).String(); got != want[n] {
			t.Errorf("State(%d) = %q, want %q", n, got, want[n])
		}
	}
	if StateRDMAReadAdv != 6 || StateDisconnected != 10 || StateError != 11 {
		t.Errorf("state numbers drifted")
	}
	if got := State(12).String(); got != "State(12)" {
		t.Errorf("State(12) = %q", got)
	}
}
