#!/bin/sh
# Runs a beside_nvidia program (tests/gpu/beside_nvidia.cu) with NVIDIA's
# libcudart.so.13 first on the library path (the shared build's runtime;
# the static build carries its own) and our libcudaev.so.1 from the
# program's rpath; exit 77 (skipped) without an NVIDIA GPU.
#   beside.sh TOOLKIT PROGRAM BUILD_KIND
if [ ! -e /dev/nvidiactl ] && [ ! -e /dev/nvidia0 ]; then
  echo "SKIP: no NVIDIA GPU on this machine (no /dev/nvidia0)"
  exit 77
fi
LD_LIBRARY_PATH="$1/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$2" "$3"
