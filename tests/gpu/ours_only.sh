#!/bin/sh
# Runs a program that uses cudaev's own API (cudaev_*), so only our library
# can run it; exit 77 (skipped) without an NVIDIA GPU.
#   ours_only.sh PROGRAM [ARGS...]
if [ ! -e /dev/nvidiactl ] && [ ! -e /dev/nvidia0 ]; then
  echo "SKIP: no NVIDIA GPU on this machine (no /dev/nvidia0)"
  exit 77
fi
exec "$@"
