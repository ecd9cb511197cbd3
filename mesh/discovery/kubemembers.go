package discovery

import (
	"context"
	"net"
	"strconv"
	"time"

	"github.com/gorping/gorping/mesh/members"
	"github.com/gorping/gorping/mesh/pinglist"
	"github.com/gorping/gorping/mesh/target"
)

// sourceAgentsKubernetes marks the agent addresses --agents.kubernetes gives.
const sourceAgentsKubernetes = "agents_kubernetes"

// newKubeMembers makes --agents.kubernetes' source: the pods of this pod's namespace,
// read as its service account (Deps.Kube in tests).
func newKubeMembers(cfg Config, d Deps) (*members.Kubernetes, error) {
	in := d.Kube
	if in == nil {
		in = members.InCluster
	}
	rc, ns, err := in()
	if err != nil {
		return nil, err
	}
	port := uint16(DefaultAgentPort)
	if d.KubePort != 0 {
		port = d.KubePort
	}
	return members.NewKubernetes(members.KubernetesConfig{REST: rc, Namespace: ns, Selector: cfg.Kubernetes,
		Port: port, Log: d.Log, Registerer: d.Metrics.Registerer})
}

// kubeFirstList bounds the wait for the API server's first list at the start: a slow
// one must not hold back the peers the other options name.
const kubeFirstList = 10 * time.Second

// waitKube waits for the first list of --agents.kubernetes, for at most kubeFirstList.
func (dc *Discovery) waitKube(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, kubeFirstList)
	defer cancel()
	for !dc.kube.Synced() {
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// kubeAddrs are the addresses of the agents to read: of the members --agents.kubernetes
// lists, those the pinglist chooses for this epoch (all of them without --max-peers).
// The plan needs only the members' names and groups, which the API server gives: the
// descriptions read are the chosen peers', whatever the fleet's size.
func (dc *Discovery) kubeAddrs(now time.Time) []target.Target {
	if dc.kube == nil {
		return nil
	}
	ms := dc.kube.Members()
	if dc.cfg.MaxPeers > 0 {
		c, err := dc.planner.Choose(pinglist.Member{Host: dc.cfg.AgentName, Group: dc.cfg.Group}, ms, dc.cfg.MaxPeers, dc.epoch(now))
		if err != nil {
			// Cannot happen with the members' checked names; if it does, every member is
			// read rather than none, and it is said once.
			if msg := err.Error(); msg != dc.lastPlan {
				dc.lastPlan = msg
				dc.log.Error("cannot compute the pinglist: reading every member", "err", err)
			}
		} else {
			ms = c
		}
	}
	dc.kubeWant = dc.kubeWant[:0]
	out := make([]target.Target, 0, len(ms))
	for _, m := range ms {
		if m.Name == dc.cfg.AgentName {
			continue
		}
		dc.kubeWant = append(dc.kubeWant, m.Name)
		h, p, err := net.SplitHostPort(m.Addr)
		if err != nil {
			continue
		}
		port, _ := strconv.ParseUint(p, 10, 16)
		out = append(out, target.Target{Host: h, Port: uint16(port), Source: sourceAgentsKubernetes})
	}
	return out
}
