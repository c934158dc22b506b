#!/usr/bin/env bash
# Runs tests/pytorch/ddp.py under torchrun, one process a GPU (NCCL), on
# NVIDIA's runtime and with ours preloaded (LD_PRELOAD, inherited by the
# ranks); requires every rank's transcript identical between the two runs
# and each rank's process to resolve cudaMalloc to the intended library.
# Skips (77) with fewer than two GPUs: NCCL refuses two ranks on one GPU.
# DDP_NPROC=N runs N ranks instead of one a GPU (DDP_NPROC=1 checks the
# script itself on a one-GPU machine).
#
#   tests/pytorch/ddp.sh [BUILD_DIR] [LOG_DIR]
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=$(cd "${1:-$here/../../build}" && pwd)
logs=${2:-$build/ddp-logs}
mkdir -p "$logs"
ours=$(readlink -f "$build/libcudart.so.13")
python3 -c 'import torch' 2>/dev/null || { echo "SKIP: no PyTorch here"; exit 77; }
n=$(python3 -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)
if [ -n "${DDP_NPROC:-}" ]; then
  [ "$DDP_NPROC" -ge 1 ] && [ "$DDP_NPROC" -le "${n:-0}" ] ||
    { echo "SKIP: DDP_NPROC=$DDP_NPROC with $n GPU(s)"; exit 77; }
  n=$DDP_NPROC
fi
[ "${n:-0}" -ge 2 ] || [ -n "${DDP_NPROC:-}" ] || { echo "SKIP: $n GPU(s); DDP over NCCL needs two"; exit 77; }
# NVLink multicast stays off: a program that uses it can take the host's
# shared GPUs out of service.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
run() { # NAME [PRELOAD]
  mkdir -p "$logs/$1"
  DDP_OUT=$logs/$1 LD_PRELOAD=${2:-} timeout 240 python3 -m torch.distributed.run \
    --standalone --nproc_per_node "$n" "$here/ddp.py" >"$logs/$1/stdout" 2>"$logs/$1/stderr"
}
run nvidia; nv=$?
run cudaev "$ours"; us=$?
fail=0
for r in $(seq 0 $((n - 1))); do
  line=$(grep "^\[cudart\] rank $r:" "$logs/cudaev/stderr" | tail -n 1)
  echo "$line" | grep -q "cudaMalloc-from=$ours\$" ||
    { echo "FAIL: rank $r of our run did not resolve cudaMalloc to $ours: $line"; fail=1; }
  grep "^\[cudart\] rank $r:" "$logs/nvidia/stderr" | tail -n 1 | grep -q "cudaMalloc-from=$ours" &&
    { echo "FAIL: rank $r of the NVIDIA run used ours"; fail=1; }
  if ! cmp -s "$logs/nvidia/rank$r.txt" "$logs/cudaev/rank$r.txt"; then
    echo "FAIL: rank $r transcripts differ (- NVIDIA, + cudaev):"
    diff -u "$logs/nvidia/rank$r.txt" "$logs/cudaev/rank$r.txt" | head -40; fail=1
  fi
done
[ "$nv" = 0 ] || { echo "FAIL: the NVIDIA run exited $nv"; tail -n 20 "$logs/nvidia/stderr"; fail=1; }
[ "$us" = 0 ] || { echo "FAIL: our run exited $us"; tail -n 20 "$logs/cudaev/stderr"; fail=1; }
echo "--- cudaev rank 0 transcript:"; cat "$logs/cudaev/rank0.txt" 2>/dev/null
grep '^\[cudart\]' "$logs/cudaev/stderr" | sed 's/^/--- cudaev: /'
grep '^\[cudart\]' "$logs/nvidia/stderr" | sed 's/^/--- NVIDIA: /'
[ "$fail" = 0 ] && { echo "ddp: 1 passed, 0 failed"; exit 0; }
echo "ddp: 0 passed, 1 failed"; exit 1
