#!/usr/bin/env bash
# bench-ratios.sh FILE: medians of `go test -bench -count N` output and the
# target ratios (BENCHMARKS.md): the bridge's (make bench), durability's
# with the stores' latencies (make bench-store), metrics' (make
# bench-metrics), and a long generation's record as a table, with its
# adoption's rebuild and the model's words' latency (make bench-record).
set -euo pipefail
awk '
/^BenchmarkRecordGrowth\// {
  name = $1; sub(/-[0-9]+$/, "", name)
  rg[name] = 1
  for (i = 3; i < NF; i++) if ($(i+1) ~ /\/(gen|turn|op|content)$/) rgm[name, $(i+1)] = rgm[name, $(i+1)] " " $i
  next
}
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
  for (b in m) if (b ~ /^BenchmarkAdoptionRebuild\//)
    printf "adoption of a 160-turn generation, %s: %.1f ms reading and rebuilding it (target <= 200 ms)\n", b, m[b] / 1e6
  for (k in st) if (k ~ /^BenchmarkTextLatency\/.* (first|later)-chunk-p50-ms$/) {
    split(k, f, " ")
    printf "the model'"'"'s words reaching the client, %s, %s: %.2f ms (target <= 2 ms)\n", f[1], f[2], median(st[k])
  }
  recordTable()
}
# recordTable prints BenchmarkRecordGrowth/<store>/<model>/turns=<n> as a
# table of medians (SQLite first, the script before openai, by turns),
# and for each store and model the worst written/content and the CPU per
# turn at its most turns over that at its fewest. The targets are the
# script'"'"'s: openai'"'"'s codec encodes the whole conversation at every turn.
function recordTable(   n, m, i, j, t, f, k, names, keys, cpu, ratio, lo, hi, worst, arm, arms, target) {
  n = 0
  for (k in rg) {
    split(k, f, "/"); sub(/^turns=/, "", f[4])
    names[++n] = k; keys[n] = sprintf("%d%d%06d", f[2] != "sqlite", f[3] != "script", f[4])
  }
  if (n == 0) return
  for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (keys[j] < keys[i]) {
    t = keys[i]; keys[i] = keys[j]; keys[j] = t; t = names[i]; names[i] = names[j]; names[j] = t
  }
  print "\none long generation'"'"'s record (BenchmarkRecordGrowth), medians:"
  printf "| %-8s | %-6s | %5s | %15s | %16s | %16s | %15s | %11s | %15s | %10s |\n", "store", "model", "turns", "written MiB/gen", "written KiB/turn", "content KiB/turn", "written/content", "CPU ms/turn", "checkpoints/gen", "wall s/gen"
  for (i = 1; i <= n; i++) {
    k = names[i]; split(k, f, "/"); sub(/^turns=/, "", f[4])
    cpu = median(rgm[k, "cpu-ms/turn"]); ratio = median(rgm[k, "written/content"])
    printf "| %-8s | %-6s | %5d | %15.1f | %16.0f | %16.1f | %14.1fx | %11.2f | %15.0f | %10.2f |\n", f[2], f[3], f[4],
      median(rgm[k, "written-MiB/gen"]), median(rgm[k, "written-KiB/turn"]), median(rgm[k, "content-KiB/turn"]),
      ratio, cpu, median(rgm[k, "checkpoints/gen"]), median(rgm[k, "ns/op"]) / 1e9
    arm = f[2] " " f[3]
    if (!(arm in lo)) { lo[arm] = cpu; lo[arm, "n"] = f[4] + 0; arms[++m] = arm }
    hi[arm] = cpu; hi[arm, "n"] = f[4] + 0
    if (ratio > worst[arm]) worst[arm] = ratio
  }
  for (i = 1; i <= m; i++) {
    arm = arms[i]; target = arm ~ /script$/
    printf "%s: written/content at most %.1fx%s", arm, worst[arm], target ? " (target <= 4x at every N)" : ""
    if (hi[arm, "n"] > lo[arm, "n"]) printf "; CPU per turn, %d turns / %d: %.2fx%s", hi[arm, "n"], lo[arm, "n"], hi[arm] / lo[arm], target ? " (target <= 2x)" : ""
    printf "\n"
  }
}' "$1"
