#!/usr/bin/env bash
# examples.sh ADDR [OPTION...]: every client example against the agentd at
# ADDR, each given OPTIONs (the options they share: --token, --tls-ca,
# --tls-cert, --tls-key, or their AGENTD_* variables in the environment).
# The Go, Python and TypeScript examples (the demo, the demo started
# detached and followed by attaching, the approval, the bad request), then
# `agentd generate` with the demo and the approval request. Each demo fails
# unless its generation completed with the demo's answer. The OAuth examples
# need an OAuth-protected MCP server, which these runs have none of: they
# are only built (Go), type-checked (TypeScript, with the other examples)
# and compiled (Python); examples/go/oauth's test runs the Go one against
# a fake agentd.
# Needs bin/agentd and the TypeScript examples built (build/ts); Python
# runs with $PY (default /usr/bin/python3, with Debian's grpcio).
set -euo pipefail
addr=$1
shift
py=${PY:-/usr/bin/python3}
python() { PYTHONPATH=gen/python "$py" "$@"; }

echo "--- Go example"; go run ./examples/go "$@" "$addr"
# A detached demo's stream ends after started: the demo must attach.
attached() { local out; out=$("$@"); echo "$out"; grep -q '^attach' <<<"$out" || { echo "the detached demo never attached" >&2; return 1; }; }
echo "--- Go example, detached"; attached go run ./examples/go --detach "$@" "$addr"
echo "--- Go approval example"; go run ./examples/go/approve "$@" "$addr"
echo "--- Python example"; python examples/python/demo.py "$@" "$addr"
echo "--- Python example, detached"; attached python examples/python/demo.py --detach "$@" "$addr"
echo "--- Python approval example"; python examples/python/approve.py "$@" "$addr"
echo "--- Python bad request example"; python examples/python/bad_request.py "$@" "$addr"
echo "--- TypeScript example"; node build/ts/examples/ts/demo.js "$@" "$addr"
echo "--- TypeScript example, detached"; attached node build/ts/examples/ts/demo.js --detach "$@" "$addr"
echo "--- TypeScript approval example"; node build/ts/examples/ts/approve.js "$@" "$addr"
echo "--- TypeScript bad request example"; node build/ts/examples/ts/bad_request.js "$@" "$addr"
echo "--- agentd generate"; bin/agentd generate --addr "$addr" "$@" --request examples/demo-start.json
echo "--- agentd generate, approving"; echo y | bin/agentd generate --addr "$addr" "$@" --request examples/approval-start.json
echo "--- OAuth examples: built, not run"
go build -o /dev/null ./examples/go/oauth
python -c 'import sys; compile(open(sys.argv[1], encoding="utf-8").read(), sys.argv[1], "exec")' examples/python/oauth.py
test -f build/ts/examples/ts/oauth.js
