#!/bin/sh
# Runs one gpu-suite program twice, on NVIDIA's libcudart.so.13 and on ours,
# and requires the same transcript (stdout) and exit code from both, and
# that each run mapped the library it was meant to: the loader's own
# LD_DEBUG=libs record ("calling init: .../libcudart.so.13") or the
# "[cudart] path" line of tests/gpu/common.h must name it.
#
#   compare.sh OURS_LIBDIR NVIDIA_LIBCUDART PROGRAM [ARGS...]
#
# Exits 77 (skipped) when this machine has no NVIDIA GPU and driver, and
# when both runs exit 77 with the same transcript: the program found no
# loader or device it needs (the interop programs), and says which.
set -u
ours_dir=$1; nvidia_lib=$2; shift 2
if [ ! -e /dev/nvidiactl ] && [ ! -e /dev/nvidia0 ]; then
  # The reason alone on the SKIP line, worded as every gpu test words it, so
  # that run.sh counts them as one group.
  echo "to run the gpu suite on a GPU machine: tests/gpu/run.sh (tests/gpu/README.md)"
  echo "SKIP: no NVIDIA GPU on this machine (no /dev/nvidia0)"
  exit 77
fi
nvidia_dir=$(dirname "$nvidia_lib")
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
LD_DEBUG=libs LD_LIBRARY_PATH="$nvidia_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@" >"$tmp/nv.out" 2>"$tmp/nv.err"; nv_rc=$?
LD_DEBUG=libs LD_LIBRARY_PATH="$ours_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@" >"$tmp/ours.out" 2>"$tmp/ours.err"; ours_rc=$?
# Ours alone again, where a crash in a TREFUSE child must show.
CUDAEV_TEST_NO_CRASH=1 LD_LIBRARY_PATH="$ours_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@" >"$tmp/ours2.out" 2>/dev/null
if [ -n "${CUDAEV_TRANSCRIPTS:-}" ]; then
  name=$(basename "$1")
  mkdir -p "$CUDAEV_TRANSCRIPTS"
  cp "$tmp/nv.out" "$CUDAEV_TRANSCRIPTS/$name.nvidia.out"
  cp "$tmp/ours.out" "$CUDAEV_TRANSCRIPTS/$name.cudaev.out"
fi
fail=0
ours_real=$(readlink -f "$ours_dir/libcudart.so.13")
nv_real=$(readlink -f "$nvidia_lib")
mapped() { # LOG REALPATH PATH: did the run load this libcudart?
  grep -E "(calling init: |^\[cudart\] )($2|$3)" "$1" >/dev/null
}
mapped "$tmp/nv.err" "$nv_real" "$nvidia_lib" ||
  { echo "FAIL: NVIDIA run did not map $nvidia_lib"; grep -E 'calling init: .*libcudart|^\[cudart\]' "$tmp/nv.err"; fail=1; }
mapped "$tmp/ours.err" "$ours_real" "$ours_dir/libcudart.so.13" ||
  { echo "FAIL: our run did not map $ours_dir/libcudart.so.13"; grep -E 'calling init: .*libcudart|^\[cudart\]' "$tmp/ours.err"; fail=1; }
if ! cmp -s "$tmp/nv.out" "$tmp/ours.out"; then
  echo "FAIL: transcripts differ (- NVIDIA, + cudaev):"
  diff -u "$tmp/nv.out" "$tmp/ours.out" | head -80
  fail=1
fi
if grep -q -- "-> CRASHED" "$tmp/ours2.out"; then
  echo "FAIL: our runtime crashed on:"; grep -- "-> CRASHED" "$tmp/ours2.out"; fail=1
fi
case $ours_rc in 1[3-5][0-9]) echo "FAIL: our run died with signal $((ours_rc - 128))"; fail=1 ;; esac
if [ "$nv_rc" != "$ours_rc" ]; then
  echo "FAIL: exit codes differ: NVIDIA $nv_rc, cudaev $ours_rc"
  fail=1
fi
echo "--- transcript (cudaev), exit $ours_rc:"; head -200 "$tmp/ours.out"
echo "--- stderr (cudaev):"; grep -v '^ *[0-9]*:' "$tmp/ours.err" | head -50
grep -E 'calling init: .*libcudart' "$tmp/ours.err" "$tmp/nv.err" | sed 's/^/--- /' 
[ "$fail" = 0 ] && [ "$nv_rc" = 0 ] && exit 0
# Both runs skipped alike (a program that found no EGL device, Vulkan
# driver or loader says why on its last line): a skip, not a failure.
[ "$fail" = 0 ] && [ "$nv_rc" = 77 ] && { echo "SKIP: both runs skipped: $(tail -n 1 "$tmp/ours.out" | sed 's/^SKIP: //')"; exit 77; }
[ "$fail" = 0 ] && { echo "FAIL: both runs exited $nv_rc"; exit 1; }
exit 1
