#!/usr/bin/env bash
# Packs a build directory for the lent GPU machine: a copy of BUILD without
# object folders and archives, debug info stripped, plus the libraries the
# GPU machine lacks (../shared/tools/device-pack) and the EGL and Vulkan
# loaders the interop programs dlopen. Both land in ignored
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
# The interop programs dlopen the EGL and Vulkan loaders, which ldd (and so
# device-pack) does not see: carry this machine's along where it has them.
# NVIDIA's Vulkan driver (libGLX_nvidia.so.0) links libX11 and libXext even
# headless, and a minimal image lacks them: those come too, with theirs.
# The NVIDIA vendor libraries themselves stay the GPU machine's own
# (tests/gpu/README.md).
for lib in libEGL.so.1 libGLdispatch.so.0 libvulkan.so.1 libX11.so.6 libXext.so.6 libxcb.so.1 \
  libXau.so.6 libXdmcp.so.6 libbsd.so.0 libmd.so.0; do
  path=$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64/ {print $NF; exit}')
  if [ -n "$path" ] && [ ! -e ".device/lib/$lib" ]; then cp -L "$path" .device/lib/; fi
done
echo "gpu-pack: $(du -sh .gpu | cut -f1) in .gpu, $(du -sh .device | cut -f1) in .device"
