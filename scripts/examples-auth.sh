#!/usr/bin/env bash
# examples-auth.sh ADDR: every client example (scripts/examples.sh: Go,
# Python, TypeScript, agentd generate) against an agentd at ADDR that serves
# mutual TLS and requires an API key: each connects with --tls-ca,
# --tls-cert and --tls-key and AGENTD_TOKEN, then again with AGENTD_TLS_CA,
# AGENTD_TLS_CERT, AGENTD_TLS_KEY and --token, both times finding agentd at
# AGENTD_ADDR. A call without the key is refused UNAUTHENTICATED, a
# connection without a client certificate in the handshake; these two give
# the Go example the address as its argument. The certificates are made for
# the run by scripts/devcerts. Needs what scripts/examples.sh needs.
set -euo pipefail
addr=$1
# What the clients are given is what this script gives them.
unset AGENTD_ADDR AGENTD_TOKEN AGENTD_TLS_CA AGENTD_TLS_CERT AGENTD_TLS_KEY
dir=$(mktemp -d)
pid=
cleanup() {
  [[ -n $pid ]] && { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; }
  rm -rf "$dir"
}
trap cleanup EXIT

certs=$dir/certs
go run ./scripts/devcerts "$certs"
key="sk-example-$RANDOM$RANDOM"
hash=$(printf '%s\n' "$key" | bin/agentd keys hash)
cat > "$dir/agentd.yaml" <<YAML
listen: $addr
state_dir: $dir/state
tls:
  cert_file: $certs/server.pem
  key_file: $certs/server-key.pem
  client_ca_file: $certs/ca.pem
auth:
  api_keys:
    - {name: examples, sha256: $hash, tenant: examples, roles: [generate]}
YAML
AGENTD_CONFIG=$dir/agentd.yaml AGENTD_SHUTDOWN_DRAIN=0 bin/agentd serve 2>"$dir/agentd.log" &
pid=$!
scripts/wait-port.sh "$addr" 60

tls=(--tls-ca "$certs/ca.pem" --tls-cert "$certs/client.pem" --tls-key "$certs/client-key.pem")

# refused NAME WANT CMD...: CMD fails, and its output says WANT.
refused() {
  local name=$1 want=$2 out
  shift 2
  echo "--- $name: refused"
  if out=$("$@" 2>&1); then
    echo "the Go example ran $name:"; echo "$out"; exit 1
  fi
  grep -q "$want" <<<"$out" || { echo "want $want, got: $out"; exit 1; }
  echo "$out"
}
example=${GO_EXAMPLES:-build/examples}/go
refused "without a key" Unauthenticated "$example" "${tls[@]}" "$addr"
refused "without a client certificate" Unavailable \
  env AGENTD_TOKEN="$key" "$example" --tls-ca "$certs/ca.pem" "$addr"

echo "=== every example, over mutual TLS with --tls-ca, --tls-cert, --tls-key and AGENTD_TOKEN"
AGENTD_ADDR=$addr AGENTD_TOKEN=$key scripts/examples.sh "${tls[@]}"
echo "=== every example, over mutual TLS with AGENTD_TLS_CA, AGENTD_TLS_CERT, AGENTD_TLS_KEY and --token"
AGENTD_ADDR=$addr AGENTD_TLS_CA=$certs/ca.pem AGENTD_TLS_CERT=$certs/client.pem AGENTD_TLS_KEY=$certs/client-key.pem \
  scripts/examples.sh --token "$key"
if grep -q -- "$key" "$dir/agentd.log"; then echo "agentd's log quotes the key"; exit 1; fi
