// Package vm is gorping's guest test bed: it boots a Debian kernel with Soft-RoCE
// (rdma_rxe) under QEMU and runs tests inside it. See guestrun for the CLI.
package vm
