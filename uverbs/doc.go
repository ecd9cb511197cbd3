// Package uverbs talks to the kernel's RDMA verbs character devices
// (/dev/infiniband/uverbsN) without libibverbs: device discovery over RDMA netlink and
// sysfs, the legacy write() command ABI of rdma/ib_user_verbs.h for the control path
// (context, PD, MR, CQ, completion channel, QP), and event fds read through the Go
// netpoller.
//
// The data path (posting work requests, polling, arming) is driver specific and lives in
// providers such as uverbs/rxe, uverbs/mlx5 and uverbs/siw, which register themselves with Register.
// What a provider implements is package uverbs/driver, whose verbs types (WC, SendWR, QPAttr,
// ...) this package names as its own. Import the providers you need for their side effect:
//
//	import _ "github.com/gorping/gorping/uverbs/rxe"
//	import _ "github.com/gorping/gorping/uverbs/mlx5"
//	import _ "github.com/gorping/gorping/uverbs/siw"
//
// Memory the kernel accesses by address (registered buffers, rings, command responses)
// is always mmap'd, never Go heap.
package uverbs
