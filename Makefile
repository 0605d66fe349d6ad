# Build, test and tooling entry points. `make help` lists the targets.
#
# Environment: CI=true turns a missing test dependency into a failure (see
# internal/testenv); FAAS_PG_BIN and FAAS_MINIO_BIN point tests at binaries
# installed elsewhere.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO ?= go

# Pinned MinIO server for integration tests; internal/testenv pins the same
# version (a test keeps them in step). The first build takes about 4 minutes.
MINIO_MODULE := github.com/minio/minio@v0.0.0-20260212201848-7aac2a2c5b7c
GOBIN_DIR    := $(firstword $(subst :, ,$(shell $(GO) env GOPATH)))/bin
MINIO_BIN    := $(GOBIN_DIR)/minio

# Pinned cosign for the signing interop tests (hdk/sign); the first build
# takes a few minutes.
COSIGN_MODULE := github.com/sigstore/cosign/v2/cmd/cosign@v2.6.5
COSIGN_BIN    := $(GOBIN_DIR)/cosign

# OCI clients for the registry interop tests (services/registry/server). crane
# follows go-containerregistry's version in go.mod; oras must be built from a
# module that requires it, because the proxy refuses its version list.
CRANE_MODULE := github.com/google/go-containerregistry/cmd/crane@$(shell $(GO) list -m -f '{{.Version}}' github.com/google/go-containerregistry)
CRANE_BIN    := $(GOBIN_DIR)/crane
ORAS_VERSION := v1.3.3
ORAS_BIN     := $(GOBIN_DIR)/oras

# grpcurl drives the model server's gRPC API in its tests
# (services/modelserver), with the vendored .proto.
GRPCURL_MODULE := github.com/fullstorydev/grpcurl/cmd/grpcurl@v1.9.4
GRPCURL_BIN    := $(GOBIN_DIR)/grpcurl

# PostgreSQL 15 server binaries (Debian package postgresql-15).
PG_BIN   ?= $(or $(FAAS_PG_BIN),/usr/lib/postgresql/15/bin)
PG_DEBPKG := postgresql-15

# The test data from outside the project (ONNX backend tests and models;
# testdata/README.md): the repository's own, or FAAS_TESTDATA's folder, as
# internal/testenv.TestData finds it.
TESTDATA ?= $(or $(FAAS_TESTDATA),testdata)

TEST_TIMEOUT ?= 60m
BENCHTIME    ?= 1s
FUZZTIME     ?= 10s

.PHONY: help tools test soak onnx-node-tests lint bench fuzz-smoke demo images portal-shots k8s-e2e

help:
	@echo 'make demo        bring up the whole platform (PostgreSQL, registry, faasd --sim 2), publish, load and classify MNIST, serve it with the model server; DEMO_NO_WAIT=1 exits when done'
	@echo 'make test        install test dependencies (tools), go vet, go test -race'
	@echo 'make soak        the accelerator pool chaos soak for SOAK_TIME ($(SOAK_TIME)); SOAK_SEED replays a run (make test runs it for 60 s)'
	@echo 'make tools       install the pinned MinIO server, cosign, crane, oras and grpcurl; PostgreSQL 15, Chromium (portal browser tests) and a C compiler (for -race) via apt when root'
	@echo 'make portal-shots  screenshots of every portal page of the browser tests into $(PORTAL_SHOTS)'
	@echo 'make lint        gofmt check, go vet and the function-length figures (internal/layout)'
	@echo 'make bench       benchmarks (see BENCHMARKS.md)'
	@echo 'make images      generate and build the reference images into build/images (SMALL=1: small bitstreams)'
	@echo 'make fuzz-smoke  run every fuzz target for FUZZTIME ($(FUZZTIME))'
	@echo 'make k8s-e2e     the device plugin on a real Kubernetes cluster (etcd, apiserver, scheduler, controller manager, kubelet) in its own namespaces; root; not part of make test'

