package rping

import "strconv"

// State is rping's enum test_state. The numbers are the ones rping prints in
// "wait for <STATE> state %d", so they are part of the output format.
type State int

const (
	StateIdle State = iota + 1
	StateConnectRequest
	StateAddrResolved
	StateRouteResolved
	StateConnected
	StateRDMAReadAdv
	StateRDMAReadComplete
	StateRDMAWriteAdv
	StateRDMAWriteComplete
	StateDisconnected
	StateError
)

var stateNames = [...]string{
	StateIdle:              "IDLE",
	StateConnectRequest:    "CONNECT_REQUEST",
	StateAddrResolved:      "ADDR_RESOLVED",
	StateRouteResolved:     "ROUTE_RESOLVED",
	StateConnected:         "CONNECTED",
	StateRDMAReadAdv:       "RDMA_READ_ADV",
	StateRDMAReadComplete:  "RDMA_READ_COMPLETE",
	StateRDMAWriteAdv:      "RDMA_WRITE_ADV",
	StateRDMAWriteComplete: "RDMA_WRITE_COMPLETE",
	StateDisconnected:      "DISCONNECTED",
	StateError:             "ERROR",
}

// String is the enumerator's name as rping's messages spell it ("RDMA_READ_ADV").
func (s State) String() string {
	if s >= StateIdle && s <= StateError {
		return stateNames[s]
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}
