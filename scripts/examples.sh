#!/usr/bin/env bash
# examples.sh [OPTION...]: every client example against the agentd at
# $AGENTD_ADDR, which each reads from the environment, each given OPTIONs
# (the options they share: --token, --tls-ca, --tls-cert, --tls-key, or
# their AGENTD_* variables in the environment). The Go, Python and
# TypeScript examples (the demo, the demo started detached and followed by
# attaching, the approval, the bad request), then `agentd generate` with
# the demo and the approval request. Each demo fails unless its generation
# completed with the demo's answer. The OAuth examples need an
# OAuth-protected MCP server, which these runs have none of: they are only
# built (Go), type-checked (TypeScript, with the other examples) and
# compiled (Python); examples/go/oauth's test runs the Go one against a
# fake agentd. Last, each language's demo pointed where nothing listens
# must say so, and how to fix it.
# Needs bin/agentd, the Go examples built into $GO_EXAMPLES (default
# build/examples: make go-examples) and the TypeScript examples (build/ts);
# Python runs with $PY (default /usr/bin/python3, with Debian's grpcio).
set -euo pipefail
: "${AGENTD_ADDR:?set AGENTD_ADDR to the address of the agentd to run the examples against}"
export AGENTD_ADDR
py=${PY:-/usr/bin/python3}
bin=${GO_EXAMPLES:-build/examples}
python() { PYTHONPATH=gen/python "$py" "$@"; }

echo "--- Go example"; "$bin/go" "$@"
# A detached demo's stream ends after started: the demo must attach.
attached() { local out; out=$("$@"); echo "$out"; grep -q '^attach' <<<"$out" || { echo "the detached demo never attached" >&2; return 1; }; }
echo "--- Go example, detached"; attached "$bin/go" --detach "$@"
echo "--- Go approval example"; "$bin/approve" "$@"
echo "--- Python example"; python examples/python/demo.py "$@"
echo "--- Python example, detached"; attached python examples/python/demo.py --detach "$@"
echo "--- Python approval example"; python examples/python/approve.py "$@"
echo "--- Python bad request example"; python examples/python/bad_request.py "$@"
echo "--- TypeScript example"; node build/ts/examples/ts/demo.js "$@"
echo "--- TypeScript example, detached"; attached node build/ts/examples/ts/demo.js --detach "$@"
echo "--- TypeScript approval example"; node build/ts/examples/ts/approve.js "$@"
echo "--- TypeScript bad request example"; node build/ts/examples/ts/bad_request.js "$@"
echo "--- agentd generate"; bin/agentd generate "$@" --request examples/demo-start.json
echo "--- agentd generate, approving"; echo y | bin/agentd generate "$@" --request examples/approval-start.json
echo "--- OAuth examples: built, not run"
test -x "$bin/oauth"
python -c 'import sys; compile(open(sys.argv[1], encoding="utf-8").read(), sys.argv[1], "exec")' examples/python/oauth.py
test -f build/ts/examples/ts/oauth.js

# not_listening NAME CMD...: CMD, pointed where nothing listens (port 1),
# fails with the line that says so.
not_listening() {
  local name=$1 out want="agentd is not listening at 127.0.0.1:1: start it (make run) or set AGENTD_ADDR"
  shift
  echo "--- $name, nothing listening"
  if out=$(AGENTD_ADDR=127.0.0.1:1 "$@" 2>&1); then
    echo "$out"; echo "$name ran with nothing listening" >&2; return 1
  fi
  grep -qF "$want" <<<"$out" || { echo "$out"; echo "$name did not say: $want" >&2; return 1; }
  grep -F "$want" <<<"$out"
}
not_listening "Go example" "$bin/go" "$@"
not_listening "Python example" python examples/python/demo.py "$@"
not_listening "TypeScript example" node build/ts/examples/ts/demo.js "$@"
