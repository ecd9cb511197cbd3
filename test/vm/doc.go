// Package vm is gorping's guest test bed: it boots a Debian kernel with Soft-RoCE
// (rdma_rxe) under QEMU and runs tests inside it. The host has no RDMA at all, so
// every test that needs the kernel's RDMA stack runs here. The CLI is guestrun.
//
// A run has five steps, each with its own deadline (Timeouts):
//
//  1. fetch (fetch.go): apt-get, under a private configuration (own sources.list
//     built from the host's Debian mirrors, own lists and cache, an empty dpkg
//     status), downloads the kernel the linux-image-<arch> metapackage points at,
//     busybox-static, iproute2, rdmacm-utils, ibverbs-utils, ibverbs-providers,
//     perftest and the library packages they depend on. Each package is unpacked
//     with dpkg -x into its own directory of the cache ($GORPING_CACHE, else
//     $XDG_CACHE_HOME/gorping, else ~/.cache/gorping; one directory per
//     suite-arch). manifest.json marks a complete cache: later runs skip apt.
//  2. build (run.go, initramfs.go, modules.go, initscript.go): go test -c -tags
//     guest for each package and go build of gorping, both CGO_ENABLED=0 for the
//     guest's architecture; the kernel modules rxe needs, ordered by their
//     modinfo dependencies and decompressed on the host; the tools' programs
//     plus exactly the libraries they load (ELF interpreter and DT_NEEDED,
//     followed transitively); a generated /init. All of it is packed as a
//     gzip'd newc cpio (cpio.go) in the merged-/usr layout.
//  3. boot (qemu.go): qemu-system-x86_64 or qemu-system-aarch64 (-M virt -cpu
//     max), KVM only when it really works, no network device, console on
//     stdout. The step ends when /init prints its first marker.
//  4. setup (the /init script): mounts, insmod of each module, dummy interface
//     d0 with 192.0.2.1/24 and 2001:db8::1/64, `rdma link add rxe0 type rxe
//     netdev d0`, then a wait until the port is ACTIVE and both GIDs exist.
//  5. run: each test binary with -test.v (or the -cmd shell command), from a
//     fresh directory under /tmp, with GORPING_BIN, GORPING_IPV4, GORPING_IPV6
//     and GORPING_RDMA_TOOL set; then the exit marker and poweroff.
//
// The host follows the console (supervise.go): /init prints marker lines with a
// per-run nonce (console.go lists them), and "Kernel panic" is recognised, so a
// failure is reported as what it is: a panic, a module that did not load, rxe0
// not coming up, or a timeout naming its step. qemu is killed on every way out.
package vm
