#!/usr/bin/env bash
# include/cudaev.hpp and include/cudaev_asio.hpp with every C++ compiler
# here (g++, clang++): tests/unit/cxx_handles.cc as C++17 and C++20,
# tests/unit/cxx_asio.cc and examples/loop_asio.cpp (--promises) as C++20,
# each with -Wall -Wextra -pedantic -Werror and UBSan, run against this
# build's libcudart.so.13. A compiler that cannot build Asio's coroutines
# skips those two and says so. Exit 77 (skipped) without a C++ compiler.
#
#   cxx_asio_std.sh SOURCE_DIR BUILD_DIR TOOLKIT
set -u
src=$1 build=$2 toolkit=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
flags=(-Wall -Wextra -pedantic -Werror -fsanitize=undefined -fno-sanitize-recover=all
  -I"$src/include" -isystem "$toolkit/include" -pthread)
link=(-L"$build" -l:libcudart.so.13 -Wl,-rpath,"$build")
fail=0 found=0

# build_run NAME CXX STD FILE ARGS...: builds FILE, runs it with ARGS.
build_run() {
  local name=$1 cxx=$2 std=$3 file=$4
  shift 4
  local exe="$tmp/$name-$cxx-$std"
  if ! "$cxx" -std=c++$std "${flags[@]}" "$file" -o "$exe" "${link[@]}" 2>"$tmp/log"; then
    echo "FAIL  $cxx -std=c++$std: $name does not compile"
    head -n 40 "$tmp/log"
    fail=1
    return
  fi
  if "$exe" "$@" >"$tmp/log" 2>&1; then
    echo "ok    $cxx -std=c++$std: $(tail -n 1 "$tmp/log")"
  else
    echo "FAIL  $cxx -std=c++$std: $name failed"
    cat "$tmp/log"
    fail=1
  fi
}

coro='#include <asio/awaitable.hpp>
#include <coroutine>
asio::awaitable<void> f() { co_return; }
int main() { return 0; }'
for cxx in g++ clang++; do
  command -v "$cxx" >/dev/null || continue
  found=1
  for std in 17 20; do
    build_run cxx_handles "$cxx" $std "$src/tests/unit/cxx_handles.cc"
  done
  if ! printf '%s\n' "$coro" | "$cxx" -std=c++20 -x c++ -fsyntax-only - 2>/dev/null; then
    echo "skip  $cxx -std=c++20: no Asio with coroutines here: cxx_asio, loop_asio not built"
    continue
  fi
  build_run cxx_asio "$cxx" 20 "$src/tests/unit/cxx_asio.cc"
  build_run loop_asio "$cxx" 20 "$src/examples/loop_asio.cpp" --promises
done
if [ $found = 0 ]; then
  echo "cxx_asio_std: no C++ compiler (g++, clang++): skipped"
  exit 77
fi
exit $fail
