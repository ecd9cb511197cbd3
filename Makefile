# gorping: build, test and demo. `make help` lists the targets by group: `make check` is
# the everyday loop (no guests), `make test` everything CI runs. A target's `## text` is
# its line in the list; `##@ Group` lines start a group.

GO      ?= go
# The version: a tag (v1.2.3) where there is one, else the commit as a Go pseudo-version
# (what `go install …@<commit>` reports), +dirty with uncommitted changes. The binaries,
# the packages and the image labels all carry it and the commit.
VERSION ?= $(shell v=$$(git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null) || \
	v=$$(TZ=UTC git log -1 --abbrev=12 --date=format-local:%Y%m%d%H%M%S --format=v0.0.0-%cd-%h 2>/dev/null)$$(git diff --quiet HEAD 2>/dev/null || echo +dirty); \
	echo $${v:-v0.0.0-dev})
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
# The commit's time (SOURCE_DATE_EPOCH): every time stamp in the packages and the image.
DATE    ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 1)
VERSION := $(VERSION)
COMMIT  := $(COMMIT)
DATE    := $(DATE)
# The branch, where HEAD is on one: with the commit, the labels of the agent's
# gorping_build_info (prometheus/common/version's variables, as its exporters set them).
BRANCH  ?= $(shell git symbolic-ref -q --short HEAD 2>/dev/null)
BRANCH  := $(BRANCH)
LDFLAGS := -s -w -X main.buildVersion=$(VERSION) -X main.buildCommit=$(COMMIT) \
	-X github.com/prometheus/common/version.Revision=$(COMMIT) -X github.com/prometheus/common/version.Branch=$(BRANCH)
ARCHES  := amd64 arm64
HOSTARCH := $(shell $(GO) env GOARCH)

.PHONY: all build test check help host-deps lint unit unit-arm64 abicheck fuzz clean
all: build

##@ Everyday

build: $(ARCHES:%=bin/gorping-linux-%) ## static binaries for amd64 and arm64 in bin/ (the default)

# CGO_ENABLED=0: the product is one static binary with no C behind it.
bin/gorping-linux-%: FORCE
	CGO_ENABLED=0 GOOS=linux GOARCH=$* $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $@ .

# The everyday loop: what needs no guest. gofmt and vet, the generated files current, the
# ABI layout against the uapi headers, and the unit tests with -race (the mlx5 oracle and
# the device models among them) in -short mode: the long ping loops over the device models
# run a tenth of their pings (their rings still wrap many times) and the test that builds
# the product binary to read its symbols is left for make unit. Measured in the README
# (The two commands).
check: lint abicheck ## gofmt, vet, generated files, the ABI layout, unit tests with -race -short (the oracles, the models); no guests
	$(GO) test -race -short -count=1 $(TEST_TAGS) ./...

##@ CI

# make test runs these one after another (two cores: the guests get them to themselves),
# each timed, and goes on past a failed one so that one run shows every failure; at the
# end it prints each target's wall time and the ten slowest tests (test/cmd/testtimes,
# from go test -json and the guests' -test.v), and fails if any target failed. The
# matrix, what each tier alone can catch and its time: docs/development.md.
TEST_TIERS := host-deps kubeapi lint dashboard-check unit campaign-check fuzz unit-arm64 abicheck test-deploy test-release guest-matrix-release guest-16k fabric
TIMES_DIR  := bin/times
TESTTIMES  := bin/testtimes
# A go test -json (or guestrun) command run through testtimes: go test's own output on
# the terminal, every line kept in $(TIMES_DIR)/<target>.log for the table.
TT_RUN = $(abspath $(TESTTIMES)) run -log $(abspath $(TIMES_DIR))/$@.log
TT     = $(TT_RUN) --
# make -n test shows the tiers' commands without timing them.
DRYRUN := $(findstring n,$(firstword -$(MAKEFLAGS)))

