package uverbs

import "testing"

// The generated names (names_string.go) are the ones gorping prints: libibverbs' without
// their prefixes, sysfs' GID types, iproute2's physical states.
func TestEnumNames(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ got, want string }{
		{QPSRTS.String(), "RTS"}, {QPState(7).String(), "QPState(7)"},
		{WCRetryExcErr.String(), "RETRY_EXC_ERR"}, {WCGeneralErr.String(), "GENERAL_ERR"}, {WCStatus(99).String(), "WCStatus(99)"},
		{WCRecvRDMAWithImm.String(), "RECV_RDMA_WITH_IMM"}, {WCLocalInv.String(), "LOCAL_INV"}, {WCOpcode(7).String(), "WCOpcode(7)"},
		{PortActiveDefer.String(), "ACTIVE_DEFER"}, {PortState(9).String(), "PortState(9)"},
		{PhysState(2).String(), "POLLING"}, {PhysState(5).String(), "LINK_UP"}, {PhysState(9).String(), "PhysState(9)"},
		{LinkLayerUnspecified.String(), "Unspecified"}, {LinkLayerEthernet.String(), "Ethernet"},
		{EventPortErr.String(), "PORT_ERR"}, {EventWQFatal.String(), "WQ_FATAL"}, {AsyncEventType(20).String(), "AsyncEventType(20)"},
		{GIDTypeIB.String(), "IB"}, {GIDTypeRoCEv1.String(), "RoCE v1"}, {GIDTypeRoCEv2.String(), "RoCE v2"}, {GIDType(7).String(), "GIDType(7)"},
		{TransportIB.String(), "InfiniBand"}, {TransportIWARP.String(), "iWARP"}, {TransportUnknown.String(), "unknown"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
