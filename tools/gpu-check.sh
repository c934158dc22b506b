#!/usr/bin/env bash
# Everything the GPU machine proves, in one call (the device tool's budget
# favours few, full calls). Run from the repository root there, after
# tools/gpu-pack.sh here (carry [".gpu", ".device"], plus ".gl" for interop).
#
#   tools/gpu-check.sh OUT [PART...]
#
# Parts (default: suite async pytorch bench):
#   suite     the gpu suite (NVIDIA's runtime and ours, transcripts compared),
#             with no libev anywhere on the library path or in ldconfig
#   async     the programs that run the application's own libev (apart, with
#             libev on their path only): async_pipeline, examples/loop_libev
#   pytorch   tests/pytorch/run.sh (LD_PRELOAD), no libev on the path
#   beside    the async API beside NVIDIA's runtime: beside_nvidia built with
#             NVIDIA's runtime shared and static and libcudaev.so.1, and
#             PyTorch without LD_PRELOAD awaiting its own streams through
#             libcudaev.so.1 loaded with ctypes (tests/pytorch/beside.py)
#   graphs    tests/pytorch/graphs.sh: PyTorch's own CUDA-graph, memory-pool
#             and optimizer-capture tests in 8 parallel pytest processes on
#             both runtimes; needs TEST_CUDA_PY, the test/test_cuda.py of the
#             installed PyTorch (not part of this tree: carry it), and fails
#             where a test passes on NVIDIA's runtime and not on ours
#   bench     bench/run.sh (BENCH_ROUNDS, BENCH_BUDGET, BENCH_PROGRAMS apply)
#   infer     the inference service's GPU tests (suite infer_gpu: results
#             against the CPU reference under load, a device fault and the
#             reset, RSS and fds over INFER_SOAK_S seconds; the twin on
#             NVIDIA's runtime and on ours), with the application's libev
#   serve     bench/serve.sh: wrk against the service and its twin (about
#             3 minutes; SERVE_* apply); its table and plot land in OUT/serve
#   nginx     deploy/test_nginx.py --backend gpu: nginx in front of two GPU
#             service processes (one per GPU where there are two), one killed
#             and restarted under load, both scraped; logs in OUT/nginx
#   python    the Python package's GPU tests (python/tests/gpu/run.sh, the
#             carried wheel) and bench/py_await.py, into OUT/python
#   pyservice the Python service on the GPU (examples/python_service/tests/
#             test_gpu.py: answers under load per --wait mode, a fault and the
#             worker replaced), then bench/serve_py.sh (five servers at 1, 16,
#             256 and 4096 connections, about 3 minutes; SERVE_* apply) into
#             OUT/serve-py; needs python3 with torch, aiohttp, uvloop, numpy
#   servepy   bench/serve_py.sh alone (pyservice without its GPU tests)
#   ab        bench/serve_ab.py: the Python service in the variants AB_VARIANTS
#             names (shell words NAME=SPEC; default the three --wait modes;
#             SPEC may name wheel=PATH, an older cudaev wheel, or server=PATH,
#             an older tree's server.py) at AB_CONNECTIONS (default 1,16),
#             AB_ROUNDS rounds (default 2), AB_SERVER_ARGS for every variant
#             (default --workers 4 --deadline-ms 30000), the carried wheel first
#             on the path; the table in OUT/ab.md, every run's files in OUT/ab.tgz
#   decode    bench/decode_load.py: the decode loop (POST /v1/generate) per
#             --wait mode at 1, 16 and 64 streams of 256 tokens, every answer
#             checked against torch one request at a time (about 3 minutes)
#             into OUT/decode-load.*; needs what pyservice needs; DECODE_ARGS
#             go to decode_load.py (e.g. --server-arg=--decode-graphs=off)
#   badinput  tests/badinput/run.sh, if present (at most BADINPUT_BUDGET s)
#   multi     with two or more GPUs: tests/pytorch/ddp.sh (DDP over NCCL, one
#             process a GPU, both runtimes) and the service under wrk on one
#             GPU and on all of them (a 256-8192-8192-16 model, whose
#             8192-square layer is most of the work, and 16 loop threads, so
#             that the GPUs' share shows; MULTI_SERVE_ARGS apply)
# The interop programs of the gpu suite find the GL/EGL/Vulkan loaders in
# .device/lib (gpu-pack.sh) or in the .gl packages, unpacked here when
# carried (the device tool's README).
# Writes OUT/summary.txt (also printed last) and OUT/logs.tar.gz.
set -uo pipefail
out=$(mkdir -p "$1" && cd "$1" && pwd); shift
[ $# -gt 0 ] || set -- suite async pytorch bench
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=$PWD/.gpu/build
logs=$out/logs
mkdir -p "$logs"
summary=$out/summary.txt
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }

