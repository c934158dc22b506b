#!/usr/bin/env bash
# Builds cudaev and runs the demo: examples/device_query (built with
# `nvcc -cudart shared`) on cudaev's libcudart.so.13, then, if present, the
# async example on our event loop. Without a GPU the runtime answers as
# NVIDIA's does (cudaErrorInsufficientDriver / cudaErrorNoDevice).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
tools/deps.sh
[ -f build/build.ninja ] || meson setup build
ninja -C build
echo "--- device_query on cudaev ($(readlink -f build/libcudart.so.13)):"
LD_LIBRARY_PATH="$PWD/build${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" build/examples/device_query || true
for ex in build/examples/async_*; do
  [ -x "$ex" ] || continue
  echo "--- $ex:"
  LD_LIBRARY_PATH="$PWD/build${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$ex" || true
done
