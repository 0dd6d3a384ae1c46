# acpgate build. Every tool is pinned in tools/go.mod and run with `go tool`,
# so nothing beyond Go itself has to be installed by hand.

GO       ?= go
TOOL     := $(GO) tool -modfile=tools/go.mod
# The benchmark harness is a module of its own (bench/go.mod), so that the
# product module's dependencies and tests are the product's; lint and
# go-test cover it too, from its directory.
BENCH    := $(GO) -C bench
# A count, not a duration: with a duration, Go 1.26's fuzzing coordinator can
# report "context deadline exceeded" as a failure when the time runs out
# while a worker is busy (go.dev/issue/75804, fixed in Go 1.27), which a
# loaded CI machine hits now and then. A count has no deadline to race.
FUZZTIME ?= 100000x

.PHONY: all deps generate generate-python lint test go-test fuzz interop interop-real smoke examples conformance check-generated breaking build bench bench-smoke check-deploy

all: lint test

## generate: regenerate gen/ from proto/ with buf and local plugins.
generate:
	$(TOOL) buf generate
	@$(MAKE) --no-print-directory generate-python 2>/dev/null || echo "(Python stubs not regenerated: run make deps for Debian's protoc)"

## lint: no tracked build outputs, buf lint, gofmt, go vet, staticcheck (the product and the bench module).
lint:
	bash scripts/check-tracked.sh
	$(TOOL) buf lint
	@unformatted="$$(gofmt -l $$(git ls-files '*.go' | grep -v '^gen/'))"; \
	if [ -n "$$unformatted" ]; then echo "gofmt needed on:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(BENCH) vet ./...
	$(TOOL) staticcheck ./...
	$(BENCH) tool -modfile=../tools/go.mod staticcheck ./...

## deps: install what the suite needs beyond Go (pinned; only what is missing).
deps:
	bash scripts/install-deps.sh

## test: everything — Go tests under the race detector (with the TypeScript
## SDK interop test required), bounded fuzzing, the grpcurl smoke test
## against the real binary, the examples, the cross-language conformance
## suite, and the Prometheus alerting rules.
test: deps build check-deploy go-test fuzz smoke examples conformance

## check-deploy: the alerting rules parse (promtool check rules) and fire on
## the synthetic series of their unit tests (promtool test rules). promtool
## comes with Debian's prometheus package (make deps).
check-deploy:
	promtool check rules deploy/prometheus/alerts.yaml
	promtool test rules deploy/prometheus/alerts_test.yaml

# PostgreSQL is required here (not skipped when missing): the postgres
# store's suite and end-to-end tests run against a real server (make deps).
go-test:
	ACPGATE_REQUIRE_INTEROP=1 ACPGATE_REQUIRE_POSTGRES=1 $(GO) test -race -count=1 ./...
	$(BENCH) test -race -count=1 ./...

## fuzz: run each fuzz target for FUZZTIME (executions, or a duration).
fuzz:
	$(GO) test ./outcome -run '^$$' -fuzz '^FuzzInterpretAlwaysYieldsExactlyOne$$' -fuzztime $(FUZZTIME)
	$(GO) test ./acp/jsonrpc -run '^$$' -fuzz '^FuzzDispatchNeverPanics$$' -fuzztime $(FUZZTIME)
	$(GO) test ./acp -run '^$$' -fuzz '^FuzzTheChunkFastPathAgreesWithTheGeneralPath$$' -fuzztime $(FUZZTIME)
	$(GO) test ./acp -run '^$$' -fuzz '^FuzzTheScannerAgreesWithEncodingJSON$$' -fuzztime $(FUZZTIME)

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
