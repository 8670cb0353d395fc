#!/usr/bin/env bash
# Cyclomatic complexity of agentd's own code (non-test, non-generated Go),
# by gocyclo (pinned in tools/go.mod): prints the average and the functions
# over 15, most complex first. Fails when the average passes MAX_AVERAGE,
# or when a function of 25 or more does not say why it stays whole: its doc
# comment must say why, in a sentence with the words "stays long because".
set -euo pipefail
cd "$(dirname "$0")/.."

MAX_AVERAGE=${MAX_AVERAGE:-4.0}
LIST_OVER=15
SPLIT_AT=25
GOCYCLO=(go tool -modfile=tools/go.mod gocyclo)

mapfile -t files < <(git ls-files '*.go' | grep -v -e '^gen/' -e '_test\.go$')
average=$("${GOCYCLO[@]}" -avg "${files[@]}" | awk '/^Average:/ {print $2}')
echo "cyclomatic complexity: average $average over ${#files[@]} files (at most $MAX_AVERAGE); functions over $LIST_OVER:"
{ "${GOCYCLO[@]}" -over "$LIST_OVER" "${files[@]}" || true; } | sed "s/^/  /"

bad=0
if awk -v a="$average" -v m="$MAX_AVERAGE" 'BEGIN {exit !(a > m)}'; then
  echo "the average $average is over $MAX_AVERAGE: split the functions that grew, along their steps"
  bad=1
fi
# "N pkg name file:line:col": the doc comment is the run of // lines above.
while read -r n _ name pos; do
  file=${pos%%:*}; line=${pos#*:}; line=${line%%:*}
  doc=$(awk -v end="$line" 'NR < end { if ($0 ~ /^\/\//) buf = buf "\n" $0; else buf = "" } NR == end { print buf; exit }' "$file")
  if ! grep -q "stays long because" <<<"$doc"; then
    echo "$file:$line: $name has cyclomatic complexity $n (at least $SPLIT_AT): split it, or say why in its doc comment (\"It stays long because ...\")"
    bad=1
  fi
done < <("${GOCYCLO[@]}" -over $((SPLIT_AT - 1)) "${files[@]}" || true)
exit $bad
