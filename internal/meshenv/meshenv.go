// Package meshenv is the world a mesh agent runs in when it is not this host's: the
// seams test/campaign's simulated fabric fills (mesh.NewIn). It is internal so that
// only gorping's own modules can build one; the product never does.
package meshenv

import (
	"context"
	"io"
	"net"
	"net/netip"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gorping/gorping/mesh/agentdesc"
	"github.com/gorping/gorping/mesh/probe"
)

// ProbeConn is one probing connection, as the agent's prober uses it: probe.Conn, the
// one declaration (*rping.Prober implements it, and so does the simulated fabric).
type ProbeConn = probe.Conn

// Env replaces an agent's every contact with the host and the network. Every field is
// required except Registered.
type Env struct {
	// Dial opens a probing connection (a probe.Dial): to addr from src (zero: the
	// default source) for the target's path; errors carry a reason as *rping.ProbeError.
	Dial func(ctx context.Context, src netip.Addr, addr netip.AddrPort, path int, log io.Writer) (ProbeConn, error)
	// Local are this host's addresses.
	Local func() map[netip.Addr]bool
	// Rails are this host's rails, as its description carries them.
	Rails func() []agentdesc.Rail
	// Listener serves the agent's HTTP (/metrics, /agent, ...) in place of
	// --web.listen-address; the agent closes it when it stops.
	Listener net.Listener
	// AgentDial connects to a peer agent's listener for /agent (discovery).
	AgentDial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Registered, if set, is given the agent's metrics registry once it is built.
	Registered func(prometheus.Gatherer)
}
