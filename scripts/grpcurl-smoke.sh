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

# The same gateway behind TLS with client certificates and JWT auth: the
# certificates from openssl, the token from a small helper.
echo "-- TLS + JWT"
kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; pid=
pki="$tmp/pki"; mkdir -p "$pki"
ec=(-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes)
openssl req -x509 "${ec[@]}" -keyout "$pki/ca.key" -out "$pki/ca.crt" -subj /CN=smoke-ca -days 1 \
  -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign 2>/dev/null
issue() { # name CN extensions
  openssl req "${ec[@]}" -keyout "$pki/$1.key" -out "$pki/$1.csr" -subj "/CN=$2" 2>/dev/null
  printf '%s\n' "$3" >"$pki/$1.ext"
  openssl x509 -req -in "$pki/$1.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 1 -extfile "$pki/$1.ext" -out "$pki/$1.crt" 2>/dev/null
}
issue server localhost $'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth'
issue client smoke-client 'extendedKeyUsage=clientAuth'
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$pki/jwt.key" 2>/dev/null
token=$(go run ./internal/testpki/cmd/smokejwt -key "$pki/jwt.key" -jwks "$pki/jwks.json" \
  -iss https://issuer.smoke -aud acpgate -sub smoke-user)
cat >"$tmp/secure.yaml" <<YAML
agents:
  - name: demo
    command: $tmp/acpgate
    args: [demo-agent]
    inherit_env: [PATH, HOME]
tls: {cert_file: $pki/server.crt, key_file: $pki/server.key, client_ca_file: $pki/ca.crt, client_auth: require}
auth: {mode: jwt, jwks_file: $pki/jwks.json, issuer: https://issuer.smoke, audience: acpgate}
YAML
XDG_STATE_HOME="$tmp/state2" "$tmp/acpgate" serve --config "$tmp/secure.yaml" --listen 127.0.0.1:0 2>"$tmp/secure.log" &
pid=$!
addr=$(acpgate_address "$tmp/secure.log" "$pid")
tlsflags=(-cacert "$pki/ca.crt" -cert "$pki/client.crt" -key "$pki/client.key")

"$GRPCURL" "${tlsflags[@]}" -d '{"service":"acpgate.v1.AgentGateway"}' "$addr" grpc.health.v1.Health/Check | tee "$tmp/health2"
grep -q '"status": "SERVING"' "$tmp/health2" || fail "health over TLS without a token is not SERVING"
if "$GRPCURL" "${tlsflags[@]}" -d '{}' "$addr" acpgate.v1.AgentGateway/ListAgents >"$tmp/anon" 2>&1; then
  fail "ListAgents without a token succeeded"
fi
grep -q 'Unauthenticated' "$tmp/anon" || fail "ListAgents without a token: $(cat "$tmp/anon")"
"$GRPCURL" "${tlsflags[@]}" -H "authorization: Bearer $token" \
  -d '{"agent":"demo","text":"hello over TLS"}' "$addr" acpgate.v1.AgentGateway/Prompt | tee "$tmp/prompt2"
grep -q 'hello over TLS' "$tmp/prompt2" || fail "the answer did not stream over TLS"
for _ in $(seq 1 50); do grep -q 'principal=smoke-user' "$tmp/secure.log" && break; sleep 0.1; done
grep -q 'principal=smoke-user' "$tmp/secure.log" || fail "the principal is not in the request log"
echo "grpcurl smoke (TLS + JWT): ok"
