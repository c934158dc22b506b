#!/usr/bin/env bash
# Runs tests/pytorch/dropin.py on NVIDIA's runtime and on ours
# (LD_PRELOAD: PyTorch's RPATH defeats LD_LIBRARY_PATH) and requires
# identical transcripts, and that each run mapped the intended library.
#
#   tests/pytorch/run.sh [BUILD_DIR] [LOG_DIR]
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=$(cd "${1:-$here/../../build}" && pwd)
logs=${2:-$build/pytorch-logs}
mkdir -p "$logs"
ours=$build/libcudart.so.13
python3 -c 'import torch' 2>/dev/null || { echo "SKIP: no PyTorch here"; exit 77; }
export PYTHONUNBUFFERED=1
python3 "$here/dropin.py" >"$logs/nvidia.out" 2>"$logs/nvidia.err"; nv=$?
LD_PRELOAD=$ours python3 "$here/dropin.py" >"$logs/cudaev.out" 2>"$logs/cudaev.err"; us=$?
fail=0
grep -q "^\[cudart\] .*$(readlink -f "$ours" | xargs basename)" "$logs/cudaev.err" &&
  ! grep "^\[cudart\]" "$logs/cudaev.err" | grep -qv "$build" ||
  { echo "FAIL: our run did not map only $ours:"; grep '^\[cudart\]' "$logs/cudaev.err"; fail=1; }
grep "^\[cudart\]" "$logs/nvidia.err" | grep -q "$build" &&
  { echo "FAIL: the NVIDIA run mapped ours"; fail=1; }
if ! cmp -s "$logs/nvidia.out" "$logs/cudaev.out"; then
  echo "FAIL: transcripts differ (- NVIDIA, + cudaev):"; diff -u "$logs/nvidia.out" "$logs/cudaev.out" | head -60; fail=1
fi
[ "$nv" = "$us" ] || { echo "FAIL: exit codes differ: NVIDIA $nv, cudaev $us"; fail=1; }
echo "--- cudaev transcript (exit $us):"; cat "$logs/cudaev.out"
echo "--- cudaev stderr (tail):"; tail -n 30 "$logs/cudaev.err"
echo "--- NVIDIA stderr (tail):"; tail -n 5 "$logs/nvidia.err"
[ "$fail" = 0 ] && [ "$nv" = 0 ] && { echo "pytorch: 1 passed, 0 failed"; exit 0; }
echo "pytorch: 0 passed, 1 failed"; exit 1
