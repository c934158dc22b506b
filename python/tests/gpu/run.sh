#!/usr/bin/env bash
# The Python package on the GPU machine: installs the carried wheel into a
# temporary folder (no network), runs the GPU tests (pytest if the
# interpreter has it, else the file's own runner) and bench/py_await.py,
# with every log under OUTDIR.
#
#   python/tests/gpu/run.sh OUTDIR [WHEEL]
#   (WHEEL default: build/py-dist/cudaev-*.whl; PYTHON default: python3)
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
out=${1:?usage: run.sh OUTDIR [WHEEL]}
whl=${2:-$(ls "$root"/build/py-dist/cudaev-*.whl 2>/dev/null | head -1)}
py=${PYTHON:-python3}
mkdir -p "$out"
out=$(cd "$out" && pwd)
[ -f "$whl" ] || { echo "run.sh: no wheel (build it with tools/py-wheel.sh and carry build/py-dist)"; exit 1; }
site=$(mktemp -d)
trap 'rm -rf "$site"' EXIT
{
  echo "# $($py -VV)"
  echo "# wheel $whl"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1
  $py -c 'import torch; print("# torch", torch.__version__, torch.version.cuda)' 2>&1
} | tee "$out/env.txt"
if ! $py -m pip install -q --no-deps --no-index --target "$site" "$whl" >"$out/install.log" 2>&1; then
  echo "# pip could not install the wheel (see install.log): unzipping it" | tee -a "$out/env.txt"
  $py -m zipfile -e "$whl" "$site"
fi
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
status=0
cd "$root/python/tests/gpu"
if $py -c 'import pytest' 2>/dev/null; then
  $py -m pytest -c /dev/null -p no:cacheprovider -v -s -rs test_gpu.py 2>&1 | tee "$out/gpu-tests.log"
else
  $py test_gpu.py 2>&1 | tee "$out/gpu-tests.log"
fi
[ "${PIPESTATUS[0]}" = 0 ] || status=1
cd "$root"
$py bench/py_await.py --out "$out/bench" 2>&1 | tee "$out/bench.log"
[ "${PIPESTATUS[0]}" = 0 ] || status=1
echo "python gpu: $([ $status = 0 ] && echo all passed || echo FAILURES) (logs in $out)"
exit $status
