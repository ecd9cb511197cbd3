package mesh

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
// read as its service account (deps.kube in tests).
func newKubeMembers(a *Agent) (*members.Kubernetes, error) {
	in := a.d.kube
	if in == nil {
		in = members.InCluster
	}
	rc, ns, err := in()
	if err != nil {
		return nil, err
	}
	port := uint16(defaultAgentPort)
	if a.d.kubePort != 0 {
		port = a.d.kubePort
	}
	return members.NewKubernetes(members.KubernetesConfig{REST: rc, Namespace: ns, Selector: a.cfg.AgentsKubernetes,
		Port: port, Log: a.log, Registerer: a.m.reg})
}

// kubeFirstList bounds the wait for the API server's first list at the start: a slow
// one must not hold back the peers the other options name.
const kubeFirstList = 10 * time.Second

// waitKube waits for the first list of --agents.kubernetes, for at most kubeFirstList.
func (dc *discovery) waitKube(ctx context.Context) {
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
func (dc *discovery) kubeAddrs(now time.Time) []target.Target {
	if dc.kube == nil {
		return nil
	}
	ms := dc.kube.Members()
	if dc.a.cfg.MaxPeers > 0 {
		c, err := dc.planner.Choose(pinglist.Member{Host: dc.a.cfg.AgentName, Group: dc.a.cfg.Group}, ms, dc.a.cfg.MaxPeers, dc.epoch(now))
		if err != nil {
			// Cannot happen with the members' checked names; if it does, every member is
			// read rather than none, and it is said once.
			if msg := err.Error(); msg != dc.lastPlan {
				dc.lastPlan = msg
				dc.a.log.Error("cannot compute the pinglist: reading every member", "err", err)
			}
		} else {
			ms = c
		}
	}
	dc.kubeWant = dc.kubeWant[:0]
	out := make([]target.Target, 0, len(ms))
	for _, m := range ms {
		if m.Name == dc.a.cfg.AgentName {
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
