package mesh

import (
	"github.com/gorping/gorping/mesh/agentdesc"
	"github.com/gorping/gorping/mesh/discovery"
)

// discovers reports whether any discovery option is given.
func (c *agentConfig) discovers() bool {
	return len(c.agents) > 0 || c.AgentsFile != "" || c.agentsDNSName != "" || c.AgentsKubernetes != ""
}

// newDiscovery wires the agent's discovery: its options, its series (registered only
// on agents that discover), this agent's description and listeners, and the handoff its
// rail targets go out by.
func newDiscovery(a *Agent) (*discovery.Discovery, error) {
	cfg := a.cfg
	a.m.registerDiscovery()
	m := a.m
	return discovery.New(discovery.Config{AgentName: cfg.AgentName, Group: cfg.Group, Version: cfg.Version, Instance: a.instance,
		Agents: cfg.agents, File: cfg.AgentsFile, DNSName: cfg.agentsDNSName, DNSPort: cfg.agentsDNSPort,
		Kubernetes: cfg.AgentsKubernetes, HTTP: cfg.agentsHTTP, RailMode: cfg.railMode, MaxPeers: cfg.MaxPeers,
		Refresh: cfg.AgentsRefresh, Keep: cfg.AgentsKeep, Rotate: cfg.Rotate, DNSRefresh: cfg.DNSRefresh,
		FileReload: cfg.TargetsReload, Interval: cfg.Interval,
	}, discovery.Deps{Log: a.log,
		Metrics: discovery.Metrics{PeerUp: m.peerUp, PeerInfo: m.peerInfo, Fetches: m.fetches, FetchFailures: m.fetchFailures,
			AgentsBadLines: m.agentsBadLines, RailProblems: m.railProblems, NameConflicts: m.nameConflicts,
			ConfigErrors: m.configErrors, Registerer: m.reg},
		Self: func() *agentdesc.Description {
			if s := a.self.Load(); s != nil {
				return &s.desc
			}
			return nil
		},
		Local: a.d.local, ListensOn: a.listensOn, Resolver: a.d.resolver, AgentDial: a.d.agentDial,
		Kube: a.d.kube, KubePort: a.d.kubePort, Hand: a.rails.put})
}
