# gorping: build, test and demo.
#
#   make            static binaries for amd64 and arm64 in bin/
#   make test       everything: gofmt/vet, unit tests with -race, the ABI layout
#                   check, the Soft-RoCE guest tier on the whole matrix and on a
#                   16 KiB-page arm64 kernel
#   make demo       boot a Soft-RoCE guest and run a gorping server and client in it
#   make trace-doc  the same with --trace: the run docs/one-ping.md is made from
#   make guest SUITE=bookworm ARCH=amd64 [PKGS=./test/guest] [RUN=regex]
#                   one guest, while iterating

GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.buildVersion=$(VERSION)
ARCHES  := amd64 arm64

.PHONY: all build test host-deps lint unit unit-arm64 abicheck clean
all: build

build: $(ARCHES:%=bin/gorping-linux-%)

# CGO_ENABLED=0: the product is one static binary with no C behind it.
bin/gorping-linux-%: FORCE
	CGO_ENABLED=0 GOOS=linux GOARCH=$* $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $@ .

test: host-deps lint unit unit-arm64 abicheck guest-matrix guest-16k

# The side-by-side CLI test compares gorping with Debian's rping on this RDMA-less
# host; the mlx5 oracle tests (test/mlx5oracle) build a C harness with gcc against
# Debian's libibverbs-dev and run its libmlx5 (ibverbs-providers). Installed only as
# root on Debian (like qemu for the guest tier). Under CI=true a missing oracle fails
# the tests.
HOST_PKGS := rdmacm-utils libibverbs-dev ibverbs-providers gcc qemu-user
host-deps:
	@missing=""; for p in $(HOST_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing$$missing (stock rping, mlx5 oracle)"; \
		(apt-get install -y --no-install-recommends $$missing >/dev/null 2>&1 || \
		 (apt-get update >/dev/null && apt-get install -y --no-install-recommends $$missing >/dev/null)) || \
		echo "*** could not install$$missing: TestSameAsRping / the mlx5 oracle tests will not run ***"; \
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
	$(GO) vet $(TEST_TAGS) ./...
	CGO_ENABLED=0 GOARCH=arm64 $(GO) build -o /dev/null .

unit:
	$(GO) test -race -count=1 $(TEST_TAGS) ./...

# The host tests of the packages with per-architecture code (barriers, MMIO, the mlx5
# provider with its model and oracle tests, rping's ping loop over the model) again as
# arm64 binaries under qemu-user
# (no -race: it needs cgo there). A missing qemu-aarch64 is a loud skip, a failure
# under CI=true.
ARM64_PKGS := ./internal/... ./uverbs/...
unit-arm64:
	@if ! command -v qemu-aarch64 >/dev/null; then \
		if [ "$$CI" = true ]; then echo "qemu-aarch64 missing (make host-deps)"; exit 1; fi; \
		echo "*** SKIPPING arm64 host tests: qemu-aarch64 missing (make host-deps as root) ***"; exit 0; fi; \
	CGO_ENABLED=0 GOARCH=arm64 $(GO) test -count=1 $(TEST_TAGS) -exec qemu-aarch64 $(ARM64_PKGS)
	CGO_ENABLED=0 GOARCH=arm64 $(GO) test -count=1 $(TEST_TAGS) -exec qemu-aarch64 -run 'MLX5' ./rping

# Compares every Go ABI mirror with the C uapi headers (gcc, test-only).
abicheck:
	$(GO) test -count=1 -tags abicheck -run 'ABI|Layout' ./...

clean:
	rm -rf bin

FORCE:

-include test/vm/Makefile.fragment.mk

# The run docs/one-ping.md is made from: a gorping server and client, both with --trace,
# in one guest (test/vm/trace.sh).
.PHONY: trace-doc
trace-doc: $(GUESTRUN)
	@$(GUESTRUN) -suite $(SUITE) -arch $(ARCH) -script test/vm/trace.sh $(GUEST_FLAGS); $(guest_skip_ok)
