// Package mesh is `gorping mesh`: a long-running agent that serves the rping protocol
// (rping's persistent server), keeps one rping connection to each of its targets, pings
// each once per interval and exports what it sees to Prometheus.
//
//	a, err := mesh.New(cfg) // cfg from mesh.DefaultConfig(), checked here
//	if err != nil { ... }   // one line naming the option
//	err = a.Run(ctx)        // until ctx ends
//
// The rping package does the RDMA work (rping.Respond, rping.DialProbe); this package
// schedules it: target sources (a file reloaded on change and SIGHUP, --peers, a DNS
// name re-resolved periodically), one loop per target with jittered slots and capped
// reconnection backoff, the metrics (client_golang, one registry per agent) and the HTTP
// endpoints (/metrics, /-/healthy, /probe) behind exporter-toolkit's TLS and basic auth.
// docs/mesh.md has the design, the metrics and the cost per target.
package mesh
