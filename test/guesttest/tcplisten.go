package guesttest

import (
	"strconv"
	"strings"
)

// TCPListening reports whether text, in the format of /proc/net/tcp or
// /proc/net/tcp6, lists a socket in state LISTEN (0A) on local port port. The
// kernel's own sockets are listed too, which is what makes it useful for iWARP:
// rdma_cm reports an id as LISTEN before the iWARP driver has its TCP listener
// (rdma_listen sets the state, then calls iw_cm_listen), and a client that
// connects in that gap is refused.
func TCPListening(text string, port int) bool {
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		// sl local_address rem_address st ...; the header's second field is "local_address".
		if len(f) < 4 || f[3] != "0A" {
			continue
		}
		_, hex, ok := strings.Cut(f[1], ":")
		if !ok {
			continue
		}
		if p, err := strconv.ParseUint(hex, 16, 16); err == nil && int(p) == port {
			return true
		}
	}
	return false
}
