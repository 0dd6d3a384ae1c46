#!/usr/bin/env bash
# Introspects and calls a running `acpgate serve` (demo agent) with grpcurl,
# using server reflection only: no proto files at hand, as a user would.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/listening.sh
GRPCURL=${GRPCURL:-grpcurl}
tmp=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

go build -o "$tmp/acpgate" ./cmd/acpgate
XDG_STATE_HOME="$tmp/state" "$tmp/acpgate" serve --listen 127.0.0.1:0 2>"$tmp/serve.log" &
pid=$!
addr=$(acpgate_address "$tmp/serve.log" "$pid")

fail() { echo "grpcurl smoke: $*"; exit 1; }

echo "-- list"
"$GRPCURL" -plaintext "$addr" list | tee "$tmp/list"
grep -qx 'acpgate.v1.AgentGateway' "$tmp/list" || fail "the service is not listed"
grep -qx 'grpc.health.v1.Health' "$tmp/list" || fail "health is not listed"

echo "-- describe"
"$GRPCURL" -plaintext "$addr" describe acpgate.v1.AgentGateway | tee "$tmp/describe"
grep -q 'rpc Prompt ( .acpgate.v1.PromptRequest ) returns ( stream .acpgate.v1.PromptEvent )' "$tmp/describe" || fail "Prompt is not described"

echo "-- health"
"$GRPCURL" -plaintext -d '{"service":"acpgate.v1.AgentGateway"}' "$addr" grpc.health.v1.Health/Check | tee "$tmp/health"
grep -q '"status": "SERVING"' "$tmp/health" || fail "not SERVING"

echo "-- Prompt"
"$GRPCURL" -plaintext -d '{"agent":"demo","text":"hello from grpcurl"}' "$addr" acpgate.v1.AgentGateway/Prompt | tee "$tmp/prompt"
grep -q '"started"' "$tmp/prompt" || fail "no started event"
grep -q 'hello from grpcurl' "$tmp/prompt" || fail "the answer did not stream"
grep -q '"stopReason": "end_turn"' "$tmp/prompt" || fail "no outcome terminal"
echo "grpcurl smoke: ok"