test: ## everything: check, short fuzzing of the mesh agent's parsers, arm64 host tests, the dashboard and manifests current and valid, release artifacts, the guest matrix, 16 KiB pages, the multi-host tier; then the table of times
ifeq ($(DRYRUN),)
	@$(GO) build -o $(TESTTIMES) ./test/cmd/testtimes || exit 1; rm -rf $(TIMES_DIR); st=0; \
	for t in $(TEST_TIERS); do \
		$(TESTTIMES) tier -dir $(TIMES_DIR) $$t -- $(MAKE) --no-print-directory $$t GUEST_RELEASE_BUILD=; s=$$?; \
		if [ $$s -gt 128 ]; then echo "make test: interrupted in $$t"; exit $$s; fi; \
		[ $$s -eq 0 ] || { st=1; echo "*** make test: $$t FAILED (exit $$s); going on with the other targets ***"; }; \
	done; \
	$(TESTTIMES) report $(TIMES_DIR); exit $$st
else
	@for t in $(TEST_TIERS); do $(MAKE) --no-print-directory $$t GUEST_RELEASE_BUILD=; done
endif

$(TESTTIMES): FORCE
	@$(GO) build -o $@ ./test/cmd/testtimes

# The side-by-side CLI test compares gorping with Debian's rping on this RDMA-less
# host; the oracle tests (test/oracle, with the mlx5 and vendor drivers' parts) build a C
# harness with gcc against Debian's libibverbs-dev and run its libmlx5, libbnxt_re,
# libirdma and libhns (ibverbs-providers); the completion tests
# run bash, zsh and fish, the release tests dpkg-deb, rpm, skopeo and lintian. Installed only as
# root on Debian (like qemu for the guest tier). Under CI=true a missing oracle fails
# the tests. prometheus gives the mesh tests a real Prometheus server and promtool
# (test/promtest: a loud skip without it, a failure under CI=true); chromium is the
# headless browser of the page checks (test/browser: the same rule).
HOST_PKGS := rdmacm-utils libibverbs-dev ibverbs-providers gcc qemu-user \
	bash zsh fish rpm rpm2cpio cpio skopeo lintian prometheus chromium etcd-server
