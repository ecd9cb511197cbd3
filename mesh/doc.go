// Package mesh is `gorping mesh`: a long-running agent that serves the rping protocol
// (rping's persistent server), keeps rping connections to each of its targets, pings
// each once per interval and exports what it sees to Prometheus.
//
//	a, err := mesh.New(cfg) // cfg from mesh.DefaultConfig(), checked here
//	if err != nil { ... }   // one line naming the option
//	err = a.Run(ctx)        // until ctx ends
//
// This package wires the agent; its parts are packages of their own, data going one
// way: mesh/source and mesh/discovery give lists of targets (a file, --peers, a DNS
// name; peer agents' rails, handed on), the reloader here merges them into the target
// list, mesh/probe runs a loop per path over rping.DialProbe and records the outcomes
// into this package's collectors, which /metrics and the landing page serve behind
// exporter-toolkit's TLS and basic auth. docs/mesh.md has the design, the metrics and the
// cost per target; docs/architecture.md the map.
package mesh
