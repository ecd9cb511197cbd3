# gorping: build, test and demo.
#
#   make            static binaries for amd64 and arm64 in bin/
#   make test       everything: gofmt/vet, unit tests with -race, the ABI layout
#                   check, the release artifacts, the Soft-RoCE guest tier on the
#                   whole matrix and on a 16 KiB-page arm64 kernel, and the
#                   multi-host tier
#   make install    [PREFIX=/usr/local] [DESTDIR=]: binary, gorping(1), completions
#   make release    bin/release: .deb and .rpm (amd64, arm64) and the OCI image
#   make demo       two Soft-RoCE guests (h1, h2): gorping -s on one, -c on the other,
#                   --stats, a delay, a partition
#   make fabric     the multi-host tier alone (FABRIC_TARGETS, RUN=regex)
#   make trace-doc  the same with --trace: the run docs/one-ping.md is made from
#   make guest SUITE=bookworm ARCH=amd64 [PKGS=./test/guest] [RUN=regex]
#                   one guest, while iterating

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
LDFLAGS := -s -w -X main.buildVersion=$(VERSION) -X main.buildCommit=$(COMMIT)
ARCHES  := amd64 arm64
HOSTARCH := $(shell $(GO) env GOARCH)

.PHONY: all build test host-deps lint unit unit-arm64 abicheck clean
all: build

build: $(ARCHES:%=bin/gorping-linux-%)

# CGO_ENABLED=0: the product is one static binary with no C behind it.
bin/gorping-linux-%: FORCE
	CGO_ENABLED=0 GOOS=linux GOARCH=$* $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $@ .

test: host-deps lint unit unit-arm64 abicheck test-release guest-matrix guest-16k guest-release fabric

# The side-by-side CLI test compares gorping with Debian's rping on this RDMA-less
# host; the oracle tests (test/oracle, with the mlx5 and vendor drivers' parts) build a C
# harness with gcc against Debian's libibverbs-dev and run its libmlx5, libbnxt_re,
# libirdma and libhns (ibverbs-providers); the completion tests
# run bash, zsh and fish, the release tests dpkg-deb, rpm, skopeo and lintian. Installed only as
# root on Debian (like qemu for the guest tier). Under CI=true a missing oracle fails
# the tests. prometheus gives the mesh tests a real Prometheus server and promtool
# (test/promtest: a loud skip without it, a failure under CI=true).
HOST_PKGS := rdmacm-utils libibverbs-dev ibverbs-providers gcc qemu-user \
	bash zsh fish rpm rpm2cpio cpio skopeo lintian prometheus
