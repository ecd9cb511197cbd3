# Soft-RoCE guest tier (test/vm), included by the top-level Makefile.
#
#   make guest [SUITE=bookworm] [ARCH=amd64] [PKGS=./test/guest] [RUN=regex]
#   make guest-matrix [MATRIX_PKGS=all] every guest: bookworm/amd64, trixie/amd64, bookworm/arm64
#   make fabric [FABRIC_TARGETS=...]  the multi-host tier: bookworm/amd64, trixie/amd64
#   make test-siw                     only the Soft-iWARP tier (bookworm/amd64)
#   make guest-16k                    the 16 KiB-page tier: trixie/arm64, linux-image-arm64-16k
#   make demo [SUITE=...] [ARCH=...]  gorping between two guests (h1, h2): the mission's
#                                     command lines, --stats, a delay, a partition
#   make demo-local                   gorping server + client in one guest
#   make bench [SUITE=...] [ARCH=...] timing figures: stock rping vs gorping, rxe data path
#   make bench-mesh [SUITE=...]       one mesh agent: 64, 256, 64 x 4 paths and 2 rails x 128 targets
#   make guest-shell                  interactive busybox shell in a guest
#   GUEST_FLAGS='-refresh -timeout 20m' adds guestrun flags.
#
# guestrun is built, not `go run`: go run turns every exit status into 1, and
# the status matters (the guest's own, 3 = test bed failure, 77 = host
# prerequisite missing). Outside CI a 77 is reported and skipped; with CI=true
# guestrun never returns 77, so CI cannot pass by testing nothing.

SUITE       ?= bookworm
ARCH        ?= amd64
PKGS        ?= ./test/guest
# guest-matrix (and so `make test`) runs every package with guest-tagged tests.
MATRIX_PKGS ?= all
RUN         ?=
GUEST_FLAGS ?=
GUESTRUN    := bin/guestrun

# Turns guestrun's "skipped" (77) into a loud note instead of a make error.
guest_skip_ok = st=$$?; if [ $$st -eq 77 ]; then echo "*** guest tier SKIPPED: host prerequisite missing (see above) ***"; exit 0; fi; exit $$st

.PHONY: guest guest-matrix test-siw guest-16k demo demo-local bench bench-ab bench-mesh guest-shell

$(GUESTRUN): FORCE
	$(GO) build -o $@ ./test/vm/guestrun

##@ Guests (QEMU)

guest: $(GUESTRUN) ## one guest: SUITE=bookworm ARCH=amd64 [PKGS=./test/guest] [RUN=regex]
	@$(GUESTRUN) -suite $(SUITE) -arch $(ARCH) -pkgs '$(PKGS)' $(if $(RUN),-run '$(RUN)') $(GUEST_FLAGS); $(guest_skip_ok)

# Every package's tests share one run step per guest; under load they have
# taken over 8 of guestrun's default 10 minutes on amd64 alone.
MATRIX_TIMEOUT ?= 30m

# Tests to leave out of the matrix (guestrun -skip; the run names them): only the mesh
# benchmark, a figure that `make bench-mesh` produces. `make test` runs every test, the
# siw tier included.
MATRIX_SKIP ?= TestGuestMeshBench

guest-matrix: $(GUESTRUN) $(TESTTIMES) ## every guest of the matrix (bookworm/amd64, trixie/amd64, bookworm/arm64), every guest-tagged package
	@$(TT) $(GUESTRUN) -matrix -pkgs '$(MATRIX_PKGS)' -timeout $(MATRIX_TIMEOUT) $(if $(RUN),-run '$(RUN)') $(if $(MATRIX_SKIP),-skip '$(MATRIX_SKIP)') $(GUEST_FLAGS); $(guest_skip_ok)

