#!/usr/bin/env bash
# bench-ratios.sh FILE: medians of `go test -bench -count N` output and the
# target ratios (BENCHMARKS.md): the bridge's (make bench), durability's
# with the stores' latencies (make bench-store), and metrics' (make
# bench-metrics).
set -euo pipefail
awk '
/^Benchmark/ {
  name = $1; sub(/-[0-9]+$/, "", name)
  for (i = 3; i < NF; i++) {
    if ($(i+1) == "ns/op") ns[name] = ns[name] " " $i
    if ($(i+1) == "spawns/op") sp[name] = sp[name] " " $i
    if ($(i+1) ~ /\/direct$/) pr[$(i+1)] = pr[$(i+1)] " " $i
    if ($(i+1) ~ /^µs-added-/) au[$(i+1)] = au[$(i+1)] " " $i
    if ($(i+1) == "record/off") du[name] = du[name] " " $i
    if ($(i+1) == "metrics/none") me = me " " $i
    if ($(i+1) == "gen-metrics/none") mg = mg " " $i
    if ($(i+1) ~ /p50|p99|\/gen/) st[name " " $(i+1)] = st[name " " $(i+1)] " " $i
  }
}
function median(list,   a, n, i, j, t) {
  n = split(list, a, " ")
  for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
  return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
END {
  for (b in ns) { m[b] = median(ns[b]); printf "%-40s %12.0f ns/op (median)\n", b, m[b] }
  for (b in sp) printf "%-40s %12.2f spawns/op (median)\n", b, median(sp[b])
  if (("BenchmarkCallTool/bridge" in m) && ("BenchmarkCallTool/direct" in m))
    printf "tools/call through the bridge / direct go-sdk, separate runs: %.2fx\n", m["BenchmarkCallTool/bridge"] / m["BenchmarkCallTool/direct"]
  if ("bridge/direct" in pr) {
    printf "tools/call through the bridge / direct go-sdk, paired rounds: %.2fx (target <= 1.25x; the tighter end-to-end target: <= 1.10x)\n", median(pr["bridge/direct"])
    if ("boundary/direct" in pr)
      printf "  in the same rounds: the direct call behind a bare gRPC round trip %.2fx; a direct call on protocol 2025-11-25 %.2fx\n", median(pr["boundary/direct"]), median(pr["classic/direct"])
    printf "  in the same rounds: the bridge'"'"'s own work without gRPC %.2fx; one CallTool RPC per call instead of the stream %.2fx\n", median(pr["session/direct"]), median(pr["unary/direct"])
  }
  if (me != "")
    printf "tools/call with metrics recorded / without, paired rounds: %.3fx (target <= 1.02x)\n", median(me)
  if (mg != "")
    printf "a generation (4 turns, 3 tool calls) with metrics recorded / without, paired rounds: %.3fx (target <= 1.02x)\n", median(mg)
  if (("BenchmarkFirstCall/cold" in m) && ("BenchmarkFirstCall/warm" in m))
    printf "first call, cold spawn / warm pool: %.1fx faster warm (target >= 20x)\n", m["BenchmarkFirstCall/cold"] / m["BenchmarkFirstCall/warm"]
  n = 0
  for (k in st) keys[++n] = k
  for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (keys[j] < keys[i]) { t = keys[i]; keys[i] = keys[j]; keys[j] = t }
  for (i = 1; i <= n; i++) { split(keys[i], f, " "); printf "%-40s %12.2f %s (median)\n", f[1], median(st[keys[i]]), f[2] }
  for (b in du) {
    target = b ~ /postgres/ ? "1.25" : "1.15"
    printf "durability on the tool loop, %s: the record on / off, paired rounds: %.2fx (target <= %sx)\n", b, median(du[b]), target
  }
  for (k in au) printf "a Generate authenticated, %s: %.1f µs per call, paired rounds (target <= 50 µs)\n", k, median(au[k])
}' "$1"
