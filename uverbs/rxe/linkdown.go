package rxe

import (
	"fmt"

	"github.com/gorping/gorping/uverbs/driver"
)

// LinkDownAdvice is rxe's known problem after a link flap (driver.LinkDownAdvisor),
// found with the multi-host test bed: on kernel 6.1, a link that goes down while rxe
// sends a management datagram leaves rxe's QP1 (the GSI QP, which carries the connection
// manager's messages) unable to receive. rxe puts QP1 in its error state; the MAD layer
// moves it back to RTS, but rxe's transition to RTS resets only the send side, so every
// CM message that arrives afterwards is dropped, and on 6.12 its sends stop completing.
// Connections from and to that host time out until the device is created anew.
func (provider) LinkDownAdvice(dev driver.Device, netdev string) string {
	if netdev == "" {
		netdev = "NETDEV"
	}
	return fmt.Sprintf("rxe's QP1, which carries the connection manager's messages, may not recover from a link flap "+
		"(a kernel bug: connections from and to this host then time out); create the device anew: "+
		"rdma link delete %s; rdma link add %s type rxe netdev %s", dev.Name, dev.Name, netdev)
}

var _ driver.LinkDownAdvisor = provider{}
