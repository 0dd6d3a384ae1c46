# acpgate build. Every tool is pinned in tools/go.mod and run with `go tool`,
# so nothing beyond Go itself has to be installed by hand.

GO       ?= go
TOOL     := $(GO) tool -modfile=tools/go.mod
FUZZTIME ?= 20s

.PHONY: all generate lint test fuzz check-generated breaking build

all: lint test

## generate: regenerate gen/ from proto/ with buf and local plugins.
generate:
	$(TOOL) buf generate

## lint: buf lint, gofmt, go vet, staticcheck.
lint:
	$(TOOL) buf lint
	@unformatted="$$(gofmt -l $$(git ls-files '*.go' | grep -v '^gen/'))"; \
	if [ -n "$$unformatted" ]; then echo "gofmt needed on:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(TOOL) staticcheck ./...

## test: the whole test suite under the race detector, plus a bounded fuzz run.
test: build
	$(GO) test -race -count=1 ./...
	$(MAKE) fuzz

## fuzz: run each fuzz target for FUZZTIME.
fuzz:
	$(GO) test ./outcome -run '^$$' -fuzz '^FuzzInterpretAlwaysYieldsExactlyOne$$' -fuzztime $(FUZZTIME)

## check-generated: fail when gen/ does not match proto/.
check-generated: generate
	@git diff --exit-code -- gen/ || { echo "gen/ is stale: run make generate and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- gen/)" || { echo "gen/ has untracked generated files"; git status --porcelain -- gen/; exit 1; }

## breaking: buf breaking against the previous commit, once there is one.
breaking:
	@if git rev-parse -q --verify HEAD~1 >/dev/null; then \
		$(TOOL) buf breaking --against '.git#ref=HEAD~1'; \
	else echo "no previous commit: skipping buf breaking"; fi

build:
	$(GO) build ./...
