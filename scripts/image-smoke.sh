#!/usr/bin/env bash
# The container images, built and run as a user would: builds IMAGE
# (Containerfile) and AGENTS_IMAGE (Containerfile.agents), then runs IMAGE
# unprivileged (its non-root user, every capability dropped, no new
# privileges, a read-only root filesystem) with its port published, and
# through that port: checks grpc.health.v1, completes a turn of the demo
# agent with grpcurl, reads the containment the gateway found inside the
# container from its log, and stops it with SIGTERM while a turn runs: the
# container must exit 0 within shutdown_grace, the running turn must end
# with its terminal (not a broken stream), and the log must say it drained.
#
# Environment: CONTAINER (podman, else docker), CONTAINER_FLAGS (global
# flags: CI's VMs need --runtime runc --cgroup-manager=cgroupfs),
# CONTAINER_RUN_FLAGS (default: explicit nofile/nproc ulimits, as podman's
# defaults exceed these VMs' hard limits), IMAGE, IMAGE_BASE, AGENTS_IMAGE,
# NODE_IMAGE (see the Makefile), GRPCURL.
#
# With IMAGE_BASE and no NODE_IMAGE (no registry to pull node from), the
# Node base of the agents image is IMAGE_BASE plus this machine's Node, the
# one CI runs (Debian bookworm's own nodejs is 18, and Gemini CLI needs 20),
# and this machine's trust store, through which it reaches the npm registry.
set -euo pipefail
cd "$(dirname "$0")/.."

CONTAINER="${CONTAINER:-$(command -v podman >/dev/null 2>&1 && echo podman || echo docker)}"
read -r -a global <<<"${CONTAINER_FLAGS:-}"
read -r -a runflags <<<"${CONTAINER_RUN_FLAGS:---ulimit nofile=4096:4096 --ulimit nproc=4096:4096}"
IMAGE="${IMAGE:-acpgate:dev}"
AGENTS_IMAGE="${AGENTS_IMAGE:-acpgate-agents:dev}"
GRPCURL="${GRPCURL:-$(go env GOPATH)/bin/grpcurl}"
# The image's configuration says shutdown_grace: 10s; the gateway exits at
# most 3 s past it (serve's shutdownOverrun). Beyond that is a failure.
STOP_BOUND=15
ctr() { "$CONTAINER" "${global[@]}" "$@"; }

echo "-- building $IMAGE (${IMAGE_BASE:-the default base})"
make --no-print-directory image CONTAINER="$CONTAINER" CONTAINER_FLAGS="${CONTAINER_FLAGS:-}" IMAGE="$IMAGE" IMAGE_BASE="${IMAGE_BASE:-}"

node_image="${NODE_IMAGE:-}"
if [ -n "${IMAGE_BASE:-}" ] && [ -z "$node_image" ]; then
  node_image=localhost/acpgate-node-base:ci
  ctx="$(mktemp -d)"
  trap 'rm -rf "$ctx"' EXIT
  node="$(readlink -f "$(command -v node)")"
  cp "$node" "$ctx/node"
  cp -r "$(dirname "$node")/../lib/node_modules/npm" "$ctx/npm"
  cp /etc/ssl/certs/ca-certificates.crt "$ctx/ca-certificates.crt"
  printf '%s\n' "FROM $IMAGE_BASE" \
    'COPY node /usr/local/bin/node' \
    'COPY npm /usr/local/lib/node_modules/npm' \
    'COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt' \
    'ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt' \
    'RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx && node --version' \
    >"$ctx/Containerfile"
  echo "-- building $node_image: $IMAGE_BASE with this machine's Node $(node --version)"
  ctr build -q -t "$node_image" "$ctx" >/dev/null
