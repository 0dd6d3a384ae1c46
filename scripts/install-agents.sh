#!/usr/bin/env bash
# Installs the real ACP agents that `make interop-real` verifies, at the
# versions pinned in interop/agents/package-lock.json, into
# interop/agents/node_modules (ignored by git). It runs npm only when that
# directory is missing or older than the lock file, so a second run costs
# nothing. Install scripts are not run, but for OpenCode's below: a pinned
# set of agents should not run code at install time.
#
# npm install, not npm ci: npm 11 leaves some platform packages of
# optional dependencies (@teddyzhu/clipboard-*) out of the lock file and
# npm ci then refuses it as out of sync. With the lock file present, npm
# install still installs the locked versions, and --no-save keeps the lock
# file as committed.
set -euo pipefail
dir="$(cd "$(dirname "$0")/.." && pwd)/interop/agents"
if [ ! -d "$dir/node_modules" ] || [ "$dir/package-lock.json" -nt "$dir/node_modules" ]; then
  echo "installing the real agents in $dir (about 900 MB)"
  (cd "$dir" && npm install --no-save --no-audit --no-fund --ignore-scripts)
  # The one install script an agent needs: OpenCode's links its platform's
  # binary (from the locked opencode-linux-* package; it downloads nothing)
  # in place of a placeholder.
  (cd "$dir/node_modules/opencode-ai" && node ./postinstall.mjs)
  touch "$dir/node_modules"
fi
