package members

import (
	"net"
	"strconv"

	"github.com/gorping/gorping/mesh/pinglist"
)

// Member is one peer agent as a membership source knows it.
type Member struct {
	Name  string // the pinglist host: --agent-name, the node's name on Kubernetes
	Group string // the pinglist group ("": none)
	Addr  string // its listener, host:port: where its /agent is read
}

// Pinglist is m as the pinglist knows it.
func (m Member) Pinglist() pinglist.Member { return pinglist.Member{Host: m.Name, Group: m.Group} }

// FromPinglist makes members of a members file's entries (pinglist.ParseMembers): each
// host is also the address of its listener, on port.
func FromPinglist(ms []pinglist.Member, port uint16) []Member {
	out := make([]Member, len(ms))
	p := strconv.Itoa(int(port))
	for i, m := range ms {
		out[i] = Member{Name: m.Host, Group: m.Group, Addr: net.JoinHostPort(m.Host, p)}
	}
	return out
}
