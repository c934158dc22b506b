#!/usr/bin/env bash
# Packs a build directory for the lent GPU machine: a copy of BUILD without
# object folders and archives, debug info stripped, plus the libraries the
# GPU machine lacks (../shared/tools/device-pack: libev, libmicrohttpd and
# its GnuTLS, ...), the EGL and Vulkan loaders the interop programs dlopen,
# and wrk for bench/serve.sh. Both land in ignored
# folders to name in the device tool's carry list.
#
#   tools/gpu-pack.sh [BUILD_DIR]     ->  carry [".gpu", ".device"]
#   there:  tools/gpu-check.sh $OUT      (or . .device/env.sh && tests/gpu/run.sh -b .gpu/build gpu)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${1:-build}
rm -rf .gpu && mkdir -p .gpu
mkdir -p .gpu/build
# The unit suite's programs (CPU only, each with the runtime linked in) and
# generated sources stay here: the device tool carries at most 64 MiB.
tar -C "$build" --exclude '*.p' --exclude '*.a' --exclude 'meson-private' --exclude '*-logs' \
  --exclude 'old-glibc' --exclude './tests/unit/unit-*' --exclude '*.c' --exclude 'logs' \
  -cf - . | tar -C .gpu/build -xf -
find .gpu/build -type f -perm -u+x -exec sh -c 'file -b "$1" | grep -q ^ELF && strip --strip-debug "$1"' _ {} \;
strip --strip-debug .gpu/build/libcudart.so.13.0.0 .gpu/build/libcudaev.so.1.0.0
git describe --always --dirty >.gpu/commit 2>/dev/null || true
# In a worktree .git is a file; git reads info/exclude from the common dir.
exclude=$(git rev-parse --git-common-dir)/info/exclude
grep -qxF "/.gpu/" "$exclude" 2>/dev/null || echo "/.gpu/" >>"$exclude"
../shared/tools/device-pack .gpu/build .device >/dev/null
# The interop programs dlopen the EGL and Vulkan loaders, which ldd (and so
# device-pack) does not see: carry this machine's along where it has them.
# NVIDIA's Vulkan driver (libGLX_nvidia.so.0) links libX11 and libXext even
# headless, and a minimal image lacks them: those come too, with theirs.
# The NVIDIA vendor libraries themselves stay the GPU machine's own
# (tests/gpu/README.md).
for lib in libEGL.so.1 libGLdispatch.so.0 libvulkan.so.1 libX11.so.6 libXext.so.6 libxcb.so.1 \
  libXau.so.6 libXdmcp.so.6 libbsd.so.0 libmd.so.0; do
  path=$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64/ && !p {print $NF; p = 1}')
  if [ -n "$path" ] && [ ! -e ".device/lib/$lib" ]; then cp -L "$path" .device/lib/; fi
done
# cuBLAS (the inference service and its twin link it) is over 500 MiB: it
# stays behind, and the GPU machine's toolkit (or PyTorch's nvidia-cublas
# wheel) provides it; tools/find-cublas.sh finds it there.
rm -f .device/lib/libcublas.so.13 .device/lib/libcublasLt.so.13
# wrk drives bench/serve.sh. It is a separate program, so ldd of the build
# never brings it: its binary and libraries go to .device/wrk (not lib/, so
# that its libssl does not replace the GPU machine's for everything else),
# behind a wrapper that env.sh puts on PATH.
if [ -x /usr/bin/wrk ]; then
  mkdir -p .device/wrk/lib
  cp -L /usr/bin/wrk .device/wrk/wrk.bin
  ldd /usr/bin/wrk | awk '/=> \//{print $1, $3}' | while read -r name path; do
    case $name in linux-vdso* | ld-linux* | libc.so* | libm.so* | libdl.so* | libpthread.so* | libgcc_s*) continue ;; esac
    cp -L "$path" ".device/wrk/lib/$name"
  done
  cat >.device/wrk/wrk <<'WRK'
#!/bin/sh
d=$(cd "$(dirname "$0")" && pwd)
LD_LIBRARY_PATH="$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$d/wrk.bin" "$@"
WRK
  chmod +x .device/wrk/wrk
  echo 'export PATH="$_pack_dir/wrk${PATH:+:$PATH}"' >>.device/env.sh
else
  echo "gpu-pack: no /usr/bin/wrk (tools/deps.sh installs it): bench/serve.sh will not run there" >&2
fi
# nginx for deploy/test_nginx.py (gpu-check.sh's part nginx), the same way;
# its libssl and libcrypto are wrk's, linked rather than copied twice.
if [ -x /usr/sbin/nginx ]; then
  mkdir -p .device/nginx/lib
  cp -L /usr/sbin/nginx .device/nginx/nginx.bin
  ldd /usr/sbin/nginx | awk '/=> \//{print $1, $3}' | while read -r name path; do
    case $name in linux-vdso* | ld-linux* | libc.so* | libm.so* | libdl.so* | libpthread.so* | libgcc_s*) continue ;; esac
    if [ -e ".device/wrk/lib/$name" ]; then
      ln -sf "../../wrk/lib/$name" ".device/nginx/lib/$name"
    else
      cp -L "$path" ".device/nginx/lib/$name"
    fi
  done
  cat >.device/nginx/nginx <<'NGINX'
#!/bin/sh
d=$(cd "$(dirname "$0")" && pwd)
LD_LIBRARY_PATH="$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$d/nginx.bin" "$@"
NGINX
  chmod +x .device/nginx/nginx
else
  echo "gpu-pack: no /usr/sbin/nginx (tools/deps.sh installs it): deploy/test_nginx.py will not run there" >&2
fi
echo "gpu-pack: $(du -sh .gpu | cut -f1) in .gpu, $(du -sh .device | cut -f1) in .device"
