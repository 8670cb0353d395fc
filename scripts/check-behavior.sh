#!/usr/bin/env bash
# check-behavior.sh [ROOT]: every behaviour id that a Go test names must be
# described in docs/behavior.md, and every id described there must be named
# by a test. Prints both differences and fails on either. ROOT is the
# repository (default: the one holding this script).
#
# An id is R or X, a dash, one or two capitals and a number, standing
# alone: with a letter, a digit or an underscore right before its R or X, or
# right after its number, it is not an id. Test files are the *_test.go
# files under ROOT, outside node_modules and .git.
set -euo pipefail

root=${1:-"$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"}
doc=docs/behavior.md
id='\b[RX]-[A-Z]{1,2}[0-9]+\b'
export LC_ALL=C

cd "$root"
if [[ ! -f $doc ]]; then
  echo "check-behavior: $doc is missing" >&2
  exit 1
fi

# "id<TAB>file" for every id a test file names.
named=$(find . \( -name node_modules -o -name .git \) -prune -o -type f -name '*_test.go' -print0 |
  xargs -0 -r grep -oE -- "$id" /dev/null |
  awk -F: '{ sub(/^\.\//, "", $1); print $2 "\t" $1 }' | sort -u)
tested=$(cut -f1 <<<"$named" | sed '/^$/d' | sort -u)
described=$(grep -oE -- "$id" "$doc" | sort -u || true)

undescribed=$(comm -23 <(echo "$tested") <(echo "$described") | sed '/^$/d')
untested=$(comm -13 <(echo "$tested") <(echo "$described") | sed '/^$/d')

if [[ -z $undescribed && -z $untested ]]; then
  echo "check-behavior: $(grep -c . <<<"$tested") behaviour ids, each named by a test and described in $doc"
  exit 0
fi
if [[ -n $undescribed ]]; then
  echo "$doc does not describe these ids, which tests name:"
  while read -r i; do
    printf '  %-6s %s\n' "$i" "$(awk -F'\t' -v i="$i" '$1 == i { printf "%s%s", sep, $2; sep = ", " }' <<<"$named")"
  done <<<"$undescribed"
fi
if [[ -n $untested ]]; then
  echo "$doc describes these ids, which no test names:"
  while read -r i; do
    printf '  %s\n' "$i"
  done <<<"$untested"
fi
exit 1