host-deps:
	@missing=""; for p in $(HOST_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing$$missing (stock rping, mlx5 oracle, prometheus)"; \
		(apt-get install -y --no-install-recommends $$missing >/dev/null 2>&1 || \
		 (apt-get update >/dev/null && apt-get install -y --no-install-recommends $$missing >/dev/null)) || \
		echo "*** could not install$$missing: TestSameAsRping / the mlx5 oracle / the Prometheus tests will not run ***"; \
	elif [ -n "$$missing" ]; then echo "*** missing$$missing: run make host-deps as root ***"; fi

# -tags mmiorecord: internal/mmio reports every barrier and doorbell store to the mlx5
# oracle (which compares the sequence with libmlx5's) and to the ConnectX model (which
# rings only on a UAR store); product builds have no recorder.
TEST_TAGS := -tags mmiorecord
lint:
	@unformatted="$$(gofmt -l .)"; if [ -n "$$unformatted" ]; then \
		echo "gofmt: these files need formatting:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags guest ./...
	$(GO) vet -tags abicheck ./...
	$(GO) vet -tags fabric ./...
	$(GO) vet $(TEST_TAGS) ./...
	CGO_ENABLED=0 GOARCH=arm64 $(GO) build -o /dev/null .
	cd tools/release && $(GO) vet ./...

unit:
	$(GO) test -race -count=1 $(TEST_TAGS) ./...

# The host tests of the packages with per-architecture code (barriers, MMIO, the mlx5
# provider with its model and oracle tests, the device models, rping's glue and ping
# loops over the mlx5 model) again as
# arm64 binaries under qemu-user
# (no -race: it needs cgo there). A missing qemu-aarch64 is a loud skip, a failure
# under CI=true.
ARM64_PKGS := ./internal/... ./uverbs/... ./test/mlx5model ./test/rxemodel ./test/bnxtremodel ./test/irdmamodel ./test/hnsmodel
unit-arm64:
	@if ! command -v qemu-aarch64 >/dev/null; then \
		if [ "$$CI" = true ]; then echo "qemu-aarch64 missing (make host-deps)"; exit 1; fi; \
		echo "*** SKIPPING arm64 host tests: qemu-aarch64 missing (make host-deps as root) ***"; exit 0; fi; \
	CGO_ENABLED=0 GOARCH=arm64 $(GO) test -count=1 $(TEST_TAGS) -exec qemu-aarch64 $(ARM64_PKGS)
	CGO_ENABLED=0 GOARCH=arm64 $(GO) test -count=1 $(TEST_TAGS) -exec qemu-aarch64 -run 'MLX5|Rxe|BnxtRe|Irdma|Hns' ./rping

# Compares every Go ABI mirror with the C uapi headers (gcc, test-only), after checking
# that the generated mirrors are what the headers give (generate-check).
abicheck: generate-check
	$(GO) test -count=1 -tags abicheck -run 'ABI|Layout' ./...

# The ABI mirrors (abi_gen.go next to each abi.spec) are generated from the uapi headers by
# internal/cmd/abigen (gcc -g, the layout read from DWARF; development tooling, never in
# the product). make generate rewrites them; generate-check fails if one is not current.
ABI_SPECS := $(sort $(wildcard */abi.spec */*/abi.spec */*/*/abi.spec))
.PHONY: generate generate-check
generate:
	$(GO) build -o bin/abigen ./internal/cmd/abigen
	@for s in $(ABI_SPECS); do echo "abigen $$s"; bin/abigen -spec $$s || exit 1; done
generate-check:
	$(GO) build -o bin/abigen ./internal/cmd/abigen
	@for s in $(ABI_SPECS); do bin/abigen -check $$s || exit 1; done

clean:
	rm -rf bin

# gorping(1), from docs/gorping.1.md (go-md2man), and the completion scripts, printed by
# the host's own binary.
.PHONY: man completions install uninstall package image release test-release guest-release
man: bin/gorping.1
bin/gorping.1: FORCE
	@mkdir -p bin
	$(GO) run ./internal/mangen -version '$(VERSION)' -in docs/gorping.1.md -out $@

completions: bin/gorping-linux-$(HOSTARCH)
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

install: bin/gorping-linux-$(HOSTARCH) man completions
	install -D -m 0755 bin/gorping-linux-$(HOSTARCH) $(DESTDIR)$(BINDIR)/gorping
	install -D -m 0644 bin/gorping.1 $(DESTDIR)$(MANDIR)/man1/gorping.1
	install -D -m 0644 bin/completion/gorping.bash $(DESTDIR)$(BASHCOMPDIR)/gorping
	install -D -m 0644 bin/completion/_gorping $(DESTDIR)$(ZSHCOMPDIR)/_gorping
	install -D -m 0644 bin/completion/gorping.fish $(DESTDIR)$(FISHCOMPDIR)/gorping.fish

uninstall:
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

package: build man completions $(RELEASE_TOOL)
	rm -f $(RELEASE_DIR)/*.deb $(RELEASE_DIR)/*.rpm
	$(RELEASE_TOOL) package $(RELEASE_ARGS)

image: build $(RELEASE_TOOL)
	rm -rf $(RELEASE_DIR)/oci $(RELEASE_DIR)/*-oci.tar
	$(RELEASE_TOOL) image $(RELEASE_ARGS)

release: package image

test-release: release
	cd tools/release && RELEASE_DIR=$(abspath $(RELEASE_DIR)) RELEASE_VERSION='$(VERSION)' RELEASE_COMMIT='$(COMMIT)' \
		$(GO) test -count=1 ./...

FORCE:

-include test/vm/Makefile.fragment.mk

# The run docs/one-ping.md is made from: a gorping server and client, both with --trace,
# in one guest (test/vm/trace.sh).
.PHONY: trace-doc
trace-doc: $(GUESTRUN)
	@$(GUESTRUN) -suite $(SUITE) -arch $(ARCH) -script test/vm/trace.sh $(GUEST_FLAGS); $(guest_skip_ok)

# The .deb installed with dpkg on a bare Debian guest (SUITE/ARCH) and removed again, and
# the image's binary run there; both as clients of stock rping (tools/release/guest.sh).
GUEST_RELEASE_DIR := $(RELEASE_DIR)/guest
guest-release: release $(GUESTRUN)
	@mkdir -p $(GUEST_RELEASE_DIR)
	@deb=$$(ls $(RELEASE_DIR)/gorping_*_$(ARCH).deb) && \
	{ $(RELEASE_TOOL) unpack -layout $(RELEASE_DIR)/oci -arch $(ARCH) -out $(GUEST_RELEASE_DIR) && \
	  echo "EXPECT_VERSION='$(VERSION)'" && echo "EXPECT_COMMIT='$(COMMIT)'" && \
	  echo "EXPECT_DEB_VERSION='$$(dpkg-deb -f $$deb Version)'"; } > $(GUEST_RELEASE_DIR)/expect.env && \
	$(GUESTRUN) -suite $(SUITE) -arch $(ARCH) -add "$$deb:/release/gorping.deb" \
		-add $(GUEST_RELEASE_DIR)/image-rootfs-$(ARCH).tar:/release/image-rootfs.tar \
		-add $(GUEST_RELEASE_DIR)/expect.env:/release/expect.env \
		-script tools/release/guest.sh $(GUEST_FLAGS); $(guest_skip_ok)
