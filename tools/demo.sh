#!/usr/bin/env bash
# Builds cudaev and runs the demo: examples/device_query (built with
# `nvcc -cudart shared`) on cudaev's libcudart.so.13, then, if present, the
# async example on our event loop, then examples/loop_epoll (the loop inside
# a plain epoll loop), then the inference service (examples/inference_server):
# started on a free port, asked with curl, checked against the CPU
# reference of the same weights, stopped with SIGTERM. Without a GPU it says
# why in one line (cudaev-info's result) and shows the CPU paths: the loop
# on promises and the service on its CPU backend.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
tools/deps.sh
[ -f build/build.ninja ] || meson setup build
ninja -C build
export LD_LIBRARY_PATH="$PWD/build${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
rc=0
result=$(build/tools/cudaev-info -q) || rc=$?
if [ "$rc" != 0 ]; then
  echo "--- the GPU part cannot run here: ${result#result: } (build/tools/cudaev-info says more)"
else
  echo "--- device_query on cudaev ($(readlink -f build/libcudart.so.13)):"
  build/examples/device_query || true
  for ex in build/examples/async_*; do
    [ -x "$ex" ] || continue
    echo "--- $ex:"
    "$ex" || true
  done
fi
echo "--- build/examples/loop_epoll (a cudaev loop in an epoll loop; docs/integrations.md):"
build/examples/loop_epoll

# The inference service: start, ask, stop (docs/inference_server.md).
srv=build/examples/inference_server/inference_server
if [ ! -x "$srv" ]; then
  echo "--- no $srv: libmicrohttpd (Debian libmicrohttpd-dev) was not found at build time"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
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
stop() { kill -TERM "$pid" && wait "$pid" && tail -n 1 "$tmp/$1.log" | sed 's/^/    /'; }
python3 -c 'print([round((i * 37 % 201 - 100) / 100, 2) for i in range(64)])' >"$tmp/x.json"
backend=cpu
[ "$rc" = 0 ] && backend=gpu
echo "--- $srv --backend $backend (one loop thread: HTTP, batching, GPU completions):"
serve "$backend"
echo "  \$ curl -X POST -H 'Content-Type: application/json' -d '$(cut -c1-40 "$tmp/x.json")...]' http://127.0.0.1:$port/v1/infer"
ask | tee "$tmp/$backend.out" | sed 's/^/  /'
echo "  \$ curl http://127.0.0.1:$port/health: $(curl -sS "http://127.0.0.1:$port/health")"
echo "  \$ curl -s http://127.0.0.1:$port/metrics | grep -E '^infer_(requests_total|batch_size_count)'"
curl -sS "http://127.0.0.1:$port/metrics" | grep -E '^infer_(requests_total\{code="200"\}|batch_size_count)' |
  sed 's/^/  /'
stop "$backend"
if [ "$backend" = gpu ]; then
  # The self-check: the CPU backend, same weights file, same request.
  serve cpu >/dev/null
  ask >"$tmp/cpu.out"
  stop cpu >/dev/null
  python3 - "$tmp/gpu.out" "$tmp/cpu.out" <<'PY'
import json, sys
g, c = (json.load(open(p)) for p in sys.argv[1:])
err = max(abs(a - b) for a, b in zip(g, c)) / max(abs(b) for b in c)
print(f"--- self-check: the GPU's answer against the CPU reference: relative error {err:.2g}"
      f" ({'ok' if err <= 1e-5 else 'FAILED'})")
sys.exit(err > 1e-5)
PY
fi
