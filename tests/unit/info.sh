#!/bin/sh
# cudaev-info runs on any machine: exit 0 with a GPU, 2 without (and its
# result line says why), and reports the library it loaded and the loop
# modes. With the toolkit's stub libcuda.so in front it must say so and
# exit 2, whatever the machine has.
#   info.sh CUDAEV_INFO LIBCUDART TOOLKIT
set -eu
info=$1 lib=$2 toolkit=$3
fail() { echo "FAIL: $*"; exit 1; }
rc=0
out=$("$info") || rc=$?
echo "$out"
echo "$out" | grep -qx "libcudart.so.13: $(readlink -f "$lib")" || fail "not the build's library"
echo "$out" | grep -qx "  thread:  ok" || fail "no thread loop"
echo "$out" | grep -qx "  foreign: ok" || fail "no foreign loop"
echo "$out" | grep -q "^  CUDAEV_HOST_POOL " || fail "no host pool setting"
result=$(echo "$out" | tail -n 1)
case "$rc:$result" in
  "0:result: GPU: "*) echo "$out" | grep -q "stream memory operations: " || fail "no mem-op probe" ;;
  "2:result: no GPU: cuda"*) ;;
  *) fail "exit $rc with: $result" ;;
esac
[ "$("$info" -q)" = "$result" ] || fail "-q does not print the result line alone"

stub="$toolkit/lib64/stubs/libcuda.so"
if [ -e "$stub" ]; then
  dir=$(mktemp -d)
  trap 'rm -rf "$dir"' EXIT
  ln -s "$stub" "$dir/libcuda.so.1"
  rc=0
  out=$(LD_LIBRARY_PATH="$dir" "$info" -q) || rc=$?
  [ "$rc" = 2 ] && [ "$out" = "result: no GPU: cudaErrorStubLibrary (CUDA driver is a stub library)" ] ||
    fail "stub driver: exit $rc: $out"
  echo "stub driver: exit 2: $out"
fi
echo "ok: cudaev-info exit $rc"
