#!/usr/bin/env bash
# PyTorch's own CUDA-graph and memory-pool tests, on NVIDIA's runtime and on
# ours (LD_PRELOAD), each in JOBS pytest processes sharing the GPU (as
# PyTorch's CI runs them): the tests that fail on ours where NVIDIA's
# passes. PyTorch's test sources are not part of this tree: pass the
# test_cuda.py of the PyTorch version installed (pytorch/pytorch,
# test/test_cuda.py).
#
#   tests/pytorch/graphs.sh BUILD_DIR TEST_CUDA_PY LOG_DIR [JOBS] [SELECTION]
#
# SELECTION is pytest's -k expression (default: the graph, memory-pool,
# block-state and optimizer-capture tests); PYTORCH_GRAPHS_TIMEOUT bounds
# each runtime's run (seconds, default 1200; past it pytest is stopped and
# its report is what it wrote so far). Ends with one line
# "pytorch-graphs: N passed, N failed" where a failure is a test that
# NVIDIA's runtime passes and ours does not, or a worker that did not map
# the runtime it should have.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=$(cd "$1" && pwd)
test_py=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
logs=$3
jobs=${4:-4}
selection=${5:-graph or MemPool or BlockStateAbsorption or CudaOptims}
mkdir -p "$logs"
ours=$(readlink -f "$build/libcudart.so.13")
python3 -c 'import torch, pytest, xdist' 2>/dev/null ||
  { echo "SKIP: needs PyTorch, pytest and pytest-xdist"; echo "pytorch-graphs: 0 passed, 0 failed"; exit 77; }
export PYTHONUNBUFFERED=1 PYTHONPATH=$here${PYTHONPATH:+:$PYTHONPATH}
# torch.testing's TestCase imports expecttest (a test-only package that a
# runtime install may lack): a stand-in without its inline-expectation
# helpers, which the selected tests do not use.
if ! python3 -c 'import expecttest' 2>/dev/null; then
  mkdir -p "$logs/stand-in"
  printf 'import unittest\n\nclass TestCase(unittest.TestCase):\n    pass\n' >"$logs/stand-in/expecttest.py"
  export PYTHONPATH=$PYTHONPATH:$logs/stand-in
fi
for rt in nvidia cudaev; do
  pre=()
  [ "$rt" = cudaev ] && pre=(LD_PRELOAD="$ours")
  : >"$logs/$rt.maps"
  (cd "$(dirname "$test_py")" && env "${pre[@]}" CUDART_PROBE_LOG="$logs/$rt.maps" \
    timeout -s INT "${PYTORCH_GRAPHS_TIMEOUT:-1200}" python3 -m pytest -p cudart_probe -p no:cacheprovider -q -n "$jobs" -k "$selection" \
    --junitxml="$logs/$rt.xml" "$test_py") >"$logs/$rt.txt" 2>&1
  echo "$rt: pytest exit $?; $(tail -n 1 "$logs/$rt.txt")"
done
python3 - "$logs" "$ours" <<'PY'
import sys, xml.etree.ElementTree as ET
logs, ours = sys.argv[1], sys.argv[2]
def outcomes(rt):
    res = {}
    try:
        root = ET.parse(f"{logs}/{rt}.xml").getroot()
    except (OSError, ET.ParseError):
        return res
    for tc in root.iter("testcase"):
        name = f"{tc.get('classname')}::{tc.get('name')}"
        kinds = {c.tag for c in tc}
        res[name] = ("failed" if kinds & {"failure", "error"} else
                     "skipped" if "skipped" in kinds else "passed")
    return res
nv, us = outcomes("nvidia"), outcomes("cudaev")
worse = sorted(t for t, o in nv.items() if o == "passed" and us.get(t) != "passed")
better = sorted(t for t, o in us.items() if o == "passed" and nv.get(t) not in (None, "passed"))
for rt, res in (("nvidia", nv), ("cudaev", us)):
    counts = {k: sum(1 for o in res.values() if o == k) for k in ("passed", "failed", "skipped")}
    print(f"{rt}: {len(res)} tests: {counts['passed']} passed, {counts['failed']} failed, "
          f"{counts['skipped']} skipped")
bad_maps = []
for rt in ("nvidia", "cudaev"):
    lines = [l for l in open(f"{logs}/{rt}.maps") if l.startswith("[cudart]")]
    ok = [l for l in lines if (f"cudaMalloc-from={ours}" in l) == (rt == "cudaev")]
    print(f"{rt}: {len(lines)} pytest processes reported their runtime, {len(ok)} the intended one")
    if not lines or len(ok) != len(lines):
        bad_maps.append(rt)
for t in worse:
    print(f"FAIL: passes on NVIDIA's, {us.get(t, 'absent')} on ours: {t}")
for t in better:
    print(f"note: passes on ours, {nv.get(t)} on NVIDIA's: {t}")
failed = len(worse) + len(bad_maps)
print(f"pytorch-graphs: {len(nv) - len(worse)} passed, {failed} failed")
sys.exit(1 if failed else 0)
PY
