#!/usr/bin/env bash
# Packs a build directory for the lent GPU machine: a copy of BUILD without
# object folders and archives, debug info stripped, plus the libraries the
# GPU machine lacks (../shared/tools/device-pack). Both land in ignored
# folders to name in the device tool's carry list.
#
#   tools/gpu-pack.sh [BUILD_DIR]     ->  carry [".gpu", ".device"]
#   there:  tools/gpu-check.sh $OUT      (or . .device/env.sh && tests/gpu/run.sh -b .gpu/build gpu)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${1:-build}
rm -rf .gpu && mkdir -p .gpu
mkdir -p .gpu/build
tar -C "$build" --exclude '*.p' --exclude '*.a' --exclude 'meson-private' --exclude '*-logs' \
  --exclude 'old-glibc' -cf - . | tar -C .gpu/build -xf -
find .gpu/build -type f -perm -u+x -exec sh -c 'file -b "$1" | grep -q ^ELF && strip --strip-debug "$1"' _ {} \;
strip --strip-debug .gpu/build/libcudart.so.13.0.0
git describe --always --dirty >.gpu/commit 2>/dev/null || true
grep -qxF "/.gpu/" .git/info/exclude 2>/dev/null || echo "/.gpu/" >> .git/info/exclude
../shared/tools/device-pack .gpu/build .device >/dev/null
echo "gpu-pack: $(du -sh .gpu | cut -f1) in .gpu, $(du -sh .device | cut -f1) in .device"
