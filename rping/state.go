package rping

// testState is rping's enum test_state. The numbers are the ones rping prints in
// "wait for <STATE> state %d", so they are part of the output format; String is the
// enumerator's name as rping's messages spell it ("RDMA_READ_ADV").
type testState int

//go:generate go run golang.org/x/tools/cmd/stringer@v0.52.0 -type=testState -linecomment

const (
	stateIdle              testState = iota + 1 // IDLE
	stateConnectRequest                         // CONNECT_REQUEST
	stateAddrResolved                           // ADDR_RESOLVED
	stateRouteResolved                          // ROUTE_RESOLVED
	stateConnected                              // CONNECTED
	stateRDMAReadAdv                            // RDMA_READ_ADV
	stateRDMAReadComplete                       // RDMA_READ_COMPLETE
	stateRDMAWriteAdv                           // RDMA_WRITE_ADV
	stateRDMAWriteComplete                      // RDMA_WRITE_COMPLETE
	stateDisconnected                           // DISCONNECTED
	stateError                                  // ERROR
)
