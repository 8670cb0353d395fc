#!/usr/bin/env bash
# run.sh AGENTD GRPCURL [LISTEN]: what `make run` runs. It starts
# `AGENTD serve` in the foreground, on LISTEN when given (as AGENTD_LISTEN;
# otherwise where the configuration says), passes its log through, and
# once agentd says where it serves, prints what to try against that
# address: the one really bound, so port 0 shows the port chosen. A
# command runs against another address than the default with it
# (AGENTD_ADDR=... for agentd's own client). It exits as agentd does.
set -euo pipefail
agentd=$1 grpcurl=$2 listen=${3:-}
default=127.0.0.1:7070

# banner prints what to try against agentd serving on $1.
banner() {
  local addr=$1 env='' arg=''
  if [[ $addr != "$default" ]]; then
    env="AGENTD_ADDR=$addr " arg=" $addr"
  fi
  cat <<BANNER

agentd serves on $addr (its log says which providers and MCP servers it has).
In another terminal, try:
  ${env}$agentd generate --request examples/demo-start.json      # the demo: a tool call through the bridge
  ${env}$agentd generate --provider mock --prompt 'Hello'
  $grpcurl -plaintext $addr list
  curl -sS http://$addr/v1/generations -H 'Content-Type: application/json' -d @examples/demo-start.json   # HTTP/JSON: docs/http.md
  go run ./examples/go$arg
  make python-env && .venv/bin/python examples/python/demo.py$arg
  make build/ts/examples/ts/demo.js && node build/ts/examples/ts/demo.js$arg

BANNER
}

# relay passes agentd's log through and prints the banner after its
# "agentd serving" line (text or JSON). It ignores Ctrl-C, which stops
# agentd, so that agentd's shutdown is shown to its last line.
relay() {
  trap '' INT TERM
  local line shown=''
  while IFS= read -r line; do
    printf '%s\n' "$line"
    if [[ -z $shown && $line == *'agentd serving'* && $line =~ address[=\":]+([^\ \",]+) ]]; then
      banner "${BASH_REMATCH[1]}"
      shown=1
    fi
  done
}

if [[ -n $listen ]]; then
  export AGENTD_LISTEN=$listen
fi
"$agentd" serve 2>&1 | relay