# tools installs what the tests need. The MinIO server is built with
# `go install` only when $(MINIO_BIN) is absent. PostgreSQL 15, a C compiler
# (for -race), curl (a client of the model server's tests) and chromium come
# from Debian packages, installed only when missing and only when running as
# root; otherwise a note says what is missing.
tools: $(MINIO_BIN) $(COSIGN_BIN) $(CRANE_BIN) $(ORAS_BIN) $(GRPCURL_BIN)
	@pkgs=""; \
	if [ -x "$(PG_BIN)/initdb" ] && [ -x "$(PG_BIN)/pg_ctl" ] && [ -x "$(PG_BIN)/postgres" ]; then :; \
	elif [ -n "$(FAAS_PG_BIN)" ]; then echo "tools: FAAS_PG_BIN=$(FAAS_PG_BIN) lacks initdb, pg_ctl or postgres" >&2; exit 1; \
	else pkgs="$$pkgs $(PG_DEBPKG)"; fi; \
	if ! command -v "$$($(GO) env CC)" >/dev/null 2>&1; then pkgs="$$pkgs gcc libc6-dev"; fi; \
	if ! command -v curl >/dev/null 2>&1; then pkgs="$$pkgs curl"; fi; \
	if [ -z "$(FAAS_CHROMIUM)" ] && ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then pkgs="$$pkgs chromium"; fi; \
	if [ -z "$$pkgs" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "tools: installing$$pkgs"; \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends --no-upgrade $$pkgs; \
	else \
		echo "tools: missing Debian packages:$$pkgs (install them as root: apt-get install -y$$pkgs)" >&2; \
	fi

$(MINIO_BIN):
	GOBIN="$(GOBIN_DIR)" $(GO) install $(MINIO_MODULE)

$(COSIGN_BIN):
	GOBIN="$(GOBIN_DIR)" $(GO) install $(COSIGN_MODULE)

$(CRANE_BIN):
	GOBIN="$(GOBIN_DIR)" $(GO) install $(CRANE_MODULE)

$(GRPCURL_BIN):
	GOBIN="$(GOBIN_DIR)" $(GO) install $(GRPCURL_MODULE)

$(ORAS_BIN):
	d=$$(mktemp -d) && cd $$d && $(GO) mod init orasbuild >/dev/null 2>&1 && \
		$(GO) get oras.land/oras/cmd/oras@$(ORAS_VERSION) && GOBIN="$(GOBIN_DIR)" $(GO) install oras.land/oras/cmd/oras && \
		rm -rf $$d

# test runs with -race when cgo works (it needs a C compiler, which tools
# installs when root); otherwise it says so and runs without. The
# whole-network simulations (TestNet…, see testenv.FullNetwork: the
# transformer and CNN nets, PP-OCR's models and examples/ocr) skip under
# -race and run in a second pass without it.
test: tools
	$(GO) vet ./...
	@race=-race; \
	if [ "$$($(GO) env CGO_ENABLED)" != 1 ]; then race=; echo "test: cgo is off (no C compiler?): running without -race"; fi; \
	set -x; \
	$(if $(CI),CI=$(CI)) $(GO) test $$race -count=1 -timeout $(TEST_TIMEOUT) ./... && \
	if [ -n "$$race" ]; then $(if $(CI),CI=$(CI)) $(GO) test -count=1 -timeout $(TEST_TIMEOUT) -run '^TestNet' ./sdk/alidnn/... ./examples/...; fi
	@$(MAKE) --no-print-directory onnx-node-tests

# soak runs the accelerator pool's chaos soak (internal/e2e TestSoak) for
# SOAK_TIME: tenants attach, use, share, detach and vanish while faasd, a
# registry replica and PostgreSQL are killed or restarted at random, then
# every invariant is checked and the counts printed. make test runs it for
# its default 60 s; SOAK_SEED replays a run's choices (the seed is printed).
SOAK_TIME ?= 10m
soak: tools
	FAAS_SOAK=$(SOAK_TIME) $(if $(SOAK_SEED),FAAS_SOAK_SEED=$(SOAK_SEED)) $(GO) test -count=1 -v -timeout 60m -run '^TestSoak$$' ./internal/e2e/

# onnx-node-tests runs every ONNX backend node test of the test data, and
# the project's own generated cases (sdk/alidnn/onnxtest/testdata/generated),
# through the tenant CLI, as scripts would (`faas model test`): every one
# must pass.
onnx-node-tests:
	$(GO) run ./sdk/cmd/faas model test sdk/alidnn/onnxtest/testdata/generated/*/
	@if [ -z "$(TESTDATA)" ] || [ ! -d "$(TESTDATA)/onnx/node" ]; then \
		msg="onnx-node-tests: $(TESTDATA)/onnx/node not found (FAAS_TESTDATA names another test data folder)"; \
		if [ "$(CI)" = true ]; then echo "$$msg" >&2; exit 1; fi; echo "$$msg; skipped"; exit 0; \
	fi; \
	set -x; $(GO) run ./sdk/cmd/faas model test $(TESTDATA)/onnx/node/*/

lint:
	@unformatted="$$(gofmt -l $$(find . -name '*.go' -not -path './.git/*'))"; \
	if [ -n "$$unformatted" ]; then echo "gofmt needed on:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) test -count=1 -v -run '^TestFunctionLength$$' ./internal/layout/ | grep -v '^=== RUN'

# images writes the reference images' sources with simulated bitstreams (38 MiB
# per chip; SMALL=1 for 1 MiB) and builds each into an OCI image layout under
# $(IMAGES_DIR)/<image>/layout.
IMAGES_DIR ?= build/images
images:
	$(GO) run ./bitstreams/images/cmd/genbits -o $(IMAGES_DIR) $(if $(SMALL),-small)
	$(GO) build -o $(IMAGES_DIR)/hdk ./hdk/cmd/hdk
	@for f in $(IMAGES_DIR)/*/image.yaml; do \
		d=$$(dirname $$f); set -x; \
		$(IMAGES_DIR)/hdk build -f $$f -o $$d/layout; \
		{ set +x; } 2>/dev/null; \
	done

# bench runs every Go benchmark BENCH_COUNT times and writes BENCHMARKS.md with
# medians and same-run baselines (internal/cmd/bench), and BENCHMARKS.json with
# the figures, which a later run of some packages updates for those packages.
BENCH_COUNT ?= 5
bench:
	$(GO) run ./internal/cmd/bench -count $(BENCH_COUNT) -benchtime $(BENCHTIME)

# portal-shots runs the portal's browser journeys (chromedp driving
# Chromium) and keeps a screenshot of every page they visit in
# $(PORTAL_SHOTS), for reviewers.
PORTAL_SHOTS ?= build/portal-shots
portal-shots: tools
	FAAS_PORTAL_SHOTS="$(abspath $(PORTAL_SHOTS))" $(GO) test -count=1 -run 'TestBrowser' ./services/registry/portal/
	@ls -1 $(PORTAL_SHOTS)

# fuzz-smoke runs each fuzz target for FUZZTIME (go test -fuzz takes one
# target of one package at a time).
fuzz-smoke:
	@n=0; \
	for dir in $$($(GO) list -f '{{.Dir}}' ./...); do \
		for f in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go 2>/dev/null | sed 's/^func //'); do \
			n=$$((n+1)); set -x; \
			$(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) "$$dir"; \
			{ set +x; } 2>/dev/null; \
		done; \
	done; \
	echo "fuzz-smoke: $$n fuzz targets"

# demo brings the whole platform up on this machine as processes — a throwaway
# PostgreSQL 15 cluster, the registry (directory blob store), faasd on two
# simulated dual-chip boards — then has the ISV acme publish the reference
# images, the tenant alice subscribe and `faas load` the AliDNN image, and
# examples/mnist classify the MNIST reference digits on it through the SDK
# (internal/demo), and the model server serve MNIST on the same accelerator,
# curl classifying a digit through it, and examples/ocr read a page it
# renders on an accelerator attached from the pool. The services stay up until Ctrl-C; DEMO_NO_WAIT=1 stops
# them and exits once the walk-through is done. Needs the PostgreSQL server
# binaries (`make tools` installs them as root); the MNIST and PP-OCR models
# come from $(TESTDATA).
DEMO_BIN ?= build/demo/bin
DEMO_PKGS := ./services/cmd/registry ./services/cmd/faasd ./hdk/cmd/hdk ./sdk/cmd/faas \
	./bitstreams/images/cmd/genbits ./internal/cmd/demo ./examples/mnist ./services/cmd/modelserver ./examples/ocr
demo:
	@if [ -z "$(FAAS_PG_BIN)" ] && [ ! -x "$(PG_BIN)/initdb" ] && ! command -v initdb >/dev/null 2>&1 && \
		[ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "demo: installing $(PG_DEBPKG)"; \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends --no-upgrade $(PG_DEBPKG); \
	fi
	@mkdir -p $(DEMO_BIN)
	$(GO) build -o $(DEMO_BIN)/ $(DEMO_PKGS)
	$(if $(DEMO_NO_WAIT),DEMO_NO_WAIT=$(DEMO_NO_WAIT)) $(DEMO_BIN)/demo -bin $(DEMO_BIN) -testdata $(TESTDATA)

# k8s-e2e runs the device plugin's tests on a real Kubernetes cluster
# (internal/k8se2e): etcd and the Kubernetes components are built from the
# versions pinned in internal/k8se2e/components/go.mod, a module of its own,
# once per version into build/k8s-e2e; everything runs as root in a network
# and a mount namespace of its own. Not part of `make test` (build tag
# k8se2e). K8S_E2E_RUN selects tests (-test.run).
k8s-e2e:
	GO=$(GO) internal/k8se2e/k8s-e2e.sh
