// Package mlx5oracle runs Debian's libibverbs + libmlx5 (rdma-core 44) over a fake
// kernel and records what the library does, so that gorping's pure-Go mlx5 provider
// can be compared with it byte for byte. It is test-only: the C harness
// (csrc/harness.c, embedded) is built with gcc against the system's libibverbs-dev
// and ibverbs-providers (`make host-deps` installs them); nothing in the product
// imports this package.
//
// # API
//
//   - [Scenarios] returns the named scenarios; [Builder] makes new ones ([Builder.CQE]
//     places CQEs: slot, owner bit of the lap, wqe_counter of the posted WQE).
//   - [Run] (or [MustRun] in tests) builds the harness once (cached under the user
//     cache dir, keyed by the source hash), runs a scenario against a fresh
//     [NewFake](sc.Params) and returns its [Record]. [MustRun] fails under CI=true
//     when the oracle cannot run ([ErrUnavailable]) and skips loudly otherwise;
//     MLX5ORACLE_DUMP=<dir> writes each record as JSON.
//   - The other side: [NewBackend](sc.Params) has the method set of a uverbs
//     device-file backend (Write, Mmap, Munmap) answering a Go provider with the same
//     [Fake]; [MapMR] maps a scenario's MR at its fixed address with the harness's
//     fill; after each step [Backend.Observe] returns the step's commands, regions and
//     UAR pages, and [DiffStep] lists how they differ from the oracle's [StepRecord].
//     [Backend.CompEvent] queues a completion event like the harness's event step.
//   - uverbs/mlx5's oracle_test.go runs every scenario through the provider that way
//     (also [PageScenarios] at 16 and 64 KiB) and lists the deliberate differences.
//   - [TsToNS] runs libmlx5's mlx5dv_ts_to_ns on any clock_info/timestamp vectors.
//
// # How the library is steered
//
// The harness defines open/openat/stat/socket/ioctl/write/mmap in the executable
// (linked -rdynamic), so libibverbs and the dlopen'ed libmlx5 call them:
//   - RDMA netlink sockets fail (EPROTONOSUPPORT) → sysfs discovery under $SYSFS_PATH,
//     a fake tree with one device mlx5_0 / uverbs0 (ConnectX-6 modalias, ABI 1);
//   - /dev/infiniband/uverbs0 is /dev/null underneath (its sysfs dev is 1:3);
//   - every ioctl on it fails with ENOTTY → libibverbs uses the legacy write() path;
//   - every write() on it is a uverbs command, answered by [Fake] in the Go process;
//   - mmap on it returns fresh anonymous pages; UAR pages (mmap command 0, 2, 3) are
//     kept read-only, and on x86-64 each store to them faults, is single-stepped with
//     the trap flag and recorded (offset, width decoded from the instruction, bytes).
//     Elsewhere the pages stay writable and only their content after each step is
//     recorded (Record.SingleStep false, StepRecord.Stores empty).
//   - the host page of every doorbell record the fake learns of ("W <name>.db") is kept
//     read-only the same way, so record stores are captured in order with the UAR
//     stores; and the data-path verbs (send, recv, poll, arm) run single-stepped
//     throughout, each instruction classified, so the fences between the stores
//     (sfence, lfence, mfence, LOCK-prefixed) are recorded too: StepRecord.Seq.
//   - sysconf(_SC_PAGESIZE) and getpagesize answer Params.PageSize ($ORACLE_PAGE_SIZE):
//     [PageScenarios] run every scenario as on a 16 or 64 KiB-page kernel;
//   - the completion channel and async fds are pipes; the event step writes an
//     ib_uverbs_comp_event_desc carrying the CQ's user_handle into the channel.
//   - MRs are anonymous mappings at the step's fixed address, byte i = i·7 + id.
//
// # Harness protocol (internal; Run speaks it)
//
// stdin: the scenario script, one [Step.Line] per line, then "end". Afterwards, the
// answers: for each query, zero or more "W <name> <hexaddr> <len>" lines (new watched
// regions) and one "A <errno> <hex response>" line.
// stdout: "Q <cmd> <in_words> <out_words> <hex of everything after the 8-byte header>"
// for each command, and "E <json>" events: start{single_step}, mmap{off,len,prot,
// flags}, store{page,off,width,hex} (page "uar<i>", a record "cq0.db", or "dbpage"),
// fence{kind}, uarpage{page,hex} (no single-step only),
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
//     ("response", "user_handle", "fd" for the comp channel, buffer addresses as
//     "cq0+0x0"/"qp0+0x0", doorbell records as "dbrec<page>+<off>" where pages are
//     numbered in order of first appearance), the header words, the errno and the
//     response bytes the fake gave (fds in GET_CONTEXT/CREATE_COMP_CHANNEL answers
//     are patched by the harness and appear as 0 here);
//   - Mmaps of the uverbs fd;
//   - Stores to UAR pages in program order: page "uar<i>" (mmap page index i), byte
//     offset, width, bytes as they lie in memory (so a be64 doorbell reads 00 00 00 0a…);
//   - Seq: the whole device-visible sequence in program order, UAR and doorbell-record
//     stores and fences ([SeqEvent]). The Go side records the provider's through
//     internal/mmio's recorder (-tags mmiorecord) as Observation.Ops; [DiffStep]
//     compares [LibView] of one with [X86View] of the other event by event and checks
//     the provider's barriers with [CheckOrder] (ToDevice, invisible on x86, included);
//     with a sequence the UAR page contents (its replay) are not compared separately;
//   - Mem: the content of every watched region after the step: "cq<i>" (the CQ
//     buffer, entries × cqe_size), "cq<i>.db" (8-byte doorbell record: set_ci, arm),
//     "qp<i>" (the QP buffer, RQ at 0 then SQ), "qp<i>.db" (8 bytes: rq head, sq
//     cur_post), "mr<i>" (registered buffers, e.g. scatter-to-CQE copies); Changed
//     names the regions that changed in this step;
//   - UAR: every UAR page's content after the step (stores replayed onto zeroed pages).
//
// Region ids count from 0 in order of CREATE_CQ / CREATE_QP / REG_MR, which is why
// scenario object ids must also count from 0 in creation order.
//
// # Fake kernel answers
//
// [Fake.Answer] is the whole fake kernel; both the harness and [Backend] use it, so
// both sides see identical answers: GET_CONTEXT (EPERM while the DEVX flag is asked,
// if Params.RefuseDEVX; else num_comp_vectors 1 and mlx5_ib_alloc_ucontext_resp:
// qp_tab_size 1<<17, bf_reg_size Params.BFRegSize, tot_bfregs Params.TotBFRegs, cache
// line 64, max_sq_desc_sz 1024, max_rq_desc_sz 512, max_send_wqebb/max_recv_wr/
// max_srq_recv_wr 1<<15, num_ports 1, response_length 72, cqe_version
// Params.CQEVersion, cmds_supp_uhw 3, log_uar_size 12, num_uars_per_page 1),
// QUERY_DEVICE(_EX) (vendor 0x2c9, part 4123, one port), QUERY_PORT (active, lid 1, MTU
// 4096, link layer Params.LinkLayer), ALLOC_PD (handles from 0, pdn Params.PDN), REG_MR
// (lkey = rkey = FirstLKey + 0x100·i), CREATE_CQ (cqe = roundup_pow2(asked+1)−1, cqn =
// FirstCQN + i), CREATE_QP (qpn = FirstQPN + i, caps echoed, bfreg_index =
// LowLatBFRegs[i] or 0 — a real kernel would hand out medium bfregs before the shared
// bfreg 0), MODIFY_QP/DESTROY_*/DEREG_MR/DEALLOC_PD (success); anything else
// EOPNOTSUPP.
//
// # What the records show about libmlx5 44 (pinned by TestOracleHarness*)
//
//   - Context: GET_CONTEXT with DEVX at 48, 40, 32 bytes (refused), then 48 without;
//     lib_caps 3, 16 bfregs, 4 low-latency, max_cqe_version 1; three ioctls, all
//     refused; one QUERY_DEVICE_EX and one QUERY_PORT; every static UAR page mapped
//     (PROT_WRITE, MAP_SHARED, offset i·4096).
//   - CQ: core cqe = roundup_pow2(n+1)−1, 64-byte CQEs, op_own 0xF0 everywhere before
//     CREATE_CQ; doorbell records from one page, 0x40 apart (CQ first).
//   - QP: SQ sized with 192 bytes of overhead (UMR reserve), RQ first in the buffer,
//     flags SCATTER_CQE, uidx counting from 0 per QP; reported max_send_wr
//     = sq_bytes / wqe_size and max_inline = wqe_size − 196.
//   - Send: a zero-length SGE is skipped; fence sets 0x80 in fm_ce_se; no small-fence
//     after RDMA READ; a chain rings once with the last WQE's ctrl; BlueFlame copies
//     whole 64-byte blocks read from the SQ (wrapping, including stale bytes after
//     the WQE) into alternating halves; without BlueFlame (bf_reg_size 0 or bfreg 0)
//     one 8-byte store of the ctrl's first 8 bytes, always at offset 0x800.
//   - Poll: requester wc opcode by WQE opcode, responder by CQE opcode; immediate and
//     pkey_index both from imm_inval_pkey; scatter-to-CQE payload copied to the RECV
//     buffer; error syndromes mapped as the mlx5 ABI documents, unknown → GENERAL_ERR;
//     set_ci after each poll; stale CQEs of the previous lap ignored.
//   - Arm: dbrec[1] = sn<<28 | solicited<<24 | ci, then one 8-byte store of that word
//     and the cqn at UAR page 0 + 0x20; sn counts the events read.
//   - Order (TestOracleHarnessSequences): send = record, sfence (a shared bfreg: its
//     spinlock's locked instruction), doorbell or BlueFlame stores, sfence; receive =
//     record only; poll = one lfence per CQE, then set_ci, also after an empty poll;
//     arm = record, sfence, store, sfence. A chain writes its record and rings once.
//   - QP destroy (TestOracleHarnessQPDestroyClean): after DESTROY_QP the QP's CQEs are
//     removed from its CQs, the others moved up over them keeping each slot's owner
//     bit, and set_ci advanced by the number removed; its user index is reused next.
//   - Page sizes (TestOracleHarnessPageSizes): at 16 KiB libmlx5 asks 16 bfregs (4
//     low-latency) and maps two 16 KiB UAR pages; at 64 KiB it asks 32 (20) and maps
//     one 64 KiB page holding 16 UARs; gross bfreg 24 is then UAR 6 of page 0.
//   - Timestamps (TestOracleHarnessTimestamps): with clock_info_versions bit 0 libmlx5
//     maps the clock_info page read-only (command 7, index 0) at open;
//     ibv_create_cq_ex with completion timestamps goes out over write() as the legacy
//     CREATE_CQ without the flag; the extended poll reads the CQE's be64 timestamp, and
//     mlx5dv_ts_to_ns converts it with the page ([TsToNS] runs that inline function
//     on any vectors).
package mlx5oracle
