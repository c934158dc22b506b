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
# The last line each run printed says where cudaMalloc resolves in the
# process's global scope: ours in our run, NVIDIA's in the other.
ours_real=$(readlink -f "$ours")
grep "^\[cudart\]" "$logs/cudaev.err" | tail -n 1 | grep -q "cudaMalloc-from=$ours_real\$" ||
  { echo "FAIL: in our run cudaMalloc did not resolve to $ours_real:"; grep '^\[cudart\]' "$logs/cudaev.err"; fail=1; }
grep "^\[cudart\]" "$logs/nvidia.err" | tail -n 1 | grep -q "cudaMalloc-from=$ours_real" &&
  { echo "FAIL: the NVIDIA run used ours"; fail=1; }
if ! cmp -s "$logs/nvidia.out" "$logs/cudaev.out"; then
  echo "FAIL: transcripts differ (- NVIDIA, + cudaev):"; diff -u "$logs/nvidia.out" "$logs/cudaev.out" | head -60; fail=1
fi
[ "$nv" = "$us" ] || { echo "FAIL: exit codes differ: NVIDIA $nv, cudaev $us"; fail=1; }
echo "--- cudaev transcript (exit $us):"; cat "$logs/cudaev.out"
echo "--- cudaev: $(grep '^\[cudart\]' "$logs/cudaev.err" | tail -n 1)"
echo "--- NVIDIA: $(grep '^\[cudart\]' "$logs/nvidia.err" | tail -n 1)"
echo "--- cudaev stderr (tail):"; grep -v '^\[cudart\]' "$logs/cudaev.err" | tail -n 20
echo "--- NVIDIA stderr (tail):"; tail -n 5 "$logs/nvidia.err"
[ "$fail" = 0 ] && [ "$nv" = 0 ] && { echo "pytorch: 1 passed, 0 failed"; exit 0; }
echo "pytorch: 0 passed, 1 failed"; exit 1
