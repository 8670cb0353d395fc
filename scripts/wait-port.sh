#!/usr/bin/env bash
# wait-port.sh HOST:PORT [SECONDS]: wait until a TCP port accepts connections.
set -euo pipefail
host=${1%:*} port=${1##*:} limit=${2:-20}
for ((i = 0; i < limit * 10; i++)); do
  if (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; then exit 0; fi
  sleep 0.1
done
echo "nothing listens on $1 after ${limit}s" >&2
exit 1