if ls .gl/*.deb >/dev/null 2>&1; then
  for f in .gl/*.deb; do dpkg -x "$f" /; done
  ldconfig
fi
[ -e /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] &&
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -e /usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json ] &&
  export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json

# The packed libraries, with libev moved aside: the runtime must not need it.
mkdir -p .device/app
[ -e .device/lib/libev.so.4 ] && mv .device/lib/libev.so.4 .device/app/
. .device/env.sh
# cuBLAS (the inference service links it) stays on the GPU machine.
# cuBLAS for the inference service, through links to its two libraries only:
# its folder (the toolkit's lib64) also holds NVIDIA's libcudart.so.13, which
# would then win over ours for programs that find ours by RUNPATH.
if cublas=$(tools/find-cublas.sh); then
  mkdir -p .device/cublas
  ln -sf "$cublas/libcublas.so.13" "$cublas/libcublasLt.so.13" .device/cublas/
  export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$PWD/.device/cublas
fi
note "date: $(date -u '+%F %T') UTC; commit: $(cat .gpu/commit 2>/dev/null || echo unknown)"
note "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1)"
if ldconfig -p | grep -q 'libev\.so'; then
  note "libev: in this machine's ldconfig (the no-libev proof does not hold here)"
else
  note "libev: not in ldconfig, not on LD_LIBRARY_PATH ($LD_LIBRARY_PATH)"
fi
note "NEEDED of ours: $(readelf -d "$build/libcudart.so.13" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')"

# The Python package: the carried wheel (tools/py-wheel.sh, build/py-dist)
# unpacked once, before the parts run, into a private folder; py_site prints
# it (empty when no wheel was carried).
py_site_dir=""
whl=$(ls build/py-dist/cudaev-*.whl 2>/dev/null | head -n 1)
if [ -n "$whl" ]; then
  py_site_dir=$(mktemp -d)
  python3 -m zipfile -e "$whl" "$py_site_dir" || py_site_dir=""
fi
py_site() { echo "$py_site_dir"; }

# bench/serve_py.sh (five servers under wrk) into OUT/serve-py.
serve_py() {
  PYTHONPATH=$(py_site)${PYTHONPATH:+:$PYTHONPATH} \
    LD_LIBRARY_PATH=$PWD/.device/app:$LD_LIBRARY_PATH SERVE_BUILD_DIR=$build \
    bash bench/serve_py.sh "$out/serve-py" >"$logs/serve-py.txt" 2>&1
  note "serve_py: exit $?"
  grep -E '^\| (py-|async|twin)|^- (PASS|FAIL)|^All' "$out/serve-py/serve_py.md" 2>/dev/null |
    tee -a "$summary" >/dev/null
}

for part in "$@"; do
  t0=$(date +%s)
  case $part in
    suite)
      tests/gpu/run.sh -b "$build" -o "$logs/gpu" -x async_pipeline -x example_loop_libev_gpu \
        -x infer_service_gpu -x infer_twin_gpu_nvidia -x infer_twin_gpu_ours gpu \
        >"$logs/suite.txt" 2>&1
      grep -E '^(FAIL|SKIP)' "$logs/suite.txt" | head -20 | tee -a "$summary"
      note "suite (no libev): $(tail -n 1 "$logs/suite.txt")"
      ;;
    async)
      rc=0
      LD_LIBRARY_PATH=$PWD/.device/app:$LD_LIBRARY_PATH "$build/examples/async_pipeline" \
        >"$logs/async_pipeline.txt" 2>&1 || rc=$?
      note "async_pipeline (application's libev): exit $rc; $(tail -n 1 "$logs/async_pipeline.txt")"
      rc=0
      LD_LIBRARY_PATH=$PWD/.device/app:$LD_LIBRARY_PATH "$build/examples/loop_libev" --gpu \
        >"$logs/loop_libev.txt" 2>&1 || rc=$?
      note "loop_libev --gpu (application's libev): exit $rc; $(tail -n 1 "$logs/loop_libev.txt")"
      ;;
    pytorch)
      tests/pytorch/run.sh "$build" "$logs/pytorch" >"$logs/pytorch.txt" 2>&1
      note "pytorch (no libev): exit $?; $(grep -E '^--- cudaev: ' "$logs/pytorch.txt" | head -n 1)"
      grep -E '^FAIL' "$logs/pytorch.txt" | head -5 | tee -a "$summary"
      ;;
    beside)
      for kind in shared static; do
        tests/gpu/beside.sh "${CUDA_HOME:-/usr/local/cuda}" "$build/tests/gpu/gpu-beside_nvidia_$kind" \
          "$kind" >"$logs/beside-$kind.txt" 2>&1
        note "beside_nvidia ($kind runtime): exit $?; $(tail -n 1 "$logs/beside-$kind.txt")"
        grep -E '^(not ok|# )' "$logs/beside-$kind.txt" | head -8 | tee -a "$summary"
      done
      PYTHONUNBUFFERED=1 python3 tests/pytorch/beside.py "$build/libcudaev.so.1" \
        >"$logs/beside-pytorch.txt" 2>&1
      note "beside-pytorch (no LD_PRELOAD): exit $?; $(tail -n 1 "$logs/beside-pytorch.txt")"
      grep -E '^(not ok|# )' "$logs/beside-pytorch.txt" | head -8 | tee -a "$summary"
      ;;
    graphs)
      if [ -n "${TEST_CUDA_PY:-}" ] && [ -f "$TEST_CUDA_PY" ]; then
        tests/pytorch/graphs.sh "$build" "$TEST_CUDA_PY" "$logs/graphs" 8 >"$logs/graphs.txt" 2>&1
        note "graphs: exit $?; $(tail -n 1 "$logs/graphs.txt")"
        grep -E '^(FAIL|nvidia|cudaev):' "$logs/graphs.txt" | head -12 | tee -a "$summary"
      else
        note "graphs: TEST_CUDA_PY does not name PyTorch's test_cuda.py: not run"
      fi
      ;;
    bench)
      LD_LIBRARY_PATH=$PWD/.device/app:$LD_LIBRARY_PATH CUDAEV_BUILD_DIR=$build \
        bash bench/run.sh "$out/bench" >"$logs/bench.txt" 2>&1
      note "bench: exit $?"
      sed -n '/^| metric/,/^$/p' "$out/bench/table.md" 2>/dev/null | tee -a "$summary" >/dev/null
      ;;
    infer)
      LD_LIBRARY_PATH=$PWD/.device/app:$LD_LIBRARY_PATH tests/gpu/run.sh -b "$build" \
        -o "$logs/infer" infer_gpu >"$logs/infer.txt" 2>&1
      note "infer (cuBLAS from ${cublas:-nowhere}): exit $?; $(tail -n 1 "$logs/infer.txt")"
      grep -hE '^(not ok|# [0-9]+ (answers|requests))' "$logs"/infer/*.log 2>/dev/null | head -12 |
        tee -a "$summary"
      ;;
    serve)
      LD_LIBRARY_PATH=$PWD/.device/app:$LD_LIBRARY_PATH SERVE_BUILD_DIR=$build \
        bash bench/serve.sh "$out/serve" >"$logs/serve.txt" 2>&1
      note "serve: exit $?"
      grep -E '^\*\*|^\| (async|twin|floor)' "$out/serve/serve.md" 2>/dev/null | tee -a "$summary" >/dev/null
      ;;
    nginx)
      # As root nginx runs as nobody (deploy/scale-out.sh), which may not
      # reach this tree: its carried copy goes where anyone can run it.
      ngx=""
      if [ -x .device/nginx/nginx ]; then
        ngx=$(mktemp -d) && cp -rL .device/nginx "$ngx/" && chmod -R a+rX "$ngx"
      fi
      PATH=${ngx:+$ngx/nginx:}$PATH LD_LIBRARY_PATH=$PWD/.device/app:$LD_LIBRARY_PATH \
        python3 deploy/test_nginx.py --server "$build/examples/inference_server/inference_server" \
        --backend gpu --out "$out/nginx" >"$logs/nginx.txt" 2>&1
      note "nginx: exit $? (77: skipped); $(grep -E '^(requests|scrape|FAIL|SKIP)' "$logs/nginx.txt" | tr '\n' ' ')"
      [ -z "$ngx" ] || rm -rf "$ngx"
      ;;
    python)
      # The package's GPU tests and bench/py_await.py (its table lands in
      # OUT/python/py_await.md).
      bash python/tests/gpu/run.sh "$out/python" "$whl" >"$logs/python.txt" 2>&1
      note "python gpu tests + py_await: exit $?"
      grep -E '[0-9]+ passed|failed|PASS|FAIL|cudaev loop per|wait\(\) call' "$logs/python.txt" |
        tee -a "$summary" >/dev/null
      ;;
    pyservice)
      python3 -c 'import torch, aiohttp, uvloop, numpy; print("torch", torch.__version__,
        "aiohttp", aiohttp.__version__, "uvloop", uvloop.__version__, "numpy", numpy.__version__)' \
        2>&1 | tail -n 1 | tee -a "$summary"
      PYTHONPATH=$(py_site)${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 \
        python3 examples/python_service/tests/test_gpu.py \
        >"$logs/pyservice.txt" 2>&1
      note "pyservice gpu tests: exit $?"
      grep -E '^(ok|not ok|skip|[0-9]+ passed)' "$logs/pyservice.txt" | tee -a "$summary" >/dev/null
      serve_py
      ;;
    servepy)
      serve_py
      ;;
    ab)
      eval "variants=(${AB_VARIANTS:-cudaev='--wait cudaev' executor='--wait executor' poll='--wait poll'})"
      PYTHONPATH=$(py_site)${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 \
        WRK=${WRK:-$PWD/.device/wrk/wrk} python3 bench/serve_ab.py --out "$out/ab" \
        --connections "${AB_CONNECTIONS:-1,16}" --rounds "${AB_ROUNDS:-2}" \
        --server-args "${AB_SERVER_ARGS:---workers 4 --deadline-ms 30000}" "${variants[@]}" \
        >"$logs/ab.txt" 2>&1
      note "serve_ab: exit $? (1: some runs did not measure)"
      cp "$out/ab/ab.md" "$out/ab.md" 2>/dev/null && grep -E '^\| ' "$out/ab.md" | tee -a "$summary" >/dev/null
      tar czf "$out/ab.tgz" -C "$out" ab && rm -rf "$out/ab"
      ;;
    decode)
      PYTHONPATH=$(py_site)${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 \
        python3 bench/decode_load.py --out "$out/decode-load" ${DECODE_ARGS:-} >"$logs/decode.txt" 2>&1
      note "decode_load: exit $?"
      grep -E '^\| (cudaev|executor|poll) |^- |^  CPU|^Answers' "$out/decode-load.md" 2>/dev/null |
        tee -a "$summary" >/dev/null
      ;;
    badinput)
      if [ -x tests/badinput/run.sh ]; then
        # Bounded (BADINPUT_BUDGET s, default 300) so that the logs still come back.
        PYTHONUNBUFFERED=1 timeout "${BADINPUT_BUDGET:-300}" tests/badinput/run.sh "$build" \
          /usr/local/cuda/lib64/libcudart.so.13 "$logs/badinput" >"$logs/badinput.txt" 2>&1
        note "badinput: exit $? (124: over BADINPUT_BUDGET)"; tail -n 25 "$logs/badinput.txt" >>"$summary"
        cp "$logs/badinput/report.txt" "$out/badinput-report.txt" 2>/dev/null || true
      else
        note "badinput: no harness in this tree"
      fi
      ;;
    multi)
      tests/pytorch/ddp.sh "$build" "$logs/ddp" >"$logs/ddp.txt" 2>&1
      note "ddp (no libev): exit $? (77: skipped); $(tail -n 1 "$logs/ddp.txt")"
      grep -E '^(FAIL|SKIP)' "$logs/ddp.txt" | head -5 | tee -a "$summary"
      if [ "$(nvidia-smi -L 2>/dev/null | wc -l)" -ge 2 ]; then
        for devs in 0 all; do
          LD_LIBRARY_PATH=$PWD/.device/app:$LD_LIBRARY_PATH SERVE_BUILD_DIR=$build \
            SERVE_SERVERS=async SERVE_CONNECTIONS="${MULTI_CONNECTIONS:-256 4096}" \
            SERVE_ARGS="${MULTI_SERVE_ARGS:---loop-threads 16 --layers 256,8192,8192,16} --devices $devs" \
            bash bench/serve.sh "$out/serve-$devs" >"$logs/serve-$devs.txt" 2>&1
          note "serve on devices $devs: exit $?"
          tail -n +2 "$out/serve-$devs/serve.csv" 2>/dev/null | tee -a "$summary" >/dev/null
        done
      fi
      ;;
    *) note "unknown part $part" ;;
  esac
  note "  ($part: $(($(date +%s) - t0)) s)"
done
tar czf "$out/logs.tar.gz" -C "$out" logs && rm -rf "$logs"
[ -z "$py_site_dir" ] || rm -rf "$py_site_dir"
echo "=== summary"; cat "$summary"
