#!/usr/bin/env bash
# Builds cudaev and runs the demo: examples/device_query (built with
# `nvcc -cudart shared`) on cudaev's libcudart.so.13, then, if present, the
# async example on our event loop, then examples/loop_epoll (the loop inside
# a plain epoll loop). Without a GPU it says why in one line (cudaev-info's
# result) and shows the loop on promises only (loop_epoll's CPU path).
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