host-deps: ## install the host's test programs (as root on Debian): stock rping, the oracles, qemu-user, prometheus, chromium, ...
	@missing=""; for p in $(HOST_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing$$missing (stock rping, mlx5 oracle, prometheus)"; \
		(apt-get install -y --no-install-recommends $$missing >/dev/null 2>&1 || \
		 (apt-get update >/dev/null && apt-get install -y --no-install-recommends $$missing >/dev/null)) || \
		echo "*** could not install$$missing: TestSameAsRping / the mlx5 oracle / the Prometheus tests will not run ***"; \
	elif [ -n "$$missing" ]; then echo "*** missing$$missing: run make host-deps as root ***"; fi

# A real Kubernetes API server for mesh/members' tests (test/kubeapi): etcd from Debian
# (etcd-server above), kube-apiserver built from k8s.io/kubernetes once into the test cache
# (about 7 minutes on 2 cores; test/kubeapi/build is its own module).
.PHONY: kubeapi
kubeapi: ## build kube-apiserver for the tests into the test cache, once (test/kubeapi)
	GO=$(GO) test/kubeapi/build.sh

# -tags mmiorecord: internal/mmio reports every barrier and doorbell store to the mlx5
# oracle (which compares the sequence with libmlx5's) and to the ConnectX model (which
# rings only on a UAR store); product builds have no recorder.
TEST_TAGS := -tags mmiorecord
##@ Everyday
lint: ## gofmt and go vet (every build tag), the arm64 build
	@unformatted="$$(gofmt -l .)"; if [ -n "$$unformatted" ]; then \
		echo "gofmt: these files need formatting:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags guest ./...
	$(GO) vet -tags abicheck ./...
	$(GO) vet -tags fabric ./...
	$(GO) vet $(TEST_TAGS) ./...
	CGO_ENABLED=0 GOARCH=arm64 $(GO) build -o /dev/null .
	cd tools/release && $(GO) vet ./...
	cd tools/deploycheck && $(GO) vet ./...
	cd tools/dashboard && $(GO) vet ./...
	cd test/campaign && $(GO) vet ./...

unit: $(TESTTIMES) ## unit tests with -race, in full
	$(TT) $(GO) test -json -race -count=1 $(TEST_TAGS) ./...

# Short fuzzing runs (FUZZTIME each) of the parsers of what anyone can send the mesh
# agent: its target file and /probe's query. make unit runs every fuzz test's seed
# corpus (testdata/fuzz included) but does not fuzz; FUZZ lists package:FuzzName.
FUZZTIME ?= 15s
FUZZ     := ./mesh/target:FuzzParseTargetFile ./mesh/target:FuzzProbeQuery
fuzz: $(TESTTIMES)
	@for f in $(FUZZ); do pkg=$${f%%:*}; name=$${f#*:}; echo "fuzz $$name for $(FUZZTIME)"; \
		$(TT) $(GO) test -json -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; done

# The tests that have raced before (issue 27; docs/development.md, "Flaky tests"), repeated:
# the host ones FLAKY_COUNT times with -race, beside HOG busy loops (HOG=2 stands for a
# loaded 2-core CI machine); FLAKY_GUEST=1 then runs the guest ones and the multi-host
# ones FLAKY_ROUNDS times on SUITE/ARCH (one boot per round).
FLAKY_COUNT  ?= 20
FLAKY_ROUNDS ?= 3
HOG          ?= 0
FLAKY_HOST   := TestGlueDebugLines|TestSecondSignalKills|TestRailsDiscovery|TestAgentProbesAndReasons|TestModelErrorCQE|TestPingLoopMLX5ModelTimestamps|TestStall|TestModelContextCloseReleasesObjects|TestClockSnapshot|TestProber|TestConformance|TestShutdownAnswersProbes|TestProbeDNSBounded
FLAKY_GUESTS := TestLeaks|TestErrors|TestRemoval|TestGuestPingLoopAllocatesNothing|TestGuestProbe
# No '$$' in these: the sub-make expands RUN again, and 'TestMesh$$|' lost both mesh tests
# ('$$|' is a make variable); 'TestMesh' selects TestMesh and TestMeshRails, the only two.
FLAKY_FABRIC := TestCrossLinkFlap|TestCrossPartition|TestCrossOneWayServerFirst|TestCrossPeerPowerOff|TestCrossPersistentTwoHosts|TestCrossNetemMix|TestMesh
.PHONY: flaky
flaky: ## repeat the tests that raced before: host ones FLAKY_COUNT times with -race (HOG=N busy loops beside); FLAKY_GUEST=1 adds the guest and multi-host ones, FLAKY_ROUNDS times
	@hog=""; for i in $$(seq 1 $(HOG)); do sh -c 'while :; do :; done' & hog="$$hog $$!"; done; \
	trap 'kill $$hog 2>/dev/null' EXIT INT TERM; \
	echo "flaky: host tests x$(FLAKY_COUNT) -race, $(HOG) busy loops beside"; \
	$(GO) test -race -count=$(FLAKY_COUNT) $(TEST_TAGS) -run '$(FLAKY_HOST)' ./rping ./uverbs/mlx5 ./uverbs/hns ./mesh ./test/mlx5model || exit 1; \
	if [ "$(FLAKY_GUEST)" = 1 ]; then for r in $$(seq 1 $(FLAKY_ROUNDS)); do \
		echo "flaky: guest and multi-host round $$r of $(FLAKY_ROUNDS) ($(SUITE)/$(ARCH))"; \
		$(MAKE) --no-print-directory guest PKGS=./test/guest RUN='$(FLAKY_GUESTS)' || exit 1; \
		$(MAKE) --no-print-directory fabric FABRIC_TARGETS=$(SUITE)/$(ARCH) RUN='$(FLAKY_FABRIC)' || exit 1; \
	done; fi

# The host tests of the packages with per-architecture code (barriers, MMIO, the mlx5
# provider with its model and oracle tests, the device models, rping's glue and ping
# loops over the mlx5 model) again as arm64 binaries under qemu-user (no -race: it
# needs cgo there), with -short: what differs on arm64 is the code under the tests
# (internal/mmio's assembly, alignment of the rings' atomics), not how many pings a
# loop sends or how many devices an oracle compares; every ring still wraps hundreds of
# times, each oracle compares its default device in full, and make unit runs every
# loop and every device on amd64. Left out: the packages whose tests build and run
# host (amd64) binaries or generate files (ARM64_EXCLUDE, a grep -E on import paths),
# and TestArm64BinaryCarriesBarriers, which builds the arm64 binary with the host's go
# and disassembles it (make unit runs it; 240 s under qemu-aarch64 for the same check).
# A missing qemu-aarch64 is a loud skip, a failure under CI=true.
ARM64_PKGS    := ./internal/... ./uverbs/... ./test/mlx5model ./test/rxemodel ./test/bnxtremodel ./test/irdmamodel ./test/hnsmodel
ARM64_EXCLUDE := /cli$$|/mangen$$|/cmd/
ARM64_SKIP    := TestArm64BinaryCarriesBarriers
ARM64_RPING   := MLX5|Rxe|BnxtRe|Irdma|Hns
##@ CI
unit-arm64: $(TESTTIMES) ## the host tests of the per-architecture packages as arm64 binaries under qemu-user (-short)
	@if ! command -v qemu-aarch64 >/dev/null; then \
		if [ "$$CI" = true ]; then echo "qemu-aarch64 missing (make host-deps)"; exit 1; fi; \
		echo "*** SKIPPING arm64 host tests: qemu-aarch64 missing (make host-deps as root) ***"; exit 0; fi; \
	pkgs=$$($(GO) list $(ARM64_PKGS) | grep -Ev '$(ARM64_EXCLUDE)') || exit 1; \
	echo "unit-arm64: $$(echo $$pkgs | wc -w) packages, then rping's '$(ARM64_RPING)' tests"; \
	CGO_ENABLED=0 GOARCH=arm64 $(TT) $(GO) test -json -short -count=1 $(TEST_TAGS) -exec qemu-aarch64 -skip '$(ARM64_SKIP)' $$pkgs && \
	CGO_ENABLED=0 GOARCH=arm64 $(TT) $(GO) test -json -short -count=1 $(TEST_TAGS) -exec qemu-aarch64 -run '$(ARM64_RPING)' ./rping

# Compares every Go ABI mirror with the C uapi headers (gcc, test-only), after checking
# that the generated mirrors are what the headers give (generate-check).
##@ Everyday
# Only the packages with such tests are built (-run would build every package's tests to
# run none in most): those with a top-level test named *ABI* or *Layout*.
ABICHECK_RUN := ABI|Layout
abicheck: generate-check $(TESTTIMES) ## the generated files current, then every ABI mirror against the uapi headers (gcc)
	@pkgs=$$(grep -rlE --include='*_test.go' --exclude-dir=tools --exclude-dir=bin --exclude-dir=testdata \
		'^func Test[A-Za-z0-9_]*($(ABICHECK_RUN))' . | xargs -n1 dirname | sort -u) && [ -n "$$pkgs" ] || \
		{ echo "abicheck: no package has a test matching '$(ABICHECK_RUN)'"; exit 1; }; \
	echo "abicheck:" $$pkgs; $(TT) $(GO) test -json -count=1 -tags abicheck -run '$(ABICHECK_RUN)' $$pkgs

# The ABI mirrors (abi_gen.go next to each abi.spec) are generated from the uapi headers by
# internal/cmd/abigen (gcc -g, the layout read from DWARF; development tooling, never in
# the product); the enum name tables (*_string.go) by stringer, pinned in each package's
# //go:generate line. make generate rewrites both; generate-check fails if one is not
# current, and leaves the tree as it was.
ABI_SPECS := $(sort $(wildcard */abi.spec */*/abi.spec */*/*/abi.spec))
GENERATE_PKGS := $(sort $(patsubst %/,./%,$(dir $(shell grep -rl --include='*.go' '^//go:generate' uverbs rping rdmacm mesh internal 2>/dev/null))))
STRINGER_FILES := $(wildcard */*_string.go */*/*_string.go)
.PHONY: generate generate-check
generate: ## rewrite the generated files: ABI mirrors (abigen), enum names (stringer)
	$(GO) build -o bin/abigen ./internal/cmd/abigen
	@for s in $(ABI_SPECS); do echo "abigen $$s"; bin/abigen -spec $$s || exit 1; done
	$(GO) generate $(GENERATE_PKGS)
generate-check: ## fail if a generated file is not what its generator gives
	$(GO) build -o bin/abigen ./internal/cmd/abigen
	@for s in $(ABI_SPECS); do bin/abigen -check $$s || exit 1; done
	@tmp=$$(mktemp -d) && for f in $(STRINGER_FILES); do mkdir -p $$tmp/$$(dirname $$f) && cp $$f $$tmp/$$f; done && \
	$(GO) generate $(GENERATE_PKGS) && st=0 && for f in $(STRINGER_FILES); do \
		cmp -s $$f $$tmp/$$f || { echo "$$f is not what go generate writes: run make generate"; cp $$tmp/$$f $$f; st=1; }; done; \
	rm -rf $$tmp; exit $$st

##@ Release and install

clean: ## remove bin/
	rm -rf bin

# gorping(1), from docs/gorping.1.md (go-md2man), and the completion scripts, printed by
# the host's own binary. The page's option lists come from cli's option tables
# (as the usage texts and the completions do): make man-update writes them into
# docs/gorping.1.md after a change there (cli/mangen's test fails until then).
.PHONY: man man-update completions install uninstall package image release test-release guest-release
man: bin/gorping.1 ## gorping(1) in bin/, from docs/gorping.1.md
bin/gorping.1: FORCE
	@mkdir -p bin
	$(GO) run ./cli/mangen -version '$(VERSION)' -in docs/gorping.1.md -out $@
man-update: ## write cli's option tables into docs/gorping.1.md
	$(GO) run ./cli/mangen -update docs/gorping.1.md

completions: bin/gorping-linux-$(HOSTARCH) ## bash, zsh and fish completions in bin/completion
	@mkdir -p bin/completion
	$< completion bash > bin/completion/gorping.bash
	$< completion zsh > bin/completion/_gorping
	$< completion fish > bin/completion/gorping.fish

# make install [PREFIX=/usr/local] [DESTDIR=]: the host's binary, the man page and the
# completions where man and the shells look. make uninstall removes exactly those files.
PREFIX      ?= /usr/local
BINDIR      ?= $(PREFIX)/bin
MANDIR      ?= $(PREFIX)/share/man
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR  ?= $(PREFIX)/share/zsh/site-functions
FISHCOMPDIR ?= $(PREFIX)/share/fish/vendor_completions.d
INSTALLED   := $(BINDIR)/gorping $(MANDIR)/man1/gorping.1 $(BASHCOMPDIR)/gorping \
	$(ZSHCOMPDIR)/_gorping $(FISHCOMPDIR)/gorping.fish

install: bin/gorping-linux-$(HOSTARCH) man completions ## [PREFIX=/usr/local] [DESTDIR=]: binary, gorping(1), completions
	install -D -m 0755 bin/gorping-linux-$(HOSTARCH) $(DESTDIR)$(BINDIR)/gorping
	install -D -m 0644 bin/gorping.1 $(DESTDIR)$(MANDIR)/man1/gorping.1
	install -D -m 0644 bin/completion/gorping.bash $(DESTDIR)$(BASHCOMPDIR)/gorping
	install -D -m 0644 bin/completion/_gorping $(DESTDIR)$(ZSHCOMPDIR)/_gorping
	install -D -m 0644 bin/completion/gorping.fish $(DESTDIR)$(FISHCOMPDIR)/gorping.fish

uninstall: ## remove exactly what install installed
	rm -f $(addprefix $(DESTDIR),$(INSTALLED))

# Release artifacts in bin/release (tools/release, a module of its own: nfpm and
# go-containerregistry stay out of gorping's go.mod): .deb and .rpm for amd64 and arm64,
# and the OCI image (a layout directory and an oci-archive tar), all with VERSION and
# COMMIT. test-release checks them on the host (dpkg-deb, rpm, skopeo, lintian) and
# make install / uninstall; guest-release installs the .deb in a guest and runs the
# image's binary there.
RELEASE_DIR  := bin/release
RELEASE_TOOL := bin/release-tool
RELEASE_ARGS  = -version '$(VERSION)' -commit '$(COMMIT)' -date '$(DATE)' -bin bin -man bin/gorping.1 \
	-completions bin/completion -license LICENSE -out $(RELEASE_DIR) $(if $(MAINTAINER),-maintainer '$(MAINTAINER)')

$(RELEASE_TOOL): FORCE
	cd tools/release && $(GO) build -o ../../$@ .

package: build man completions $(RELEASE_TOOL) ## .deb and .rpm (amd64, arm64) in bin/release
	rm -f $(RELEASE_DIR)/*.deb $(RELEASE_DIR)/*.rpm
	$(RELEASE_TOOL) package $(RELEASE_ARGS)

image: build $(RELEASE_TOOL) ## the OCI image in bin/release
	rm -rf $(RELEASE_DIR)/oci $(RELEASE_DIR)/*-oci.tar
	$(RELEASE_TOOL) image $(RELEASE_ARGS)

release: package image ## packages and image

##@ CI
test-release: release $(TESTTIMES) ## check the packages and the image on the host (dpkg-deb, rpm, skopeo, lintian)
	cd tools/release && RELEASE_DIR=$(abspath $(RELEASE_DIR)) RELEASE_VERSION='$(VERSION)' RELEASE_COMMIT='$(COMMIT)' \
		$(TT) $(GO) test -json -count=1 ./...

# The Kubernetes manifests, built by kustomize as kubectl apply -k builds them and decoded
# strictly against Kubernetes' and the Prometheus Operator's Go types (tools/deploycheck, a
# module of its own: those types stay out of gorping's go.mod); the Operator's PodMonitor and
# PrometheusRule are generated from deploy/prometheus/gorping-rules.yml (make deploy-update
# after a change there; the test fails until then). The Prometheus files themselves are
# checked by promtool in make unit (deploy/deploy_test.go).
.PHONY: test-deploy deploy-update
##@ CI
test-deploy: $(TESTTIMES) ## the Kubernetes manifests as kustomize builds them, decoded strictly against the API types
	cd tools/deploycheck && $(TT) $(GO) test -json -count=1 ./...
##@ Release and install
deploy-update: ## regenerate the PodMonitor and PrometheusRule from deploy/prometheus
	cd tools/deploycheck && $(GO) run . -root ../..

# The Grafana dashboard deploy/grafana/gorping-mesh.json is generated by tools/dashboard
# (the Grafana Foundation SDK, a module of its own: it stays out of gorping's go.mod).
# make dashboard rewrites it; dashboard-check fails if the committed one is not current.
.PHONY: dashboard dashboard-check
dashboard: ## regenerate deploy/grafana/gorping-mesh.json (tools/dashboard)
	cd tools/dashboard && $(GO) run . -out ../../deploy/grafana/gorping-mesh.json
##@ CI
dashboard-check: $(TESTTIMES) ## fail if the committed dashboard is not what tools/dashboard writes
	cd tools/dashboard && $(TT) $(GO) test -json -count=1 ./...

# The fault-injection campaign (test/campaign, a module of its own: prometheus/prometheus
# stays out of gorping's go.mod): a simulated fabric, the real agent per host, the shipped
# rules in Prometheus' rule engine, on testing/synctest's virtual clock (docs/mesh.md,
# "Detection quality"). make campaign is the small one; make detect a larger one (its
# default is what fits this 2-core, 24 GB machine: 1,000 hosts x 8 rails does not, see
# the doc), its table on stdout and last the overall line. DETECT_ARGS sets the
# -campaign.* flags (-campaign.seed N replays a run; -campaign.kinds picks kinds).
CAMPAIGN_ARGS ?= -campaign.hosts 20 -campaign.group 5 -campaign.rails 2 -campaign.max-peers 8
DETECT_ARGS   ?= -campaign.hosts 100 -campaign.group 20 -campaign.rails 2 -campaign.max-peers 16 -campaign.pairs
# The small campaign guards the kinds the shipped rules detect (docs/mesh.md "Detection
# quality"): every kind but the slow link, whose +50 µs does not move a group pair's median.
CAMPAIGN_SKIP ?= slow link +50 µs
.PHONY: campaign detect campaign-check
##@ CI
campaign-check: $(TESTTIMES) ## the small fault campaign over the kinds the rules detect, its fabric model and its judge: fails when a figure falls under its goal
	cd test/campaign && $(TT) $(GO) test -json -count=1 -timeout 20m ./... -args $(CAMPAIGN_ARGS) -campaign.skip '$(CAMPAIGN_SKIP)'
campaign: ## the small fault campaign: fails when a figure falls under its goal
	cd test/campaign && $(GO) test -count=1 -timeout 30m -run '^TestCampaign$$' . -args $(CAMPAIGN_ARGS)
##@ Everyday
detect: ## the fault campaign at fleet size: its table, size and time, and the overall figures
	@out="$$(mktemp)"; cd test/campaign && $(GO) test -count=1 -timeout 0 -run '^TestCampaign$$' . -args \
		-campaign.out "$$out" $(DETECT_ARGS) >/dev/null; st=$$?; cat "$$out"; rm -f "$$out"; exit $$st

# One mesh agent in a child process over a fake connection at the dial seam (mesh.NewIn),
# 256 to 8,192 paths, scraped every 15 s: its CPU per probe, RSS, heap, ... (docs/mesh.md,
# "The agent's own cost at native speed"). Figures, not a test: no pass or fail on speed.
# BENCH_AGENT_ARGS: benchagent's flags (-sizes, -window, -cpuprofile FILE, ...).
BENCH_AGENT_ARGS ?=
.PHONY: bench-agent
##@ Demo and figures
bench-agent: ## the mesh agent's own CPU, RSS and allocations per probe at native speed, 256 to 8,192 paths (docs/mesh.md)
	@$(GO) build -o bin/benchagent ./test/cmd/benchagent && bin/benchagent $(BENCH_AGENT_ARGS)

FORCE:

##@ Everyday
help: ## this list
	@awk 'BEGIN {FS = ":[^#]*## "} \
		/^##@ / {g = substr($$0, 5); if (!(g in seen)) {seen[g] = 1; order[++n] = g}; next} \
		/^[a-zA-Z0-9_.-]+:.*## / && !/^[^:]*:=/ {list[g] = list[g] sprintf("  %-16s %s\n", $$1, $$2)} \
		END {for (i = 1; i <= n; i++) printf "%s%s\n%s", (i > 1 ? "\n" : ""), order[i], list[order[i]]}' $(MAKEFILE_LIST)

-include test/vm/Makefile.fragment.mk

# The run docs/one-ping.md is made from: a gorping server and client, both with --trace,
# in one guest (test/vm/trace.sh).
.PHONY: trace-doc
##@ Guests (QEMU)
trace-doc: $(GUESTRUN) ## gorping server and client with --trace in one guest: the run docs/one-ping.md is made from
	@$(GUESTRUN) -suite $(SUITE) -arch $(ARCH) -script test/vm/trace.sh $(GUEST_FLAGS); $(guest_skip_ok)

# The runs docs/learn.md quotes, in one guest: devices -v, a --trace pair with the kernel's
# function tracer on rxe_mmap and ib_uverbs_comp_handler, and 1-8 busy-polling clients at
# once (test/vm/learn.sh).
.PHONY: learn-doc
##@ Guests (QEMU)
learn-doc: $(GUESTRUN) ## the runs docs/learn.md quotes: devices -v, a traced pair with kernel stacks, 1-8 pollers
	@$(GUESTRUN) -suite $(SUITE) -arch $(ARCH) -script test/vm/learn.sh $(GUEST_FLAGS); $(guest_skip_ok)

# The .deb installed with dpkg on a bare Debian guest (SUITE/ARCH) and removed again, and
# the image's binary run there; both as clients of stock rping (tools/release/guest.sh).
# make test runs the same script in the guest matrix's boot of SUITE/ARCH, after its tests
# (guest-matrix-release), rather than booting that guest a second time.
GUEST_RELEASE_DIR := $(RELEASE_DIR)/guest
GUEST_RELEASE_ADD  = -add "$$deb:/release/gorping.deb" \
	-add $(GUEST_RELEASE_DIR)/image-rootfs-$(ARCH).tar:/release/image-rootfs.tar \
	-add $(GUEST_RELEASE_DIR)/expect.env:/release/expect.env
# The image's file system for ARCH and what the artifacts must say; sets $$deb.
guest_release_files = mkdir -p $(GUEST_RELEASE_DIR) && { deb=$$(ls $(RELEASE_DIR)/gorping_*_$(ARCH).deb) || \
	{ echo "no $(ARCH) .deb in $(RELEASE_DIR): make release builds it"; false; }; } && \
	{ $(RELEASE_TOOL) unpack -layout $(RELEASE_DIR)/oci -arch $(ARCH) -out $(GUEST_RELEASE_DIR) && \
	  echo "EXPECT_VERSION='$(VERSION)'" && echo "EXPECT_COMMIT='$(COMMIT)'" && \
	  echo "EXPECT_DEB_VERSION='$$(dpkg-deb -f $$deb Version)'"; } > $(GUEST_RELEASE_DIR)/expect.env
guest-release: release $(GUESTRUN) $(TESTTIMES) ## the .deb and the image's binary in a bare guest, against stock rping
	@$(guest_release_files) && \
	$(TT) $(GUESTRUN) -suite $(SUITE) -arch $(ARCH) $(GUEST_RELEASE_ADD) \
		-script tools/release/guest.sh $(GUEST_FLAGS); $(guest_skip_ok)

.PHONY: guest-matrix-release
##@ CI
# make test has built the artifacts in test-release just before (GUEST_RELEASE_BUILD=, no
# second build); alone it builds them. A stale .deb fails guest.sh's version check.
GUEST_RELEASE_BUILD ?= release
guest-matrix-release: $(GUEST_RELEASE_BUILD) $(GUESTRUN) $(TESTTIMES) ## the guest matrix, and guest-release's checks in its SUITE/ARCH guest after the tests (one boot less)
	@$(guest_release_files) && \
	$(TT) $(GUESTRUN) -matrix -pkgs '$(MATRIX_PKGS)' -timeout $(MATRIX_TIMEOUT) $(if $(RUN),-run '$(RUN)') $(if $(MATRIX_SKIP),-skip '$(MATRIX_SKIP)') \
		$(GUEST_RELEASE_ADD) -after-script tools/release/guest.sh -after-on $(SUITE)/$(ARCH) $(GUEST_FLAGS); $(guest_skip_ok)
