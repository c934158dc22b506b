#!/usr/bin/env bash
# Builds cudaev and runs the demo: examples/device_query (built with
# `nvcc -cudart shared`) on cudaev's libcudart.so.13, then, if present, the
# async example on our event loop, then examples/loop_epoll (the loop inside
# a plain epoll loop), then the inference service (examples/inference_server):
# started on a free port, asked with curl, checked against the CPU
# reference of the same weights, stopped with SIGTERM. Without a GPU it says
# why in one line (cudaev-info's result) and shows the CPU paths: the loop
# on promises and the service on its CPU backend.
#
# The last line says what was shown and whether it all worked ("demo:
# loop_epoll ok, inference service ok (cpu backend): all worked"), naming
# what failed otherwise; the exit status is 1 if anything failed.
#
# CUDAEV_DEMO_BUILD=DIR runs the demo of a tree already built in DIR,
# without installing or building anything, and CUDAEV_DEMO_SERVER=PROGRAM
# stands in for the service: the unit test `demo` uses both.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${CUDAEV_DEMO_BUILD:-build}
if [ -z "${CUDAEV_DEMO_BUILD:-}" ]; then
  tools/deps.sh
  [ -f build/build.ninja ] || meson setup build
  ninja -C build
fi
libdir=$(cd "$build" && pwd)
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
shown=()  # "what ok" or "what FAILED", in the order shown
failed=0
record() { # WHAT STATUS: STATUS 0 is "ok", anything else "FAILED"
  if [ "$2" = 0 ]; then shown+=("$1 ok"); else shown+=("$1 FAILED"); failed=$((failed + 1)); fi
}
rc=0
result=$("$build/tools/cudaev-info" -q) || rc=$?
nogpu=""
if [ "$rc" != 0 ]; then
  nogpu=${result#result: }
  echo "--- the GPU part cannot run here: $nogpu ($build/tools/cudaev-info says more)"
else
  echo "--- device_query on cudaev ($(readlink -f "$build/libcudart.so.13")):"
  s=0; "$build/examples/device_query" || s=$?
  record device_query "$s"
  for ex in "$build"/examples/async_*; do
    [ -x "$ex" ] || continue
    echo "--- $ex:"
    s=0; "$ex" || s=$?
    record "$(basename "$ex")" "$s"
  done
fi
echo "--- $build/examples/loop_epoll (a cudaev loop in an epoll loop; docs/integrations.md):"
s=0; "$build/examples/loop_epoll" || s=$?
record loop_epoll "$s"

# The inference service: start, ask, stop (docs/inference_server.md).
srv=${CUDAEV_DEMO_SERVER:-$build/examples/inference_server/inference_server}
tmp=$(mktemp -d)
pid=""
trap '[ -z "$pid" ] || kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
serve() { # backend -> pid, port; the service's output in $tmp/<backend>.log
  rm -f "$tmp/port"
  "$srv" --backend "$1" --port 0 --port-file "$tmp/port" --weights "$tmp/weights.bin" \
    >"$tmp/$1.log" 2>&1 &
  pid=$!
  for _ in $(seq 200); do [ -s "$tmp/port" ] || ! kill -0 "$pid" 2>/dev/null && break; sleep 0.05; done
  port=$(cat "$tmp/port" 2>/dev/null || true)
  [ -n "$port" ] || { cat "$tmp/$1.log"; return 1; }
  sed 's/^/    /' "$tmp/$1.log"
}
ask() { # -> the answer to one JSON request
  curl -sS -X POST -H 'Content-Type: application/json' --data-binary @"$tmp/x.json" \
    "http://127.0.0.1:$port/v1/infer"
}
stop() { # exit 0 after SIGTERM, else 1
  local s=0
  kill -TERM "$pid" && wait "$pid" || s=$?
  pid=""
  tail -n 1 "$tmp/$1.log" | sed 's/^/    /'
  return "$s"
}
answered() { # FILE: one answer of 16 finite numbers, as the model gives
  python3 - "$1" <<'PY'
import json, math, sys
try:
    a = json.load(open(sys.argv[1]))
except ValueError:
    a = None
ok = isinstance(a, list) and len(a) == 16 and all(
    isinstance(v, (int, float)) and math.isfinite(v) for v in a)
sys.exit(0 if ok else 1)
PY
}
service() { # backend: start, ask, stop; non-zero if any step failed
  local b=$1
  echo "--- $srv --backend $b (one loop thread: HTTP, batching, GPU completions):"
  serve "$b" || return 1
  echo "  \$ curl -X POST -H 'Content-Type: application/json' -d '$(cut -c1-40 "$tmp/x.json")...]' http://127.0.0.1:$port/v1/infer"
  ask | tee "$tmp/$b.out" | sed 's/^/  /'
  answered "$tmp/$b.out" || { echo "  (not an answer of 16 numbers)"; stop "$b"; return 1; }
  local health
  health=$(curl -sS "http://127.0.0.1:$port/health" || true)
  echo "  \$ curl http://127.0.0.1:$port/health: $health"
  echo "  \$ curl -s http://127.0.0.1:$port/metrics | grep -E '^infer_(requests_total|batch_size_count)'"
  curl -sS "http://127.0.0.1:$port/metrics" | grep -E '^infer_(requests_total\{code="200"\}|batch_size_count)' |
    sed 's/^/  /' || true
  stop "$b" || return 1
  [ "$health" = ok ]
}
if [ ! -x "$srv" ]; then
  echo "--- no $srv: http-parser or libmicrohttpd (Debian libhttp-parser-dev, libmicrohttpd-dev) was not found at build time"
  shown+=("inference service not built (no http-parser or libmicrohttpd)")
else
  python3 -c 'print([round((i * 37 % 201 - 100) / 100, 2) for i in range(64)])' >"$tmp/x.json"
  backend=cpu
  [ "$rc" = 0 ] && backend=gpu
  s=0; service "$backend" || s=$?
  if [ "$s" = 0 ] && [ "$backend" = gpu ]; then
    # The self-check: the CPU backend, same weights file, same request.
    { serve cpu >/dev/null && ask >"$tmp/cpu.out" && stop cpu >/dev/null; } || s=1
    [ "$s" = 0 ] && { python3 - "$tmp/gpu.out" "$tmp/cpu.out" <<'PY' || s=$?
import json, sys
g, c = (json.load(open(p)) for p in sys.argv[1:])
err = max(abs(a - b) for a, b in zip(g, c)) / max(abs(b) for b in c)
print(f"--- self-check: the GPU's answer against the CPU reference: relative error {err:.2g}"
      f" ({'ok' if err <= 1e-5 else 'FAILED'})")
sys.exit(err > 1e-5)
PY
    }
  fi
  record "inference service" "$s"
  shown[${#shown[@]} - 1]="${shown[${#shown[@]} - 1]} ($backend backend)"
fi

# The same service in Python (examples/python_service, docs/python_service.md):
# aiohttp and PyTorch (numpy on the CPU) awaiting each batch with the cudaev
# package, asked the same request; its answer must equal the C service's.
py=python3
[ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import aiohttp, numpy' 2>/dev/null && py=/usr/bin/python3
if [ ! -s "$tmp/cpu.out" ] && [ ! -s "$tmp/gpu.out" ]; then
  : # the C service did not answer: nothing to compare with
elif readelf -d "$build/libcudaev.so.1" 2>/dev/null | grep -qE 'lib[at]san'; then
  # A sanitized build's library cannot load into the uninstrumented Python.
  echo "--- the Python service: skipped in a sanitized build"
  shown+=("Python service skipped (sanitized build)")
elif ! $py -c 'import aiohttp, numpy' 2>/dev/null; then
  echo "--- the Python service needs aiohttp and numpy (Debian python3-aiohttp, python3-numpy)"
  shown+=("Python service skipped (no aiohttp/numpy)")
else
  s=0
  dev=cpu
  [ "$rc" = 0 ] && $py -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null && dev=cuda
  loopk=asyncio
  $py -c 'import uvloop' 2>/dev/null && loopk=uvloop
  # The wheel (tools/py-wheel.sh), or one already built or carried there.
  whl=$(tools/py-wheel.sh "$build" 2>"$tmp/wheel.log" | tail -n 1) ||
    whl=$(ls "$build"/py-dist/cudaev-*.whl 2>/dev/null | head -n 1)
  mkdir -p "$tmp/py"
  { [ -f "$whl" ] && $py -m zipfile -e "$whl" "$tmp/py"; } || { cat "$tmp/wheel.log"; s=1; }
  ref="$tmp/$backend.out"
  echo "--- examples/python_service/server.py --wait cudaev --model-device $dev --loop $loopk:"
  PYTHONPATH="$tmp/py" $py examples/python_service/server.py --port 0 --port-file "$tmp/pyport" \
    --weights "$tmp/weights.bin" --model-device "$dev" --wait cudaev --loop "$loopk" \
    >"$tmp/py.log" 2>&1 &
  pid=$!
  for _ in $(seq 400); do [ -s "$tmp/pyport" ] || ! kill -0 "$pid" 2>/dev/null && break; sleep 0.05; done
  port=$(cat "$tmp/pyport" 2>/dev/null || true)
  if [ -z "$port" ] || [ "$s" != 0 ]; then
    sed 's/^/    /' "$tmp/py.log"; s=1
  else
    sed 's/^/    /' "$tmp/py.log"
    echo "  \$ curl -X POST ... http://127.0.0.1:$port/v1/infer"
    ask | tee "$tmp/py.out" | sed 's/^/  /'
    $py - "$tmp/py.out" "$ref" <<'PY' || s=1
import json, sys
p, c = (json.load(open(f)) for f in sys.argv[1:])
err = max(abs(a - b) for a, b in zip(p, c)) / max(abs(b) for b in c)
print(f"--- the Python service's answer against the C service's: relative error {err:.2g}"
      f" ({'ok' if err <= 1e-5 and len(p) == len(c) else 'FAILED'})")
sys.exit(not (err <= 1e-5 and len(p) == len(c)))
PY
  fi
  if [ -n "$pid" ]; then stop py || s=1; fi
  record "Python service" "$s"
  shown[${#shown[@]} - 1]="${shown[${#shown[@]} - 1]} ($dev)"
fi

# One line: what was shown, and whether it all worked.
list=$(printf '%s, ' "${shown[@]}")
list=${list%, }
# Without a GPU, why in short ("no GPU: cudaErrorInsufficientDriver"): the
# loader's words were on the first line.
why=${nogpu%% (*}
if [ "$failed" = 0 ]; then
  echo "demo: $list: all worked${why:+; the GPU part did not run ($why)}"
else
  echo "demo: $list: $failed of ${#shown[@]} failed${why:+; the GPU part did not run ($why)}"
  exit 1
fi
