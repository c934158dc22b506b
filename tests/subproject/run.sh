#!/bin/sh
# cudaev as a Meson subproject: a copy of tests/subproject/ gets
# subprojects/cudaev (a symlink to this source tree), is configured with
# the fallback forced (an installed cudaev.pc must not be picked instead),
# built, and its program run; it must load the subproject's library.
#   run.sh SOURCE_DIR WORK_DIR
set -eu
src=$(cd "$1" && pwd) work=$2
rm -rf "$work"
mkdir -p "$work/subprojects"
work=$(cd "$work" && pwd)
cp "$src/tests/subproject/meson.build" "$src/tests/subproject/consumer.c" "$work/"
ln -s "$src" "$work/subprojects/cudaev"
# Only what this test builds: the library and the program (the subproject
# leaves out its tests, examples and benchmarks by itself).
meson setup "$work/build" "$work" --force-fallback-for=cudaev >"$work/setup.log" 2>&1 ||
  { tail -n 30 "$work/setup.log"; exit 1; }
ninja -C "$work/build" consumer >"$work/build.log" 2>&1 || { tail -n 30 "$work/build.log"; exit 1; }
out=$(env -u LD_LIBRARY_PATH "$work/build/consumer")
echo "$out"
[ "$out" = "consumer: promise cudaSuccess" ] || exit 1
env -u LD_LIBRARY_PATH ldd "$work/build/consumer" | grep -q "libcudart.so.13 => $work/build/subprojects/cudaev/libcudart.so.13" ||
  { echo "FAIL: not the subproject's library:"; ldd "$work/build/consumer"; exit 1; }
rm -rf "$work"
echo "ok: cudaev as a subproject"
