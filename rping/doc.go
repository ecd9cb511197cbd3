// Package rping is rdma-core's rping in Go: the ping protocol, the client and server state
// machines, and the wiring of rdmacm (connection setup) and uverbs (verbs objects and the
// data path) into one connection, with rping's output, error lines and exit statuses.
//
// Run executes one invocation described by a Config (the CLI in package main fills it
// with rping's option rules) and returns the exit status. For long-running agents (gorping
// mesh), Respond runs the persistent server until its context ends, and DialProbe dials as
// Run's client does (the same functions: openCM, dialClient) and keeps the connection open
// for single pings (Prober.Ping) that report why they failed (ProbeError, Prober.Err).
//
// Per ping, the client advertises its start buffer (address, rkey, length) in a SEND; the
// server RDMA READs it and SENDs a "go ahead"; the client advertises its RDMA buffer; the
// server RDMA WRITEs the payload there and SENDs another go-ahead; the client prints the
// echo and, with -V, compares it. Each connection owns its buffers, all mmap'd and
// registered (never Go heap), and the ping loop allocates nothing per ping.
//
// Errors users meet first (device permissions, RLIMIT_MEMLOCK, an address without an RDMA
// device, a port without the route's GID) keep rping's line and exit status and add one
// "gorping: " line that says what to do (package explain). The hints find devices through uverbs'
// discovery, so they work for any driver, with or without a gorping provider.
package rping
