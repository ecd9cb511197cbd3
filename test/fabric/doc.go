// Package fabric holds the multi-host tests: gorping and stock rping on
// several QEMU guests joined by a virtual Ethernet (test/vm's Cluster), with
// faults injected inside the guests (tc netem, link down, MTU, power off).
// The tests run on the host and drive the guests through their agents; they
// are built with the fabric tag (make fabric, part of make test).
package fabric
