#!/usr/bin/env bash
# Runs the Go, Python and Node examples against a real `acpgate serve` on the
# built-in demo agent, so that they cannot rot: each must stream an answer
# and exit 0 for a completed turn, exit 6 for a refusal, and exit 0 saying
# so for a turn of tool calls only; and the Python and Node clients work as
# installed packages, outside the repository.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/listening.sh
tmp=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

go build -o "$tmp/acpgate" ./cmd/acpgate
go build -o "$tmp/example-go" ./examples/go
XDG_STATE_HOME="$tmp/state" "$tmp/acpgate" serve --listen 127.0.0.1:0 2>"$tmp/serve.log" &
pid=$!
addr=$(acpgate_address "$tmp/serve.log" "$pid")

failed=0
# check LANGUAGE WANT_EXIT STDOUT_PATTERN STDERR_PATTERN -- COMMAND...
# (an empty STDOUT_PATTERN checks nothing on stdout)
check() {
  local lang=$1 want=$2 out_pat=$3 err_pat=$4
  shift 5
  local got=0
  "$@" >"$tmp/out" 2>"$tmp/err" || got=$?
  if [ "$got" != "$want" ] || { [ -n "$out_pat" ] && ! grep -q -- "$out_pat" "$tmp/out"; } || ! grep -q -- "$err_pat" "$tmp/err"; then
    echo "examples smoke: $lang: $* exited $got (want $want; stdout matching '$out_pat', stderr matching '$err_pat')"
    echo "--- stdout"; cat "$tmp/out"; echo "--- stderr"; cat "$tmp/err"
    failed=1
    return
  fi
  echo "examples smoke: $lang $(basename "${@: -1}"): exit $got as expected"
}

for lang in go python node; do
  case $lang in
    go) run=("$tmp/example-go" --addr "$addr") ;;
    python) run=(env PYTHONPATH=clients/python /usr/bin/python3 examples/python/prompt.py --addr "$addr") ;;
    node) run=(node examples/node/prompt.mjs --addr "$addr") ;;
  esac
  check "$lang" 0 'acpgate' 'turn' -- "${run[@]}" "tell me about acpgate"
  check "$lang" 6 '' 'refused' -- "${run[@]}" refuse
  check "$lang" 0 '' 'without text' -- "${run[@]}" tools
done

# The clients as packages, away from the repository: the Python one installed
# into a virtual environment (its dependencies from Debian's packages, as no
# package index is reachable here), the Node one packed with its protos and
# unpacked elsewhere. Each example runs from a directory of its own.
pyenv="$tmp/venv"
/usr/bin/python3 -m venv --system-site-packages "$pyenv"
"$pyenv/bin/pip" install --quiet --no-deps --no-build-isolation --no-index ./clients/python
rm -rf clients/python/build clients/python/*.egg-info
mkdir -p "$tmp/py"
cp examples/python/prompt.py "$tmp/py/"
check python-package 0 'acpgate' 'turn' -- env -u PYTHONPATH -C "$tmp/py" "$pyenv/bin/python" prompt.py --addr "$addr" "tell me about acpgate"

mkdir -p "$tmp/node/node_modules"
(cd clients/node && npm pack --silent --pack-destination "$tmp/node" >/dev/null)
tar -xzf "$tmp"/node/acpgate-client-*.tgz -C "$tmp/node"
mv "$tmp/node/package" "$tmp/node/node_modules/acpgate-client"
cp -R clients/node/node_modules/. "$tmp/node/node_modules/"
rm -rf clients/node/proto
sed 's#"../../clients/node/index.mjs"#"acpgate-client"#' examples/node/prompt.mjs >"$tmp/node/prompt.mjs"
check node-package 0 'acpgate' 'turn' -- env -u ACPGATE_PROTO_DIR -C "$tmp/node" node prompt.mjs --addr "$addr" "tell me about acpgate"

[ "$failed" = 0 ] || exit 1
echo "examples smoke: ok"
