#!/usr/bin/env bash
# Fails when a tracked C/CUDA source differs from what clang-format makes of
# it under the committed .clang-format (clang-format 14, Debian bookworm's).
# Prints the files that drift and one line "N passed, N failed" (one check).
#
#   tools/check-format.sh          check every tracked *.c *.h *.cu *.cuh
#   tools/check-format.sh --fix    reformat the files that drift, in place
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
fix=0
[ "${1:-}" = --fix ] && fix=1
cf=${CLANG_FORMAT:-clang-format}
if ! command -v "$cf" >/dev/null; then
  echo "check-format: $cf not found (tools/deps.sh installs it)"; echo "0 passed, 1 failed"; exit 1
fi
# Other versions wrap some lines differently; say so instead of failing mysteriously.
"$cf" --version | grep -q 'version 14\.' ||
  echo "check-format: note: $("$cf" --version) is not clang-format 14; CI uses 14"

mapfile -t files < <(git ls-files -- '*.c' '*.h' '*.cu' '*.cuh')
drift=()
for f in "${files[@]}"; do
  "$cf" --dry-run --Werror "$f" >/dev/null 2>&1 || drift+=("$f")
done
if [ ${#drift[@]} -eq 0 ]; then
  echo "check-format: ${#files[@]} files match .clang-format"
  echo "1 passed, 0 failed"
  exit 0
fi
if [ $fix = 1 ]; then
  "$cf" -i "${drift[@]}"
  status=0
  for f in "${drift[@]}"; do
    if "$cf" --dry-run --Werror "$f" >/dev/null 2>&1; then
      echo "check-format: reformatted $f"
    else
      # clang-format 14 does not always settle (long X-macro lists without
      # one entry per line): such a construct needs rewriting by hand.
      echo "check-format: $f still differs after reformatting: clang-format does not settle on it"
      status=1
    fi
  done
  exit $status
fi
for f in "${drift[@]}"; do
  echo "check-format: $f: $("$cf" --dry-run "$f" 2>&1 | grep -c 'warning:') places differ"
done
echo "check-format: ${#drift[@]} of ${#files[@]} files drift from .clang-format;" \
  "see the changes with 'clang-format --dry-run FILE', apply them with 'tools/check-format.sh --fix'"
echo "0 passed, 1 failed"
exit 1
