#!/usr/bin/env bash
# include/cudaev.h from C++: cxx_outcomes.cc built as C++11, 14, 17 and 20
# with -Wall -Wextra -pedantic -Werror and UBSan (-fsanitize=undefined,
# whose enum check catches an outcome outside cudaError's range), by every
# C++ compiler here (g++, clang++), and each build run against this build's
# libcudart.so.13. The header alone must also pass C11 and C17 with the same
# warnings, and a use of a version 0 name must warn, naming its
# replacement, in C and in C++. Exit 77 (skipped) without a C++ compiler.
#
#   cxx_std.sh SOURCE_DIR BUILD_DIR TOOLKIT
set -u
src=$1 build=$2 toolkit=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
warn=(-Wall -Wextra -pedantic -Werror)
inc=(-I"$src/include" -I"$src/src" -isystem "$toolkit/include")
fail=0

for cc in gcc clang; do
  command -v "$cc" >/dev/null || continue
  for std in c11 c17; do
    if printf '#include <cudaev.h>\nint main(void) { return CUDAEV_ERROR_TIMEOUT == cudaSuccess; }\n' |
      "$cc" -std=$std "${warn[@]}" "${inc[@]}" -x c -fsyntax-only - 2>"$tmp/log"; then
      echo "ok    $cc -std=$std: the header"
    else
      echo "FAIL  $cc -std=$std: the header does not compile"
      cat "$tmp/log"
      fail=1
    fi
  done
done

# A deprecated name: the compiler must refuse it under -Werror and name the
# new one.
old='#include <cudaev.h>
int main(void) { cudaev_future_t *f; return cudaev_timer_future(0, 1, &f) != cudaSuccess; }'
for c in "gcc -x c -std=c11" "clang -x c -std=c11" "g++ -x c++ -std=c++11" "clang++ -x c++ -std=c++14" \
  "g++ -x c++ -std=c++20"; do
  command -v "${c%% *}" >/dev/null || continue
  # shellcheck disable=SC2086
  if printf '%s\n' "$old" | $c "${warn[@]}" "${inc[@]}" -fsyntax-only - 2>"$tmp/log"; then
    echo "FAIL  $c: a version 0 name compiles without a warning"
    fail=1
  elif grep -q 'cudaev_future_new_timer' "$tmp/log" && grep -qi 'deprecated' "$tmp/log"; then
    echo "ok    $c: a version 0 name warns and names its replacement"
  else
    echo "FAIL  $c: a version 0 name fails for another reason"
    cat "$tmp/log"
    fail=1
  fi
done

found=0
for cxx in g++ clang++; do
  command -v "$cxx" >/dev/null || continue
  found=1
  for std in 11 14 17 20; do
    exe="$tmp/cxx_outcomes-$cxx-$std"
    if ! "$cxx" -std=c++$std "${warn[@]}" -fsanitize=undefined -fno-sanitize-recover=all "${inc[@]}" \
      "$src/tests/unit/cxx_outcomes.cc" -o "$exe" -L"$build" -l:libcudart.so.13 \
      -Wl,-rpath,"$build" 2>"$tmp/log"; then
      echo "FAIL  $cxx -std=c++$std: cxx_outcomes.cc does not compile"
      cat "$tmp/log"
      fail=1
      continue
    fi
    if "$exe" >"$tmp/log" 2>&1; then
      echo "ok    $cxx -std=c++$std: $(tail -n 1 "$tmp/log")"
    else
      echo "FAIL  $cxx -std=c++$std: cxx_outcomes failed"
      cat "$tmp/log"
      fail=1
    fi
  done
done
if [ $found = 0 ]; then
  echo "cxx_std: no C++ compiler (g++, clang++): skipped"
  exit 77
fi
exit $fail
