// Package oracle runs Debian's libibverbs and one of its providers (libmlx5, libbnxt_re,
// libirdma, libhns from rdma-core 44) over a fake kernel and records what the library
// does, so that gorping's pure-Go provider for the same driver can be compared with it
// byte for byte and store by store. It is the one harness of every provider's oracle:
// the C harness (csrc/harness.c, embedded) knows no driver; a driver's part (a Driver:
// test/mlx5oracle, and the vendor oracles next to their providers' tests) says how the
// library finds the device (the fake sysfs), answers the driver data of the commands
// (Driver.Answer, through the one Fake), names the device pages among the mmaps
// (Driver.Mmap), places what the device writes (Driver.Poke) and checks the provider's
// doorbell discipline (Driver.CheckOrder). It is test-only: the harness is built with gcc
// against the system's libibverbs-dev and ibverbs-providers (`make host-deps`).
//
// # API
//
//   - [Run] (or [MustRun] in tests) builds the harness once per driver (cached under the
//     user cache dir, keyed by the source hash and the build arguments), runs a
//     [Scenario] against a fresh [NewFake] of its Driver and returns its [Record].
//     [MustRun] fails under CI=true when the oracle cannot run ([ErrUnavailable]) and
//     skips loudly otherwise; ORACLE_DUMP=<dir> writes each record as JSON.
//   - The other side: [NewBackend] has the method set of a uverbs device-file backend
//     (Write, Mmap, Munmap) answering a Go provider with the same [Fake]; [MapMR] maps a
//     scenario's MR at its fixed address with the harness's fill; [Backend.Poke] writes
//     a "cqe" step as the harness does; after each step [Backend.Observe] returns the
//     step's commands, regions, device pages and (with -tags mmiorecord) the provider's
//     device-visible operations, and [DiffStep] lists how they differ from the library's
//     [StepRecord]. [Backend.CompEvent] queues a completion event like the harness's
//     event step.
//
// # How the library is steered
//
// The harness defines open/openat/stat/socket/ioctl/write/mmap in the executable
// (linked -rdynamic), so libibverbs and the dlopen'ed provider call them:
//   - RDMA netlink sockets fail (EPROTONOSUPPORT) → sysfs discovery under $SYSFS_PATH,
//     the fake tree the Driver wrote (one device on uverbs0, matched by modalias);
//   - /dev/infiniband/uverbs0 is /dev/null underneath (its sysfs dev is 1:3);
//   - every ioctl on it fails with ENOTTY → libibverbs uses the legacy write() path;
//   - every write() on it is a uverbs command, answered by [Fake] in the Go process;
//   - every mmap on it returns fresh anonymous memory, named by the Driver: device pages
//     (mlx5's UARs, bnxt_re's doorbell page) are kept read-only, and on x86-64 each
//     store to them faults, is single-stepped with the trap flag and recorded (offset,
//     width decoded from the instruction, bytes). Elsewhere the pages stay writable and
//     only their content after each step is recorded (Record.SingleStep false,
//     StepRecord.Stores empty).
//   - the host page of every doorbell record the fake learns of ("W <name>.db") is kept
//     read-only the same way, so record stores are captured in order with the device
//     stores; and the data-path verbs (send, recv, poll, arm) run single-stepped
//     throughout, each instruction classified, so the fences between the stores
//     (sfence, lfence, mfence, LOCK-prefixed) are recorded too: StepRecord.Seq.
//   - sysconf(_SC_PAGESIZE) and getpagesize answer the Driver's PageSize
//     ($ORACLE_PAGE_SIZE): scenarios run as on a 16 or 64 KiB-page kernel;
//   - the completion channel and async fds are pipes; the event step writes an
//     ib_uverbs_comp_event_desc carrying the CQ's user_handle into the channel.
//   - MRs are anonymous mappings at the step's fixed address, byte i = i·7 + id.
//
// # Harness protocol (internal; Run speaks it)
//
// stdin: the scenario script, one [Step.Line] per line, then "end". Afterwards, the
// answers: for each query, zero or more "W <name> <hexaddr> <len>" lines (new watched
// regions) and one "A <errno> <rest>" line: for a command the hex response; for an mmap
// "<page name or -> <hex content or ->"; for a cqe step "<region> <offset> <hex>".
// stdout: "Q <cmd> <in_words> <out_words> <hex of everything after the 8-byte header>"
// for each command, "M <off> <len> <prot> <flags>" for each mmap of the device file,
// "P <step>" for each cqe step, and "E <json>" events: start{single_step},
// mmap{off,len,prot,flags}, store{page,off,width,hex} (page a device page's name, a
// record "cq0.db", or "dbpage"), fence{kind}, devpage{page,hex} (no single-step only),
// mem{name,hex} (a watched region whose content changed, emitted after each step),
// step{i,ret,errno,<result fields>}, done.
//
// # Record format
//
// A [Record] has one [StepRecord] per scenario step, in order, each with
//   - Step/Line: the step and its script line;
//   - Result: ret/errno and the step's outputs ([Result]: lkey/rkey for mr, cqe for
//     cq, qpn and the caps the library reports for qp, modify return codes for rts,
//     bad_wr index for send/recv, the ibv_wc array for poll, the CQ id for event);
//   - Cmds: each uverbs command sent during the step, normalised by [Fake]: Core and
//     Driver request bytes with run-dependent fields zeroed and named in Syms
//     ("response", "user_handle", "fd", buffer addresses as "cq0+0x0"/"qp0+0x0",
//     doorbell records as "dbrec<page>+<off>" where pages are numbered in order of
//     first appearance), the header words, the errno and the response bytes the fake
//     gave (fds patched by the harness appear as 0 here);
//   - Mmaps of the uverbs fd;
//   - Stores to device pages in program order, bytes as they lie in memory;
//   - Seq: the whole device-visible sequence in program order, device and
//     doorbell-record stores and fences ([SeqEvent]), compared with the provider's
//     through [LibView] and [X86View];
//   - Mem: the content of every watched region after the step ("cq<i>", "qp<i>",
//     "qp<i>.sq", "cq<i>.db", "mr<i>": the driver names them); Changed names the
//     regions that changed in this step;
//   - Pages: every device page's content after the step.
//
// Region ids count from 0 in order of CREATE_CQ / CREATE_QP / REG_MR, which is why
// scenario object ids must also count from 0 in creation order.
package oracle
