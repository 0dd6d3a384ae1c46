# acpgate build. Every tool is pinned in tools/go.mod and run with `go tool`,
# so nothing beyond Go itself has to be installed by hand.

GO       ?= go
TOOL     := $(GO) tool -modfile=tools/go.mod
# The benchmark harness is a module of its own (bench/go.mod), so that the
# product module's dependencies and tests are the product's; lint and
# go-test cover it too, from its directory.
BENCH    := $(GO) -C bench
# The workflow-engine recipes (docs/workflows.md) are modules of their own
# too, so that DBOS's and Temporal's SDKs stay out of the product's module.
WORKFLOWS := examples/workflows/dbos examples/workflows/temporal
# deploy/ is a module of its own too: its tests need Helm and the
# Kubernetes API types, which the product must not depend on.
DEPLOY   := $(GO) -C deploy
# A count, not a duration: with a duration, Go 1.26's fuzzing coordinator can
# report "context deadline exceeded" as a failure when the time runs out
# while a worker is busy (go.dev/issue/75804, fixed in Go 1.27), which a
# loaded CI machine hits now and then. A count has no deadline to race.
FUZZTIME ?= 100000x

.PHONY: all deps generate generate-python lint test test-go go-test fuzz interop interop-real smoke examples workflows conformance check-generated breaking build bench bench-smoke check-deploy image image-agents image-smoke release

all: lint test

## generate: regenerate gen/ from proto/ with buf and local plugins.
generate:
	$(TOOL) buf generate
	@$(MAKE) --no-print-directory generate-python 2>/dev/null || echo "(Python stubs not regenerated: run make deps for Debian's protoc)"

## lint: no tracked build outputs, doc links resolve, buf lint, gofmt, go vet, staticcheck (the product, the bench and deploy modules and the workflow recipes).
lint:
	bash scripts/check-tracked.sh
	python3 scripts/check-doc-links.py
	$(TOOL) buf lint
	@unformatted="$$(gofmt -l $$(git ls-files '*.go' | grep -v '^gen/'))"; \
	if [ -n "$$unformatted" ]; then echo "gofmt needed on:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(BENCH) vet ./...
	$(TOOL) staticcheck ./...
	$(BENCH) tool -modfile=../tools/go.mod staticcheck ./...
	@for m in $(WORKFLOWS); do \
		$(GO) -C $$m vet ./... && $(GO) -C $$m tool -modfile=$(CURDIR)/tools/go.mod staticcheck ./... || exit 1; \
	done
	$(DEPLOY) vet ./...
	$(DEPLOY) tool -modfile=../tools/go.mod staticcheck ./...

## deps: install what the suite needs beyond Go (pinned; only what is missing).
deps:
	bash scripts/install-deps.sh

## test: everything — Go tests under the race detector (with the TypeScript
## SDK interop test required), bounded fuzzing, the grpcurl smoke test
## against the real binary, the examples, the workflow-engine recipes, the
## cross-language conformance suite, and the Prometheus alerting rules.
test: deps build check-deploy go-test fuzz smoke examples workflows conformance

## check-deploy: the alerting rules parse (promtool check rules) and fire on
## the synthetic series of their unit tests (promtool test rules). promtool
## comes with Debian's prometheus package (make deps). Then deploy/'s tests:
## helm lint and helm template of the chart, every rendered and plain
## Kubernetes manifest decoded strictly into the k8s.io/api types, their
## configurations through acpgate serve --check, and the systemd unit
## through systemd-analyze verify.
check-deploy:
	promtool check rules deploy/prometheus/alerts.yaml
	promtool test rules deploy/prometheus/alerts_test.yaml
	$(DEPLOY) vet ./...
	ACPGATE_REQUIRE_SYSTEMD=1 $(DEPLOY) test -count=1 ./...

## test-go: the Go tests alone, needing nothing but Go: the tests that need
## PostgreSQL, Node.js or Debian's tools skip themselves (and say so) where
## those are missing. A quick check while working; make test is the whole.
test-go:
	$(GO) test -race -count=1 ./...

# PostgreSQL is required here (not skipped when missing): the postgres
# store's suite and end-to-end tests run against a real server (make deps).
go-test:
	ACPGATE_REQUIRE_INTEROP=1 ACPGATE_REQUIRE_POSTGRES=1 $(GO) test -race -count=1 ./...
	$(BENCH) test -race -count=1 ./...

## fuzz: run each fuzz target for FUZZTIME (executions, or a duration).
fuzz:
	$(GO) test ./outcome -run '^$$' -fuzz '^FuzzInterpretAlwaysYieldsExactlyOne$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/acp/jsonrpc -run '^$$' -fuzz '^FuzzDispatchNeverPanics$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/acp/translate -run '^$$' -fuzz '^FuzzTheChunkFastPathAgreesWithTheGeneralPath$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/acp/translate -run '^$$' -fuzz '^FuzzTheScannerAgreesWithEncodingJSON$$' -fuzztime $(FUZZTIME)

## interop-real: the real ACP agents (docs/agents.md), pinned in
## interop/agents and installed once, through the real binary against
## local stand-ins for their model APIs.
interop-real:
	bash scripts/install-agents.sh
	ACPGATE_REAL_AGENTS="$(CURDIR)/interop/agents/node_modules" $(BENCH) test -count=1 -timeout 15m ./realagents/

## smoke: grpcurl lists, describes, health-checks and prompts the real binary.
smoke:
	GRPCURL="$$($(GO) env GOPATH)/bin/grpcurl" bash scripts/grpcurl-smoke.sh

## examples: the Go, Python and Node examples against the real binary.
examples:
	bash scripts/examples-smoke.sh

