#!/usr/bin/env bash
# examples-auth.sh ADDR: the demo clients (Go, Python, TypeScript, agentd
# generate) against an agentd that requires an API key: each runs with
# AGENTD_TOKEN, and a call without it is refused UNAUTHENTICATED.
set -euo pipefail
addr=$1
dir=$(mktemp -d)
pid=
cleanup() {
  [[ -n $pid ]] && { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; }
  rm -rf "$dir"
}
trap cleanup EXIT

key="sk-example-$RANDOM$RANDOM"
hash=$(printf '%s\n' "$key" | bin/agentd keys hash)
cat > "$dir/agentd.yaml" <<YAML
listen: $addr
state_dir: $dir/state
auth:
  api_keys:
    - {name: examples, sha256: $hash, tenant: examples, roles: [generate]}
YAML
AGENTD_CONFIG=$dir/agentd.yaml bin/agentd serve 2>"$dir/agentd.log" &
pid=$!
scripts/wait-port.sh "$addr" 60

echo "--- without a key: refused"
if out=$(go run ./examples/go "$addr" 2>&1); then
  echo "the Go example ran without a key:"; echo "$out"; exit 1
fi
grep -q Unauthenticated <<<"$out" || { echo "want Unauthenticated, got: $out"; exit 1; }
echo "$out"

export AGENTD_TOKEN=$key
echo "--- Go example, with AGENTD_TOKEN"; go run ./examples/go "$addr"
echo "--- Python example, with AGENTD_TOKEN"; PYTHONPATH=gen/python /usr/bin/python3 examples/python/demo.py "$addr"
echo "--- TypeScript example, with AGENTD_TOKEN"; node build/ts/examples/ts/demo.js "$addr"
echo "--- agentd generate, with AGENTD_TOKEN"; bin/agentd generate --addr "$addr" --request examples/demo-start.json
if grep -q -- "$key" "$dir/agentd.log"; then echo "agentd's log quotes the key"; exit 1; fi