# The multi-host (fabric) tier: three guests per target on the test bed's virtual
# Ethernet, gorping and stock rping across them under delay, loss, MTU changes,
# partitions, power-offs and link flaps. The tests run on the host (test/fabric,
# tag fabric) and drive the guests through their agents. FABRIC_CONSOLE=1 echoes
# the guests' consoles, FABRIC_PCAP=file captures the wire.
#
# Targets: one per kernel (6.1, 6.12). bookworm/arm64 has bookworm/amd64's kernel, and
# nothing a fabric test exercises is per-architecture (rxe and the rping protocol are
# the same code on both; gorping's arm64 build meets a real kernel in the guest matrix
# and the 16 KiB guest): docs/development.md, The matrix. FABRIC_TARGETS=bookworm/arm64
# runs it there. FABRIC_ONCE: tests that use no stock rping and nothing that differs
# between the kernels (the mesh agents' rails, discovery and alerts over rxe), run on
# the first target only.
FABRIC_TARGETS ?= bookworm/amd64 trixie/amd64
FABRIC_ONCE    ?= TestMeshRails
FABRIC_TIMEOUT ?= 40m
.PHONY: fabric
fabric: $(TESTTIMES) ## the multi-host tier (FABRIC_TARGETS, RUN=regex): three guests per target against stock rping
	@st=0; first=1; for t in $(FABRIC_TARGETS); do \
		skip=""; if [ $$first = 0 ] && [ -n "$(FABRIC_ONCE)" ]; then skip="$(FABRIC_ONCE)"; \
			echo "== fabric tier on $$t (left out, run on the first target only: $$skip)"; \
		else echo "== fabric tier on $$t"; fi; first=0; \
		FABRIC_SUITE=$${t%/*} FABRIC_ARCH=$${t#*/} $(TT_RUN) -v -label $$t -- \
			$(GO) test -json -tags fabric -count=1 -v -timeout $(FABRIC_TIMEOUT) \
			$(if $(RUN),-run '$(RUN)') $${skip:+-skip "$$skip"} ./test/fabric || st=1; \
	done; exit $$st

# Only the siw tier (bookworm/amd64, where siw.ko builds); make test runs it too.
test-siw: $(GUESTRUN) ## only the Soft-iWARP tier (bookworm/amd64)
	@$(GUESTRUN) -suite bookworm -arch amd64 -pkgs ./test/guest -run 'TestSiw' -timeout 30m $(GUEST_FLAGS); $(guest_skip_ok)

# The 16 KiB-page tier (make test runs it): Debian trixie's arm64 kernel with 16 KiB
# pages, so page-size assumptions anywhere in gorping (rxe's rings, buffers, the mlx5
# sizing the oracle also checks at 16/64 KiB) meet a real kernel. It runs the tests that
# depend on the page size: the kernel's page size itself, the rxe interop tests against
# stock rping (every ring and buffer mmap'd), the leak and allocation checks, the memlock
# error (counted in pages), the uverbs object and query tests and the timestamps
# fallback; the rest of every guest package runs on the three matrix targets (4m10s
# measured from a cold cache on the 2-core build machine, 2026-12-02; every package in
# full took 10.1 min inside make test). GUEST16K_RUN= GUEST16K_PKGS=all runs everything.
GUEST16K_PKGS ?= all
GUEST16K_RUN  ?= TestKernelPageSize|TestStockRpingOverRxe|TestInterop|TestTimestampsFallback|TestGuestErrorMemlock|TestLeaks|TestGuestLoopbackRC|TestGuestObjects|TestGuestQueries|TestGuestCompletionTimestamps|TestGuestPingLoopAllocatesNothing
guest-16k: $(GUESTRUN) $(TESTTIMES) ## the 16 KiB-page tier: trixie/arm64 with linux-image-arm64-16k
	@$(TT) $(GUESTRUN) -suite trixie -arch arm64 -kernel-flavour 16k -pkgs '$(GUEST16K_PKGS)' $(if $(GUEST16K_RUN),-run '$(GUEST16K_RUN)') -timeout 30m $(GUEST_FLAGS); $(guest_skip_ok)

##@ Demo and figures

