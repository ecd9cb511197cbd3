// Package guest holds tests that need a real RDMA kernel: they carry the build
// tag "guest" and run inside the QEMU guest of test/vm (Debian kernel, rdma_rxe on
// a dummy interface, stock rping). Run them with
//
//	go run ./test/vm/guestrun -pkgs ./test/guest [-run TestName]
//
// On the host (no tag) this package is empty.
package guest
