// Package diag is what gorping's diagnostics and `gorping devices` know about RDMA
// devices without a uverbs context: their ports, GID tables, device attributes and
// counters from a host's sysfs, their netdevs' MTUs and statistics, the MTU check of a
// RoCE path and the likely cause of a failed work completion. Every read goes through
// the uverbs.Host it concerns.
package diag
