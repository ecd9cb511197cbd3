package members

import (
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"sync"

	"github.com/gorping/gorping/mesh/agentdesc"
	"github.com/gorping/gorping/mesh/pinglist"
)

// ETag is the entity tag /agent serves doc with (a strong one: the document's hash), so
// that a peer's conditional request for an unchanged description is a 304 without a body
// (http.ServeContent answers If-None-Match).
func ETag(doc []byte) string {
	h := sha256.Sum256(doc)
	return `"` + base64.RawURLEncoding.EncodeToString(h[:12]) + `"`
}

// Conditional keeps each agent address's last description and its ETag, so that reading
// it again asks If-None-Match and an unchanged description costs a 304: no body, no
// decoding. It is safe for concurrent use.
type Conditional struct {
	mu sync.Mutex
	m  map[string]condEntry
}

type condEntry struct {
	etag string
	desc agentdesc.Description
}

// Ask makes req conditional on addr's last description, if one is known.
func (c *Conditional) Ask(req *http.Request, addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[addr]; ok && e.etag != "" {
		req.Header.Set("If-None-Match", e.etag)
	}
}

// NotModified is addr's description after a 304 (false: none is kept, the 304 is wrong).
func (c *Conditional) NotModified(addr string) (agentdesc.Description, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[addr]
	return e.desc, ok && e.etag != ""
}

// Keep records addr's description and the ETag it came with ("": it cannot be asked
// conditionally).
func (c *Conditional) Keep(addr, etag string, d agentdesc.Description) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]condEntry{}
	}
	c.m[addr] = condEntry{etag, d}
}

// Retain forgets every address but addrs: what is kept follows the peers read, not the
// fleet.
func (c *Conditional) Retain(addrs []string) {
	keep := make(map[string]bool, len(addrs))
	for _, a := range addrs {
		keep[a] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for a := range c.m {
		if !keep[a] {
			delete(c.m, a)
		}
	}
}

// Planner chooses peers as Choose does, and keeps the plan of the last membership:
// Kubernetes.Members returns the same slice until the pods change, and building the plan
// of 100,000 members takes most of a second, its targets microseconds. Not safe for
// concurrent use.
type Planner struct {
	ms     []Member
	self   pinglist.Member
	max    int
	plan   *pinglist.Plan
	byName map[string]Member
}

// Choose is the members self probes in epoch (see Choose).
func (p *Planner) Choose(self pinglist.Member, ms []Member, maxPeers int, epoch uint64) ([]Member, error) {
	same := p.plan != nil && len(ms) == len(p.ms) && (len(ms) == 0 || &ms[0] == &p.ms[0]) && self == p.self && maxPeers == p.max
	if !same {
		pl := make([]pinglist.Member, 0, len(ms)+1)
		pl = append(pl, self)
		byName := make(map[string]Member, len(ms))
		for _, m := range ms {
			if m.Name == self.Host {
				continue
			}
			byName[m.Name] = m
			pl = append(pl, m.Pinglist())
		}
		plan, err := pinglist.New(pl, maxPeers)
		if err != nil {
			return nil, err
		}
		p.ms, p.self, p.max, p.plan, p.byName = ms, self, maxPeers, plan, byName
	}
	ts, err := p.plan.Targets(self.Host, epoch)
	if err != nil {
		return nil, err
	}
	out := make([]Member, 0, len(ts))
	for _, t := range ts {
		out = append(out, p.byName[t.Host])
	}
	return out, nil
}

// Choose is the members this agent (self) probes in epoch with a budget of maxPeers (0:
// every member): the pinglist's choice over the whole membership, so that agents that
// know the same members choose lists that fit together. Only their descriptions need
// reading. self need not be among ms.
func Choose(self pinglist.Member, ms []Member, maxPeers int, epoch uint64) ([]Member, error) {
	var p Planner
	return p.Choose(self, ms, maxPeers, epoch)
}
