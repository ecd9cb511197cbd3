// Package mlx5oracle runs Debian's libibverbs + libmlx5 (rdma-core 44) over a fake
// kernel and records what the library does, so that gorping's pure-Go mlx5 provider
// can be compared with it byte for byte. It is test-only: the C harness (test/oracle's)
// is built with gcc against the system's libibverbs-dev and ibverbs-providers (`make
// host-deps` installs them); nothing in the product imports this package.
//
// It is the mlx5 part of the one oracle harness (test/oracle: the harness, the fake
// kernel, records and comparison); this package is its [Driver] (ConnectX-6 sysfs,
// mlx5_ib's answers, the UAR pages as device pages, the 64-byte CQE, mlx5's doorbell
// discipline), the mlx5 scenarios and the tests of what libmlx5 does.
//
// # API
//
//   - [Scenarios] returns the named scenarios; [Builder] makes new ones ([Builder.CQE]
//     places CQEs: slot, owner bit of the lap, wqe_counter of the posted WQE).
//   - [Run] (or [MustRun] in tests) runs a scenario with the oracle; its records are
//     [oracle.Record]s, and ORACLE_DUMP=<dir> writes each as JSON.
//   - [NewBackend](sc.Params) answers a Go provider with the same fake kernel;
//     [DiffStep] compares a step with mlx5's [CheckOrder].
//   - uverbs/mlx5's oracle_test.go runs every scenario through the provider that way
//     (also [PageScenarios] at 16 and 64 KiB) and lists the deliberate differences.
//   - [TsToNS] runs libmlx5's mlx5dv_ts_to_ns on any clock_info/timestamp vectors.
//
// test/oracle's documentation says how the library is steered and what a record holds.
// For mlx5 the device pages are the UAR pages (mmap commands 0, 2 and 3, named
// "uar<index>"); the regions are "cq<i>" (entries × cqe_size), "cq<i>.db" (set_ci, arm),
// "qp<i>" (RQ at 0, then the SQ), "qp<i>.db" (rq head, sq cur_post) and "mr<i>".
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
