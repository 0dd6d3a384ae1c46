#!/usr/bin/env bash
# Runs acpgate's cross-language conformance suite: builds the test agent and
# the gateway, starts `acpgate serve` on conformance/gateway.yaml, runs the
# Go, Python and Node runners against it, and fails unless all three outputs
# are byte-identical to conformance/expected.jsonl (and so to each other).
# See conformance/README.md.
#
# Needs, beyond Go: Debian's python3-grpcio and python3-protobuf (for the
# system /usr/bin/python3), Node.js with npm, and `npm ci` run in
# clients/node.
#
#   bash conformance/run.sh            # the whole suite
#   KEEP=1 bash conformance/run.sh     # keep the work directory (outputs, server log)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/listening.sh

PYTHON=${PYTHON:-/usr/bin/python3}
NODE=${NODE:-node}
export PYTHONDONTWRITEBYTECODE=1

work="$(mktemp -d "${TMPDIR:-/tmp}/acpgate-conformance.XXXXXX")"
server_pid=""
cleanup() {
	if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
		kill -TERM "$server_pid" 2>/dev/null || true
		for _ in $(seq 1 100); do
			kill -0 "$server_pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$server_pid" 2>/dev/null || true
		wait "$server_pid" 2>/dev/null || true
	fi
	if [ -n "${KEEP:-}" ]; then
		echo "conformance: work directory kept: $work" >&2
	else
		rm -rf "$work"
	fi
}
trap cleanup EXIT

fail() {
	echo "conformance: $*" >&2
	exit 1
}

echo "== conformance: prerequisites"
"$PYTHON" -c 'import grpc, google.protobuf' 2>/dev/null ||
	fail "$PYTHON cannot import grpc and google.protobuf: apt-get install python3-grpcio python3-protobuf"
command -v "$NODE" >/dev/null || fail "node not found"
[ -d clients/node/node_modules/@grpc/grpc-js ] ||
	fail "clients/node has no node_modules: run (cd clients/node && npm ci)"

echo "== conformance: build"
go build -o "$work/testagent" ./internal/testagent
go build -o "$work/acpgate" ./cmd/acpgate
go build -o "$work/conformance-go" ./conformance/go

echo "== conformance: expected.jsonl matches scenarios.json"
PYTHONPATH=clients/python "$PYTHON" conformance/python/run.py --expected >"$work/declared.jsonl"
if ! cmp -s "$work/declared.jsonl" conformance/expected.jsonl; then
	diff -u conformance/expected.jsonl "$work/declared.jsonl" | cut -c1-400 >&2 || true
	fail "conformance/expected.jsonl differs from the expectations in conformance/scenarios.json (regenerate it: PYTHONPATH=clients/python $PYTHON conformance/python/run.py --expected > conformance/expected.jsonl)"
fi

echo "== conformance: start the gateway"
ACPGATE_TESTAGENT="$work/testagent" XDG_STATE_HOME="$work/state" "$work/acpgate" serve \
	--config conformance/gateway.yaml --listen 127.0.0.1:0 2>"$work/server.log" &
server_pid=$!
addr=$(acpgate_address "$work/server.log" "$server_pid") || fail "the gateway did not start listening"
echo "gateway at $addr"

status=0
run_runner() {
	local lang="$1"
	shift
	echo "== conformance: $lang runner"
	if ! "$@" >"$work/$lang.jsonl" 2>"$work/$lang.err"; then
		echo "conformance: the $lang runner failed" >&2
		status=1
	fi
	cat "$work/$lang.err" >&2
}
run_runner go "$work/conformance-go" --addr "$addr" --scenarios conformance/scenarios.json
run_runner python env PYTHONPATH=clients/python "$PYTHON" conformance/python/run.py --addr "$addr"
run_runner node "$NODE" conformance/node/run.mjs --addr "$addr"

echo "== conformance: compare"
# Per scenario, for the summary; the byte-for-byte comparison below decides.
"$PYTHON" - "$work" <<'EOF' || status=1
import json, sys
work = sys.argv[1]
def lines(path):
    with open(path, "rb") as f:
        return f.read().splitlines()
expected = lines("conformance/expected.jsonl")
outputs = {lang: lines(f"{work}/{lang}.jsonl") for lang in ("go", "python", "node")}
passed = failed = 0
for i, want in enumerate(expected):
    name = json.loads(want)["name"]
    bad = [lang for lang, got in outputs.items() if i >= len(got) or got[i] != want]
    if bad:
        failed += 1
        print(f"FAIL {name}: differs in {', '.join(bad)}")
    else:
        passed += 1
for lang, got in outputs.items():
    if len(got) > len(expected):
        failed += 1
        print(f"FAIL {lang}: {len(got) - len(expected)} line(s) more than expected")
print(f"conformance: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
EOF
for lang in go python node; do
	if ! cmp -s conformance/expected.jsonl "$work/$lang.jsonl"; then
		status=1
		echo "--- $lang output differs from conformance/expected.jsonl (lines cut at 400 characters):" >&2
		diff -u conformance/expected.jsonl "$work/$lang.jsonl" | cut -c1-400 >&2 || true
	fi
done
if [ "$status" -ne 0 ]; then
	echo "--- gateway log (last 40 lines):" >&2
	tail -n 40 "$work/server.log" >&2
	fail "the runners' outputs differ from conformance/expected.jsonl"
fi
echo "conformance: the Go, Python and Node runners agree with conformance/expected.jsonl"
