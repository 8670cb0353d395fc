#!/usr/bin/env bash
# Fails when a tracked file is something a build makes: an executable
# binary (ELF, Mach-O, PE, or any file git tracks as executable that is not
# text) or anything over 1 MiB, unless ALLOWED lists it.
set -euo pipefail
cd "$(dirname "$0")/.."

# Large files that belong in the repository, each for a reason.
ALLOWED=(
  proto/accepted-api.binpb  # the last accepted API, guarded by buf breaking
  package-lock.json         # npm's pins for buf, the protoc plugins and the MCP servers
)
MAX_BYTES=$((1024 * 1024))

allowed() {
  local f
  for f in "${ALLOWED[@]}"; do [[ "$1" == "$f" ]] && return 0; done
  return 1
}

bad=0
while IFS= read -r -d '' entry; do
  mode=${entry%% *}
  path=${entry#*$'\t'}
  [[ -f "$path" ]] || continue # deleted in the work tree, not yet committed
  allowed "$path" && continue
  size=$(stat -c %s -- "$path")
  if (( size > MAX_BYTES )); then
    echo "tracked file over 1 MiB: $path ($size bytes)"; bad=1; continue
  fi
  magic=$(head -c 4 -- "$path" | od -An -tx1 | tr -d ' \n')
  case "$magic" in
    7f454c46 | cafebabe | feedface | feedfacf | cefaedfe | cffaedfe | 4d5a*)
      echo "tracked executable binary: $path"; bad=1; continue ;;
  esac
  if [[ "$mode" == 100755 ]] && grep -qI . -- "$path" 2>/dev/null; then
    : # an executable text file: a script
  elif [[ "$mode" == 100755 ]] && (( size > 0 )); then
    echo "tracked executable binary: $path"; bad=1
  fi
done < <(git ls-files -s -z | sed -z 's/^\([0-9]*\) [0-9a-f]* [0-9]*\t/\1 \t/')

if (( bad )); then
  echo "remove these files from git (a build makes them), or add them to ALLOWED in $0 with a reason"
  exit 1
fi
