#!/usr/bin/env bash
# Installs what the full test suite needs beyond Go, pinned, and only what
# is missing: grpcurl, the Node packages of the interop agent and the Node
# client, Debian's Python gRPC packages and protoc for the Python client,
# openssl for the smoke test's certificates, Debian's prometheus (the
# server and promtool) for the alerting rules' checks and the real scrape
# test, and Debian's postgresql for the postgres store's tests (they start
# a server of their own from its binaries; the package's own service is
# not used), and podman, runc and mmdebstrap for the container images
# (scripts/image-smoke.sh) and systemd for systemd-analyze verify.
# Safe to run repeatedly. Debian packages need root.
#
# The packages come with services (a Prometheus server, a PostgreSQL
# cluster) that the tests never use: they are installed without being
# started or enabled, so that running the tests on a workstation leaves no
# server running now or at the next boot. A service of a package that was
# already installed is left as it was.
set -euo pipefail
cd "$(dirname "$0")/.."

GRPCURL_VERSION=v1.9.4
gobin="$(go env GOPATH)/bin"

if [ ! -x "$gobin/grpcurl" ]; then
  echo "installing grpcurl $GRPCURL_VERSION"
  go install "github.com/fullstorydev/grpcurl/cmd/grpcurl@$GRPCURL_VERSION"
fi

for dir in internal/acp/testdata/tsagent clients/node; do
  [ -f "$dir/package-lock.json" ] || continue
  if [ ! -d "$dir/node_modules" ] || [ "$dir/package-lock.json" -nt "$dir/node_modules" ]; then
    echo "installing Node packages in $dir"
    (cd "$dir" && npm ci --no-audit --no-fund)
    touch "$dir/node_modules"
  fi
done

debs=(openssl protobuf-compiler protobuf-compiler-grpc libprotobuf-dev python3-grpcio python3-protobuf python3-venv python3-wheel prometheus postgresql podman runc mmdebstrap systemd)
missing=()
for p in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "missing Debian packages: ${missing[*]} (run as root, or: sudo apt-get install ${missing[*]})" >&2
    exit 1
  fi
  echo "installing Debian packages: ${missing[*]} (their services neither started nor enabled)"
  apt-get update
  # policy-rc.d answering 101 keeps maintainer scripts from starting services.
  policy=/usr/sbin/policy-rc.d
  own_policy=""
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && own_policy=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
  if [ -n "$own_policy" ]; then rm -f "$policy"; fi
  for p in "${missing[@]}"; do
    case "$p" in
      prometheus) unit=prometheus.service ;;
      postgresql) unit=postgresql.service ;;
      *) continue ;;
    esac
    if command -v deb-systemd-helper >/dev/null; then deb-systemd-helper disable "$unit" >/dev/null 2>&1 || true; fi
    if command -v update-rc.d >/dev/null; then update-rc.d "${unit%.service}" disable >/dev/null 2>&1 || true; fi
  done
fi
