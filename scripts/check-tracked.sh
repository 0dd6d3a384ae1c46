#!/usr/bin/env bash
# Fails when git tracks a build output: an executable or object file of any
# platform, or a profile or trace. A committed binary goes stale with the next
# commit, and whoever runs it gets an old gateway without knowing.
set -euo pipefail
cd "$(dirname "$0")/.."
bad=0
while IFS= read -r -d '' f; do
  [ -f "$f" ] || continue
  case "$f" in
    *.prof|*.pprof|*.trace|*.test|*.out) echo "tracked build output: $f"; bad=1; continue ;;
  esac
  # ELF, Mach-O (both byte orders, fat), PE ("MZ"), and Go archives.
  magic="$(head -c 4 -- "$f" | od -An -tx1 | tr -d ' \n')"
  case "$magic" in
    7f454c46|cffaedfe|cefaedfe|feedfacf|feedface|cafebabe|4d5a*|213c6172)
      echo "tracked build output: $f (binary)"; bad=1 ;;
  esac
done < <(git ls-files -z)
if [ "$bad" -ne 0 ]; then
  echo "remove it with: git rm --cached <file>, and add it to .gitignore" >&2
  exit 1
fi
