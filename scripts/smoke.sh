#!/usr/bin/env bash
# smoke.sh "GRPCURL" AGENT_ADDR BRIDGE_ADDR
# Starts `agentd serve` and `agentd bridge`, and checks with grpcurl what a
# newcomer would: each lists its service, health and reflection, and health
# answers SERVING, liveness and readiness too; agentd version answers. Both processes are stopped by the PIDs recorded here.
set -euo pipefail
grpcurl=$1 agent=$2 bridge=$3
pids=()
state=$(mktemp -d)
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; rm -rf "$state"' EXIT

AGENTD_LISTEN=$agent AGENTD_STATE_DIR=$state AGENTD_SHUTDOWN_DRAIN=0 bin/agentd serve 2>/tmp/agentd-smoke.log & pids+=($!)
AGENTD_BRIDGE_LISTEN=$bridge bin/agentd bridge 2>/tmp/agentd-bridge-smoke.log & pids+=($!)
scripts/wait-port.sh "$agent"
scripts/wait-port.sh "$bridge"

check() { # check ADDR SERVICE
  local list
  list=$($grpcurl -plaintext "$1" list)
  for want in "$2" grpc.health.v1.Health grpc.reflection.v1.ServerReflection; do
    grep -qx "$want" <<<"$list" || { echo "$1 does not list $want:"; echo "$list"; exit 1; }
  done
  $grpcurl -plaintext -d "{\"service\":\"$2\"}" "$1" grpc.health.v1.Health/Check | grep -q '"SERVING"' ||
    { echo "$1: health of $2 is not SERVING"; exit 1; }
  echo "$1: lists $2, health, reflection; $2 is SERVING"
}
# Kubernetes' probes: liveness and readiness, on both.
probe() { # probe ADDR NAME
  $grpcurl -plaintext -d "{\"service\":\"$2\"}" "$1" grpc.health.v1.Health/Check | grep -q '"SERVING"' ||
    { echo "$1: $2 is not SERVING"; exit 1; }
}
for addr in "$agent" "$bridge"; do
  probe "$addr" liveness
  probe "$addr" readiness
  echo "$addr: liveness and readiness are SERVING"
done
# agentd version says which build it is: version, commit and Go release.
bin/agentd version | grep -q '^agentd .* (commit .*, go' || { echo "agentd version: $(bin/agentd version)"; exit 1; }
echo "$(bin/agentd version)"
check "$agent" agentd.v1.AgentService
check "$agent" agentd.bridge.v1.BridgeAdminService
check "$bridge" agentd.bridge.v1.BridgeService
check "$bridge" agentd.bridge.v1.BridgeAdminService
# The admin API answers over gRPC: the demo server's pool is listed.
$grpcurl -plaintext "$agent" agentd.bridge.v1.BridgeAdminService/GetPoolStats | grep -q '"serverName": "demo"' ||
  { echo "$agent: GetPoolStats does not list the demo pool"; exit 1; }
$grpcurl -plaintext "$agent" agentd.bridge.v1.BridgeAdminService/GetCacheStats | grep -q '"enabled": true' ||
  { echo "$agent: GetCacheStats does not report the cache"; exit 1; }
echo "$agent: the admin API reports the demo pool and the cache"