## workflows: the DBOS and Temporal recipes, each its own module, against
## the real binary (the DBOS worker on PostgreSQL; both killed mid-turn).
workflows:
	@for m in $(WORKFLOWS); do \
		ACPGATE_REQUIRE_POSTGRES=1 $(GO) -C $$m test -race -count=1 ./... || exit 1; \
	done

## conformance: Go, Python and Node clients must see byte-identical terminals.
conformance:
	bash conformance/run.sh

## generate-python: regenerate clients/python/acpgate/v1 from proto/ (Debian's protoc).
generate-python:
	bash clients/python/generate.sh

## check-generated: fail when gen/ or the Python stubs do not match proto/.
check-generated: generate generate-python
	@git diff --exit-code -- gen/ clients/python/ || { echo "generated code is stale: run make generate generate-python and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- gen/ clients/python/)" || { echo "untracked generated files"; git status --porcelain -- gen/ clients/python/; exit 1; }

## breaking: buf breaking against the previous commit, once there is one.
breaking:
	@if git rev-parse -q --verify HEAD~1 >/dev/null; then \
		$(TOOL) buf breaking --against '.git#ref=HEAD~1'; \
	else echo "no previous commit: skipping buf breaking"; fi

build:
	$(GO) build ./...

## bench: the benchmark harness (about 25 minutes on 2 cores, with PostgreSQL for the cluster section); writes docs/benchmarks.md.
## Its throughput section also runs acpgate built at BENCH_BASELINE (the tree before durable turns), turn by turn beside this one;
## BENCH_BASELINE= (empty) leaves it out, as a checkout without that history must.
BENCH_BASELINE ?= a808356
bench:
	$(BENCH) run ./cmd/acpbench run -out ../docs/benchmarks.md $(if $(BENCH_BASELINE),-baseline $(BENCH_BASELINE))

## bench-smoke: every benchmark client and section on tiny shapes; fails on any lost chunk.
bench-smoke:
	$(BENCH) run ./cmd/acpbench run -smoke

# ---- packaging: container images and release binaries (docs/operations.md)

# What `acpgate version` prints, embedded at link time (cmd/acpgate/version.go).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -s -w -X main.buildVersion=$(VERSION) -X main.buildCommit=$(COMMIT)
# Static: the SQLite driver is pure Go (modernc.org/sqlite), so nothing needs cgo.
STATIC  := CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)'

# podman, else docker. CONTAINER_FLAGS are global flags before the verb
# (CI's VMs need --runtime runc --cgroup-manager=cgroupfs).
CONTAINER       ?= $(shell command -v podman >/dev/null 2>&1 && echo podman || echo docker)
CONTAINER_FLAGS ?=
IMAGE           ?= acpgate:dev
# Empty: the Containerfile's own base (distroless/static). CI passes an image
# made from Debian's archive, since it reaches no registry.
IMAGE_BASE      ?=
AGENTS_IMAGE    ?= acpgate-agents:dev
# Empty: Containerfile.agents' own Node base (node:20-bookworm-slim).
NODE_IMAGE      ?=
IMAGE_ARCH      ?= $(shell $(GO) env GOARCH)

## image: build the container image IMAGE (Containerfile) from a static binary.
image:
	rm -rf dist/image && mkdir -p dist/image/state
	GOOS=linux GOARCH=$(IMAGE_ARCH) $(STATIC) -o dist/image/acpgate ./cmd/acpgate
	GOOS=linux GOARCH=$(IMAGE_ARCH) $(STATIC) -o dist/image/acpgate-launcher ./cmd/acpgate-launcher
	cp deploy/container/acpgate.yaml dist/image/acpgate.yaml
	$(CONTAINER) $(CONTAINER_FLAGS) build -f Containerfile $(if $(IMAGE_BASE),--build-arg BASE=$(IMAGE_BASE)) -t $(IMAGE) dist/image

## image-agents: build AGENTS_IMAGE (Containerfile.agents: Node and Gemini CLI beside acpgate from IMAGE).
image-agents:
	mkdir -p dist/image-agents
	cp deploy/container/agents.yaml dist/image-agents/acpgate.yaml
	$(CONTAINER) $(CONTAINER_FLAGS) build -f Containerfile.agents --build-arg ACPGATE_IMAGE=$(IMAGE) $(if $(NODE_IMAGE),--build-arg NODE_IMAGE=$(NODE_IMAGE)) -t $(AGENTS_IMAGE) dist/image-agents

## image-smoke: build both images, run IMAGE unprivileged, prompt it, check health, drain on SIGTERM.
image-smoke:
	bash scripts/image-smoke.sh

# Linux only: agent containment (namespaces, prctl), the Landlock sandbox
# and the journal cache use Linux system calls, so darwin does not build.
RELEASE_PLATFORMS ?= linux/amd64 linux/arm64

## release: static binaries for RELEASE_PLATFORMS in dist/release (version and commit embedded), a CycloneDX SBOM of each
## (cyclonedx-gomod bin: the modules recorded in the binary itself), and SHA256SUMS.
release:
	rm -rf dist/release && mkdir -p dist/release
	@set -e; for p in $(RELEASE_PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; out=dist/release/acpgate-$(VERSION)-$$os-$$arch; \
		echo "building $$out"; \
		GOOS=$$os GOARCH=$$arch $(STATIC) -o $$out ./cmd/acpgate; \
		GOOS=$$os GOARCH=$$arch $(STATIC) -o dist/release/acpgate-launcher-$(VERSION)-$$os-$$arch ./cmd/acpgate-launcher; \
		$(TOOL) cyclonedx-gomod bin -json -version $(VERSION) -output $$out.sbom.cdx.json $$out; \
	done
	cd dist/release && sha256sum acpgate-* > SHA256SUMS
	@cat dist/release/SHA256SUMS