demo: $(GUESTRUN) ## two Soft-RoCE guests: gorping -s on one, -c on the other, --stats, a delay, a partition
	@$(GUESTRUN) -suite $(SUITE) -arch $(ARCH) -hosts 2 -script test/vm/demo.sh $(GUEST_FLAGS); $(guest_skip_ok)

demo-local: $(GUESTRUN) ## gorping server and client in one guest
	@$(GUESTRUN) -suite $(SUITE) -arch $(ARCH) -script test/vm/demo-local.sh $(GUEST_FLAGS); $(guest_skip_ok)

# Times stock rping and gorping against each other in a guest and between two
# guests (figures, not a test); on the host, the rxe data path and rping's ping loop
# over each device model (the providers side by side).
bench: $(GUESTRUN) ## timing figures: stock rping vs gorping in one guest and between two, the rxe data path, rping over each device model
	@$(GUESTRUN) -suite $(SUITE) -arch $(ARCH) -script test/vm/bench.sh $(GUEST_FLAGS); $(guest_skip_ok)
	@$(GUESTRUN) -suite $(SUITE) -arch $(ARCH) -hosts 2 -timeout 60m -script test/vm/bench-hosts.sh $(GUEST_FLAGS); $(guest_skip_ok)
	$(GO) test -run '^$$' -bench . -benchmem ./uverbs/rxe
	$(GO) test -run '^$$' -bench ModelPings -benchtime 5000x $(TEST_TAGS) ./rping

# A/B of two trees in one guest: make bench-ab BEFORE=path/to/gorping-linux-amd64 (a build
# of the older tree for the guest's architecture) runs bench.sh's rounds with that
# binary's gorping×gorping pairs, event mode and --poll, beside this tree's.
BENCH_ROUNDS ?= 6
bench-ab: $(GUESTRUN) ## BEFORE=older gorping binary: its event and --poll time per ping beside this tree's, alternating rounds in one guest
	@test -n "$(BEFORE)" || { echo "usage: make bench-ab BEFORE=path/to/older/gorping-linux-$(ARCH)"; exit 2; }
	@$(GUESTRUN) -suite $(SUITE) -arch $(ARCH) -add $(abspath $(BEFORE)):/usr/local/bin/gorping-before \
		-add $(abspath test/vm/bench.sh):/bench.sh -cmd 'BENCH_ROUNDS=$(BENCH_ROUNDS) sh /bench.sh' $(GUEST_FLAGS); $(guest_skip_ok)

# The cross-host round trip of each test-bed network configuration: QEMU's
# TCP socket netdev (what two guests were first joined with) and the test
# bed's switch with one and two vCPUs per guest.
.PHONY: bench-net
bench-net: $(GUESTRUN) ## the cross-host round trip of each test-bed network configuration
	@for cfg in "-net socket -cpus 1" "-net switch -cpus 1" "-net switch -cpus 2"; do \
		echo "== test bed $$cfg"; \
		$(GUESTRUN) -suite $(SUITE) -arch $(ARCH) -hosts 2 $$cfg -script test/vm/bench-net.sh $(GUEST_FLAGS) | grep -v '^\[' || exit $$?; \
	done

# One gorping mesh agent probing 64 and 256 targets, and a shell loop of rping -c -C 1
# (figures for docs/mesh.md, not a test).
bench-mesh: $(GUESTRUN) ## one mesh agent: 64 and 256 targets, 64 x 4 paths, 2 rails x 128 (docs/mesh.md, Figures)
	@$(GUESTRUN) -suite $(SUITE) -arch $(ARCH) -pkgs ./mesh -run TestGuestMeshBench -timeout 30m $(GUEST_FLAGS); $(guest_skip_ok)

guest-shell: $(GUESTRUN) ## an interactive busybox shell in a guest
	$(GUESTRUN) -suite $(SUITE) -arch $(ARCH) -i -cmd sh -timeout 8h $(GUEST_FLAGS)