fi
echo "-- building $AGENTS_IMAGE (Node from ${node_image:-the default base})"
make --no-print-directory image-agents CONTAINER="$CONTAINER" CONTAINER_FLAGS="${CONTAINER_FLAGS:-}" IMAGE="$IMAGE" AGENTS_IMAGE="$AGENTS_IMAGE" NODE_IMAGE="$node_image"
gemini_version="$(ctr run --rm "${runflags[@]}" --entrypoint gemini "$AGENTS_IMAGE" --version)"
echo "$AGENTS_IMAGE: gemini $gemini_version, $(ctr run --rm "${runflags[@]}" "$AGENTS_IMAGE" version | head -1)"
[ "$gemini_version" = 0.61.0 ] || { echo "FAIL: gemini --version printed '$gemini_version', want 0.61.0" >&2; exit 1; }
ctr run --rm "${runflags[@]}" "$AGENTS_IMAGE" serve --check --config /etc/acpgate/acpgate.yaml \
  || { echo "FAIL: $AGENTS_IMAGE's built-in configuration does not pass serve --check" >&2; exit 1; }

name="acpgate-smoke-$$"
log="$(mktemp)"
cleanup() { ctr rm -f "$name" >/dev/null 2>&1 || true; rm -f "$log"; }
trap cleanup EXIT
echo "-- running $IMAGE unprivileged as $name"
ctr run -d --name "$name" "${runflags[@]}" \
  --cap-drop ALL --security-opt no-new-privileges --read-only --tmpfs /tmp \
  -p 127.0.0.1::7070 "$IMAGE" >/dev/null
addr="$(ctr port "$name" 7070/tcp | head -1)"
addr="${addr/0.0.0.0/127.0.0.1}"
fail() { echo "FAIL: $*" >&2; ctr logs "$name" >&2 || true; exit 1; }

health=""
for _ in $(seq 1 50); do # 10 s at most for the gateway to serve
  health="$("$GRPCURL" -plaintext -max-time 2 -d '{"service":"acpgate.v1.AgentGateway"}' "$addr" grpc.health.v1.Health/Check 2>/dev/null || true)"
  [[ "$health" == *SERVING* ]] && break
  sleep 0.2
done
[[ "$health" == *'"SERVING"'* ]] || fail "health check through $addr: '$health'"
echo "health: SERVING through $addr"

user="$(ctr exec "$name" /usr/local/bin/acpgate version | head -1) as uid $(ctr inspect -f '{{.Config.User}}' "$name")"
echo "$user"
turn="$("$GRPCURL" -plaintext -max-time 30 -d '{"agent":"demo","text":"hello"}' "$addr" acpgate.v1.AgentGateway/Prompt)" || fail "prompt: $turn"
grep -q '"stopReason": "end_turn"' <<<"$turn" || fail "the demo turn did not end with end_turn: $turn"
grep -q 'agentMessageChunk' <<<"$turn" || fail "the demo turn streamed no message chunk: $turn"
echo "turn: streamed the demo agent's answer, ended end_turn"

containment="$(ctr logs "$name" 2>&1 | grep -m1 'msg="agent containment' || true)"
[[ "$containment" == *kind=* ]] || fail "the gateway logged no containment kind"
echo "containment inside the container: ${containment#*msg=}"

# A turn in flight across SIGTERM: the slow demo turn streams for a minute,
# far past the grace, so the gateway must end it itself.
"$GRPCURL" -plaintext -max-time 60 -d '{"agent":"demo","text":"slow"}' "$addr" acpgate.v1.AgentGateway/Prompt >"$log" 2>&1 &
client=$!
for _ in $(seq 1 50); do grep -q agentMessageChunk "$log" && break; sleep 0.2; done
grep -q agentMessageChunk "$log" || fail "the slow turn streamed nothing: $(cat "$log")"
start=$(date +%s)
ctr kill --signal TERM "$name" >/dev/null
code="$(timeout "$STOP_BOUND" "$CONTAINER" "${global[@]}" wait "$name" || echo timeout)"
took=$(($(date +%s) - start))
wait "$client" || true
[ "$code" = 0 ] || fail "after SIGTERM the container exited '$code' (want 0 within ${STOP_BOUND}s)"
logs="$(ctr logs "$name" 2>&1)"
grep -q 'msg="shutting down"' <<<"$logs" || fail "the log does not say it shut down"
grep -q 'msg=stopped' <<<"$logs" || fail "the log does not say it stopped"
grep -q -E '^  "(error|outcome)": \{' "$log" || fail "the turn running at SIGTERM got no terminal: $(tail -20 "$log")"
echo "SIGTERM: exit 0 after ${took}s; the running turn ended with its terminal; the log says shutting down, then stopped"
echo "image smoke passed"
