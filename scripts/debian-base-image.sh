#!/usr/bin/env bash
# Makes a base image from Debian's archive, for a machine that reaches no
# container registry (CI's): mmdebstrap's minbase bookworm, imported as
# localhost/acpgate-base:bookworm unless that image exists already. Prints
# the image's name, to be passed as IMAGE_BASE.
# Environment: CONTAINER (podman, else docker), CONTAINER_FLAGS.
set -euo pipefail
CONTAINER="${CONTAINER:-$(command -v podman >/dev/null 2>&1 && echo podman || echo docker)}"
read -r -a global <<<"${CONTAINER_FLAGS:-}"
name=localhost/acpgate-base:bookworm
if ! "$CONTAINER" "${global[@]}" image inspect "$name" >/dev/null 2>&1; then
  tar="$(mktemp -d)/base.tar"
  trap 'rm -rf "$(dirname "$tar")"' EXIT
  mmdebstrap --quiet --variant=minbase bookworm "$tar" >&2
  "$CONTAINER" "${global[@]}" import "$tar" "$name" >/dev/null
fi
echo "$name"
