#!/usr/bin/env bash
# Installs the real ACP agents that `make interop-real` verifies, at the
# versions pinned in interop/agents/package-lock.json, into
# interop/agents/node_modules (ignored by git). It runs npm only when that
# directory is missing or older than the lock file, so a second run costs
# nothing. Install scripts are not run: every agent works without them, and
# a pinned set of agents should not run code at install time.
set -euo pipefail
dir="$(cd "$(dirname "$0")/.." && pwd)/interop/agents"
if [ ! -d "$dir/node_modules" ] || [ "$dir/package-lock.json" -nt "$dir/node_modules" ]; then
  echo "installing the real agents in $dir (about 900 MB)"
  (cd "$dir" && npm ci --no-audit --no-fund --ignore-scripts)
  touch "$dir/node_modules"
fi
