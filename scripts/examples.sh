#!/usr/bin/env bash
# examples.sh [OPTION...]: every client example against the agentd at
# $AGENTD_ADDR, which each reads from the environment, each given OPTIONs
# (the options they share: --token, --tls-ca, --tls-cert, --tls-key, or
# their AGENTD_* variables in the environment). The Go, Python and
# TypeScript examples (the demo, the demo started detached and followed by
# attaching, the approval, the bad request, the structured answer), then
# `agentd generate` with the demo and the approval request, and with the
# structured request and its schema. Each demo fails unless its generation
# completed with the demo's answer; each structured example unless it
# prints the ticket of examples/structured-start.json's script, decoded
# into its language's type, and agentd generate unless the ticket is
# alone on its stdout. The OAuth examples need an
# OAuth-protected MCP server, which these runs have none of: they are only
# built (Go), type-checked (TypeScript, with the other examples) and
# compiled (Python); examples/go/oauth's test runs the Go one against a
# fake agentd. Last, each language's demo pointed where nothing listens
# must say so, and how to fix it. The chat examples run twice on the same
# state files (see chats).
# Needs bin/agentd, the Go examples built into $GO_EXAMPLES (default
# build/examples: make go-examples) and the TypeScript examples (build/ts);
# Python runs with $PY (default /usr/bin/python3, with Debian's grpcio).
set -euo pipefail
: "${AGENTD_ADDR:?set AGENTD_ADDR to the address of the agentd to run the examples against}"
export AGENTD_ADDR
py=${PY:-/usr/bin/python3}
bin=${GO_EXAMPLES:-build/examples}
python() { PYTHONPATH=gen/python "$py" "$@"; }

# chat NAME STATE CMD...: CMD, a chat example, with its thread's id kept in
# the file STATE. A first run (no STATE yet) must create the thread; a later
# one must continue it, saying so with that id, and list the first run's
# line among the thread's items.
chat() {
  local name=$1 state=$2 out id
  shift 2
  if [[ ! -e $state ]]; then
    echo "--- $name"
    out=$(echo 'My name is Ada.' | "$@" --state "$state"); echo "$out"
    [[ -s $state ]] || { echo "$name kept no thread id in $state" >&2; return 1; }
    return
  fi
  id=$(<"$state")
  echo "--- $name, again"
  out=$(echo 'What is my name?' | "$@" --state "$state"); echo "$out"
  grep -q "^continuing $id " <<<"$out" || { echo "$name did not continue $id" >&2; return 1; }
  grep -q "user: My name is Ada.$" <<<"$out" || { echo "$name's thread lost the first run's line" >&2; return 1; }
}
# chats: each language's chat example once, its thread's id kept in
# $CHAT_DIR. make examples runs them twice on one CHAT_DIR, restarting
# agentd between (CHAT_ONLY=1 runs only these): the second run continues
# each thread from agentd's store. Without CHAT_DIR they run twice here,
# against the same agentd, in a directory of their own.
chats() {
  chat "Go chat example" "$CHAT_DIR/go.txt" "$bin/chat" "$@"
  chat "Python chat example" "$CHAT_DIR/python.txt" python examples/python/chat.py "$@"
  chat "TypeScript chat example" "$CHAT_DIR/ts.txt" node build/ts/examples/ts/chat.js "$@"
}
if [[ -n ${CHAT_ONLY:-} ]]; then chats "$@"; exit; fi

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
# structured NAME CMD...: CMD, a structured example, must print the
# script's ticket as its language's type holds it.
structured() {
  local name=$1 out want='ticket: [high] Checkout times out (checkout, timeout)'
  shift
  echo "--- $name"
  out=$("$@") || { echo "$out"; return 1; }
  echo "$out"
  grep -qxF "$want" <<<"$out" || { echo "$name did not print: $want" >&2; return 1; }
}
structured "Go structured example" "$bin/structured" "$@"
structured "Python structured example" python examples/python/structured.py "$@"
structured "TypeScript structured example" node build/ts/examples/ts/structured.js "$@"
echo "--- agentd generate"; bin/agentd generate "$@" --request examples/demo-start.json
echo "--- agentd generate, approving"; echo y | bin/agentd generate "$@" --request examples/approval-start.json
echo "--- agentd generate, structured"
ticket=$(bin/agentd generate "$@" --request examples/structured-start.json --output-schema examples/ticket.schema.json)
echo "$ticket"
python -c 'import json, sys; t = json.load(sys.stdin); sys.exit(t != {"title": "Checkout times out", "priority": "high", "tags": ["checkout", "timeout"]})' <<<"$ticket" ||
  { echo "agentd generate --output-schema did not print the ticket alone on stdout" >&2; exit 1; }
echo "--- OAuth examples: built, not run"
test -x "$bin/oauth"
python -c 'import sys; compile(open(sys.argv[1], encoding="utf-8").read(), sys.argv[1], "exec")' examples/python/oauth.py
test -f build/ts/examples/ts/oauth.js
if [[ -n ${CHAT_DIR:-} ]]; then
  chats "$@"
else
  CHAT_DIR=$(mktemp -d); trap 'rm -rf "$CHAT_DIR"' EXIT
  chats "$@"; chats "$@"
fi

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
