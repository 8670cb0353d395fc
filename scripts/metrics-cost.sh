#!/usr/bin/env bash
# metrics-cost.sh: what recording and serving metrics costs agentd under
# load (its budget: at most 2% of generations/s). It runs agentd-load
# ROUNDS times without and with -metrics (the order alternating from round
# to round, so that a drift of the machine's load falls on both), each run
# LOAD_STREAMS streams for LOAD_DURATION, and prints each round's ratio
# of generations/s, with metrics to without, and their median.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
rounds=${ROUNDS:-3}
streams=${LOAD_STREAMS:-100}
duration=${LOAD_DURATION:-20s}
bin=$(mktemp -d)/agentd-load
trap 'rm -rf "$(dirname "$bin")"' EXIT
go build -o "$bin" ./cmd/agentd-load

rate() { # rate [-metrics]: one run's generations/s
  "$bin" -streams "$streams" -duration "$duration" -settle 1s -json "$@" |
    python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["generations_per_s"]) if r["ok"] else sys.exit("the load run failed: %s" % r["problems"])'
}

ratios=()
for ((i = 1; i <= rounds; i++)); do
  if ((i % 2)); then off=$(rate); on=$(rate -metrics); else on=$(rate -metrics); off=$(rate); fi
  ratio=$(python3 -c "print(f'{$on / $off:.4f}')")
  ratios+=("$ratio")
  echo "round $i: without metrics $off/s, with metrics $on/s: ratio $ratio"
done
median=$(printf '%s\n' "${ratios[@]}" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
echo "median ratio of generations/s, with metrics to without: $median (budget: at least 0.98)"
