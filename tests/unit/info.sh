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

# --help and -h: the help on stdout, nothing on stderr, exit 0, without
# asking the runtime anything (no result line). An unknown option: the
# usage on stderr, nothing on stdout, exit 2.
for opt in --help -h; do
  rc=0
  out=$("$info" "$opt" 2>/dev/null) || rc=$?
  err=$("$info" "$opt" 2>&1 >/dev/null) || true
  [ "$rc" = 0 ] || fail "$opt: exit $rc"
  [ -z "$err" ] || fail "$opt: wrote to stderr: $err"
  echo "$out" | head -n 1 | grep -q "^usage: cudaev-info " || fail "$opt: no usage line first: $out"
  echo "$out" | grep -q "^  -q " || fail "$opt: -q not described"
  echo "$out" | grep -q "^Exit status:" || fail "$opt: exit statuses not described"
  echo "$out" | grep -q "^result:" && fail "$opt: ran the probe (a result line)"
done
echo "--help: exit 0, $(echo "$out" | wc -l) lines"
for args in "-x" "--bogus" "-q -q"; do
  rc=0
  # shellcheck disable=SC2086
  out=$("$info" $args 2>&1 >/dev/null) || rc=$?
  [ "$rc" = 2 ] || fail "'$args': exit $rc, not 2"
  echo "$out" | grep -q "^usage: cudaev-info " || fail "'$args': no usage on stderr: $out"
  # shellcheck disable=SC2086
  [ -z "$("$info" $args 2>/dev/null)" ] || fail "'$args': wrote to stdout"
done
echo "unknown options: exit 2, usage on stderr"

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
