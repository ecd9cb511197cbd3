// Package mesh is `gorping mesh`: a long-running agent that serves the rping protocol
// (rping's persistent server), keeps one rping connection to each of its targets, pings
// each once per interval and exports what it sees to Prometheus.
//
// The rping package does the RDMA work (rping.Respond, rping.DialProbe); this package
// schedules it: target sources (a file reloaded on change and SIGHUP, --peers, a DNS
// name re-resolved periodically), one loop per target with jittered slots and capped
// reconnection backoff, the metrics (client_golang, one registry per agent) and the HTTP
// endpoints (/metrics, /-/healthy, /probe) behind exporter-toolkit's TLS and basic auth.
// docs/mesh.md has the design, the metrics and the cost per target.
package mesh

import "flag"

// flagErrHelp is what ParseArgs returns for --help.
var flagErrHelp = flag.ErrHelp
